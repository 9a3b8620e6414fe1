/**
 * `signal` enforcement (needs `shareProcessNamespace: true`): stops the
 * workload at once instead of waiting for its liveness probe, SIGTERM then
 * SIGKILL after the grace, and keeps stopping the processes the kubelet
 * restarts while the lease is lost. This module carries out what the
 * workload's permission (lib/hold/permission.ts) decides (a close starts the
 * rescans, an open ends them) and what it knows of the workload
 * for the release. Which processes one scan finds is decided by
 * lib/enforce/workload_scan.ts (using lib/enforce/target.ts, the targets by
 * name, and lib/enforce/workload_set.ts, what the targets brought along
 * under other names); how they are signalled, by
 * lib/enforce/stop_sequence.ts.
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
import type { ProcessInfo, ProcessTable } from "./proc.ts";
import { StopSequence } from "./stop_sequence.ts";
import { WorkloadScanner } from "./workload_scan.ts";
import { WorkloadSet } from "./workload_set.ts";

/** Options for {@linkcode SignalEnforcer}. */
export interface SignalEnforcerOptions {
  /** The workload's executable basename (`BERTH_SIGNAL_TARGET`); must not be empty. */
  target: string;
  /** SIGTERM -> SIGKILL grace in milliseconds (`enforceGraceSeconds` * 1000); 0 sends SIGKILL right after SIGTERM. */
  graceMs: number;
  /** How often to look for restarted targets while the permission is closed; default 250 ms (the kubelet restarts a stopped container at once the first time). */
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

/**
 * The signal enforcer; see the module doc. It never signals PID 1, itself,
 * its parent, or a process running its executable or a copy of it (known
 * where `/proc/PID/exe` can be examined: the same user, or
 * `CAP_SYS_PTRACE`).
 */
export class SignalEnforcer implements Enforcer {
  #o: Required<SignalEnforcerOptions>;
  /** Present while the permission is closed; aborting it stops the rescans and pending KILLs. */
  #closing: AbortController | undefined;
  #reason = "";
  #listFailureReported = false;
  /** Whether any scan since start found a target: proof that the PID namespace is shared. */
  #seenTarget = false;
  /** Whether the last close left the marker (see `StopEvidence.markerLeft`). */
  #markerLeft = false;
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
  /** Finds the targets and what they brought along in each scan. */
  #scanner: WorkloadScanner;
  /** Signals what the scans find. */
  #stops: StopSequence;
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
    const { target, graceMs, clock, logger, processTable, ownCopies } = this.#o;
    this.#scanner = new WorkloadScanner({
      target,
      processTable,
      ownCopies,
      workload: this.#workload,
    });
    this.#stops = new StopSequence({
      graceMs,
      clock,
      logger,
      processTable,
      workload: this.#workload,
      spared: (p) => this.#scanner.spared(p),
      reason: () => this.#reason,
      track: (task) => this.#track(task),
    });
  }

  /**
   * Cancels pending KILLs and rescans, then writes the marker; until a
   * target has been seen, also looks for one (so that at a shutdown whose
   * workload has already exited, as at pod deletion, it is known that this
   * sidecar does see the workload, and the release need not wait).
   */
  open(d: MarkerDeadlines): Promise<void> {
    // Stop pending KILLs and rescans now, not after queued work has run.
    this.#endClosing();
    return this.#serial(async () => {
      this.#endClosing();
      this.#stops.clear();
      this.#workload.clear();
      this.#lastOthers = [];
      await this.#o.marker.writeMarker(d);
      if (!this.#seenTarget) await this.#lookForTarget();
    });
  }

  /** Sets {@linkcode SignalEnforcer.#seenTarget} when a target runs; a table that cannot be read is left to the scans. */
  async #lookForTarget(): Promise<void> {
    try {
      const procs = await this.#scanner.read();
      if (procs.some((p) => this.#scanner.isTarget(p))) {
        this.#seenTarget = true;
      }
    } catch {
      // Said by the first scan after a close, which needs the table.
    }
  }

  /** Removes the marker, signals the targets and keeps rescanning. */
  close(reason: string): Promise<void> {
    return this.#serial(async () => {
      this.#markerLeft = !await removeMarker(
        this.#o.marker,
        this.#o.logger,
        reason,
      );
      this.#reason = reason;
      let closing = this.#closing;
      if (!closing) {
        closing = new AbortController();
        this.#closing = closing;
        this.#stops.clearDenied();
        this.#listFailureReported = false;
        this.#track(this.#scanLoop(closing.signal));
      }
      await this.#scan(closing.signal);
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
    const evidence = await this.#evidence(signal);
    return this.#markerLeft ? { ...evidence, markerLeft: true } : evidence;
  }

  /** {@linkcode SignalEnforcer.workloadStopped}, from the process table alone. */
  async #evidence(signal: AbortSignal): Promise<StopEvidence> {
    const { clock, scanIntervalMs, target } = this.#o;
    for (;;) {
      const closing = this.#closing;
      if (!closing) {
        return { stopped: false, detail: "the gate is open" };
      }
      await this.#serial(() => this.#scan(closing.signal));
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
        this.#stops.pendingKills === 0
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
    const t = task.catch((e) =>
      this.#o.logger.warn(GO_MESSAGES.enforceFailed, {
        detail: "signal enforcement failed",
        error: e,
      })
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

  async #scan(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const { logger, target } = this.#o;
    let procs: ProcessInfo[];
    try {
      procs = await this.#scanner.read();
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
    const found = this.#scanner.scan(procs);
    this.#lastTargets = found.targets.length;
    this.#lastOthers = found.others;
    this.#reportAbsence(found.targets.length === 0);
    await this.#stops.stop(found, signal);
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
}
