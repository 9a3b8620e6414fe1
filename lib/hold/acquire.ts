/** Getting the lease: the acquire loop of `acquire` (the init container) and `run`. @module */
import { Attempts } from "./attempts.ts";
import { bounded } from "../state/clock.ts";
import {
  configFix,
  DEFAULT_REQUEST_TIMEOUT_MS,
  describeFailure,
  type GrantOutcome,
} from "../lease/rpc.ts";
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { LeaseParams } from "./lease.ts";

/** A failure no wait can heal, met with `endOnFix`: the caller says the fix and ends. */
export class UnusableServerError extends Error {
  /** Says `detail`, the failure, and `fix`, what to change. */
  constructor(readonly fix: string, readonly detail: string) {
    super(`${detail}; ${fix}`);
    this.name = "UnusableServerError";
  }
}

/** A lease the caller now holds: its token, and when its Acquire was sent on the three clocks. */
export interface AcquiredLease {
  token: number;
  sentAt: number;
  sentAtBoot: number;
  sentAtWall: number;
}

/** Options for {@linkcode acquireLease}. */
export interface AcquireOptions extends LeaseParams {
  /** A stop signal, or `--acquire-timeout`. */
  signal: AbortSignal;
  guardSharedHolder: boolean;
  /** Throw {@linkcode UnusableServerError} for a failure that names its fix (`run`). */
  endOnFix?: boolean;
  /** Jitter source in [0, 1), for exact tests. */
  random?: () => number;
}

/**
 * Retries Acquire until it succeeds or `signal` aborts. "Held by another" is
 * polled at the heartbeat, as the Go helper does; errors back off from 0.5 s
 * to the heartbeat with jitter, so pods waiting on a broken server do not
 * hammer it in step. A grant that comes after the permission it gives would
 * have closed is of no use, so it is confirmed again at once.
 *
 * @returns The lease, or undefined when `signal` aborted first.
 * @throws {UnusableServerError} With `endOnFix`, on a failure no wait heals.
 */
export async function acquireLease(
  o: AcquireOptions,
): Promise<AcquiredLease | undefined> {
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
      const fix = configFix(outcome);
      if (fix !== undefined && o.endOnFix) {
        throw new UnusableServerError(fix, describeFailure(outcome));
      }
      wait = backoff * (0.5 + random() / 2);
      backoff = Math.min(backoff * 2, heartbeatMs);
    }
    const a = attempts.record(outcome, sent.sentAt, wait);
    if (a.kind === "cancelled") return undefined;
    if (a.kind === "shared") wait = clock.now() - sent.sentAt + a.quietMs;
    if (a.kind === "granted") {
      const closesAt = sent.sentAt + ttlSeconds * 1000 - o.enforceLeadMs;
      if (clock.now() < closesAt) return { token: a.token, ...sent };
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
  return undefined;
}
