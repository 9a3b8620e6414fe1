/**
 * `gate`'s loop: wait for the health marker's verdict to pass, start
 * COMMAND, watch it ({@linkcode watchCommand}), stop it when the verdict
 * fails; and again, unless told to exit. The verdict is `check`'s (one
 * predicate: {@linkcode examineMarker}), failed also when `--parent-pid` is
 * no longer the parent. Signals are forwarded to COMMAND, or, while it does
 * not run, end the wait. The subcommand's wiring (arguments, logger, usage)
 * is lib/gate/gate.ts.
 *
 * @module
 */
import {
  EXIT_GATE_CANCELLED,
  EXIT_GATE_CLOSED,
  type GateArgs,
} from "./gate_args.ts";
import {
  readDeadlines,
  shortenedGraceMs,
  untilLeaseDeadline,
  warnLongGrace,
  watchCommand,
} from "./marker_watch.ts";
import {
  becomeSubreaper,
  ProcessGroup,
  reapOrphans,
  SpawnError,
} from "./process_group.ts";
import type { Logger } from "../obs/log.ts";
import { type Clock, systemClock } from "../state/clock.ts";
import {
  examineMarker,
  type MarkerDeadlines,
  type Verdict,
} from "../state/marker.ts";
import { StateDir } from "../state/state_dir.ts";

/** The signals the gate forwards to COMMAND (or, while it waits, ends on). */
const FORWARDED: readonly Deno.Signal[] = [
  "SIGTERM",
  "SIGINT",
  "SIGHUP",
  "SIGQUIT",
  "SIGUSR1",
  "SIGUSR2",
];
/** The forwarded signals after which COMMAND is not started again. */
const STOPPING: ReadonlySet<Deno.Signal> = new Set([
  "SIGTERM",
  "SIGINT",
  "SIGQUIT",
]);

/** Options for {@linkcode runGate}: the parsed arguments plus the seams. */
export interface GateOptions extends GateArgs {
  /** Receives the gate's own records (on stderr in production). */
  logger: Logger;
  /** The environment COMMAND starts from; default this process's. */
  baseEnv?: Record<string, string>;
  /** Times the grace and reads the boot clock for the marker's deadlines; default the system's. */
  clock?: Clock;
}

/** What COMMAND is told about the lease. */
export interface CommandLease {
  holder: string;
  /** The fencing token to pass to the systems it writes to. */
  token: number;
  /** The local lease deadline, wall-clock ms since the epoch. */
  expiresAtMs?: number;
}

/**
 * COMMAND's environment: `base` plus `BERTH_FENCING_TOKEN`, `BERTH_HOLDER`
 * and, when known, `BERTH_LEASE_EXPIRES_AT` (RFC 3339, UTC, ms rounded
 * down: stop before it), the same words in `run` and `gate`.
 * `BERTH_API_KEY` is removed: the command needs the token, not the
 * credential that can take the lease.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const env = commandEnv(
 *   { PATH: "/usr/bin", BERTH_API_KEY: "s3cret" },
 *   { holder: "prod/a", token: 7, expiresAtMs: 1_500 },
 * );
 * assert.deepEqual(env, {
 *   PATH: "/usr/bin",
 *   BERTH_FENCING_TOKEN: "7",
 *   BERTH_HOLDER: "prod/a",
 *   BERTH_LEASE_EXPIRES_AT: "1970-01-01T00:00:01.500Z",
 * });
 * ```
 */
export function commandEnv(
  base: Record<string, string>,
  lease: CommandLease,
): Record<string, string> {
  const env = { ...base };
  delete env.BERTH_API_KEY;
  env.BERTH_FENCING_TOKEN = String(lease.token);
  env.BERTH_HOLDER = lease.holder;
  if (lease.expiresAtMs !== undefined) {
    env.BERTH_LEASE_EXPIRES_AT = new Date(Math.floor(lease.expiresAtMs))
      .toISOString();
  } else {
    delete env.BERTH_LEASE_EXPIRES_AT;
  }
  return env;
}

/** The text of what was thrown, for a record or a reason. */
function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The reason of a verdict that cannot be evaluated because `e` was thrown. */
function unevaluable(e: unknown): string {
  return `cannot evaluate the gate deadline: ${message(e)}`;
}

