/**
 * `berth-acquire gate [flags] -- COMMAND [ARGS...]`: an independent fence
 * around the workload. It runs as the main container's command, from the
 * state volume (`/berth/check gate -- /app/server ...`), never talks to the
 * lease server, and runs COMMAND only while the health marker passes the
 * same verdict as `check` (one predicate: {@linkcode examineMarker}). It
 * waits for that verdict before every start, so a container the kubelet
 * restarts while its pod has no lease does not run the workload at all, and
 * it stops COMMAND's whole process tree (SIGTERM, SIGKILL after the grace)
 * as soon as the verdict fails: at the next look (every `--interval`) or on
 * a timer set for the marker's own gate deadline, so a dead or wedged
 * sidecar stops nothing from running late.
 *
 * `run` starts its own command under this same subcommand, with a marker of
 * its own and `--parent-pid`, so that a killed or frozen `run` cannot leave
 * the command behind.
 *
 * Its imports stay small (no lease client, no `node:` module): it lives in
 * the workload's container and memory budget.
 *
 * @module
 */
import { formatDurationMs } from "../config/duration.ts";
import {
  EXIT_GATE_CANCELLED,
  EXIT_GATE_CLOSED,
  EXIT_GATE_USAGE,
  GATE_USAGE,
  type GateArgs,
  parseGateArgs,
} from "./gate_args.ts";
import { commandEnv } from "../enforce/command_env.ts";
import {
  type ChildExit,
  ProcessGroup,
  SpawnError,
} from "../enforce/process_group.ts";
import { becomeSubreaper, reapOrphans } from "../enforce/process_tree.ts";
import { createLogger, type Logger, parseLogFormat } from "../obs/log.ts";
import { type Clock, systemClock } from "../state/clock.ts";
import {
  examineMarker,
  type MarkerDeadlines,
  type Verdict,
} from "../state/marker.ts";
import { StateDir } from "../state/state_dir.ts";

export { EXIT_GATE_CANCELLED, EXIT_GATE_CLOSED, EXIT_GATE_USAGE };

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

/**
 * How long before the lease deadline COMMAND must be gone: a stop that
 * fails the verdict sends SIGKILL by then at the latest, whatever `--grace`.
 */
export const LEASE_MARGIN_MS = 250;

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Ms until the lease deadline of `d`, on the sooner of its two clocks; 0
 * when the boot clock cannot be read and no wall-clock copy is written.
 */
function untilLeaseDeadline(d: MarkerDeadlines, clock: Clock): number {
  let left = Infinity;
  try {
    left = d.leaseDeadlineBootMs - clock.bootNow();
  } catch {
    if (d.leaseDeadlineWallMs === undefined) return 0;
  }
  if (d.leaseDeadlineWallMs !== undefined) {
    left = Math.min(left, d.leaseDeadlineWallMs - Date.now());
  }
  return left;
}

/**
 * The gate's loop: wait for OK, start COMMAND, watch it, stop it when the
 * verdict fails; again, unless told to exit. Returns the exit status.
 */
