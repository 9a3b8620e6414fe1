/**
 * The Acquires of a process that does not hold the lease (the first acquire
 * of `acquire` and `run`, the sidecar's reacquire), each read in the light
 * of the ones before. The server answers a live holder's Acquire like a
 * Renew, so two processes under one holder identity would both be told they
 * hold the lease: a grant that extended an older one is another process's,
 * unless one of our unanswered Acquires explains it (by the server's own
 * times, whatever the skew). A rejection no wait heals is retried (a rotated
 * key heals it) but said at ERROR with what to do, once a minute; so is an
 * outage past a minute.
 *
 * @module
 */
import {
  configFix,
  describeFailure,
  grantAgeNs,
  type GrantOutcome,
  isPersistentFailure,
  type LeaseFailure,
  type LeaseRecord,
} from "../lease/rpc.ts";
import type { Clock } from "../state/clock.ts";
import type { Logger } from "../obs/log.ts";
import { formatDurationMs } from "../state/marker.ts";

/** How often an ERROR that goes on is said again. */
export const REPEAT_ERROR_MS = 60_000;

export const SHARED_HOLDER_MESSAGE =
  "the lease is already held under this holder identity by another process or pod; " +
  "waiting until it is released or expires (give every instance its own holder identity)";
export const REJECTION_MESSAGE =
  "the API server rejects the acquire request; retrying, but this does not heal by waiting: fix what the error names";
export const UNUSABLE_SERVER_MESSAGE =
  "the API server cannot be used as configured; retrying, but this does not heal by waiting: apply the fix";
export const OUTAGE_MESSAGE =
  "the API server has not answered usably for over a minute; still retrying";

/**
 * The gap between `acquiredAt` and the renewal an answer reports from which
 * it is an extension: a fresh grant has 0, or microseconds from a server
 * that reads its clock twice (docs/known-limits.md).
 */
const EXTENSION_MIN_GAP_NS = 1_000_000n;

/** What one Acquire's answer means to a process that does not hold the lease. */
export type Attempt =
  | { kind: "granted"; token: number; lease: LeaseRecord }
  /** Another process's under this identity: send nothing for `quietMs` (each Acquire would extend it). */
  | { kind: "shared"; quietMs: number }
  | { kind: "held" }
  | { kind: "failed" }
  | { kind: "cancelled" };

/** Options for {@linkcode Attempts}. */
export interface AttemptsOptions {
  ttlSeconds: number;
  clock: Clock;
  logger: Logger;
  /**
   * Refuse a grant that extends another process's under this identity;
   * false where the identity names this process alone (the sidecar's
   * derived holder) or is shared by design (startup-gate admits a workload).
   */
  guardSharedHolder: boolean;
  /** A token this process holds, asked only when a grant looks like another's: a grant of it is ours. */
  ownToken?: () => number;
  boundMs: number;
  /** The Go helper's lines for "held by another" and a failure. */
  lines: { held: string; failed: string };
}

/** Records a process's Acquires and says their answers; see the module doc. */
export class Attempts {
  #o: AttemptsOptions;
  /** What the last answer met, for the line that ends a wait. */
  last: string | undefined;
  /** Our Acquires that may have been granted unseen: the first, and how long such a grant lives. */
  #askedSince: number | undefined;
  #askedUntil = -Infinity;
  #failingSince: number | undefined;
  #outageSaidAt = -Infinity;
  /** The rejection said last (without its request id: each has its own), when, and how many since. */
  #said: string | undefined;
  #saidAt = 0;
  #unsaid = 0;

  constructor(o: AttemptsOptions) {
    this.#o = o;
  }

  /** @param sentAt When an Acquire was sent that may have been granted unseen (no answer, or one unused). */
  asked(sentAt: number): void {
    if (this.#askedSince === undefined || sentAt > this.#askedUntil) {
      this.#askedSince = sentAt;
    }
    this.#askedUntil = sentAt + this.#o.boundMs + this.#o.ttlSeconds * 1000;
  }

