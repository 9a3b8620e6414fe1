/**
 * `gate`'s arguments, usage and exit statuses, read by the one argument
 * parser every subcommand uses (`node:util` would cost every container start).
 *
 * @module
 */
import { parseDurationMs } from "../config/duration.ts";
import { isSet, lastValue, parseArgv } from "../config/argv.ts";
import { EXIT_USAGE } from "../cmd/exit_codes.ts";
import { type LogLevel, parseLogLevel } from "../obs/log.ts";

/** `--exit-on-close`: COMMAND was stopped because the verdict failed. The same code as `run`'s lease loss. */
export const EXIT_GATE_CLOSED = 75;
/** A stop signal arrived while no COMMAND ran (waiting for the lease, before its first start or between runs). */
export const EXIT_GATE_CANCELLED = 77;
/** Bad arguments. */
export const EXIT_GATE_USAGE = EXIT_USAGE;

/** How often the marker is looked at by default (its CPU: docs/run-and-gate.md). */
export const DEFAULT_INTERVAL_MS = 200;

export const GATE_USAGE =
  `Usage: berth-acquire gate [flags] -- COMMAND [ARGS...]

Runs COMMAND (directly, no shell) only while the health marker passes the
same verdict as "check"; waits for it before every start, and stops the
command's whole process tree (SIGTERM, SIGKILL after the grace) as soon as it
fails. Never talks to the lease server. After a stop it waits and starts
COMMAND again when the marker passes again.

  --state-dir DIR      the state volume; env BERTH_STATE_DIR; default /berth
  --interval D         how often the marker is looked at, a duration (200ms,
                       1s); default 200ms
  --grace D            SIGTERM to SIGKILL, a duration (10s, 1m); default
                       BERTH_ENFORCE_GRACE_SECONDS (whole seconds) or 0s
  --max-age D          largest accepted marker age, a duration as check's
                       (30s); default 0 (none)
  --exit-on-close      exit 75 after a stop instead of waiting
  --parent-pid PID     stop COMMAND and exit 75 as soon as PID is no longer the parent
  --log-level LEVEL    debug, info, warn or error; env BERTH_LOG_LEVEL; default info
  --help               show this help

Exit status: COMMAND's own (128+N when signal N ended it); 75 stopped with
--exit-on-close or --parent-pid; 77 a stop signal while waiting; 78 bad
arguments; 126 COMMAND cannot be executed; 127 COMMAND not found.`;

/** The parsed arguments of `gate`. */
export interface GateArgs {
  help: boolean;
  stateDir: string;
  intervalMs: number;
  graceMs: number;
  /** 0: none. */
  maxAgeMs: number;
  exitOnClose: boolean;
  parentPid?: number;
  logLevel: LogLevel;
  command: string[];
}

const GATE_FLAGS = {
  "state-dir": { kind: "value", wants: "a directory" },
  interval: { kind: "value", wants: "a duration such as 200ms" },
  grace: { kind: "value", wants: "a duration such as 10s" },
  "max-age": { kind: "value", wants: "a duration such as 30s" },
  "parent-pid": { kind: "value", wants: "a PID" },
  "log-level": { kind: "value", wants: "debug, info, warn or error" },
  "exit-on-close": { kind: "boolean" },
  help: { kind: "boolean", short: "h" },
} as const;

/** Parses `gate`'s arguments, with defaults from `env`; throws naming the argument that is wrong. */
export function parseGateArgs(
  args: string[],
  env: Record<string, string | undefined>,
): GateArgs {
  const graceSeconds = env.BERTH_ENFORCE_GRACE_SECONDS;
  const argv = parseArgv(args, {
    flags: GATE_FLAGS,
    dashDash: "command",
    positionalHint: "put the command after --, e.g. gate -- /app/server",
  });
  const out: GateArgs = {
    help: isSet(argv, "help"),
    stateDir: env.BERTH_STATE_DIR || "/berth",
    intervalMs: DEFAULT_INTERVAL_MS,
    graceMs: graceSeconds && /^\d+$/.test(graceSeconds)
      ? Number(graceSeconds) * 1000
      : 0,
    maxAgeMs: 0,
    exitOnClose: isSet(argv, "exit-on-close"),
    logLevel: env.BERTH_LOG_LEVEL
      ? parseLogLevel(env.BERTH_LOG_LEVEL, "BERTH_LOG_LEVEL")
      : "INFO",
    command: argv.command ?? [],
  };
  const value = (name: string) => lastValue(argv, name);
  const stateDir = value("state-dir");
  if (stateDir !== undefined) {
    if (stateDir === "") throw new Error("--state-dir is empty");
    out.stateDir = stateDir;
  }
  const interval = value("interval");
  if (interval !== undefined) {
    out.intervalMs = parseDurationMs(interval, "--interval");
    if (out.intervalMs < 10 || out.intervalMs > 10_000) {
      throw new Error("--interval must be between 10ms and 10s");
    }
  }
  const grace = value("grace");
  if (grace !== undefined) out.graceMs = parseDurationMs(grace, "--grace");
  const logLevel = value("log-level");
  if (logLevel !== undefined) {
    out.logLevel = parseLogLevel(logLevel, "--log-level");
  }
  const maxAge = value("max-age");
  if (maxAge !== undefined) {
    out.maxAgeMs = parseDurationMs(maxAge, "--max-age", { negative: "zero" });
  }
  const parentPid = value("parent-pid");
  if (parentPid !== undefined) {
    if (!/^[1-9]\d*$/.test(parentPid)) {
      throw new Error(`--parent-pid ${JSON.stringify(parentPid)} is not a PID`);
    }
    out.parentPid = Number(parentPid);
  }
  return out;
}
