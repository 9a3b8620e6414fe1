/**
 * `gate`'s loop: wait for the health marker's verdict to pass, start
 * COMMAND, watch it ({@linkcode watchCommand}), stop it when the verdict
 * fails; and again, unless told to exit. The verdict is `check`'s
 * ({@linkcode examineMarker}), failed also when `--parent-pid` is no longer
 * the parent. Signals are forwarded to COMMAND, or, while it does not run,
 * end the wait.
 *
 * @module
 */
import { readDeadlines, stopInTime, watchCommand } from "./marker_watch.ts";
import {
  becomeSubreaper,
  ProcessGroup,
  reapOrphans,
  SpawnError,
} from "./process_group.ts";
import { onSignals, SHUTDOWN_SIGNALS } from "../cmd/signals.ts";
import type { Logger } from "../obs/log.ts";
import { type Clock, systemClock } from "../state/clock.ts";
import {
  examineMarker,
  formatDurationMs,
  type MarkerDeadlines,
  type Verdict,
} from "../state/marker.ts";
import { StateDir } from "../state/state_dir.ts";

/** `--exit-on-close`: COMMAND was stopped because the verdict failed. The same code as `run`'s lease loss. */
export const EXIT_GATE_CLOSED = 75;
/** A stop signal arrived while no COMMAND ran. */
export const EXIT_GATE_CANCELLED = 77;

const FORWARDED = [...SHUTDOWN_SIGNALS, "SIGUSR1", "SIGUSR2"] as const;
/** The forwarded signals after which COMMAND is not started again. */
const STOPPING = new Set<Deno.Signal>(["SIGTERM", "SIGINT", "SIGQUIT"]);

/** What {@linkcode runGate} works with: `gate`'s arguments, and the seams. */
export interface GateOptions {
  stateDir: string;
  intervalMs: number;
  graceMs: number;
  /** 0: none. */
  maxAgeMs: number;
  exitOnClose: boolean;
  parentPid?: number;
  command: string[];
  logger: Logger;
  /** The environment COMMAND starts from; default this process's. */
  baseEnv?: Record<string, string>;
  clock?: Clock;
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
  lease: { holder: string; token: number; expiresAtMs?: number },
): Record<string, string> {
  const env = { ...base };
  delete env.BERTH_API_KEY;
  delete env.BERTH_LEASE_EXPIRES_AT;
  env.BERTH_FENCING_TOKEN = String(lease.token);
  env.BERTH_HOLDER = lease.holder;
  if (lease.expiresAtMs !== undefined) {
    env.BERTH_LEASE_EXPIRES_AT = new Date(Math.floor(lease.expiresAtMs))
      .toISOString();
  }
  return env;
}

const message = (e: unknown) => e instanceof Error ? e.message : String(e);
const unevaluable = (e: unknown) =>
  `cannot evaluate the gate deadline: ${message(e)}`;

/**
 * The gate's loop (see the module doc). Returns COMMAND's exit status,
 * {@linkcode EXIT_GATE_CLOSED}, {@linkcode EXIT_GATE_CANCELLED}, or a
 * {@linkcode SpawnError}'s (126, 127); rethrows any other start failure.
 */
