/**
 * `signal` enforcement (needs `shareProcessNamespace: true`): stops the
 * workload at once instead of waiting for its liveness probe, SIGTERM then
 * SIGKILL after the grace, and keeps stopping the processes the kubelet
 * restarts while the lease is lost. Which processes are the workload is
 * decided by lib/enforce/target.ts (the targets, by name; on its own
 * because the kernel keeps only 15 bytes of a process name) and by
 * lib/enforce/workload_set.ts (what the targets brought along under other
 * names, stopped with them).
 *
 * @module
 */
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
  type ProcessInfo,
  type ProcessTable,
  type StopSignal,
} from "./proc.ts";
import { matchesTarget } from "./target.ts";
import { WorkloadSet } from "./workload_set.ts";

/** Options for {@linkcode SignalEnforcer}. */
export interface SignalEnforcerOptions {
  /** The workload's executable basename (`BERTH_SIGNAL_TARGET`); must not be empty. */
  target: string;
  /** SIGTERM -> SIGKILL grace in milliseconds (`enforceGraceSeconds` * 1000); 0 sends SIGKILL right after SIGTERM. */
  graceMs: number;
  /** How often to look for restarted targets while the gate is closed; default 250 ms (the kubelet restarts a stopped container at once the first time). */
  scanIntervalMs?: number;
  /** Times the grace and the rescans. */
  clock: Clock;
  /** Receives one INFO record per signal sent and a WARN per refused target. */
  logger: Logger;
  /** Where targets are found and signalled. */
  processTable: ProcessTable;
  /** The health marker, removed before any signal. */
  marker: MarkerStore;
  /**
   * Copies of this program a process may run, such as the probe `check` the
   * init container installed in the state volume (the liveness probe and
   * `gate` run it in the workload's container): never signalled, like this
   * program itself. Compared by file identity, so the path the workload's
   * container sees does not matter. Default none.
   */
  ownCopies?: string[];
}

/** One process's identity over time: a reused PID is another process. */
function keyOf(p: ProcessInfo): string {
  return `${p.pid}:${p.startTime}`;
}

/**
 * The signal enforcer; see the module doc. It never signals PID 1, itself,
 * its parent, or a process running its executable or a copy of it (known
 * where `/proc/PID/exe` can be examined: the same user, or
 * `CAP_SYS_PTRACE`).
 */
export class SignalEnforcer implements Enforcer {
  #o: Required<SignalEnforcerOptions>;
  /** Present while the gate is closed; aborting it stops the rescans and pending KILLs. */
  #gate: AbortController | undefined;
  #reason = "";
  /** Targets already sent SIGTERM during this closing, by `pid:startTime`. */
  #termed = new Set<string>();
  /** PIDs whose refused signal was already reported during this closing. */
  #deniedReported = new Set<number>();
  #listFailureReported = false;
  /** Whether any scan since start found a target: proof that the PID namespace is shared. */
  #seenTarget = false;
  /** Whether the current run of scans without a target was already reported. */
  #absenceReported = false;
  /** Live targets in the last scan; undefined before the first and after a scan that could not read the table. */
  #lastTargets: number | undefined;
  /** Why the last scan could not read the process table; undefined when it could. */
  #listError: string | undefined;
  /**
   * What the targets found during this closing brought along (lib/enforce/
   * workload_set.ts): processes of other names that are the workload's too,
   * stopped with the targets.
   */
  #workload = new WorkloadSet();
  /** Live processes of the workload with another name in the last scan. */
  #lastOthers: ProcessInfo[] = [];
  /** File identities of this program and its {@linkcode SignalEnforcerOptions.ownCopies}. */
  #ownIds = new Set<string>();
  /** SIGKILLs scheduled and not yet due. */
  #pendingKills = 0;
  /** Serialises marker updates and scans so they apply in call order. */
  #queue: Promise<void> = Promise.resolve();
  /** Running background tasks (the scan loop, delayed KILLs), awaited by dispose(). */
  #tasks = new Set<Promise<void>>();

