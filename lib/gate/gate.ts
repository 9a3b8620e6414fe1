/**
 * `berth-acquire gate [flags] -- COMMAND [ARGS...]`, the subcommand's
 * wiring: an independent fence that runs COMMAND, in the main container,
 * only while the health marker passes `check`'s verdict, and never talks to
 * the lease server (docs/run-and-gate.md). `run` starts its own command
 * under it, with a marker of its own and `--parent-pid`, so a killed or
 * frozen `run` cannot leave the command behind. Its imports stay small (no
 * lease client, no `node:` module): it lives in the workload's container.
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

/** `berth-acquire gate`: see the usage text. */
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
