/**
 * `run`'s waits and its supervision of the command: wait for the lease, then
 * for the renewer to permit the command, start it under `gate`, watch it,
 * and say how each ended, in its own line and exit status
 * (docs/run-and-gate.md, "Exit status"). The command's gate watches run's
 * private marker and run itself, so a killed or frozen `run` cannot leave
 * the command running past the last confirmed deadline.
 *
 * @module
 */
import {
  type ChildExit,
  type ProcessGroup,
  reapOrphans,
  SpawnError,
} from "../gate/process_group.ts";
import type { ChildEnforcer } from "./child_enforcer.ts";
import { aborted, type Clock } from "../state/clock.ts";
import type { Config } from "../config/config.ts";
import type { LogFields, Logger } from "../obs/log.ts";
import type { Renewer } from "../hold/renewer.ts";
import type { RenewerStatus } from "../hold/lease.ts";
import type { StateDir } from "../state/state_dir.ts";
import { EXIT_GATE_CLOSED } from "../gate/gate_loop.ts";
import type { LeaseKeeper } from "../cmd/lease_keeper.ts";
import {
  onSignals,
  SHUTDOWN_SIGNALS,
  type SignalSource,
} from "../cmd/signals.ts";
import { type AcquiredLease, acquireLease } from "../hold/acquire.ts";
import type { LeaseClient } from "../lease/rpc.ts";

/** The command was stopped because the lease was lost (sysexits' `EX_TEMPFAIL`: another holder has it now). */
export const EXIT_LEASE_LOST = 75;
/** `--acquire-timeout` passed before the lease was acquired (again). */
export const EXIT_ACQUIRE_TIMEOUT = 76;
/** A stop signal arrived while waiting for the lease; the command did not run (again). */
export const EXIT_CANCELLED = 77;
/** A renewal confirmed the lease while the command was being stopped: held, but the command is gone. Not a loss. */
export const EXIT_CONFIRMED_LATE = 79;
/** The command's gate ended while the command still ran; run stopped what it left (sysexits' `EX_SOFTWARE`). */
export const EXIT_GATE_DIED = 70;
/** Invalid configuration or start-up failure (sysexits' `EX_CONFIG`). */
export const EXIT_CONFIG = 78;

const isTimeout = (signal: AbortSignal) =>
  (signal.reason as Error | undefined)?.name === "TimeoutError";

/** A bound on one wait for the lease: the signals, and `--acquire-timeout`. */
function waitBound(
  config: Config,
  clock: Clock,
  ...signals: AbortSignal[]
): AbortSignal {
  if (config.acquireTimeoutMs) {
    signals.push(clock.timeout(config.acquireTimeoutMs));
  }
  return AbortSignal.any(signals);
}

/**
 * Waits for the lease with `acquire`'s loop, bound by `--acquire-timeout`
 * and by run's stop signals (`cancelled`), and ended at once by an API
 * server no wait can fix. Returns the lease, or the exit status.
 */
export async function acquireForRun(o: {
  config: Config;
  client: LeaseClient;
  clock: Clock;
  logger: Logger;
  cancelled: AbortSignal;
  /** Where run's state is, said once in its first line. */
  dirs: LogFields;
}): Promise<AcquiredLease | number> {
  const { config, clock, logger } = o;
  logger.info("acquiring lease", {
    ttl_seconds: config.ttlSeconds,
    enforce_lead_ms: config.enforceLeadMs,
    enforce_grace_seconds: config.enforceGraceSeconds,
    ...o.dirs,
  });
  const bound = waitBound(config, clock, o.cancelled);
  const { lease, last, fix } = await acquireLease({
    client: o.client,
    holder: config.holder,
    ttlSeconds: config.ttlSeconds,
    heartbeatMs: config.heartbeatMs,
    enforceLeadMs: config.enforceLeadMs,
    signal: bound,
    clock,
    logger,
    guardSharedHolder: true,
    endOnFix: true,
  });
  if (fix !== undefined) {
    logger.error(`the API server cannot be used as configured: ${fix}`, {
      error: last,
      fix,
    });
    return EXIT_CONFIG;
  }
  if (!lease) {
    if (isTimeout(bound)) {
      logger.error(
        "gave up waiting for the lease: --acquire-timeout reached",
        { last_attempt: last },
      );
      return EXIT_ACQUIRE_TIMEOUT;
    }
    // A standby stopped on purpose (systemctl stop): no failure, INFO.
    logger.info("stopped before the lease was acquired", {
      reason: bound.reason instanceof Error
        ? bound.reason.message
        : String(bound.reason),
    });
    return EXIT_CANCELLED;
  }
  logger.info("lease acquired", { fencing_token: lease.token });
  return lease;
}

