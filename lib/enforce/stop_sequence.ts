/**
 * The stop sequence of signal mode: SIGTERM, then SIGKILL once the grace
 * has passed, to each process one scan found (lib/enforce/workload_scan.ts),
 * or to the whole process group it leads. Before a SIGKILL it checks that
 * the PID still names the process that got the SIGTERM, and it reports
 * every signal sent and, once per closing, each one refused.
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { Clock } from "../state/clock.ts";
import type { Logger } from "../obs/log.ts";
import {
  isDead,
  type ProcessInfo,
  type ProcessTable,
  type StopSignal,
} from "./proc.ts";
import type { WorkloadScan } from "./workload_scan.ts";
import type { WorkloadSet } from "./workload_set.ts";

/** Options for {@linkcode StopSequence}. */
export interface StopSequenceOptions {
  /** SIGTERM -> SIGKILL grace in milliseconds; 0 sends SIGKILL right after SIGTERM. */
  graceMs: number;
  /** Times the grace. */
  clock: Clock;
  /** Receives one INFO record per signal sent and a WARN per refused process. */
  logger: Logger;
  /** Where processes are looked up again and signalled. */
  processTable: ProcessTable;
  /** What the targets brought along: which process groups are the workload's, and where the processes a signal reached are remembered. */
  workload: WorkloadSet;
  /** Processes never signalled (see `WorkloadScanner.spared`): a group holding one is signalled member by member. */
  spared: (p: ProcessInfo) => boolean;
  /** Why the permission closed, read whenever a signal is reported (a SIGKILL due later gives the latest reason). */
  reason: () => string;
  /** Runs a delayed SIGKILL in the background; its owner reports a failure and awaits it at disposal. */
  track: (task: Promise<void>) => void;
}

/** One process's identity over time: a reused PID is another process. */
function keyOf(p: ProcessInfo): string {
  return `${p.pid}:${p.startTime}`;
}

/** Signals the workload's processes; see the module doc. */
export class StopSequence {
  #o: StopSequenceOptions;
  /** Processes already sent SIGTERM during this closing, by `pid:startTime`. */
  #termed = new Set<string>();
  /** PIDs whose refused signal was already reported during this closing. */
  #deniedReported = new Set<number>();
  /** SIGKILLs scheduled and not yet due. */
  #pendingKills = 0;

  /**
   * Nothing is signalled until the first {@linkcode StopSequence.stop}.
   *
   * @param options See {@linkcode StopSequenceOptions}.
   */
  constructor(options: StopSequenceOptions) {
    this.#o = options;
  }

  /** How many SIGKILLs are scheduled and not yet due. */
  get pendingKills(): number {
    return this.#pendingKills;
  }

  /** Forgets the SIGTERMs sent and the refusals reported (the permission reopened). */
  clear(): void {
    this.#termed.clear();
    this.#deniedReported.clear();
  }

  /** Forgets the refusals reported, so that a new closing reports them again. */
  clearDenied(): void {
    this.#deniedReported.clear();
  }

  /**
   * Stops what one scan found: the targets first, then what they brought
   * along (their groups, sessions, control groups, descendants), each
   * SIGTERM then SIGKILL after the grace. A process already sent SIGTERM
   * during this closing is not sent another; each of the others is
   * remembered in the workload set, signalled or not. With a grace of 0 the
   * SIGKILLs are sent before it resolves; else they are left to tasks.
   *
   * @param found One scan of the process table.
   * @param signal Aborts when the permission opens again: nothing more is
   * signalled.
   */
  async stop(found: WorkloadScan, signal: AbortSignal): Promise<void> {
    const { procs, self, targets, others } = found;
    const { graceMs, workload } = this.#o;
    for (const p of [...targets, ...others]) {
      if (signal.aborted) return;
      // Remembered at every scan, signalled or not: a new group or session
      // it made since is the workload's too.
      if (!targets.includes(p)) workload.remember(p, self);
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
        workload.remember(q, self);
        this.#termed.add(keyOf(q));
        if (graceMs === 0) await this.#killIfSame(q, signal);
        else this.#o.track(this.#killAfterGrace(q, signal));
      }
    }
  }

  /**
   * Whether `p` is signalled as its whole process group: it leads a group of
   * the workload's (never this sidecar's) that holds no spared process.
   */
  #groupSignal(p: ProcessInfo, procs: ProcessInfo[]): boolean {
    return this.#o.workload.leadsGroup(p) &&
      !procs.some((q) =>
        q.pgid === p.pid && q.pid !== p.pid && !isDead(q) && this.#o.spared(q)
      );
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
    if (!this.#o.workload.leadsGroup(p)) return [];
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
      logger.warn(failedMessage(sig), {
        detail: "cannot signal the workload process",
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
      reason: this.#o.reason(),
      ...(group ? { pgid: p.pid } : {}),
    };
    if (result === "sent") {
      logger.info(
        sig === "SIGTERM" ? GO_MESSAGES.sentSigterm : GO_MESSAGES.sentSigkill,
        fields,
      );
    } else if (result === "gone") {
      logger.debug("workload process already exited", fields);
    } else if (!this.#deniedReported.has(p.pid)) {
      this.#deniedReported.add(p.pid);
      logger.warn(failedMessage(sig), {
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

/** The Go helper's message for a signal that could not be sent. */
function failedMessage(sig: StopSignal): string {
  return sig === "SIGTERM"
    ? GO_MESSAGES.sigtermFailed
    : GO_MESSAGES.sigkillFailed;
}
