/**
 * `gate`'s arguments: parsed by hand, like `check`'s, because `node:util`
 * would cost every container start, and kept apart from the loop so the
 * loop's module stays about one concept.
 *
 * @module
 */
import { parseDurationMs } from "../config/duration.ts";
import { withTwoDashes } from "../config/flag_name.ts";
import { flagSuggestion } from "../config/nearest.ts";
import { type LogLevel, parseLogLevel } from "../obs/log.ts";

/** `--exit-on-close`: COMMAND was stopped because the verdict failed. The same code as `run`'s lease loss. */
export const EXIT_GATE_CLOSED = 75;
/** A stop signal arrived while no COMMAND ran (waiting for the lease, before its first start or between runs). */
export const EXIT_GATE_CANCELLED = 77;
/** Bad arguments. */
export const EXIT_GATE_USAGE = 78;

/** How often the marker is looked at by default: measured at about 0.17 ms of CPU a look (docs/run-and-gate.md, "`gate`"). */
export const DEFAULT_INTERVAL_MS = 200;

export const GATE_USAGE =
  `Usage: berth-acquire gate [flags] -- COMMAND [ARGS...]

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
  --log-level LEVEL    debug, info, warn or error; env BERTH_LOG_LEVEL; default info
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
  /** The lowest level logged. */
  logLevel: LogLevel;
  /** COMMAND and its arguments. */
  command: string[];
}

const VALUED = [
  "--state-dir",
  "--interval",
  "--grace",
  "--max-age",
  "--parent-pid",
  "--log-level",
];

/** Every flag `gate` takes, for the nearest one to a misspelling. */
const GATE_FLAGS = [
  ...VALUED.map((f) => f.slice(2)),
  "exit-on-close",
  "help",
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
    logLevel: env.BERTH_LOG_LEVEL
      ? parseLogLevel(env.BERTH_LOG_LEVEL, "BERTH_LOG_LEVEL")
      : "INFO",
    command: [],
  };
  for (let i = 0; i < args.length; i++) {
    const given = args[i];
    if (given === "--") {
      out.command = args.slice(i + 1);
      return out;
    }
    // One dash or two, as Go's flag package takes them.
    const a = withTwoDashes(given);
    if (a === "--help" || given === "-h") {
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
          ? `unknown flag ${JSON.stringify(given.split("=")[0])}${
            flagSuggestion(given.split("=")[0], GATE_FLAGS)
          }`
          : `unexpected argument ${
            JSON.stringify(given)
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
    } else if (name === "--log-level") {
      out.logLevel = parseLogLevel(value, "--log-level");
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
