/**
 * `berth-acquire acquire`, the init container: the acquire loop
 * (`lib/hold/acquire.ts`, shared with `run`), then the hand-over through the
 * state volume (`lib/hold/handoff.ts`).
 *
 * @module
 */
import { acquireLease } from "../hold/acquire.ts";
import { writeHandoff } from "../hold/handoff.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import { GO_MESSAGES } from "../obs/go_messages.ts";
import { systemClock } from "../state/clock.ts";
import { prepareStateDir, StateDir } from "../state/state_dir.ts";
import { installCheckWrapper } from "./self_argv.ts";
import { shutdownSignal } from "./signals.ts";
import { clientFor, start, startupFailure } from "./startup.ts";

/** The probe's ELF rewrite: imported only compiled, through a variable (docs/development.md). */
const INSTALL_CHECK = "./install_check.ts";
type InstallCheck = typeof import("./install_check.ts");

const USAGE = `Usage: berth-acquire acquire [flags]

Init container: blocks until the lease is acquired (retrying errors and
waiting while another holder has it), then writes holder, token and the
health marker to the state directory (created with mode 0755 less the umask
when it is missing), installs the probe there as "check" (with its loader and
libraries, so it runs in any main image; see "berth-acquire install-check
--help"), and exits 0. Exits 1 on a configuration error, on --acquire-timeout,
or on SIGTERM, SIGINT, SIGHUP or SIGQUIT before the lease was acquired.
`;

/** `berth-acquire acquire`: see the usage text. Returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const started = start(
    { name: "acquire", usage: USAGE, goFailureLine: true },
    args,
  );
  if (typeof started === "number") return started;
  const { config, logger } = started;
  const clock = systemClock;
  const state = new StateDir(config.stateDir);
  let client: LeaseClient;
  try {
    prepareStateDir(state);
    client = await clientFor(config, logger, clock);
  } catch (e) {
    return startupFailure(logger, "cannot start", e);
  }
  // A recreated pod sandbox reruns this init container on the same volume,
  // its other containers gone: the token the volume names for a derived
  // holder (it carries the pod's UID) is this pod's. Not so for one given
  // explicitly, which another pod may share after a server reissued tokens.
  const ownToken = started.given.has("holder-identity") ? undefined : () => {
    try {
      return state.readHolder() === config.holder ? state.readToken() ?? 0 : 0;
    } catch {
      return 0; // an unreadable handoff proves nothing: the guard stays
    }
  };
  using shutdown = shutdownSignal(logger);
  try {
    const signal = config.acquireTimeoutMs
      ? AbortSignal.any([
        shutdown.signal,
        clock.timeout(config.acquireTimeoutMs),
      ])
      : shutdown.signal;
    logger.info("acquiring lease", {
      mode: config.mode,
      ttl_seconds: config.ttlSeconds,
    });
    const { lease, last } = await acquireLease({
      client,
      holder: config.holder,
      ttlSeconds: config.ttlSeconds,
      heartbeatMs: config.heartbeatMs,
      // Only a runtime-singleton workload is stopped at the lease's deadline.
      enforceLeadMs: config.mode === "runtime-singleton"
        ? config.enforceLeadMs
        : 0,
      // Every pod of a startup-gate workload presents the same identity.
      guardSharedHolder: config.mode !== "startup-gate",
      ownToken,
      signal,
      clock,
      logger,
    });
    if (!lease) {
      // The line that ends the wait names what it waited on.
      return startupFailure(
        logger,
        "acquire",
        (signal.reason as Error | undefined)?.name === "TimeoutError"
          ? `gave up waiting for the lease: --acquire-timeout reached${
            last ? `; the last attempt: ${last}` : ""
          }`
          : "stopped before the lease was acquired",
      );
    }
    const handed = await writeHandoff({
      state,
      config,
      lease,
      client,
      clock,
      logger,
      installCheck: async () =>
        Deno.build.standalone
          ? (await import(INSTALL_CHECK) as InstallCheck)
            .installProbe(state, logger)
          : await installCheckWrapper(state),
    });
    if (!handed) {
      return startupFailure(
        logger,
        "acquire",
        "persist lease state: the state volume cannot be written (see the lines above)",
      );
    }
    logger.info(GO_MESSAGES.leaseAcquired, { fencing_token: lease.token });
    return 0;
  } catch (e) {
    // Whatever ends acquire ends it with the Go helper's line.
    return startupFailure(logger, "acquire", e);
  }
}
