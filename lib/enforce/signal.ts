/**
 * `signal` enforcement (needs `shareProcessNamespace: true`): when the
 * permission closes, the marker goes first, then every process named like
 * the target, and what it brought along (workload_set.ts), gets SIGTERM and,
 * once the grace has passed, SIGKILL; rescans stop what the kubelet restarts
 * until the permission opens again. Never signalled: PID 1, this process,
 * its parent, and a process running this program or a copy of it (known
 * where `/proc/PID/exe` can be examined: the same user, or `CAP_SYS_PTRACE`).
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { Clock } from "../state/clock.ts";
import type { Logger } from "../obs/log.ts";
import type { MarkerDeadlines } from "../state/marker.ts";
import {
  type Enforcer,
  type MarkerStore,
  removeMarker,
  type StopEvidence,
} from "./enforcer.ts";
import {
  isDead,
  type KillResult,
  matchesTarget,
  type ProcessInfo,
  type ProcessTable,
  type StopSignal,
} from "./proc.ts";
import { WorkloadSet } from "./workload_set.ts";

/** Options for {@linkcode SignalEnforcer}. */
export interface SignalEnforcerOptions {
  /** The workload's name (`BERTH_SIGNAL_TARGET`). */
  target: string;
  /** SIGTERM -> SIGKILL grace, ms; 0 sends SIGKILL right after SIGTERM. */
  graceMs: number;
  /** How often to rescan while the permission is closed; default 250 ms (the kubelet restarts a stopped container at once the first time). */
  scanIntervalMs?: number;
  clock: Clock;
  logger: Logger;
  processTable: ProcessTable;
  marker: MarkerStore;
  /** Copies of this program, such as the probe on the state volume, compared by file identity (so the path another container sees does not matter). */
  ownCopies?: string[];
}

/** One process's identity over time: a reused PID is another process. */
const keyOf = (p: ProcessInfo) => `${p.pid}:${p.startTime}`;

/** The signal enforcer; see the module doc. */
export class SignalEnforcer implements Enforcer {
  #o: Required<SignalEnforcerOptions>;
  /** Present while the permission is closed; aborting it ends the rescans and pending SIGKILLs. */
  #closing: AbortController | undefined;
  #reason = "";
  #workload = new WorkloadSet();
  #ownIds = new Set<string>();
  /** Sent SIGTERM during this closing, by {@linkcode keyOf}. */
  #termed = new Set<string>();
  #deniedReported = new Set<number>();
  #pendingKills = 0;
  /** Whether a target was seen since start: proof that the PID namespace is shared. */
  #seenTarget = false;
  #markerLeft = false;
  #absenceReported = false;
  #listFailureReported = false;
  /** What the last scan that could read the table found. */
  #live: { targets: ProcessInfo[]; others: ProcessInfo[] } | undefined;
  #listError: string | undefined;
  /** Serialises marker updates and scans so they apply in call order. */
  #queue: Promise<void> = Promise.resolve();
  #tasks = new Set<Promise<void>>();

  /** Throws on an empty target, a negative grace or a scan interval that is not positive. */
  constructor(options: SignalEnforcerOptions) {
    const { target, graceMs, scanIntervalMs = 250 } = options;
    const wrong = target === ""
      ? "signal enforcement needs a target process name (BERTH_SIGNAL_TARGET); an empty one would signal every process in the shared PID namespace"
      : !(graceMs >= 0)
      ? `enforce grace must not be negative (got ${graceMs} ms)`
      : !(scanIntervalMs > 0)
      ? `scan interval must be positive (got ${scanIntervalMs} ms)`
      : undefined;
    if (wrong !== undefined) throw new Error(wrong);
    this.#o = { ownCopies: [], ...options, scanIntervalMs };
  }