/**
 * `run`'s stop signals: they end a wait (`cancelled`), or go to the running
 * command; a Ctrl-C once a stop was forwarded kills it.
 */
export class SignalRouter {
  #cancel = new AbortController();
  #target: ProcessGroup | undefined;
  #stopForwarded = false;
  dispose: () => void;

  constructor(private logger: Logger, source: SignalSource) {
    this.dispose = onSignals(SHUTDOWN_SIGNALS, (n) => this.#on(n), source);
  }

  get cancelled(): AbortSignal {
    return this.#cancel.signal;
  }

  /** SIGTERM, SIGINT or SIGQUIT reached the current command: `run` does not restart it after a loss. */
  get stopForwarded(): boolean {
    return this.#stopForwarded;
  }

  /** Undefined: nothing runs. */
  forwardTo(target: ProcessGroup | undefined): void {
    if (target !== this.#target && target !== undefined) {
      this.#stopForwarded = false;
    }
    this.#target = target;
  }

  #on(name: Deno.Signal): void {
    const target = this.#target;
    if (target && name === "SIGINT" && this.#stopForwarded) {
      // A person at the terminal asks again: the command's cleanup is not
      // waited out.
      target.kill(this.logger);
    } else if (target) {
      if (name !== "SIGHUP") this.#stopForwarded = true;
      this.logger.info("signal received; forwarding it to the command", {
        signal: name,
        pgid: target.pid,
      });
      target.signal(name);
    } else if (!this.#cancel.signal.aborted) {
      this.logger.info("signal received; shutting down", { signal: name });
      this.#cancel.abort(new DOMException(`received ${name}`, "AbortError"));
    } else {
      this.logger.info("signal received again; still finishing", {
        signal: name,
      });
    }
  }
}

/**
 * The renewer's changes as the supervision waits on them (`next` aborts at
 * the next change of the permission or the token), and how late run noticed
 * a close that came after the lease deadline itself (it was frozen or
 * starved): said at once, and taken by the stop it explains.
 */
export function watchChanges(clock: Clock, logger: Logger) {
  let change = new AbortController();
  let deadline: number | undefined;
  let lateMs: number | undefined;
  return {
    changed(st: RenewerStatus) {
      if (st.permissionOpen) {
        deadline = st.deadline;
      } else if (deadline !== undefined && clock.now() > deadline) {
        lateMs = clock.now() - deadline;
        logger.error(
          "the lease's local deadline passed before run could act (was it frozen or starved?); the command's gate stops it by that deadline on its own",
          { late_ms: Math.round(lateMs) },
        );
        deadline = undefined;
      }
      change.abort();
      change = new AbortController();
    },
    next: () => change.signal,
    takeLate() {
      const late = lateMs;
      lateMs = undefined;
      return late;
    },
  };
}

/** Everything {@linkcode supervise} works with once the lease is held. */
export interface Supervision {
  config: Config;
  command: string[];
  restart: boolean;
  clock: Clock;
  logger: Logger;
  keeper: LeaseKeeper;
  renewer: Renewer;
  enforcer: ChildEnforcer;
  signals: SignalRouter;
  renewerFailed: AbortSignal;
  /** The private state directory the command's gate watches. */
  fence: StateDir;
  launcher: CommandLauncher;
  changes: ReturnType<typeof watchChanges>;
}

/** How each run of the command starts (`gatedLauncher`): the seam tests replace. */
export interface CommandLauncher {
  /** Once, before the lease is acquired; returns why it failed (run logs it and goes on). */
  prepare(): string | undefined;
  /** `env`: `BERTH_API_KEY` already removed. */
  start(c: Supervision & { env: Record<string, string> }): ProcessGroup;
  /** Why it exited while its group ran on, when that means the gate failed (run exits 70). */
  deathReason(exit: ChildExit): string | undefined;
}

/**
 * Waits until the renewer's permission is open as decided and every earlier
 * decision applied (a close still queued would stop the command it found
 * attached); the command's gate also waits for the enforcer's marker.
 * Returns undefined then, else run's exit status: cancelled by a signal
 * (checked first, so one that arrived just before the start is not lost),
 * the renewer failed, or `--acquire-timeout` passed.
 */
