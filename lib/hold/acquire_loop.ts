/**
 * The acquire loop shared by `acquire` (the init container) and `run`:
 * retry Acquire until the lease is held, polling at the heartbeat while
 * another holder has it and backing off on errors. A rejection that does not
 * heal by waiting (400, 401, 403, 404: a wrong key, holder, namespace or URL)
 * is still retried, because a rotated key or a fixed server heals it, but it
 * is logged at ERROR with what to do: at once, then at most once a minute.
 *
 * @module
 */
import { bounded, type Clock } from "../state/clock.ts";
import {
  classifyAcquire,
  deadlineFrom,
  permissionClosesAt,
} from "./deadline.ts";
import {
  mayHaveBeenGranted,
  PossibleGrant,
  sharedHolderQuietMs,
} from "./shared_holder.ts";
import {
  configFix,
  DEFAULT_REQUEST_TIMEOUT_MS,
  isPersistentFailure,
  type LeaseClient,
} from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";
import { GO_MESSAGES } from "../obs/go_messages.ts";
import { formatDurationMs } from "../config/duration.ts";
import { REJECTION_LOG_INTERVAL_MS, RejectionLog } from "./rejection_log.ts";

/** The ERROR line, once a minute, of a server that has not answered usably for over a minute. */
export const OUTAGE_MESSAGE =
  "the API server has not answered usably for over a minute; still retrying";

/**
 * A failure no wait can heal, met with {@linkcode AcquireLeaseOptions.endOnFix}:
 * the wait ends at once and the caller says the fix.
 */
export class UnusableServerError extends Error {
  /**
   * @param fix The one-line fix (`configFix`).
   * @param detail The failure as {@linkcode describeFailure} says it.
   */
  constructor(readonly fix: string, readonly detail: string) {
    super(`${detail}; ${fix}`);
    this.name = "UnusableServerError";
  }
}

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
   * The enforcement lead (ms). An answer that arrives after the permission
   * it grants would already have closed (send + TTL - lead) is of no use to
   * the workload, so the lease is confirmed again at once instead of handed
   * over expired. Default 0.
   */
  enforceLeadMs?: number;
  /**
   * The holder identity is shared by design (startup-gate: every pod of the
   * workload presents the workload's identity, and admission is of the
   * workload, not of one pod), so a grant that extends a live one is
   * admission too, not another process's lease to let expire. Default false
   * (runtime-singleton: an identity names one pod incarnation).
   */
  sharedHolder?: boolean;
  /** Bound on each RPC (ms); default {@linkcode DEFAULT_REQUEST_TIMEOUT_MS}, the reference client's bound. */
  requestTimeoutMs?: number;
  /** Aborts the wait: a stop signal, or `--acquire-timeout`. */
  signal: AbortSignal;
  /** Monotonic clock and waits. */
  clock: Clock;
  /** Where each wait is reported, with the current holder. */
  logger: Logger;
  /** Jitter source in [0, 1); injectable so tests are exact. Default `Math.random`. */
  random?: () => number;
  /**
   * End at once, throwing {@linkcode UnusableServerError}, on a failure that
   * names its fix (see `configFix`) instead of retrying it (`run`). Default
   * false: the failure is retried as the Go helper does, its retry line
   * carries `fix`, and an ERROR line names the fix once a minute.
   */
  endOnFix?: boolean;
  /**
   * Say "lease held by another, waiting" once per holder and token
   * (a new holder, or the lease taken again once it expired) instead of at
   * every poll, and say at ERROR once a minute that the server has not
   * answered usably once failures have gone on for over a minute (`run`).
   * Default false: every poll is logged, as the Go helper does.
   */
  quiet?: boolean;
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
 * in step. Other errors are logged at WARN each time; a rejection (400, 401,
 * 403, 404) at ERROR, the first time and then once a
 * minute while it goes on, with how many were not logged.
 *
 * @param o The client, the lease's parameters, the clock and the logger.
 * @returns The lease, or undefined when `signal` aborted first.
 */