  /**
   * Records one Acquire's answer and logs it.
   *
   * @param outcome The answer.
   * @param sentAt When the Acquire was sent.
   * @param retryInMs When the next attempt goes.
   * @returns What the answer means.
   */
  record(outcome: GrantOutcome, sentAt: number, retryInMs: number): Attempt {
    const { logger, lines, ttlSeconds } = this.#o;
    if (outcome.kind === "aborted") return { kind: "cancelled" };
    if (outcome.kind !== "acquired" && outcome.kind !== "not-acquired") {
      return this.#failed(outcome, sentAt, Math.round(retryInMs));
    }
    this.#failingSince = undefined;
    this.#outageSaidAt = -Infinity;
    this.#said = undefined;
    const { lease } = outcome;
    if (outcome.kind === "not-acquired") {
      this.#askedSince = undefined; // nothing of ours was granted
      this.last =
        `the lease is held by ${lease.holder} (fencing token ${lease.fencingToken})`;
      logger.info(lines.held, {
        current_holder: lease.holder,
        current_fencing_token: lease.fencingToken,
        retry_in_ms: Math.round(retryInMs),
        expires_at: lease.expiresAt,
      });
      return { kind: "held" };
    }
    if (
      this.#o.guardSharedHolder && this.#anothers(lease, sentAt) &&
      lease.fencingToken !== this.#o.ownToken?.()
    ) {
      this.last = SHARED_HOLDER_MESSAGE;
      logger.warn(SHARED_HOLDER_MESSAGE, {
        current_fencing_token: lease.fencingToken,
        acquired_at: lease.acquiredAt,
      });
      this.#askedSince = undefined;
      // Unless its holder renews it, it expires within a TTL and a second.
      return { kind: "shared", quietMs: ttlSeconds * 1000 + 1000 };
    }
    return { kind: "granted", token: lease.fencingToken, lease };
  }

  /**
   * Whether a grant extended one none of our asks explains: ours is no
   * older than our first unanswered ask (allowing 1 % and 50 ms for the two
   * clocks) and alive only a TTL past the last.
   */
  #anothers(lease: LeaseRecord, sentAt: number): boolean {
    const age = grantAgeNs(lease, this.#o.ttlSeconds);
    if (age === undefined || age < EXTENSION_MIN_GAP_NS) return false;
    if (this.#askedSince === undefined || sentAt > this.#askedUntil) {
      return true;
    }
    const elapsed = BigInt(
      Math.ceil((this.#o.clock.now() - this.#askedSince) * 1e6),
    );
    return age > elapsed + elapsed / 100n + 50_000_000n;
  }

  #failed(failure: LeaseFailure, sentAt: number, retryInMs: number): Attempt {
    const { clock, logger, lines } = this.#o;
    // No answer, or one we could not read: the server may have granted it.
    if (
      failure.kind === "timeout" || failure.kind === "transport-error" ||
      failure.kind === "bad-response" ||
      (failure.kind === "server-error" && failure.status >= 500)
    ) this.asked(sentAt);
    this.#failingSince ??= sentAt;
    this.last = describeFailure(failure);
    const failingMs = clock.now() - this.#failingSince;
    const fix = configFix(failure);
    logger.warn(lines.failed, {
      error: describeFailure(failure),
      retry_in_ms: retryInMs,
      fix,
      failing_for: formatDurationMs(failingMs),
    });
    if (fix !== undefined || isPersistentFailure(failure)) {
      this.rejected(failure, retryInMs);
      return { kind: "failed" };
    }
    this.#said = undefined;
    if (
      failingMs >= REPEAT_ERROR_MS &&
      clock.now() - this.#outageSaidAt >= REPEAT_ERROR_MS
    ) {
      this.#outageSaidAt = clock.now();
      logger.error(OUTAGE_MESSAGE, {
        error: describeFailure(failure),
        failing_for: formatDurationMs(failingMs),
      });
    }
    return { kind: "failed" };
  }

  /**
   * Says a rejection no wait heals at ERROR: the first (or the first with
   * another text) at once, then one line a minute counting those between.
   * Also the renewer's, for a renewal failure that names its fix.
   */
  rejected(failure: LeaseFailure, retryInMs: number): void {
    const now = this.#o.clock.now();
    const said = describeFailure(
      { ...failure, requestId: undefined } as LeaseFailure,
    );
    if (said === this.#said && now - this.#saidAt < REPEAT_ERROR_MS) {
      this.#unsaid++;
      return;
    }
    const fix = configFix(failure);
    this.#o.logger.error(fix ? UNUSABLE_SERVER_MESSAGE : REJECTION_MESSAGE, {
      error: describeFailure(failure),
      fix,
      retry_in_ms: retryInMs,
      rejected_since_last_line: this.#unsaid || undefined,
    });
    this.#said = said;
    this.#saidAt = now;
    this.#unsaid = 0;
  }

  /** The lease is settled (ours): earlier asks explain nothing, the next rejection is news. */
  forget(): void {
    this.#askedSince = undefined;
    this.#said = undefined;
    this.#unsaid = 0;
  }
}