async function whenOpen(
  s: Supervision,
  ranBefore: boolean,
): Promise<number | undefined> {
  const { config, clock, logger, renewer, signals } = s;
  let bound: AbortSignal | undefined;
  for (;;) {
    if (signals.cancelled.aborted) {
      logger.info(
        ranBefore
          ? "stopped while waiting to run the command again"
          : "stopped before the command started",
      );
      return EXIT_CANCELLED;
    }
    if (s.renewerFailed.aborted) return EXIT_LEASE_LOST;
    if (renewer.status().permissionOpen && renewer.applied) return undefined;
    if (renewer.status().permissionOpen) {
      await Promise.race([
        renewer.whenApplied(),
        aborted(AbortSignal.any([signals.cancelled, s.renewerFailed])),
      ]);
      continue;
    }
    if (bound === undefined) {
      logger.info(
        "waiting for the lease to be confirmed before running the command",
      );
      bound = waitBound(config, clock, signals.cancelled, s.renewerFailed);
    } else if (isTimeout(bound)) {
      logger.error(
        "gave up waiting to reacquire the lease: --acquire-timeout reached",
      );
      return EXIT_ACQUIRE_TIMEOUT;
    }
    await aborted(AbortSignal.any([s.changes.next(), bound]));
  }
}

/**
 * Runs the command while the permission is open, again after each reacquire
 * with `--restart-on-reacquire`, and returns `run`'s exit status once no
 * process of the command is left.
 */
export async function supervise(s: Supervision): Promise<number> {
  const { logger, renewer, enforcer, signals } = s;
  const base = Deno.env.toObject();
  delete base.BERTH_API_KEY;
  for (let runs = 0;; runs++) {
    const stop = await whenOpen(s, runs > 0);
    if (stop !== undefined) return stop;
    let child: ProcessGroup;
    try {
      child = s.launcher.start({ ...s, env: base });
    } catch (e) {
      if (!(e instanceof SpawnError)) throw e;
      logger.error("cannot run the command's gate", { error: e.message });
      return e.exitCode;
    }
    enforcer.attach(child);
    logger.info("running the command", {
      command: s.command[0],
      gate_pid: child.pid,
      fencing_token: renewer.status().token,
    });
    signals.forwardTo(child);
    let exit: ChildExit;
    let gateDied = false;
    try {
      exit = await child.finished((e) => {
        const reason = s.launcher.deathReason(e);
        if (reason === undefined) return undefined;
        gateDied = true;
        logger.error(`${reason}; stopping the command it left`, {
          gate_pid: child.pid,
          ...(e.signal === undefined ? { code: e.code } : { signal: e.signal }),
        });
        return reason;
      });
    } finally {
      signals.forwardTo(undefined);
      enforcer.detach(child);
      reapOrphans(() => false);
    }
    if (gateDied && exit.leftBehind && exit.stopReason === undefined) {
      return EXIT_GATE_DIED;
    }
    const byFence = exit.stopReason === undefined &&
      exit.code === EXIT_GATE_CLOSED;
    if (exit.stopReason === undefined && !byFence) {
      logger.info("the command exited", {
        code: exit.code,
        ...(exit.signal ? { signal: exit.signal } : {}),
      });
      return exit.code;
    }
    const late = s.changes.takeLate();
    const final = !s.restart || signals.stopForwarded ||
      s.renewerFailed.aborted;
    if (s.renewerFailed.aborted) {
      // Checked first: a renewer that failed may have left its permission
      // open as decided, which is no confirmation.
      logger.error(
        "the command was stopped: the lease renewer failed (see its error above)",
        { reason: exit.stopReason, code: exit.code },
      );
      return EXIT_LEASE_LOST;
    }
    // The gate stopped the command when run's own close would have: run
    // was late.
    const closesAt = renewer.status().permissionClosesAt;
    const unconfirmed = closesAt !== undefined && s.clock.now() >= closesAt;
    if (late !== undefined || (byFence && unconfirmed)) {
      logger.error(
        "the command was stopped by its gate at the last confirmed deadline: run could not confirm the lease in time (it was frozen or starved)",
        late === undefined ? {} : { late_ms: Math.round(late) },
      );
    } else if (byFence) {
      // run was not late: the gate's own verdict failed (a marker run could
      // not write, a wall clock that stepped forward); its line says which.
      logger.error(
        "the command was stopped by its gate on its own verdict (its reason is logged above: stopping the command)",
      );
    } else if (renewer.status().permissionOpen) {
      logger.warn(
        "the command was stopped, and then the lease was confirmed after all: the confirmation came too late to keep it running",
        { reason: exit.stopReason, code: exit.code },
      );
      if (final) return EXIT_CONFIRMED_LATE;
      continue;
    } else {
      logger.error("the command was stopped: the lease is not held", {
        reason: exit.stopReason,
        code: exit.code,
      });
    }
    if (final) return EXIT_LEASE_LOST;
  }
}