  /**
   * Validates the options; nothing is scanned until the first `close()`.
   *
   * @param options See {@linkcode SignalEnforcerOptions}.
   * @throws {Error} On an empty target, a negative grace or a scan interval
   * that is not positive: all configuration errors.
   */
  constructor(options: SignalEnforcerOptions) {
    if (options.target === "") {
      throw new Error(
        "signal enforcement needs a target process name (BERTH_SIGNAL_TARGET); an empty one would signal every process in the shared PID namespace",
      );
    }
    if (!(options.graceMs >= 0)) {
      throw new Error(
        `enforce grace must not be negative (got ${options.graceMs} ms)`,
      );
    }
    const scanIntervalMs = options.scanIntervalMs ?? 250;
    if (!(scanIntervalMs > 0)) {
      throw new Error(
        `scan interval must be positive (got ${scanIntervalMs} ms)`,
      );
    }
    this.#o = { ownCopies: [], ...options, scanIntervalMs };
  }

  /**
   * Cancels pending KILLs and rescans, then writes the marker; until a
   * target has been seen, also looks for one (so that at a shutdown whose
   * workload has already exited, as at pod deletion, it is known that this
   * sidecar does see the workload, and the release need not wait).
   */
  open(d: MarkerDeadlines): Promise<void> {
    // Stop pending KILLs and rescans now, not after queued work has run.
    this.#endGate();
    return this.#serial(async () => {
      this.#endGate();
      this.#termed.clear();
      this.#deniedReported.clear();
      this.#workload.clear();
      this.#lastOthers = [];
      await this.#o.marker.write(d);
      if (!this.#seenTarget) await this.#lookForTarget();
    });
  }

  /** Sets {@linkcode SignalEnforcer.#seenTarget} when a target runs; a table that cannot be read is left to the scans. */
  async #lookForTarget(): Promise<void> {
    try {
      await this.#readOwnIds();
      const procs = await this.#o.processTable.list();
      if (procs.some((p) => this.#isTarget(p))) this.#seenTarget = true;
    } catch {
      // Said by the first scan after a close, which needs the table.
    }
  }

  /** Removes the marker, signals the targets and keeps rescanning. */
  close(reason: string): Promise<void> {
    return this.#serial(async () => {
      await removeMarker(this.#o.marker, this.#o.logger, reason);
      this.#reason = reason;
      let gate = this.#gate;
      if (!gate) {
        gate = new AbortController();
        this.#gate = gate;
        this.#deniedReported.clear();
        this.#listFailureReported = false;
        this.#track(this.#scanLoop(gate.signal));
      }
      await this.#scan(gate.signal);
    });
  }

  /**
   * Stopped means: the process table could be read, a target was seen
   * since start (so this sidecar does see the workload's processes) and a
   * scan after the closing finds none alive, nor any process they brought
   * along (in their process groups, sessions or control groups, or below
   * them; lib/enforce/workload_set.ts), with no SIGKILL still due. Rescans at the scan interval until
   * then, or until `signal` aborts.
   */
  async workloadStopped(signal: AbortSignal): Promise<StopEvidence> {
    const { clock, scanIntervalMs, target } = this.#o;
    for (;;) {
      const gate = this.#gate;
      if (!gate) {
        return { stopped: false, detail: "the gate is open" };
      }
      await this.#serial(() => this.#scan(gate.signal));
      if (this.#listError !== undefined) {
        return {
          stopped: false,
          detail:
            `cannot read the process table, so it cannot tell whether the workload runs: ${this.#listError}`,
        };
      }
      if (!this.#seenTarget) {
        return {
          stopped: false,
          detail:
            `no process named ${target} was seen since the sidecar started, so it cannot tell whether the workload runs (signal mode needs shareProcessNamespace: true)`,
        };
      }
      const others = this.#lastOthers;
      if (
        this.#lastTargets === 0 && others.length === 0 &&
        this.#pendingKills === 0
      ) {
        return {
          stopped: true,
          detail: `no process named ${target} is running`,
        };
      }
      if (signal.aborted) {
        const named = `${
          this.#lastTargets ?? "some"
        } process(es) named ${target} still running`;
        if (others.length === 0) return { stopped: false, detail: named };
        return {
          stopped: false,
          detail:
            `${named}, and ${others.length} other process(es) they brought along (${
              others.slice(0, 5).map((p) => `${p.pid} ${p.comm}`).join(", ")
            })`,
        };
      }
      await clock.sleep(scanIntervalMs, signal);
    }
  }

  /** Stops rescans and pending KILLs and waits for them to end. */
  async dispose(): Promise<void> {
    this.#endGate();
    await this.#queue;
    while (this.#tasks.size > 0) await Promise.all([...this.#tasks]);
  }

  #endGate(): void {
    this.#gate?.abort();
    this.#gate = undefined;
  }

  #serial(fn: () => Promise<void>): Promise<void> {
    const run = this.#queue.then(fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  #track(task: Promise<void>): void {
    const t = task.catch((e) =>
      this.#o.logger.error("signal enforcement failed", { error: e })
    ).finally(() => this.#tasks.delete(t));
    this.#tasks.add(t);
  }

  async #scanLoop(signal: AbortSignal): Promise<void> {
    const { clock, scanIntervalMs } = this.#o;
    for (;;) {
      await clock.sleep(scanIntervalMs, signal);
      if (signal.aborted) return;
      await this.#serial(() => this.#scan(signal));
    }
  }

  /**
   * Never signalled: PID 1, this sidecar, its parent, a process running its
   * executable or a copy of it (where its `/proc/PID/exe` can be examined),
   * the dead.
   */
  #spared(p: ProcessInfo): boolean {
    const t = this.#o.processTable;
    return p.pid === 1 || p.pid === t.selfPid || p.pid === t.parentPid ||
      (p.exeId !== undefined && this.#ownIds.has(p.exeId)) || isDead(p);
  }

  /** The file identities of this program and its copies, read again at every scan (a copy can be reinstalled). */
  async #readOwnIds(): Promise<void> {
    const t = this.#o.processTable;
    const ids = await Promise.all(
      [t.selfExe, ...this.#o.ownCopies].map((p) => t.fileId(p)),
    );
    this.#ownIds = new Set(ids.filter((id): id is string => id !== undefined));
  }

  #isTarget(p: ProcessInfo): boolean {
    return !this.#spared(p) && matchesTarget(p, this.#o.target);
  }

  async #scan(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const { processTable, logger, target, graceMs } = this.#o;
    let procs: ProcessInfo[];
    try {
      await this.#readOwnIds();
      procs = await processTable.list();
      this.#listError = undefined;
    } catch (e) {
      this.#lastTargets = undefined;
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
    const selfPid = processTable.selfPid;
    const self = procs.find((q) => q.pid === selfPid);
    const targets = procs.filter((p) => this.#isTarget(p));
    for (const p of targets) this.#workload.remember(p, self);
    const isTarget = new Set(targets.map((p) => p.pid));
    const others = this.#workload.members(
      procs,
      selfPid,
      (p) => isTarget.has(p.pid) || this.#spared(p),
    );
    this.#lastTargets = targets.length;
    this.#lastOthers = others;
    this.#reportAbsence(targets.length === 0);
    // The targets first, then what they brought along (their groups,
    // sessions, control groups, descendants), each SIGTERM then SIGKILL.
    for (const p of [...targets, ...others]) {
      if (signal.aborted) return;
      // Remembered at every scan, signalled or not: a new group or session
      // it made since is the workload's too.
      if (!isTarget.has(p.pid)) this.#workload.remember(p, self);
      if (this.#termed.has(keyOf(p))) continue;
      const group = this.#groupSignal(p, procs);
      if (this.#send(p, "SIGTERM", group) !== "sent") continue;
      // A group signal reached the members the group has now: each is
      // SIGKILLed on its own after the grace too, as the leader's group
      // SIGKILL may never come (the leader can exit first). One that joins
      // later is signalled when a scan finds it.
      const reached = group
        ? procs.filter((q) => q.pgid === p.pid && !isDead(q))
        : [p];
      for (const q of reached) {
        if (q !== p && this.#termed.has(keyOf(q))) continue;
        this.#workload.remember(q, self);
        this.#termed.add(keyOf(q));
        if (graceMs === 0) await this.#killIfSame(q, signal);
        else this.#track(this.#killAfterGrace(q, signal));
      }
    }
  }

  /**
   * Whether `p` is signalled as its whole process group: it leads a group of
   * the workload's (never this sidecar's) that holds no spared process.
   */
  #groupSignal(p: ProcessInfo, procs: ProcessInfo[]): boolean {
    return this.#workload.leadsGroup(p) &&
      !procs.some((q) =>
        q.pgid === p.pid && q.pid !== p.pid && !isDead(q) && this.#spared(q)
      );
  }

  /**
   * One record per run of scans that find no target: that the namespace is
   * probably not shared while no target was ever seen, else that the target
   * is not running (stopped, or in the kubelet's restart back-off).
   */
  #reportAbsence(absent: boolean): void {
    if (!absent) {
      this.#seenTarget = true;
      this.#absenceReported = false;
      return;
    }
    if (this.#absenceReported) return;
    this.#absenceReported = true;
    const fields = { target: this.#o.target, reason: this.#reason };
    if (this.#seenTarget) {
      this.#o.logger.info(
        "the signal target is not running; nothing to stop now",
        fields,
      );
    } else {
      this.#o.logger.warn(
        "no process matches the signal target and none was seen since the sidecar started; nothing to stop now (signal mode needs shareProcessNamespace: true in the pod spec)",
        fields,
      );
    }
  }

  async #killAfterGrace(p: ProcessInfo, signal: AbortSignal): Promise<void> {
    this.#pendingKills++;
    try {
      await this.#o.clock.sleep(this.#o.graceMs, signal);
      if (signal.aborted) return;
      await this.#killIfSame(p, signal);
    } finally {
      this.#pendingKills--;
    }
  }

  /**
   * SIGKILL `p` only if its PID still names the same process (same start
   * time): a PID freed by an exit can be reused by an unrelated process.
   * A race of a few microseconds between the check and the kill remains;
   * Deno offers no pidfd to close it.
   */
  async #killIfSame(p: ProcessInfo, signal: AbortSignal): Promise<void> {
    let now: ProcessInfo | undefined;
    try {
      now = await this.#o.processTable.get(p.pid);
    } catch {
      now = undefined;
    }
    if (signal.aborted) return;
    const members = await this.#groupMembers(p);
    if (members.length > 0 && this.#groupSignal(p, members)) {
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
      // Gone, or the table could not say: forgotten, so that a scan that
      // still finds it signals it again rather than never.
      this.#termed.delete(keyOf(p));
      this.#o.logger.debug("target exited after SIGTERM", {
        pid: p.pid,
        comm: p.comm,
      });
      return;
    }
    this.#send(p, "SIGKILL");
  }

  /**
   * The live members of the group `p` leads, when it leads one of the
   * workload's and its id was not taken by another process's group since;
   * none when the table cannot be read.
   */
  async #groupMembers(p: ProcessInfo): Promise<ProcessInfo[]> {
    if (!this.#workload.leadsGroup(p)) return [];
    try {
      const members = (await this.#o.processTable.list()).filter((q) =>
        q.pgid === p.pid && !isDead(q)
      );
      const reused = members.some((q) =>
        q.pid === p.pid && q.startTime !== p.startTime
      );
      return reused ? [] : members;
    } catch {
      return [];
    }
  }

  #send(
    p: ProcessInfo,
    sig: StopSignal,
    group = false,
  ): "sent" | "gone" | "denied" {
    const { processTable, logger } = this.#o;
    let result: "sent" | "gone" | "denied";
    try {
      result = processTable.kill(group ? -p.pid : p.pid, sig);
    } catch (e) {
      logger.error("cannot signal the workload process", {
        pid: p.pid,
        comm: p.comm,
        signal: sig,
        error: e,
      });
      return "denied";
    }
    const fields = {
      pid: p.pid,
      comm: p.comm,
      signal: sig,
      reason: this.#reason,
      ...(group ? { pgid: p.pid } : {}),
    };
    if (result === "sent") logger.info("signalled workload process", fields);
    else if (result === "gone") {
      logger.debug("workload process already exited", fields);
    } else if (!this.#deniedReported.has(p.pid)) {
      this.#deniedReported.add(p.pid);
      logger.warn(
        "not permitted to signal the workload process: give the sidecar the CAP_KILL capability, " +
          "run it as the workload's user (matching runAsUser), or use probe enforcement (BERTH_ENFORCE=probe)",
        { ...fields, target_uid: p.uid, sidecar_uid: Deno.uid() ?? undefined },
      );
    }
    return result;
  }
}
