/**
 * `berth-acquire renew`, the native sidecar of a runtime-singleton pod: it
 * wires the configuration to a {@linkcode Renewer} with the chosen enforcer
 * and runs it until SIGTERM/SIGINT.
 *
 * @module
 */
import { systemClock } from "./clock.ts";
import {
  clientFor,
  EXIT_FAILURE,
  shutdownSignal,
  start,
  startupFailure,
} from "./command.ts";
import type { Config } from "./config.ts";
import {
  type Enforcer,
  type MarkerStore,
  ProbeEnforcer,
  SignalEnforcer,
} from "./enforce.ts";
import type { Logger } from "./log.ts";
import { LinuxProcessTable } from "./proc.ts";
import { Renewer } from "./renewer.ts";
import { StateDir } from "./state.ts";

const USAGE = `Usage: berth-acquire renew [flags]

Sidecar (runtime-singleton mode only): adopts the lease the init container
acquired, renews it every heartbeat against a local deadline, and stops the
workload before that deadline when the lease cannot be confirmed: by removing
the health marker (enforce=probe) or also by signalling the workload through
a shared PID namespace (enforce=signal). Reacquires when it can, and releases
the lease on SIGTERM/SIGINT when configured to. Exits 0 after a shutdown, 1 on
a configuration error.
`;

/**
 * The enforcer `config` asks for, writing the marker through `state`. Shared
 * with `run`, which stops its child by process group instead.
 */
export function enforcerFor(
  config: Config,
  state: StateDir,
  logger: Logger,
): Enforcer {
  const marker: MarkerStore = {
    write: (d) => state.writeMarker(d),
    remove: () => state.removeMarker(),
  };
  if (config.enforce === "probe") return new ProbeEnforcer({ marker, logger });
  return new SignalEnforcer({
    target: config.signalTarget,
    graceMs: config.enforceGraceSeconds * 1000,
    clock: systemClock,
    logger,
    processTable: new LinuxProcessTable(),
    marker,
  });
}

/** `berth-acquire renew`: see the usage text. */
export async function main(args: string[]): Promise<number> {
  const started = start({ name: "renew", usage: USAGE }, args);
  if (typeof started === "number") return started;
  const { config, logger } = started;
  if (config.mode !== "runtime-singleton") {
    logger.error(
      "renew runs only in runtime-singleton mode: a startup-gate lease is not kept after the pod starts; remove the sidecar or set BERTH_MODE=runtime-singleton",
    );
    return EXIT_FAILURE;
  }
  const clock = systemClock;
  const state = new StateDir(config.stateDir);
  let renewer: Renewer;
  try {
    await state.cleanStaleTemps();
    renewer = new Renewer({
      client: await clientFor(config, logger, clock),
      holder: config.holder,
      ttlSeconds: config.ttlSeconds,
      heartbeatMs: config.heartbeatMs,
      enforceLeadMs: config.enforceLeadMs,
      enforcer: enforcerFor(config, state, logger),
      store: state,
      clock,
      logger,
      releaseOnShutdown: config.releaseOnShutdown,
    });
  } catch (e) {
    return startupFailure(logger, "cannot start", e);
  }
  const shutdown = shutdownSignal(logger);
  try {
    logger.info("renewing lease", {
      enforce: config.enforce,
      ttl_seconds: config.ttlSeconds,
      heartbeat_ms: Math.round(config.heartbeatMs),
      enforce_lead_ms: config.enforceLeadMs,
    });
    await renewer.run(shutdown.signal);
    return 0;
  } finally {
    shutdown.dispose();
  }
}