export async function runGate(o: GateOptions): Promise<number> {
  let logger = o.logger;
  const clock = o.clock ?? systemClock;
  const state = new StateDir(o.stateDir);
  const base = o.baseEnv ?? Deno.env.toObject();
  // The holder on every line, once the state volume names it.
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
  // `run`'s own gate (`--parent-pid`): run logs the command's start, the
  // signals it forwards and the exit, so the gate says them at DEBUG; what
  // only the gate knows (its stops) it says at its own level.
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
  const cancel = new AbortController();
  // The deadlines of the last marker that passed while COMMAND ran.
  let known: MarkerDeadlines | undefined;
  // The holder/token problem last reported (`missing`, or the read error).
  let handoffProblem: string | undefined;
  let [reapFailureReported, noDeadlineWarned] = [false, false];
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
  const stopCommand = (running: ProcessGroup, reason: string) =>
    stopInTime(running, reason, { ...o, clock, logger }, known);
  const parentGone = () =>
    o.parentPid !== undefined && Deno.ppid !== o.parentPid;
  const verdict = (): Verdict =>
    parentGone()
      ? { kind: "Absent", reason: `the parent process ${o.parentPid} is gone` }
      : examineMarker(state.markerPath, { maxAgeMs: o.maxAgeMs });
  const safeVerdict = (): Verdict => {
    try {
      return verdict();
    } catch (e) {
      return { kind: "Indeterminate", reason: unevaluable(e) };
    }
  };
  const onSignal = (name: Deno.Signal) => {
    if (child === undefined) {
      if (name === "SIGHUP" || name.startsWith("SIGUSR")) return;
      logger.info("signal received while waiting; exiting", { signal: name });
      cancel.abort();
      return;
    }
    if (name === "SIGINT" && stopAsked) {
      // Ctrl-C again: the command's cleanup is not waited out.
      child.kill(logger);
      return;
    }
    if (STOPPING.has(name)) stopAsked = true;
    const v = safeVerdict();
    if (v.kind !== "OK") {
      // The verdict already failed: this signal is the stop (run removes its
      // marker before it signals), so COMMAND gets one SIGTERM, not two.
      stopCommand(child, v.reason);
      return;
    }
    routine("signal received; forwarding it to the command", {
      signal: name,
      pgid: child.pid,
    });
    child.signal(name);
  };
  const stopListening = onSignals(FORWARDED, onSignal);
  Deno.addSignalListener("SIGCHLD", orphans);
  try {
    for (;;) {
      // Wait for OK, said once per kind of failure: its reason's age
      // changes every look.
      let shown: string | undefined;
      for (;;) {
        if (cancel.signal.aborted) return EXIT_GATE_CANCELLED;
        const v = verdict();
        if (parentGone()) {
          logger.error("the parent process is gone; exiting", {
            parent_pid: o.parentPid,
          });
          return EXIT_GATE_CLOSED;
        }
        if (v.kind === "OK") break;
        if (v.kind !== shown) {
          shown = v.kind;
          logger.info("waiting for the lease before starting the command", {
            reason: v.reason,
          });
        }
        await clock.sleep(o.intervalMs, cancel.signal);
      }
      let lease: { holder: string; token: number } | undefined;
      let problem = "missing";
      try {
        const [holder, token] = [state.readHolder(), state.readToken()];
        if (holder !== undefined && token !== undefined) {
          lease = { holder, token };
        }
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
        await clock.sleep(o.intervalMs * 5, cancel.signal);
        continue;
      }
      withHolder(lease.holder);
      if (handoffProblem !== undefined) {
        handoffProblem = undefined;
        logger.info("the state volume has the lease's holder and token again");
      }
      known = readDeadlines(state);
      // A stop noticed at the next look would have its grace cut short.
      const leadMs = known &&
        known.leaseDeadlineBootMs - known.gateClosesBootMs;
      if (leadMs !== undefined && o.graceMs + o.intervalMs > leadMs) {
        o.logger.warn(
          "--grace plus --interval exceed the marker's enforcement lead: a stopped command gets SIGKILL early, before the lease deadline; lower --grace or --interval, or raise the sidecar's BERTH_ENFORCE_LEAD_SECONDS",
          {
            grace: formatDurationMs(o.graceMs),
            interval: formatDurationMs(o.intervalMs),
            lead: formatDurationMs(leadMs),
          },
        );
      }
      if (known === undefined && o.maxAgeMs === 0 && !noDeadlineWarned) {
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
            expiresAtMs: known?.leaseDeadlineWallMs,
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
        { reason: exit.stopReason, code: exit.code },
      );
      if (o.exitOnClose || parentGone()) return EXIT_GATE_CLOSED;
      logger.info("waiting for the lease to run the command again");
    }
  } finally {
    stopListening();
    Deno.removeSignalListener("SIGCHLD", orphans);
  }
}
