/**
 * `berth-acquire acquire`, the init container: block the pod's start until
 * the lease is held, then hand it over to the sidecar and the probe through
 * the state volume.
 *
 * @module
 */
import { type Clock, systemClock } from "../state/clock.ts";
import {
  clientFor,
  EXIT_FAILURE,
  shutdownSignal,
  start,
  startupFailure,
} from "./startup.ts";
import type { Config } from "../config/config.ts";
import {
  classifyAcquire,
  deadlineFrom,
  extendedExistingGrant,
  gateClosesAt,
  mayHaveBeenGranted,
  SHARED_HOLDER_MESSAGE,
  sharedHolderQuietMs,
} from "../hold/deadline.ts";
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  describeFailure,
  type LeaseClient,
} from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";
import type { MarkerDeadlines } from "../state/marker.ts";
import { StateDir } from "../state/state_dir.ts";

const USAGE = `Usage: berth-acquire acquire [flags]

Init container: blocks until the lease is acquired (retrying errors and
waiting while another holder has it), then writes holder, token and the
health marker to the state directory, installs the probe there as "check",
and exits 0. Exits 1 on a configuration error, on --acquire-timeout, or when
stopped by SIGTERM/SIGINT before the lease was acquired.
`;

/** Options for {@linkcode acquireLease}. */
export interface AcquireLeaseOptions {
  /** The lease RPCs. */
  client: LeaseClient;
  /** Holder identity to acquire for. */
  holder: string;
  /** TTL to request, whole seconds. */
  ttlSeconds: number;
  /** Poll interval while another holder has the lease; also the cap of the error back-off. */
  heartbeatMs: number;
  /**
   * The enforcement lead (ms). An answer that arrives after its own gate
   * closing time (send + TTL - lead) is of no use to the workload, so the
   * lease is confirmed again at once instead of handed over expired. Default 0.
   */
  enforceLeadMs?: number;
  /** Bound on each RPC (ms); default {@linkcode DEFAULT_REQUEST_TIMEOUT_MS}, the reference client's. */
  requestTimeoutMs?: number;
  /** Aborts the wait: SIGTERM/SIGINT, or `--acquire-timeout`. */
  signal: AbortSignal;
  /** Monotonic clock and waits. */
  clock: Clock;
  /** Where each wait is reported, with the current holder. */
  logger: Logger;
  /** Jitter source in [0, 1); injectable so tests are exact. Default `Math.random`. */
  random?: () => number;
}

/** A lease the caller now holds. */
export interface AcquiredLease {
  /** The fencing token the server granted. */
  token: number;
  /** Monotonic ms at which the successful request was sent (the deadline counts from here). */
  sentAt: number;
  /** Boot-time ms at the same moment, to write the deadline into the marker. */
  sentAtBoot: number;
  /** Wall-clock ms at the same moment, for the marker's second copy of the deadline. */
  sentAtWall: number;
}

/**
 * Retries Acquire until it succeeds or `signal` aborts (then resolves
 * `undefined`). "Held by another" is polled at the heartbeat, as upstream
 * does; errors back off from 0.5 s, doubling up to the heartbeat, with
 * jitter, so a crowd of pods waiting on a broken server does not hammer it
 * in step.
 */
export async function acquireLease(
  o: AcquireLeaseOptions,
): Promise<AcquiredLease | undefined> {
  const { client, holder, ttlSeconds, heartbeatMs, signal, clock, logger } = o;
  const random = o.random ?? Math.random;
  const requestTimeoutMs = o.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  let backoff = Math.min(500, heartbeatMs);
  // Whether an earlier attempt may have been granted without our knowing
  // (no answer, or an answer we did not use): then an extension of our own
  // grant is expected and is not someone else's.
  let mayHoldAlready = false;
  while (!signal.aborted) {
    const sentAt = clock.now();
    const sentAtBoot = clock.bootNow();
    const sentAtWall = clock.wallNow();
    const outcome = await client.acquire(
      holder,
      ttlSeconds,
      AbortSignal.any([clock.timeout(requestTimeoutMs), signal]),
    );
    const verdict = classifyAcquire(outcome);
    let wait = heartbeatMs;
    switch (verdict.kind) {
      case "acquired":
        if (
          !mayHoldAlready && extendedExistingGrant(verdict.lease, ttlSeconds)
        ) {
          // Another process or pod uses this holder identity and holds the
          // lease. Polling would extend its lease for it, so wait until the
          // lease we just extended can have expired, then ask again.
          logger.warn(SHARED_HOLDER_MESSAGE, {
            current_fencing_token: verdict.token,
            acquired_at: verdict.lease.acquiredAt,
          });
          wait = clock.now() - sentAt + sharedHolderQuietMs(ttlSeconds);
          break;
        }
        if (
          clock.now() <
            gateClosesAt(deadlineFrom(sentAt, ttlSeconds), o.enforceLeadMs ?? 0)
        ) {
          return { token: verdict.token, sentAt, sentAtBoot, sentAtWall };
        }
        // Acquire by the same live holder keeps the token and acts as a renew.
        mayHoldAlready = true;
        logger.warn(
          "the lease was granted too late to use; confirming it again",
          {
            fencing_token: verdict.token,
          },
        );
        continue;
      case "cancelled":
        return undefined;
      case "held":
        backoff = Math.min(500, heartbeatMs);
        logger.info("lease held by another holder; waiting", {
          current_holder: verdict.holder,
          current_fencing_token: verdict.token,
        });
        break;
      case "failed":
        if (mayHaveBeenGranted(verdict.failure)) mayHoldAlready = true;
        wait = backoff * (0.5 + random() / 2);
        backoff = Math.min(backoff * 2, heartbeatMs);
        logger.warn("lease acquire failed; retrying", {
          error: verdict.reason,
          retry_in_ms: Math.round(wait),
        });
        break;
    }
    await clock.sleep(sentAt + wait - clock.now(), signal);
  }
  return undefined;
}

