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
import { formatDurationMs, parseDurationMs } from "../config/duration.ts";
import { commandEnv } from "../enforce/command_env.ts";
import {
  type ChildExit,
  ProcessGroup,
  SpawnError,
} from "../enforce/process_group.ts";
import { becomeSubreaper, reapOrphans } from "../enforce/process_tree.ts";
import { createLogger, type Logger, parseLogFormat } from "../obs/log.ts";
import { systemClock } from "../state/clock.ts";
import { examineMarker, type Verdict } from "../state/marker.ts";
import { StateDir } from "../state/state_dir.ts";

/** `--exit-on-close`: COMMAND was stopped because the verdict failed. The same code as `run`'s lease loss. */
export const EXIT_GATE_CLOSED = 75;
/** A stop signal arrived while no COMMAND ran (waiting for the lease). */
export const EXIT_GATE_CANCELLED = 77;
/** Bad arguments. */
export const EXIT_GATE_USAGE = 78;

/** How often the marker is looked at by default: measured at about 0.3 ms of CPU a look (README, "`gate`"). */
export const DEFAULT_INTERVAL_MS = 200;

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

const USAGE = `Usage: berth-acquire gate [flags] -- COMMAND [ARGS...]

Runs COMMAND (directly, no shell) only while the health marker passes the
same verdict as "check"; waits for it before every start, and stops the
command's whole process tree (SIGTERM, SIGKILL after the grace) as soon as it
fails. Never talks to the lease server. After a stop it waits and starts
COMMAND again when the marker passes again.

  --state-dir DIR      the state volume; env BERTH_STATE_DIR; default /berth
  --interval D         how often the marker is looked at; default 200ms
  --grace D            SIGTERM to SIGKILL; default BERTH_ENFORCE_GRACE_SECONDS or 0s
  --max-age D          largest accepted marker age, as check's; default 0 (none)
  --exit-on-close      exit 75 after a stop instead of waiting
  --parent-pid PID     stop COMMAND and exit 75 as soon as PID is no longer the parent
  --help               show this help

Exit status: COMMAND's own (128+N when signal N ended it); 75 stopped with
--exit-on-close or --parent-pid; 77 a stop signal while waiting; 78 bad
arguments; 126 COMMAND cannot be executed; 127 COMMAND not found.`;

/** The parsed arguments of `gate`. */
export interface GateArgs {
  /** `--help`. */
  help: boolean;
  /** The state directory. */
  stateDir: string;
  /** The look interval, ms. */
  intervalMs: number;
  /** SIGTERM -> SIGKILL grace, ms. */
  graceMs: number;
  /** The marker's largest accepted age, ms (0: none). */
  maxAgeMs: number;
  /** Exit after a stop instead of waiting. */
  exitOnClose: boolean;
  /** Stop at once when this is no longer the parent's PID. */
  parentPid?: number;
  /** COMMAND and its arguments. */
  command: string[];
}

const VALUED = [
  "--state-dir",
  "--interval",
  "--grace",
  "--max-age",
  "--parent-pid",
];

/**
 * Parses `gate`'s arguments by hand (like `check`: `node:util` would cost
 * every container start). `env` gives the defaults.
 *
 * @throws {Error} naming the argument that is wrong.
 */
export function parseGateArgs(
  args: string[],
  env: Record<string, string | undefined>,
): GateArgs {
  const graceSeconds = env.BERTH_ENFORCE_GRACE_SECONDS;
  const out: GateArgs = {
    help: false,
    stateDir: env.BERTH_STATE_DIR || "/berth",
    intervalMs: DEFAULT_INTERVAL_MS,
    graceMs: graceSeconds && /^\d+$/.test(graceSeconds)
      ? Number(graceSeconds) * 1000
      : 0,
    maxAgeMs: 0,
    exitOnClose: false,
    command: [],
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--") {
      out.command = args.slice(i + 1);
      return out;
    }
    if (a === "--help" || a === "-h") {
      out.help = true;
      continue;
    }
    if (a === "--exit-on-close") {
      out.exitOnClose = true;
      continue;
    }
    const eq = a.indexOf("=");
    const name = eq < 0 ? a : a.slice(0, eq);
    if (!VALUED.includes(name)) {
      throw new Error(
        a.startsWith("-")
          ? `unknown flag ${JSON.stringify(name)}`
          : `unexpected argument ${
            JSON.stringify(a)
          }: put the command after --, e.g. gate -- /app/server`,
      );
    }
    let value: string;
    if (eq >= 0) value = a.slice(eq + 1);
    else if (i + 1 < args.length) value = args[++i];
    else throw new Error(`flag ${name} needs a value`);
    if (name === "--state-dir") {
      if (value === "") throw new Error("--state-dir is empty");
      out.stateDir = value;
    } else if (name === "--interval") {
      out.intervalMs = parseDurationMs(value, "--interval");
      if (out.intervalMs < 10 || out.intervalMs > 10_000) {
        throw new Error("--interval must be between 10ms and 10s");
      }
    } else if (name === "--grace") {
      out.graceMs = parseDurationMs(value, "--grace");
    } else if (name === "--max-age") {
      out.maxAgeMs = parseDurationMs(value, "--max-age");
    } else {
      if (!/^[1-9]\d*$/.test(value)) {
        throw new Error(`--parent-pid ${JSON.stringify(value)} is not a PID`);
      }
      out.parentPid = Number(value);
    }
  }
  return out;
}