/**
 * The gate's loop (see the module doc). Returns COMMAND's exit status,
 * {@linkcode EXIT_GATE_CLOSED}, {@linkcode EXIT_GATE_CANCELLED}, or a
 * {@linkcode SpawnError}'s (126, 127); rethrows any other start failure.
 */
export async function runGate(o: GateOptions): Promise<number> {
  let logger = o.logger;
  const clock = o.clock ?? systemClock;
  const state = new StateDir(o.stateDir);
  const markerPath = state.markerPath;
  const base = o.baseEnv ?? Deno.env.toObject();
  /** The holder on every line, once the state volume names it. */
  let holder: string | undefined;
  const withHolder = (h: string | undefined) => {
    if (h === undefined || h === holder) return;
    holder = h;
    logger = o.logger.with({ holder: h });
  };
  try {
    withHolder(state.readHolder());
  } catch {
    // Not there yet: added once it is.
  }
  /**
   * `run`'s own gate (`--parent-pid`): run logs the command's start, the
   * signals it forwards and the exit, so the gate says them at DEBUG; what
   * only the gate knows (its stops) it says at its own level.
   */
  const routine = (msg: string, fields?: Record<string, unknown>) =>
    o.parentPid !== undefined
      ? logger.debug(msg, fields)
      : logger.info(msg, fields);
  const notSubreaper = becomeSubreaper();
  if (notSubreaper !== undefined) {
    logger.warn(
      "cannot become a child subreaper; a worker that leaves the process group with setsid is not tracked",
      { reason: notSubreaper },
    );
  }
  let child: ProcessGroup | undefined;
  let stopAsked = false;
  let cancelled = false;
  let wake: () => void = () => {};
  /** The deadlines of the last marker that passed while COMMAND ran. */
  let known: MarkerDeadlines | undefined;
  let reapFailureReported = false;
  /** The holder/token problem last reported (`missing`, or the read error), so each is logged once. */
  let handoffProblem: string | undefined;
  let noDeadlineWarned = false;
  const orphans = () => {
    try {
      reapOrphans((pid) => pid === child?.pid);
    } catch (e) {
      if (reapFailureReported) return;
      reapFailureReported = true;
      logger.warn("cannot reap orphaned processes; they stay zombies", {
        error: message(e),
      });
    }
  };
  /**
   * Stops COMMAND because the verdict failed, with SIGKILL in time for the
   * last known lease deadline ({@linkcode shortenedGraceMs}).
   */
  const stopCommand = (running: ProcessGroup, reason: string) => {
    if (running.stopReason !== undefined) return;
    let graceMs = o.graceMs;
    if (known !== undefined) {
      const shortened = shortenedGraceMs(
        o.graceMs,
        untilLeaseDeadline(known, clock),
      );
      if (shortened !== undefined) {
        graceMs = shortened;
        logger.warn(
          "shortening the grace so that the command is gone before the lease deadline",
          { grace_ms: graceMs, configured_grace_ms: o.graceMs },
        );
      }
    }
    running.stop(reason, graceMs);
  };
  const safeVerdict = (): Verdict => {
    try {
      return verdict();
    } catch (e) {
      return { kind: "Indeterminate", reason: unevaluable(e) };
    }
  };
  const parentGone = () =>
    o.parentPid !== undefined && Deno.ppid !== o.parentPid;
  const verdict = (): Verdict => {
    if (parentGone()) {
      return {
        kind: "Absent",
        reason: `the parent process ${o.parentPid} is gone`,
      };
    }
    return examineMarker(markerPath, { maxAgeMs: o.maxAgeMs });
  };
  const onSignal = (name: Deno.Signal) => {
    if (child === undefined) {
      if (name === "SIGHUP" || name.startsWith("SIGUSR")) return;
      cancelled = true;
      logger.info("signal received while waiting; exiting", { signal: name });
      wake();
      return;
    }
    const v = safeVerdict();
    if (v.kind !== "OK") {
      // The verdict already failed: this signal is the stop (run removes its
      // marker before it signals), so COMMAND gets one SIGTERM, not two.
      // Only a stopping signal also ends the gate.
      if (STOPPING.has(name)) stopAsked = true;
      stopCommand(child, v.reason);
      return;
    }
    if (STOPPING.has(name)) stopAsked = true;
    routine("signal received; forwarding it to the command", {
      signal: name,
      pgid: child.pid,
    });
    child.signal(name);
  };
  const handlers = FORWARDED.map((name) => {
    const h = () => onSignal(name);
    Deno.addSignalListener(name, h);
    return [name, h] as const;
  });
  Deno.addSignalListener("SIGCHLD", orphans);
  try {
    for (;;) {
      // Wait for OK.
      let shown: string | undefined;
      for (;;) {
        if (cancelled) return EXIT_GATE_CANCELLED;
        const v = verdict();
        if (parentGone()) {
          logger.error("the parent process is gone; exiting", {
            parent_pid: o.parentPid,
          });
          return EXIT_GATE_CLOSED;
        }
        if (v.kind === "OK") break;
        if (v.kind !== shown) {
          // Once per kind of failure: the reason's age changes every look.
          shown = v.kind;
          logger.info("waiting for the lease before starting the command", {
            reason: v.reason,
          });
        }
        await sleepOrWake(o.intervalMs, (w) => wake = w);
      }
      let lease: { holder: string; token: number } | undefined;
      let problem: string;
      try {
        const holder = state.readHolder();
        const token = state.readToken();
        if (holder !== undefined && token !== undefined) {
          lease = { holder, token };
        }
        problem = "missing";
      } catch (e) {
        problem = message(e);
      }
      if (lease === undefined) {
        if (problem === handoffProblem) {
          logger.debug("the state volume still has no usable holder and token");
        } else if (problem === "missing") {
          logger.error(
            "the marker passes but the state volume has no holder and token; waiting",
            { state_dir: o.stateDir },
          );
        } else {
          logger.error("cannot read the lease's holder or token; waiting", {
            error: problem,
          });
        }
        handoffProblem = problem;
        await sleepOrWake(o.intervalMs * 5, (w) => wake = w);
        continue;
      }
      withHolder(lease.holder);
      if (handoffProblem !== undefined) {
        handoffProblem = undefined;
        logger.info("the state volume has the lease's holder and token again");
      }
      const deadlines = readDeadlines(state);
      known = deadlines;
      warnLongGrace(o, deadlines);
      if (deadlines === undefined && o.maxAgeMs === 0 && !noDeadlineWarned) {
        noDeadlineWarned = true;
        logger.warn(
          "the marker carries no deadlines and --max-age is 0: only its removal stops the command, so a dead sidecar would not; set --max-age if a sidecar renews the marker",
          { state_dir: o.stateDir },
        );
      }
      try {
        child = ProcessGroup.spawn({
          argv: o.command,
          env: commandEnv(base, {
            ...lease,
            expiresAtMs: deadlines?.leaseDeadlineWallMs,
          }),
          graceMs: o.graceMs,
          clock,
          logger,
          descendants: "all",
        });
      } catch (e) {
        if (!(e instanceof SpawnError)) throw e;
        logger.error("cannot run the command", { error: e.message });
        return e.exitCode;
      }
      routine("lease confirmed; running the command", {
        command: o.command[0],
        pid: child.pid,
        fencing_token: lease.token,
      });
      const running = child;
      const exit = await watchCommand(running, o.intervalMs, {
        state,
        clock,
        verdict: safeVerdict,
        stop: (reason) => stopCommand(running, reason),
        seen: (d) => known = d,
        failed: (e) => {
          const reason = unevaluable(e);
          logger.error("stopping the command: " + reason, {});
          stopCommand(running, reason);
        },
      });
      child = undefined;
      orphans();
      if (exit.stopReason === undefined) {
        routine("the command exited", {
          code: exit.code,
          ...(exit.signal ? { signal: exit.signal } : {}),
        });
        return exit.code;
      }
      if (stopAsked) return exit.code;
      // run says the stop in its own words (its gate exits on it).
      (o.parentPid !== undefined ? logger.debug : logger.warn)(
        "the command was stopped: the lease is not confirmed",
        {
          reason: exit.stopReason,
          code: exit.code,
        },
      );
      if (o.exitOnClose || parentGone()) return EXIT_GATE_CLOSED;
      logger.info("waiting for the lease to run the command again");
    }
  } finally {
    for (const [n, h] of handlers) Deno.removeSignalListener(n, h);
    Deno.removeSignalListener("SIGCHLD", orphans);
  }
}

/** Sleeps `ms`, or less when the returned wake-up is called. */
function sleepOrWake(
  ms: number,
  install: (w: () => void) => void,
): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    install(() => {
      clearTimeout(t);
      resolve();
    });
  });
}
