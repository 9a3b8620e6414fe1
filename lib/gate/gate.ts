/**
 * `berth-acquire gate [flags] -- COMMAND [ARGS...]`, its arguments and
 * wiring (the loop is gate_loop.ts): a fence that runs COMMAND, in the main
 * container, only while the health marker passes `check`'s verdict, and
 * never talks to the lease server (docs/run-and-gate.md). `run` starts its
 * command under it, with `--parent-pid`, so a killed or frozen `run` cannot
 * leave the command behind. Its imports stay small (no lease client, no
 * `node:` module, not even `node:util` for the arguments): it lives in the
 * workload's container.
 *
 * @module
 */
import { parseDurationMs } from "../config/duration.ts";
import { formatDurationMs } from "../state/marker.ts";
import {
  EXIT_USAGE,
  isSet,
  lastValue,
  parseArgv,
  usageLine,
} from "../config/argv.ts";
import { type GateOptions, runGate } from "./gate_loop.ts";
import { startFullCollections } from "../cmd/full_collection.ts";
import {
  createLogger,
  type Logger,
  type LogLevel,
  parseLogFormat,
  parseLogLevel,
} from "../obs/log.ts";

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

/** How often the marker is looked at by default (its CPU: docs/run-and-gate.md). */
const DEFAULT_INTERVAL_MS = 200;

/** The parsed arguments of `gate`. */
export interface GateArgs
  extends Omit<GateOptions, "logger" | "baseEnv" | "clock"> {
  help: boolean;
  logLevel: LogLevel;
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
  const argv = parseArgv(args, {
    flags: GATE_FLAGS,
    dashDash: "command",
    positionalHint: "put the command after --, e.g. gate -- /app/server",
  });
  const logLevel = env.BERTH_LOG_LEVEL
    ? parseLogLevel(env.BERTH_LOG_LEVEL, "BERTH_LOG_LEVEL")
    : "INFO";
  // Checked in this order, so the first wrong flag is the one named.
  const flag = <T>(name: string, parse: (value: string, flag: string) => T) => {
    const value = lastValue(argv, name);
    return value === undefined ? undefined : parse(value, `--${name}`);
  };
  const grace = env.BERTH_ENFORCE_GRACE_SECONDS;
  return {
    help: isSet(argv, "help"),
    exitOnClose: isSet(argv, "exit-on-close"),
    command: argv.command ?? [],
    stateDir: flag("state-dir", (v, f) => {
      if (v === "") throw new Error(`${f} is empty`);
      return v;
    }) ?? (env.BERTH_STATE_DIR || "/berth"),
    intervalMs: flag("interval", (v, f) => {
      const ms = parseDurationMs(v, f);
      if (ms < 10 || ms > 10_000) {
        throw new Error("--interval must be between 10ms and 10s");
      }
      return ms;
    }) ?? DEFAULT_INTERVAL_MS,
    graceMs: flag("grace", parseDurationMs) ??
      (grace && /^\d+$/.test(grace) ? Number(grace) * 1000 : 0),
    logLevel: flag("log-level", parseLogLevel) ?? logLevel,
    maxAgeMs:
      flag("max-age", (v, f) => parseDurationMs(v, f, { negative: "zero" })) ??
        0,
    parentPid: flag("parent-pid", (v, f) => {
      if (!/^[1-9]\d*$/.test(v)) {
        throw new Error(`${f} ${JSON.stringify(v)} is not a PID`);
      }
      return Number(v);
    }),
  };
}

/** `berth-acquire gate`: see the usage text. */
export async function main(args: string[]): Promise<number> {
  const env = Deno.env.toObject();
  let parsed: GateArgs;
  let logger: Logger;
  try {
    parsed = parseGateArgs(args, env);
    logger = createLogger({
      format: env.BERTH_LOG_FORMAT
        ? parseLogFormat(env.BERTH_LOG_FORMAT, "BERTH_LOG_FORMAT")
        : "text",
      level: parsed.logLevel,
    }).with(leaseFields(env));
  } catch (e) {
    console.error(usageLine("gate", (e as Error).message));
    return EXIT_USAGE;
  }
  if (parsed.help) {
    console.log(GATE_USAGE);
    return 0;
  }
  if (parsed.command.length === 0) {
    console.error(
      "berth-acquire gate: no command to run: put it after --, e.g. berth-acquire gate -- /app/server",
    );
    return EXIT_USAGE;
  }
  logger.debug("gate settings", {
    interval: formatDurationMs(parsed.intervalMs),
    grace: formatDurationMs(parsed.graceMs),
  });
  using _collections = startFullCollections();
  return await runGate({ ...parsed, logger });
}

/**
 * The lease fields of the gate's lines, from the environment the sidecar (or
 * `run`) shares with it; the loop adds the holder once the volume names it.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.deepEqual(
 *   leaseFields({ BERTH_LEASE_NAME: "db", POD_NAMESPACE: "prod" }),
 *   { lease: "db", namespace: "prod" },
 * );
 * ```
 */
export function leaseFields(
  env: Record<string, string | undefined>,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (env.BERTH_LEASE_NAME) out.lease = env.BERTH_LEASE_NAME;
  const ns = env.BERTH_LEASE_NAMESPACE || env.POD_NAMESPACE;
  if (ns) out.namespace = ns;
  return out;
}