/** Options for {@linkcode runGate}: the parsed arguments plus the seams. */
export interface GateOptions extends GateArgs {
  /** Receives the gate's own records (on stderr in production). */
  logger: Logger;
  /** The environment COMMAND starts from; default this process's. */
  baseEnv?: Record<string, string>;
}

/** Why the gate's wait ended. */
type Wake = "look" | "signal";

/**
 * The gate's loop: wait for OK, start COMMAND, watch it, stop it when the
 * verdict fails; again, unless told to exit. Returns the exit status.
 */
export async function runGate(o: GateOptions): Promise<number> {
  const { logger } = o;
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
  let wake: (why: Wake) => void = () => {};
  const orphans = () => reapOrphans((pid) => pid === child?.pid);
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
      wake("signal");
      return;
    }
    const v = verdict();
    if (v.kind !== "OK") {
      // The verdict already failed: this signal is the stop (run removes its
      // marker before it signals), so COMMAND gets one SIGTERM, not two.
      stopAsked = true;
      child.stop(v.reason);
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
      try {
        const holder = state.readHolder();
        const token = state.readToken();
        if (holder !== undefined && token !== undefined) {
          lease = { holder, token };
        }
      } catch (e) {
        logger.error("cannot read the lease's holder or token", {
          error: (e as Error).message,
        });
      }
      if (lease === undefined) {
        logger.error(
          "the marker passes but the state volume has no holder and token; waiting",
          { state_dir: o.stateDir },
        );
        await sleepOrWake(o.intervalMs * 5, (w) => wake = w);
        continue;
      }
      const deadlines = readDeadlines(state);
      try {
        child = ProcessGroup.spawn({
          argv: o.command,
          env: commandEnv(base, {
            ...lease,
            expiresAtMs: deadlines?.leaseDeadlineWallMs,
          }),
          graceMs: o.graceMs,
          clock: systemClock,
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
      const exit = await watch(child, o, verdict);
      child = undefined;
      orphans();
      if (exit.stopReason === undefined || stopAsked) {
        return exit.code;
      }
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

/** Ms until the marker's gate deadline, on the sooner of its two clocks; undefined: none. */
function untilGateCloses(state: StateDir): number | undefined {
  const d = readDeadlines(state);
  if (d === undefined) return undefined;
  let left = d.gateClosesBootMs - systemClock.bootNow();
  if (d.gateClosesWallMs !== undefined) {
    left = Math.min(left, d.gateClosesWallMs - Date.now());
  }
  return left;
}

/** Sleeps `ms`, or less when the returned wake-up is called. */
function sleepOrWake(
  ms: number,
  install: (w: (why: Wake) => void) => void,
): Promise<Wake> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve("look"), ms);
    install((why) => {
      clearTimeout(t);
      resolve(why);
    });
  });
}

/**
 * Watches a running COMMAND: looks at the verdict every interval and at the
 * marker's gate deadline (a timer, re-armed at every look), and stops the
 * tree the moment the verdict fails. Resolves with COMMAND's exit once its
 * tree is gone.
 */
async function watch(
  child: ProcessGroup,
  o: GateOptions,
  verdict: () => Verdict,
): Promise<ChildExit> {
  const state = new StateDir(o.stateDir);
  let deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  const look = () => {
    if (child.stopReason !== undefined) return;
    const v = verdict();
    if (v.kind !== "OK") {
      child.stop(v.reason);
      return;
    }
    clearTimeout(deadlineTimer);
    const left = untilGateCloses(state);
    if (left !== undefined && left < o.intervalMs) {
      // The boot clock ticks in 10 ms: look again just after the deadline.
      deadlineTimer = setTimeout(look, Math.max(0, left) + 10);
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
    console.log(USAGE);
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