  /**
   * Ends the closing and writes the marker. Until a target was seen it also
   * looks for one, so that at a shutdown whose workload has already exited
   * (pod deletion) it is known that this sidecar sees the workload.
   */
  open(d: MarkerDeadlines): Promise<void> {
    // Pending SIGKILLs and rescans end now, not after queued work.
    this.#endClosing();
    return this.#serial(async () => {
      this.#endClosing();
      this.#termed.clear();
      this.#deniedReported.clear();
      this.#workload.clear();
      this.#live = undefined;
      await this.#o.marker.writeMarker(d);
      if (this.#seenTarget) return;
      // A table that cannot be read is said by the first scan after a close.
      const procs = await this.#read().catch(() => []);
      if (procs.some((p) => this.#isTarget(p))) this.#seenTarget = true;
    });
  }

  close(reason: string): Promise<void> {
    return this.#serial(async () => {
      const { marker, logger } = this.#o;
      this.#markerLeft = !await removeMarker(marker, logger, reason);
      this.#reason = reason;
      let closing = this.#closing;
      if (!closing) {
        closing = this.#closing = new AbortController();
        this.#deniedReported.clear();
        this.#listFailureReported = false;
        this.#track(this.#scanLoop(closing.signal));
      }
      await this.#scan(closing.signal);
    });
  }

  /**
   * Stopped means: the table could be read, a target was seen since start,
   * and a scan after the closing finds no target and nothing they brought
   * along alive, with no SIGKILL still due. Rescans until then or until
   * `signal` aborts. `stopping` while a process that got SIGTERM still runs
   * or its SIGKILL is due: releasing then would let it run beside the next
   * holder.
   */
  async workloadStopped(signal: AbortSignal): Promise<StopEvidence> {
    const evidence = await this.#evidence(signal);
    const { targets = [], others = [] } = this.#live ?? {};
    const stopping = !evidence.stopped && this.#closing !== undefined &&
      (this.#pendingKills > 0 ||
        [...targets, ...others].some((p) => this.#termed.has(keyOf(p))));
    return {
      ...evidence,
      ...(this.#markerLeft ? { markerLeft: true } : {}),
      ...(stopping ? { stopping: true } : {}),
    };
  }

  async #evidence(signal: AbortSignal): Promise<StopEvidence> {
    const { target } = this.#o;
    for (;;) {
      const closing = this.#closing;
      if (!closing) return { stopped: false, detail: "the gate is open" };
      await this.#serial(() => this.#scan(closing.signal));
      const { targets, others } = this.#live ?? { targets: [], others: [] };
      let detail: string | undefined;
      if (this.#listError !== undefined) {
        detail =
          `cannot read the process table, so it cannot tell whether the workload runs: ${this.#listError}`;
      } else if (!this.#seenTarget) {
        detail =
          `no process named ${target} was seen since the sidecar started, so it cannot tell whether the workload runs (signal mode needs shareProcessNamespace: true)`;
      } else if (
        this.#live && targets.length + others.length + this.#pendingKills === 0
      ) {
        const none = `no process named ${target} is running`;
        return { stopped: true, detail: none };
      } else if (signal.aborted) {
        const count = this.#live ? targets.length : "some";
        const named = `${count} process(es) named ${target} still running`;
        const some = others.slice(0, 5).map((p) => `${p.pid} ${p.comm}`);
        detail = others.length === 0
          ? named
          : `${named}, and ${others.length} other process(es) they brought along (${
            some.join(", ")
          })`;
      }
      if (detail !== undefined) return { stopped: false, detail };
      await this.#o.clock.sleep(this.#o.scanIntervalMs, signal);
    }
  }

  /** Ends the rescans and pending SIGKILLs and waits for them. */
  async dispose(): Promise<void> {
    this.#endClosing();
    await this.#queue;
    while (this.#tasks.size > 0) await Promise.all([...this.#tasks]);
  }

  #endClosing(): void {
    this.#closing?.abort();
    this.#closing = undefined;
  }

  #serial(fn: () => Promise<void>): Promise<void> {
    const run = this.#queue.then(fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  #track(task: Promise<void>): void {
    const detail = "signal enforcement failed";
    const t = task.catch((error) =>
      this.#o.logger.warn(GO_MESSAGES.enforceFailed, { detail, error })
    ).finally(() => this.#tasks.delete(t));
    this.#tasks.add(t);
  }

  async #scanLoop(signal: AbortSignal): Promise<void> {
    for (;;) {
      await this.#o.clock.sleep(this.#o.scanIntervalMs, signal);
      if (signal.aborted) return;
      await this.#serial(() => this.#scan(signal));
    }
  }

  /** Reads the identities of this program's copies again (one can be reinstalled), then the table. */
  async #read(): Promise<ProcessInfo[]> {
    const t = this.#o.processTable;
    const ids = await Promise.all(
      [t.selfExe, ...this.#o.ownCopies].map((p) => t.fileId(p)),
    );
    this.#ownIds = new Set(ids.filter((id): id is string => id !== undefined));
    return await t.list();
  }

  #spared(p: ProcessInfo): boolean {
    const t = this.#o.processTable;
    return p.pid === 1 || p.pid === t.selfPid || p.pid === t.parentPid ||
      (p.exeId !== undefined && this.#ownIds.has(p.exeId)) || isDead(p);
  }

  #isTarget(p: ProcessInfo): boolean {
    return !this.#spared(p) && matchesTarget(p, this.#o.target);
  }

  async #scan(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const { logger, target, processTable } = this.#o;
    let procs: ProcessInfo[];
    try {
      procs = await this.#read();
      this.#listError = undefined;
    } catch (e) {
      this.#listError = e instanceof Error ? e.message : String(e);
      if (!this.#listFailureReported) {
        this.#listFailureReported = true;
        logger.warn(
          "cannot read the process table; only the liveness probe will stop the workload",
          { target, error: e },
        );
      }
      return;
    }
    const self = procs.find((q) => q.pid === processTable.selfPid);
    const targets = procs.filter((p) => this.#isTarget(p));
    for (const p of targets) this.#workload.remember(p, self);
    const named = new Set(targets.map((p) => p.pid));
    const others = this.#workload.members(
      procs,
      processTable.selfPid,
      (p) => named.has(p.pid) || this.#spared(p),
    );
    this.#live = { targets, others };
    if (targets.length > 0) {
      this.#seenTarget = true;
      this.#absenceReported = false;
    } else if (!this.#absenceReported) {
      // Once per run of scans without a target.
      this.#absenceReported = true;
      const fields = { target, reason: this.#reason };
      if (this.#seenTarget) {
        logger.info(
          "the signal target is not running; nothing to stop now",
          fields,
        );
      } else {
        logger.warn(
          "no process matches the signal target and none was seen since the sidecar started; nothing to stop now (signal mode needs shareProcessNamespace: true in the pod spec)",
          fields,
        );
      }
    }
    for (const p of [...targets, ...others]) {
      if (signal.aborted) return;
      // Remembered at every scan: a group or session it made since is the
      // workload's too.
      if (!named.has(p.pid)) this.#workload.remember(p, self);
      if (this.#termed.has(keyOf(p))) continue;
      const group = this.#group(p, procs);
      if (this.#send(p, "SIGTERM", group.length > 0) !== "sent") continue;
      // Each member a group signal reached gets its own SIGKILL too: the
      // leader may exit first, and its group SIGKILL never come.
      for (const q of group.length > 0 ? group : [p]) {
        if (q !== p && this.#termed.has(keyOf(q))) continue;
        this.#workload.remember(q, self);
        this.#termed.add(keyOf(q));
        if (this.#o.graceMs === 0) await this.#killIfSame(q, signal);
        else this.#track(this.#killAfterGrace(q, signal));
      }
    }
  }

  /** Whom `p`'s group signal reaches, when it is signalled as its group: none when that holds a spared process. */
  #group(p: ProcessInfo, procs: ProcessInfo[]): ProcessInfo[] {
    const members = this.#workload.group(p, procs);
    return members.some((q) => q.pid !== p.pid && this.#spared(q))
      ? []
      : members;
  }

  async #killAfterGrace(p: ProcessInfo, signal: AbortSignal): Promise<void> {
    this.#pendingKills++;
    try {
      await this.#o.clock.sleep(this.#o.graceMs, signal);
      if (!signal.aborted) await this.#killIfSame(p, signal);
    } finally {
      this.#pendingKills--;
    }
  }

  /**
   * SIGKILLs `p` only if its PID still names the same process (same start
   * time): a freed PID can be reused by an unrelated process. A race of
   * microseconds between check and kill remains; Deno offers no pidfd.
   */
  async #killIfSame(p: ProcessInfo, signal: AbortSignal): Promise<void> {
    const t = this.#o.processTable;
    const now = await t.get(p.pid).catch(() => undefined);
    if (signal.aborted) return;
    const procs = this.#workload.leadsGroup(p)
      ? await t.list().catch(() => [])
      : [];
    if (this.#group(p, procs).length > 0) {
      // The leader's exit does not free its group id while members live.
      this.#send(p, "SIGKILL", true);
      // A leader that moved to another group since is not in it any more.
      if (
        !isDead(now) && now?.startTime === p.startTime && now.pgid !== p.pid
      ) {
        this.#send(p, "SIGKILL");
      }
      return;
    }
    if (isDead(now) || now?.startTime !== p.startTime) {
      // Gone, or unknown: forgotten, so a scan that still finds it signals
      // it again rather than never.
      this.#termed.delete(keyOf(p));
      const { pid, comm } = p;
      this.#o.logger.debug("target exited after SIGTERM", { pid, comm });
      return;
    }
    this.#send(p, "SIGKILL");
  }

  #send(p: ProcessInfo, sig: StopSignal, group = false): KillResult {
    const { processTable, logger } = this.#o;
    const term = sig === "SIGTERM";
    const failed = term ? GO_MESSAGES.sigtermFailed : GO_MESSAGES.sigkillFailed;
    const proc = { pid: p.pid, comm: p.comm, signal: sig };
    let result: KillResult;
    try {
      result = processTable.kill(group ? -p.pid : p.pid, sig);
    } catch (error) {
      const detail = "cannot signal the workload process";
      logger.warn(failed, { detail, ...proc, error });
      return "denied";
    }
    const fields = {
      ...proc,
      reason: this.#reason,
      ...(group ? { pgid: p.pid } : {}),
    };
    if (result === "sent") {
      logger.info(
        term ? GO_MESSAGES.sentSigterm : GO_MESSAGES.sentSigkill,
        fields,
      );
    } else if (result === "gone") {
      logger.debug("workload process already exited", fields);
    } else if (!this.#deniedReported.has(p.pid)) {
      this.#deniedReported.add(p.pid);
      logger.warn(failed, {
        detail:
          "not permitted to signal the workload process: give the sidecar the CAP_KILL capability, " +
          "run it as the workload's user (matching runAsUser), or use probe enforcement (BERTH_ENFORCE=probe)",
        ...fields,
        error: "EPERM",
        target_uid: p.uid,
        sidecar_uid: Deno.uid() ?? undefined,
      });
    }
    return result;
  }
}