export async function runGate(o: GateOptions): Promise<number> {
  const { logger } = o;
  const clock = o.clock ?? systemClock;
  const state = new StateDir(o.stateDir);
  const markerPath = state.markerPath;
  const base = o.baseEnv ?? Deno.env.toObject();
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
   * Stops COMMAND because the verdict failed, with SIGKILL no later than
   * {@linkcode LEASE_MARGIN_MS} before the last known lease deadline.
   */
  const stopCommand = (running: ProcessGroup, reason: string) => {
    if (running.stopReason !== undefined) return;
    let graceMs = o.graceMs;
    if (known !== undefined) {
      const left = untilLeaseDeadline(known, clock) - LEASE_MARGIN_MS;
      if (left < graceMs) {
        graceMs = Math.max(0, Math.floor(left));
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
      return {
        kind: "Indeterminate",
        reason: `cannot evaluate the gate deadline: ${message(e)}`,
      };
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
    logger.info("signal received; forwarding it to the command", {
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
      logger.info("lease confirmed; running the command", {
        command: o.command[0],
        pid: child.pid,
        fencing_token: lease.token,
      });
      const running = child;
      const exit = await watch(running, o, {
        state,
        clock,
        verdict: safeVerdict,
        stop: (reason) => stopCommand(running, reason),
        seen: (d) => known = d,
      });
      child = undefined;
      orphans();
      if (exit.stopReason === undefined) {
        logger.info("the command exited", {
          code: exit.code,
          ...(exit.signal ? { signal: exit.signal } : {}),
        });
        return exit.code;
      }
      if (stopAsked) return exit.code;
      logger.warn("the command was stopped: the lease is not confirmed", {
        reason: exit.stopReason,
        code: exit.code,
      });
      if (o.exitOnClose || parentGone()) return EXIT_GATE_CLOSED;
      logger.info("waiting for the lease to run the command again");
    }
  } finally {
    for (const [n, h] of handlers) Deno.removeSignalListener(n, h);
    Deno.removeSignalListener("SIGCHLD", orphans);
  }
}

/** The marker's deadlines, or undefined when it has none (or cannot be read: the next look decides). */
function readDeadlines(state: StateDir) {
  try {
    return state.readMarkerDeadlines();
  } catch {
    return undefined;
  }
}

/**
 * WARN when `--grace` plus `--interval` exceed the marker's lead (lease
 * deadline minus gate deadline): a stop noticed at the next look could then
 * not end COMMAND by the lease deadline with the full grace (it is cut
 * short; see {@linkcode LEASE_MARGIN_MS}).
 */
function warnLongGrace(o: GateOptions, d: MarkerDeadlines | undefined): void {
  if (d === undefined) return;
  const leadMs = d.leaseDeadlineBootMs - d.gateClosesBootMs;
  if (o.graceMs + o.intervalMs <= leadMs) return;
  o.logger.warn(
    "--grace plus --interval exceed the marker's enforcement lead: a stopped command gets SIGKILL early, before the lease deadline; lower --grace or --interval, or raise the sidecar's BERTH_ENFORCE_LEAD_SECONDS",
    {
      grace: formatDurationMs(o.graceMs),
      interval: formatDurationMs(o.intervalMs),
      lead: formatDurationMs(leadMs),
    },
  );
}

/** Ms until the gate deadline of `d`, on the sooner of its two clocks. Throws when the boot clock cannot be read. */
function untilGateCloses(d: MarkerDeadlines, clock: Clock): number {
  let left = d.gateClosesBootMs - clock.bootNow();
  if (d.gateClosesWallMs !== undefined) {
    left = Math.min(left, d.gateClosesWallMs - Date.now());
  }
  return left;
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

/** What {@linkcode watch} needs from the gate's loop. */
interface WatchHooks {
  /** The state volume. */
  state: StateDir;
  /** Reads the boot clock. */
  clock: Clock;
  /** The verdict; never throws. */
  verdict: () => Verdict;
  /** Stops COMMAND for `reason`, keeping to the lease deadline. */
  stop: (reason: string) => void;
  /** Told the deadlines of every marker that passed. */
  seen: (d: MarkerDeadlines | undefined) => void;
}

/**
 * Watches a running COMMAND: looks at the verdict every interval and at the
 * marker's gate deadline (a timer, re-armed at every look), and stops the
 * tree the moment the verdict fails, or when a look cannot be completed.
 * Resolves with COMMAND's exit once its tree is gone.
 */
async function watch(
  child: ProcessGroup,
  o: GateOptions,
  h: WatchHooks,
): Promise<ChildExit> {
  const { state } = h;
  let deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  const look = () => {
    if (child.stopReason !== undefined) return;
    try {
      const v = h.verdict();
      if (v.kind !== "OK") {
        h.stop(v.reason);
        return;
      }
      clearTimeout(deadlineTimer);
      const d = readDeadlines(state);
      h.seen(d);
      const left = d === undefined ? undefined : untilGateCloses(d, h.clock);
      if (left !== undefined && left < o.intervalMs) {
        // The boot clock ticks in 10 ms: look again just after the deadline.
        deadlineTimer = setTimeout(look, Math.max(0, left) + 10);
      }
    } catch (e) {
      const reason = `cannot evaluate the gate deadline: ${message(e)}`;
      o.logger.error("stopping the command: " + reason, {});
      h.stop(reason);
    }
  };
  const every = setInterval(look, o.intervalMs);
  look();
  try {
    return await child.finished();
  } finally {
    clearInterval(every);
    clearTimeout(deadlineTimer);
  }
}

/** `berth-acquire gate`: see the usage text. */
export async function main(args: string[]): Promise<number> {
  const env = Deno.env.toObject();
  let logger: Logger;
  let parsed: GateArgs;
  try {
    logger = createLogger({
      format: env.BERTH_LOG_FORMAT
        ? parseLogFormat(env.BERTH_LOG_FORMAT, "BERTH_LOG_FORMAT")
        : "text",
    });
    parsed = parseGateArgs(args, env);
  } catch (e) {
    console.error(
      `berth-acquire gate: ${
        (e as Error).message
      } (run "berth-acquire gate --help")`,
    );
    return EXIT_GATE_USAGE;
  }
  if (parsed.help) {
    console.log(GATE_USAGE);
    return 0;
  }
  if (parsed.command.length === 0) {
    console.error(
      "berth-acquire gate: no command to run: put it after --, e.g. berth-acquire gate -- /app/server",
    );
    return EXIT_GATE_USAGE;
  }
  logger.debug("gate settings", {
    interval: formatDurationMs(parsed.intervalMs),
    grace: formatDurationMs(parsed.graceMs),
  });
  return await runGate({ ...parsed, logger });
}