export async function acquireLease(
  o: AcquireLeaseOptions,
): Promise<AcquiredLease | undefined> {
  const { client, holder, ttlSeconds, heartbeatMs, signal, clock, logger } = o;
  const random = o.random ?? Math.random;
  const requestTimeoutMs = o.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  let backoff = Math.min(500, heartbeatMs);
  // Attempts that may have been granted without our knowing (no answer, or
  // an answer we did not use): an extension of such a grant is our own.
  const possible = new PossibleGrant(ttlSeconds);
  const rejections = new RejectionLog(logger, clock);
  /** The holder and token the last "held" line named (quiet mode). */
  let saidHeld: string | undefined;
  /** When the current run of failures began; undefined while none. */
  let failingSince: number | undefined;
  let outageSaidAt: number | undefined;
  while (!signal.aborted) {
    const sentAt = clock.now();
    const sentAtBoot = clock.bootNow();
    const sentAtWall = clock.wallNow();
    let outcome;
    {
      using call = bounded(clock, requestTimeoutMs, signal);
      outcome = await client.acquire(holder, ttlSeconds, call.signal);
    }
    const verdict = classifyAcquire(outcome);
    let wait = heartbeatMs;
    switch (verdict.kind) {
      case "acquired":
        if (
          !o.sharedHolder &&
          possible.another(verdict.lease, sentAt, clock.now(), logger)
        ) {
          // Another process or pod uses this holder identity and holds the
          // lease. Polling would extend its lease for it, so wait until the
          // lease we just extended can have expired, then ask again.
          wait = clock.now() - sentAt + sharedHolderQuietMs(ttlSeconds);
          break;
        }
        if (
          clock.now() <
            permissionClosesAt(
              deadlineFrom(sentAt, ttlSeconds),
              o.enforceLeadMs ?? 0,
            )
        ) {
          return { token: verdict.token, sentAt, sentAtBoot, sentAtWall };
        }
        // Acquire by the same live holder keeps the token and acts as a renew.
        possible.asked(sentAt, requestTimeoutMs);
        logger.warn(
          "the lease was granted too late to use; confirming it again",
          {
            fencing_token: verdict.token,
          },
        );
        continue;
      case "cancelled":
        return undefined;
      case "held": {
        // Another holder has it: no earlier attempt of ours was granted.
        possible.clear();
        rejections.reset();
        failingSince = outageSaidAt = undefined;
        backoff = Math.min(500, heartbeatMs);
        const who = `${verdict.holder}\u0000${verdict.token}`;
        const fields = {
          current_holder: verdict.holder,
          current_fencing_token: verdict.token,
          retry_in_ms: Math.round(wait),
          ...(o.quiet && outcome.kind === "not-acquired"
            ? { expires_at: outcome.lease.expiresAt }
            : {}),
        };
        // run (quiet) says it once per holder and token; acquire, as the Go
        // helper, at every poll.
        (o.quiet && who === saidHeld ? logger.debug : logger.info)(
          GO_MESSAGES.heldByAnother,
          fields,
        );
        saidHeld = who;
        break;
      }
      case "failed": {
        if (mayHaveBeenGranted(verdict.failure)) {
          possible.asked(sentAt, requestTimeoutMs);
        }
        wait = backoff * (0.5 + random() / 2);
        backoff = Math.min(backoff * 2, heartbeatMs);
        failingSince ??= sentAt;
        const fix = configFix(verdict.failure);
        if (fix !== undefined && o.endOnFix) {
          throw new UnusableServerError(fix, verdict.reason);
        }
        const failingMs = clock.now() - failingSince;
        const persistent = fix !== undefined ||
          isPersistentFailure(verdict.failure);
        // Go's line on every attempt (run: at DEBUG for a failure whose
        // ERROR line comes once a minute); a failure that does not heal by
        // waiting also gets its ERROR line, at most once a minute.
        (o.quiet && persistent ? logger.debug : logger.warn)(
          GO_MESSAGES.acquireFailed,
          {
            error: verdict.reason,
            retry_in_ms: Math.round(wait),
            ...(fix !== undefined ? { fix } : {}),
            ...(o.quiet ? { failing_for: formatDurationMs(failingMs) } : {}),
          },
        );
        if (persistent) {
          rejections.report(verdict.failure, Math.round(wait));
          break;
        }
        rejections.reset();
        if (
          o.quiet && failingMs >= REJECTION_LOG_INTERVAL_MS &&
          (outageSaidAt === undefined ||
            clock.now() - outageSaidAt >= REJECTION_LOG_INTERVAL_MS)
        ) {
          outageSaidAt = clock.now();
          logger.error(OUTAGE_MESSAGE, {
            error: verdict.reason,
            failing_for: formatDurationMs(failingMs),
          });
        }
        break;
      }
    }
    await clock.sleep(sentAt + wait - clock.now(), signal);
  }
  return undefined;
}
