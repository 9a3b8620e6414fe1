/**
 * `berth-acquire gate [flags] -- COMMAND [ARGS...]`: an independent fence
 * around the workload. It runs as the main container's command, from the
 * state volume (`/berth/check gate -- /app/server ...`), never talks to the
 * lease server, and runs COMMAND only while the health marker passes the
 * same verdict as `check` (one predicate: `examineMarker`, in
 * lib/state/marker.ts). It waits for that verdict before every start, so a
 * container the kubelet restarts while its pod has no lease does not run the
 * workload at all, and it stops COMMAND's whole process tree (SIGTERM,
 * SIGKILL after the grace) as soon as the verdict fails: at the next look
 * (every `--interval`) or on a timer set for the marker's own gate deadline,
 * so a dead or wedged sidecar stops nothing from running late.
 *
 * `run` starts its own command under this same subcommand, with a marker of
 * its own and `--parent-pid`, so that a killed or frozen `run` cannot leave
 * the command behind.
 *
 * This module is the subcommand's wiring: arguments (lib/gate/gate_args.ts),
 * logger, usage. The loop is lib/gate/gate_loop.ts; the watch of a running
 * COMMAND and its deadline arithmetic, lib/gate/marker_watch.ts.
 *
 * Its imports stay small (no lease client, no `node:` module): it lives in
 * the workload's container and memory budget.
 *
 * @module
 */
import { formatDurationMs } from "../config/duration.ts";
import { usageLine } from "../config/argv.ts";
import {
  EXIT_GATE_USAGE,
  GATE_USAGE,
  type GateArgs,
  parseGateArgs,
} from "./gate_args.ts";
import { runGate } from "./gate_loop.ts";
import { startFullCollections } from "../cmd/full_collection.ts";
import { createLogger, type Logger, parseLogFormat } from "../obs/log.ts";

/**
 * `berth-acquire gate`: see the usage text.
 *
 * @param args The arguments after `gate`.
 * @returns The exit status (see the usage text).
 */
export async function main(args: string[]): Promise<number> {
  const env = Deno.env.toObject();
  let logger: Logger;
  let parsed: GateArgs;
  try {
    parsed = parseGateArgs(args, env);
    logger = createLogger({
      format: env.BERTH_LOG_FORMAT
        ? parseLogFormat(env.BERTH_LOG_FORMAT, "BERTH_LOG_FORMAT")
        : "text",
      level: parsed.logLevel,
    }).with(leaseFields(env));
  } catch (e) {
    console.error(
      usageLine("gate", (e as Error).message),
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
  using _collections = startFullCollections();
  return await runGate({ ...parsed, logger });
}

/**
 * The lease fields of the gate's lines, from the environment the sidecar (or
 * `run`) shares with it: `lease` and `namespace` when set; the holder is
 * added by the loop once it reads the state volume.
 *
 * @param env The environment.
 * @returns The fields to put on every line.
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
