/**
 * `run`'s first step: wait for the lease, and say how the wait ended. The
 * wait is the acquire loop `acquire` uses (lib/hold/acquire.ts), bound
 * by `--acquire-timeout` and by run's stop signals, and ended at once by an
 * API server no wait can fix. Each way it can end without a lease has its
 * own line and exit status: 78 for an unusable server (with the fix), 76
 * when `--acquire-timeout` was reached, 77 when a stop signal came first
 * (logged at INFO: a standby stopped on purpose is no failure).
 *
 * @module
 */
import { type AcquiredLease, acquireLease } from "../hold/acquire.ts";
import type { Config } from "../config/config.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";
import type { Clock } from "../state/clock.ts";
import {
  EXIT_ACQUIRE_TIMEOUT,
  EXIT_CANCELLED,
  EXIT_CONFIG,
  isTimeout,
  waitBound,
} from "./run_supervise.ts";

/** What {@linkcode acquireForRun} needs. */
export interface RunAcquireOptions {
  /** The resolved configuration: TTL, heartbeat, lead, holder, `--acquire-timeout`. */
  config: Config;
  /** The lease RPCs. */
  client: LeaseClient;
  /** Paces the retries and bounds the wait. */
  clock: Clock;
  /** Receives the start, the end and every problem of the wait. */
  logger: Logger;
  /** Aborted when a stop signal arrives: the wait ends, exit 77. */
  cancelled: AbortSignal;
}

/**
 * Waits for the lease as `run` does: logs `acquiring lease`, then `lease
 * acquired` with the fencing token, or the reason it gave up.
 *
 * @param o What the wait needs.
 * @returns The lease, or the exit status to end `run` with
 *   (`EXIT_CONFIG`, `EXIT_ACQUIRE_TIMEOUT` or `EXIT_CANCELLED`).
 */
export async function acquireForRun(
  o: RunAcquireOptions,
): Promise<AcquiredLease | number> {
  const { config, clock, logger } = o;
  logger.info("acquiring lease", {
    ttl_seconds: config.ttlSeconds,
    enforce_lead_ms: config.enforceLeadMs,
    enforce_grace_seconds: config.enforceGraceSeconds,
  });
  const bound = waitBound(config, clock, o.cancelled);
  const { lease, last, fix } = await acquireLease({
    client: o.client,
    holder: config.holder,
    ttlSeconds: config.ttlSeconds,
    heartbeatMs: config.heartbeatMs,
    enforceLeadMs: config.enforceLeadMs,
    signal: bound,
    clock,
    logger,
    guardSharedHolder: true,
    endOnFix: true,
  });
  if (fix !== undefined) {
    // No wait heals it: one line with the fix, and the configuration exit.
    logger.error(`the API server cannot be used as configured: ${fix}`, {
      error: last,
      fix,
    });
    return EXIT_CONFIG;
  }
  if (!lease) {
    if (isTimeout(bound)) {
      logger.error(
        "gave up waiting for the lease: --acquire-timeout reached",
        { last_attempt: last },
      );
      return EXIT_ACQUIRE_TIMEOUT;
    }
    // A standby stopped on purpose (systemctl stop): no failure.
    logger.info("stopped before the lease was acquired", {
      reason: bound.reason instanceof Error
        ? bound.reason.message
        : String(bound.reason),
    });
    return EXIT_CANCELLED;
  }
  logger.info("lease acquired", { fencing_token: lease.token });
  return lease;
}
