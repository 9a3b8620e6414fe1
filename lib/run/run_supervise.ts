/**
 * `run`'s supervision of its command once the lease is held: wait for the
 * renewer to permit the command to run, start the command under `gate`, watch
 * it, and say how it ended (its exit statuses are defined here). The command's
 * gate watches run's private marker and run itself, so a killed or frozen `run`
 * cannot leave the command running past the last confirmed deadline.
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
import type { Logger } from "../obs/log.ts";
import type { Renewer } from "../hold/renewer.ts";
import type { StateDir } from "../state/state_dir.ts";
import { EXIT_GATE_CLOSED } from "../gate/gate_args.ts";
import type { LeaseKeeper } from "../cmd/lease_keeper.ts";
import type { SignalRouter } from "./run_signals.ts";
import type { CommandLauncher } from "./launcher.ts";

/**
 * The command was stopped because the lease was lost (or could not be
 * confirmed before its local deadline). 75 is sysexits' `EX_TEMPFAIL`
 * ("try again later"), which is what it means to a supervisor: another
 * holder has the lease now. The `run` codes sit in the sysexits block
 * (64-78), which ordinary programs rarely use, away from 1/2 (generic
 * errors), 126/127 (cannot execute / not found) and 128+N (killed by signal
 * N), so a caller can tell them from the command's own statuses.
 */
export const EXIT_LEASE_LOST = 75;
/** `--acquire-timeout` passed before the lease was acquired; the command never ran (or, after a loss, did not run again). */
export const EXIT_ACQUIRE_TIMEOUT = 76;
/** SIGTERM/SIGINT/SIGHUP/SIGQUIT arrived while waiting for the lease; the command did not run (again). */
export const EXIT_CANCELLED = 77;
/**
 * The command was stopped because the lease could not be confirmed in time,
 * and a renewal confirmed it after all while the command was being stopped:
 * the lease is held, but the command is gone. Not a loss (75): the next run
 * may well hold the lease. Outside the sysexits block, so it is not read as
 * one of its meanings.
 */
export const EXIT_CONFIRMED_LATE = 79;
/**
 * The command's gate (run's own watcher of the command) ended while the
 * command was still running: killed by a signal (the OOM killer, say) or
 * failed; run stopped the command it left. Not the command's status, nor a
 * loss: sysexits' `EX_SOFTWARE`.
 */
export const EXIT_GATE_DIED = 70;
/** Invalid configuration or start-up failure (flags, env, CA bundle, key file, state directory, listener). sysexits' `EX_CONFIG`. */
export const EXIT_CONFIG = 78;

export function isTimeout(signal: AbortSignal): boolean {
  return (signal.reason as Error | undefined)?.name === "TimeoutError";
}

/** A bound on one wait for the lease: the signals, and `--acquire-timeout`. */
export function waitBound(
  config: Config,
  clock: Clock,
  ...signals: AbortSignal[]
): AbortSignal {
  if (config.acquireTimeoutMs) {
    signals.push(clock.timeout(config.acquireTimeoutMs));
  }
  return AbortSignal.any(signals);
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
  /** Starts each run of the command (see `RunOptions.launcher`). */
  launcher: CommandLauncher;
  /** Aborts at the renewer's next change of the permission or the token. */
  nextChange(): AbortSignal;
  /**
   * How late run noticed the last close, when that was after the lease
   * deadline itself (it was frozen or starved); cleared by the call.
   */
  takeLateClose(): number | undefined;
}

/**
 * Waits until the renewer's permission is open: it decides alone (the
 * enforcer keeps no copy), and every decision before it has been applied, so
 * a close still queued cannot stop the command it would find attached; the
 * command's own gate also waits for the marker the enforcer writes. Returns
 * undefined when the command's gate may be started, else `run`'s exit status:
 * cancelled by a signal (checked first, so a signal that arrived just before
 * the start is not lost), the renewer failed, or `--acquire-timeout` passed.
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
    // Open as decided and with every earlier decision applied: a close
    // still queued would stop the command it found attached.
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
    await aborted(AbortSignal.any([s.nextChange(), bound]));
  }
}

/**
 * Runs the command while the permission is open, again after each reacquire
 * with `--restart-on-reacquire`, and returns `run`'s exit status. Returns only
 * once no process of the command is left.
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
    const late = s.takeLateClose();
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
    // The command's gate stopped it when run's own close would have: run
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