/**
 * The marker `acquire` hands over: in runtime-singleton mode it carries the
 * deadline of this acquisition, so the workload cannot outlive the lease even
 * if the sidecar never starts; in startup-gate mode nobody renews, so it
 * carries none and only its presence counts.
 */
export function handoffMarker(
  config: Pick<Config, "mode" | "ttlSeconds" | "enforceLeadMs">,
  sent: Pick<AcquiredLease, "sentAtBoot" | "sentAtWall">,
): MarkerDeadlines | undefined {
  if (config.mode === "startup-gate") return undefined;
  const leaseDeadlineBootMs = deadlineFrom(sent.sentAtBoot, config.ttlSeconds);
  const leaseDeadlineWallMs = deadlineFrom(sent.sentAtWall, config.ttlSeconds);
  return {
    leaseDeadlineBootMs,
    gateClosesBootMs: gateClosesAt(leaseDeadlineBootMs, config.enforceLeadMs),
    leaseDeadlineWallMs,
    gateClosesWallMs: gateClosesAt(leaseDeadlineWallMs, config.enforceLeadMs),
  };
}

/** Options for {@linkcode handOver}. */
export interface HandOverOptions {
  /** The state directory to write. */
  state: StateDir;
  /** Mode, TTL, lead (for the marker), holder and state directory (for messages). */
  config: Pick<
    Config,
    "mode" | "ttlSeconds" | "enforceLeadMs" | "holder" | "stateDir"
  >;
  /** The lease just acquired. */
  lease: AcquiredLease;
  /** To release the lease when the state cannot be written. */
  client: LeaseClient;
  /** Bounds that release. */
  clock: Clock;
  /** Reports a failure. */
  logger: Logger;
  /** Also copy the probe to `<state>/check` (the init container does; `run` does not). */
  installCheck: boolean;
}

/**
 * Writes holder, token and marker (and the probe) for the roles that come
 * next. When the volume cannot be written the lease is released at once
 * (bounded, 5 s), so the standby does not wait a whole TTL for a lease
 * nobody will renew; returns false then.
 */
export async function handOver(o: HandOverOptions): Promise<boolean> {
  const { state, config, lease, client, clock, logger } = o;
  try {
    await state.writeHolder(config.holder);
    await state.writeToken(lease.token);
    await state.writeMarker(handoffMarker(config, lease));
    if (o.installCheck) await state.installCheck();
    return true;
  } catch (e) {
    logger.error("cannot write the state volume; releasing the lease", {
      error: e,
      state_dir: config.stateDir,
      fencing_token: lease.token,
    });
    const released = await client.release(
      config.holder,
      lease.token,
      clock.timeout(5_000),
    );
    if (released.kind !== "released") {
      logger.warn("release failed; the lease expires on its own", {
        error: describeFailure(released),
      });
    }
    return false;
  }
}

/** `berth-acquire acquire`: see the usage text. */
export async function main(args: string[]): Promise<number> {
  const started = start({ name: "acquire", usage: USAGE }, args);
  if (typeof started === "number") return started;
  const { config, logger } = started;
  const clock = systemClock;
  const state = new StateDir(config.stateDir);
  let client: LeaseClient;
  try {
    await state.cleanStaleTemps();
    client = await clientFor(config, logger, clock);
  } catch (e) {
    return startupFailure(logger, "cannot start", e);
  }
  const shutdown = shutdownSignal(logger);
  try {
    const signals = [shutdown.signal];
    if (config.acquireTimeoutMs) {
      signals.push(clock.timeout(config.acquireTimeoutMs));
    }
    const signal = AbortSignal.any(signals);
    logger.info("acquiring lease", {
      mode: config.mode,
      ttl_seconds: config.ttlSeconds,
    });
    const lease = await acquireLease({
      client,
      holder: config.holder,
      ttlSeconds: config.ttlSeconds,
      heartbeatMs: config.heartbeatMs,
      // Only a runtime-singleton workload is stopped at the lease's deadline.
      enforceLeadMs: config.mode === "runtime-singleton"
        ? config.enforceLeadMs
        : 0,
      signal,
      clock,
      logger,
    });
    if (!lease) {
      const timedOut =
        (signal.reason as Error | undefined)?.name === "TimeoutError";
      logger.error(
        timedOut
          ? "gave up waiting for the lease: --acquire-timeout reached"
          : "stopped before the lease was acquired",
      );
      return EXIT_FAILURE;
    }
    if (
      !await handOver({
        state,
        config,
        lease,
        client,
        clock,
        logger,
        installCheck: true,
      })
    ) {
      return EXIT_FAILURE;
    }
    logger.info("lease acquired", { fencing_token: lease.token });
    return 0;
  } finally {
    shutdown.dispose();
  }
}
