/**
 * Enforcement: what the renewer's lease "gate" does to the workload. The
 * health marker is always removed when the gate closes, so the main
 * container's liveness probe fails whatever else happens (the backstop).
 * `probe` mode does only that; `signal` mode also stops the workload's
 * processes at once through the shared PID namespace, and keeps stopping the
 * ones the kubelet restarts while the lease is lost.
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import type { Logger } from "../obs/log.ts";
import type { MarkerDeadlines } from "../state/marker.ts";
import type { ProcessInfo, ProcessTable, StopSignal } from "./proc.ts";

/**
 * What the enforcers need from the state volume. It is injected rather than
 * imported so the enforcers can be tested with an in-memory fake and the
 * state directory's safety rules live in one place.
 */
export interface MarkerStore {
  /** Atomically (re)writes the health marker with these deadlines. */
  write(d: MarkerDeadlines): Promise<void>;
  /** Removes the health marker; a missing marker is not an error. */
  remove(): Promise<void>;
}

/**
 * The lease gate as the renewer drives it, so the renewer does not care which
 * enforcement mode was configured.
 */
export interface Enforcer {
  /**
   * Gate open or refreshed: (re)writes the marker with these deadlines;
   * signal mode also stops scanning and forgets the TERM times. Rejects when
   * the marker cannot be written.
   */
  open(d: MarkerDeadlines): Promise<void>;
  /**
   * Gate closed (lease lost or about to be): removes the marker first; signal
   * mode then signals the targets and, until `open()`/`dispose()`, keeps
   * scanning for restarted ones. Idempotent and meant to be called on every
   * renewer tick while the lease is lost; each call re-applies at once.
   * Never rejects: failures are logged, the sidecar must not crash.
   */
  close(reason: string): Promise<void>;
  /** Stops background scanning and timers; used at shutdown and in tests. */
  dispose(): Promise<void>;
}

/** Options for {@linkcode ProbeEnforcer}. */
export interface ProbeEnforcerOptions {
  /** The health marker on the state volume. */
  marker: MarkerStore;
  /** Where a failure to remove the marker is reported. */
  logger: Logger;
}

/**
 * `probe` mode: the liveness probe of the main container does the stopping,
 * so the gate is only the marker's presence.
 */
export class ProbeEnforcer implements Enforcer {
  #o: ProbeEnforcerOptions;

  /** See {@linkcode ProbeEnforcerOptions}. */
  constructor(options: ProbeEnforcerOptions) {
    this.#o = options;
  }

  open(d: MarkerDeadlines): Promise<void> {
    return this.#o.marker.write(d);
  }

  async close(reason: string): Promise<void> {
    await removeMarker(this.#o.marker, this.#o.logger, reason);
  }

  dispose(): Promise<void> {
    return Promise.resolve();
  }
}

/** Options for {@linkcode SignalEnforcer}. */
export interface SignalEnforcerOptions {
  /** The workload's process `comm` or executable basename (`BERTH_SIGNAL_TARGET`); must not be empty. */
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
}

/** The kernel keeps at most this many bytes of a process name in `comm`. */
const COMM_BYTES = 15;

/**
 * Whether `p` is the workload named `target`, ignoring the exclusions. It is
 * its own function because the kernel truncates `comm` to 15 bytes, so a long
 * target must also match its truncated form, and a process that renamed
 * itself is still found by its executable's file name.
 */
export function matchesTarget(p: ProcessInfo, target: string): boolean {
  if (target === "") return false;
  if (p.comm === target || p.comm === truncateComm(target)) return true;
  if (p.exe === undefined) return false;
  return p.exe.slice(p.exe.lastIndexOf("/") + 1) === target;
}

/** `name` cut to what the kernel would keep in `comm` (decoded the way the process table decodes it). */
function truncateComm(name: string): string {
  const bytes = new TextEncoder().encode(name);
  if (bytes.length <= COMM_BYTES) return name;
  return new TextDecoder().decode(bytes.subarray(0, COMM_BYTES));
}

function gone(p: ProcessInfo | undefined): boolean {
  return p === undefined || p.state === "Z" || p.state === "X";
}

async function removeMarker(
  marker: MarkerStore,
  logger: Logger,
  reason: string,
): Promise<void> {
  try {
    await marker.remove();
  } catch (e) {
    logger.error(
      "cannot remove the health marker; the workload's liveness probe may keep passing until the deadline written in the marker",
      { reason, error: e },
    );
  }
}

/**
 * `signal` mode (needs `shareProcessNamespace: true`): stops the workload at
 * once instead of waiting for its liveness probe, SIGTERM then SIGKILL after
 * the grace, and keeps stopping the processes the kubelet restarts while the
 * lease is lost. It never signals PID 1, itself, its parent or another copy
 * of its own executable.
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
  /** Whether this closing has scanned yet: finding no target is only worth a log on the first scan. */
  #scanned = false;
  /** Serialises marker updates and scans so they apply in call order. */
  #queue: Promise<void> = Promise.resolve();
  /** Running background tasks (the scan loop, delayed KILLs), awaited by dispose(). */
  #tasks = new Set<Promise<void>>();

