/**
 * `berth-acquire renew`, the native sidecar of a runtime-singleton pod: the
 * renewer with the configured enforcer, run until a stop signal.
 *
 * @module
 */
import { ConfigError } from "../config/argv.ts";
import type { Config } from "../config/config.ts";
import { type Enforcer, ProbeEnforcer } from "../enforce/enforcer.ts";
import { LinuxProcessTable } from "../enforce/proc.ts";
import { SignalEnforcer } from "../enforce/signal.ts";
import type { Renewer } from "../hold/renewer.ts";
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { Logger } from "../obs/log.ts";
import { systemClock } from "../state/clock.ts";
import { prepareStateDir, StateDir } from "../state/state_dir.ts";
import { HEALTH_ADDR_ENV, type HealthAddr, healthAddrFrom } from "./health.ts";
import { LeaseKeeper, type LeaseMetrics } from "./lease_keeper.ts";
import { shutdownSignal } from "./signals.ts";
import { EXIT_FAILURE, start, startupFailure } from "./startup.ts";

const USAGE = `Usage: berth-acquire renew [flags]

Sidecar (runtime-singleton mode only): adopts the lease the init container
acquired, renews it every heartbeat against a local deadline, and stops the
workload before that deadline when the lease cannot be confirmed: by removing
the health marker (enforce=probe) or also by signalling the workload through
a shared PID namespace (enforce=signal). Reacquires when it can, and releases
the lease on SIGTERM, SIGINT, SIGHUP or SIGQUIT when configured to. Exits 0
after a shutdown, 1 on a configuration error.

With --health-addr (env ${HEALTH_ADDR_ENV}) it also serves GET /healthz (200
"ok", or 503 and the reason line: the verdict check would give) and GET
/metrics (Prometheus text format), e.g. for an httpGet liveness probe in an
image that cannot run the copied check. In a pod use :8471 (all
interfaces): the kubelet probes the pod IP, not 127.0.0.1.
`;

/** renew's flags beside the configuration's; `check` skips them too (a test holds main.ts to it). */
export const RENEW_FLAGS = {
  "health-addr": {
    kind: "value",
    value: "HOST:PORT",
    help:
      `serve GET /healthz and /metrics on this address (env ${HEALTH_ADDR_ENV}); default: off`,
  },
} as const;

/**
 * The enforcer `config` asks for, keeping the marker in `state`, counted by
 * `metrics` when given. Only signal mode builds a process table (probe mode
 * never reads `/proc`).
 */
export function enforcerFor(
  config: Config,
  state: StateDir,
  logger: Logger,
  metrics?: LeaseMetrics,
): Enforcer {
  const marker = metrics ? metrics.markerStore(state) : state;
  if (config.enforce === "probe") return new ProbeEnforcer({ marker, logger });
  const processTable = new LinuxProcessTable();
  return new SignalEnforcer({
    target: config.signalTarget,
    graceMs: config.enforceGraceSeconds * 1000,
    clock: systemClock,
    logger,
    processTable: metrics ? metrics.processTable(processTable) : processTable,
    marker,
    // The probe the init container installed runs in the workload's container.
    ownCopies: [state.checkPath],
  });
}

/** `berth-acquire renew`: see the usage text. */
export async function main(args: string[]): Promise<number> {
  const started = start(
    { name: "renew", usage: USAGE, flags: RENEW_FLAGS, goFailureLine: true },
    args,
  );
  if (typeof started === "number") return started;
  const { config, extra, logger } = started;
  let healthAddr: HealthAddr | undefined;
  try {
    healthAddr = healthAddrFrom(
      extra["health-addr"],
      Deno.env.get(HEALTH_ADDR_ENV),
    );
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return started.configProblem(e.problem);
  }
  if (config.mode !== "runtime-singleton") {
    logger.error(GO_MESSAGES.failed, {
      error:
        "renew runs only in runtime-singleton mode: a startup-gate lease is not kept after the pod starts; remove the sidecar or set BERTH_MODE=runtime-singleton",
    });
    return EXIT_FAILURE;
  }
  const clock = systemClock;
  const state = new StateDir(config.stateDir);
  let keeper: LeaseKeeper;
  let renewer: Renewer;
  try {
    prepareStateDir(state);
    keeper = await LeaseKeeper.open({ config, logger, clock, healthAddr });
    renewer = keeper.renewer(
      enforcerFor(config, state, logger, keeper.metrics),
      state,
      // A derived holder carries the pod's UID: a live lease under it is this
      // pod's own (its init container's), never another process's.
      started.given.has("holder-identity"),
    );
  } catch (e) {
    return startupFailure(logger, "cannot start", e);
  }
  const shutdown = shutdownSignal(logger);
  shutdown.signal.addEventListener("abort", () => keeper.stopping());
  try {
    logger.info(GO_MESSAGES.sidecarStarting, {
      enforce: config.enforce,
      ttl_seconds: config.ttlSeconds,
      heartbeat_ms: Math.round(config.heartbeatMs),
      enforce_lead_ms: config.enforceLeadMs,
    });
    await renewer.run(shutdown.signal);
    return 0;
  } catch (e) {
    // Whatever ends renew ends it with the Go helper's line.
    return startupFailure(logger, "renew", e);
  } finally {
    shutdown.dispose();
    await keeper.close();
  }
}
