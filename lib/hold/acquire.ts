/** Getting the lease: the acquire loop of `acquire` (the init container) and `run`. @module */
import { Attempts, type AttemptsOptions } from "./attempts.ts";
import { bounded } from "../state/clock.ts";
import {
  configFix,
  DEFAULT_REQUEST_TIMEOUT_MS,
  describeFailure,
  type GrantOutcome,
  statusFix,
} from "../lease/rpc.ts";
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { LeaseParams } from "./lease.ts";

/** A lease the caller now holds: its token, and when its Acquire was sent on the three clocks. */
export interface AcquiredLease {
  token: number;
  sentAt: number;
  sentAtBoot: number;
  sentAtWall: number;
}

/** Options for {@linkcode acquireLease}. */
export interface AcquireOptions
  extends LeaseParams, Pick<AttemptsOptions, "guardSharedHolder" | "ownToken"> {
  /** A stop signal, or `--acquire-timeout`. */
  signal: AbortSignal;
  /** End at a failure no wait heals: one naming its fix, or a 401, 403, 404 (`run`: a wrong key or URL). */
  endOnFix?: boolean;
  /** Jitter source in [0, 1), for exact tests. */
  random?: () => number;
}

/** How a wait ended: the lease, or what the last attempt met (and with `endOnFix`, its fix). */
export interface AcquireResult {
  lease?: AcquiredLease;
  last?: string;
  fix?: string;
}

/**
 * Retries Acquire until it succeeds or `signal` aborts. "Held by another" is
 * polled at the heartbeat, as the Go helper does; errors back off from 0.5 s
 * to the heartbeat with jitter, so pods waiting on a broken server do not
 * hammer it in step. A grant that comes after the permission it gives would
 * have closed is of no use, so it is confirmed again at once.
 *
 * @returns The lease, or the last answer when `signal` (or `endOnFix`) ended the wait.
 */
export async function acquireLease(
  o: AcquireOptions,
): Promise<AcquireResult> {
  const { client, holder, ttlSeconds, heartbeatMs, signal, clock } = o;
  const random = o.random ?? Math.random;
  const bound = DEFAULT_REQUEST_TIMEOUT_MS;
  const attempts = new Attempts({
    ...o,
    boundMs: bound,
    lines: {
      held: GO_MESSAGES.heldByAnother,
      failed: GO_MESSAGES.acquireFailed,
    },
  });
  let backoff = Math.min(500, heartbeatMs);
  while (!signal.aborted) {
    const sent = {
      sentAt: clock.now(),
      sentAtBoot: clock.bootNow(),
      sentAtWall: clock.wallNow(),
    };
    let outcome: GrantOutcome;
    {
      using call = bounded(clock, bound, signal);
      outcome = await client.acquire(holder, ttlSeconds, call.signal);
    }
    let wait = heartbeatMs;
    if (outcome.kind === "acquired" || outcome.kind === "not-acquired") {
      backoff = Math.min(500, heartbeatMs);
    } else if (outcome.kind !== "aborted") {
      const fix = configFix(outcome) ?? statusFix(outcome);
      if (fix !== undefined && o.endOnFix) {
        return { last: describeFailure(outcome), fix };
      }
      wait = backoff * (0.5 + random() / 2);
      backoff = Math.min(backoff * 2, heartbeatMs);
    }
    const a = attempts.record(outcome, sent.sentAt, wait);
    if (a.kind === "cancelled") break;
    if (a.kind === "shared") wait = clock.now() - sent.sentAt + a.quietMs;
    if (a.kind === "granted") {
      const closesAt = sent.sentAt + ttlSeconds * 1000 - o.enforceLeadMs;
      if (clock.now() < closesAt) return { lease: { token: a.token, ...sent } };
      // An Acquire by the live holder keeps the token and acts as a renew.
      attempts.asked(sent.sentAt);
      o.logger.warn(
        "the lease was granted too late to use; confirming it again",
        { fencing_token: a.token },
      );
      continue;
    }
    await clock.sleep(sent.sentAt + wait - clock.now(), signal);
  }
  return { last: attempts.last };
}