  /** Throws on an empty target or a negative grace: both are configuration errors. */
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
    this.#o = { ...options, scanIntervalMs };
  }

  open(d: MarkerDeadlines): Promise<void> {
    // Stop pending KILLs and rescans now, not after queued work has run.
    this.#endGate();
    return this.#serial(async () => {
      this.#endGate();
      this.#termed.clear();
      this.#deniedReported.clear();
      await this.#o.marker.write(d);
    });
  }

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
        this.#scanned = false;
        this.#track(this.#scanLoop(gate.signal));
      }
      await this.#scan(gate.signal);
    });
  }

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

  #isTarget(p: ProcessInfo): boolean {
    const t = this.#o.processTable;
    if (p.pid === 1 || p.pid === t.selfPid || p.pid === t.parentPid) {
      return false;
    }
    if (p.exe !== undefined && p.exe === t.selfExe) return false;
    if (gone(p)) return false;
    return matchesTarget(p, this.#o.target);
  }

  async #scan(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const { processTable, logger, target, graceMs } = this.#o;
    let procs: ProcessInfo[];
    try {
      procs = await processTable.list();
    } catch (e) {
      if (!this.#listFailureReported) {
        this.#listFailureReported = true;
        logger.warn(
          "cannot read the process table; only the liveness probe will stop the workload",
          { target, error: e },
        );
      }
      return;
    }
    const targets = procs.filter((p) => this.#isTarget(p));
    const first = !this.#scanned;
    this.#scanned = true;
    if (targets.length === 0 && first) {
      logger.info(
        "no process matches the signal target; nothing to stop now (signal mode needs shareProcessNamespace: true in the pod spec)",
        { target, reason: this.#reason },
      );
    }
    for (const p of targets) {
      if (signal.aborted) return;
      const key = `${p.pid}:${p.startTime}`;
      if (this.#termed.has(key)) continue;
      if (this.#send(p, "SIGTERM") !== "sent") continue;
      this.#termed.add(key);
      if (graceMs === 0) await this.#killIfSame(p, signal);
      else this.#track(this.#killAfterGrace(p, signal));
    }
  }

  async #killAfterGrace(p: ProcessInfo, signal: AbortSignal): Promise<void> {
    await this.#o.clock.sleep(this.#o.graceMs, signal);
    if (signal.aborted) return;
    await this.#killIfSame(p, signal);
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
    if (gone(now) || now?.startTime !== p.startTime) {
      this.#o.logger.debug("target exited after SIGTERM", {
        pid: p.pid,
        comm: p.comm,
      });
      return;
    }
    this.#send(p, "SIGKILL");
  }

  #send(p: ProcessInfo, sig: StopSignal): "sent" | "gone" | "denied" {
    const { processTable, logger } = this.#o;
    let result: "sent" | "gone" | "denied";
    try {
      result = processTable.kill(p.pid, sig);
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
