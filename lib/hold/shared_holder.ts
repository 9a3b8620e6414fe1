/**
 * One holder identity, two processes: telling an Acquire that extended our
 * own grant from one that extended another process's, on the server's clock.
 *
 * The server answers a live holder's Acquire like a Renew (same token,
 * `acquiredAt` kept), so two processes that share one holder identity (every
 * pod of a `startup-gate` workload, or a misconfigured fixed identity) would
 * both be told they hold the lease. These pure functions and the
 * {@linkcode PossibleGrant} record are what `acquire` (`acquire_loop.ts`) and
 * the sidecar's reacquire (`reacquire.ts`) decide with.
 *
 * @module
 */
import type { LeaseFailure, LeaseRecord } from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";

/**
 * The smallest gap between a lease's `acquiredAt` and the renewal an answer
 * reports that counts as an extension (see {@linkcode extendedExistingGrant}),
 * in nanoseconds. A server that reads its clock once per request (as the dev
 * server does) gives a fresh grant a gap of exactly 0; the tolerance covers
 * one that reads it twice (microseconds apart), and it is the window left to
 * two processes that share one holder identity (see docs/known-limits.md):
 * Acquires that reach the server less than 1 ms apart both succeed.
 */
export const EXTENSION_MIN_GAP_NS = 1_000_000n;

const RFC3339 =
  /^(\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * Parses an RFC 3339 time to nanoseconds since the epoch, keeping all nine
 * fractional digits the server may send (`Date.parse` keeps three, which
 * would hide a gap of up to a millisecond). Returns `undefined` for anything
 * that is not RFC 3339.
 *
 * @param text A time as the server sends it, e.g. `2026-05-07T00:00:00.123456789Z`.
 * @returns Nanoseconds since 1970-01-01T00:00:00Z (negative before it).
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(parseTimeNs("1970-01-01T00:00:01.5Z"), 1_500_000_000n);
 * ```
 */
export function parseTimeNs(text: string): bigint | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  const whole = Date.parse(`${m[1].toUpperCase()}${m[3].toUpperCase()}`);
  if (!Number.isFinite(whole)) return undefined;
  const frac = BigInt((m[2] ?? "").padEnd(9, "0"));
  return BigInt(whole) * 1_000_000n + frac;
}

/**
 * Whether an `acquired:true` answer extended a lease that this same holder
 * identity already held, rather than granting it afresh. The server answers
 * a live holder's Acquire like a Renew (same token, `acquiredAt` kept), so
 * two processes that share one holder identity would both be told they hold
 * the lease. A fresh grant has `acquiredAt` equal to the renewal time
 * (`expiresAt` minus the TTL just sent); an extension has an older one, by at
 * least {@linkcode EXTENSION_MIN_GAP_NS}. Both times are the server's, so
 * clock skew does not matter. Unknown or zero times (old servers) answer
 * false.
 *
 * @param lease The record of an `acquired:true` answer.
 * @param ttlSeconds The TTL the Acquire sent.
 * @returns True when the answer extended an earlier grant.
 */
export function extendedExistingGrant(
  lease: LeaseRecord,
  ttlSeconds: number,
): boolean {
  const age = grantAgeNs(lease, ttlSeconds);
  return age !== undefined && age >= EXTENSION_MIN_GAP_NS;
}

/**
 * The grant's age on the server's clock when this answer renewed it
 * (`expiresAt` minus the TTL, less `acquiredAt`); undefined when either time
 * is unknown or unset (year 1, old servers).
 */
function grantAgeNs(
  lease: LeaseRecord,
  ttlSeconds: number,
): bigint | undefined {
  const acquiredAt = parseTimeNs(lease.acquiredAt);
  const expiresAt = parseTimeNs(lease.expiresAt);
  if (acquiredAt === undefined || expiresAt === undefined) return undefined;
  if (acquiredAt <= 0n || expiresAt <= 0n) return undefined;
  return expiresAt - BigInt(ttlSeconds) * 1_000_000_000n - acquiredAt;
}

/** The part of {@linkcode couldBeOurGrant}'s slack that does not grow with the interval. */
const GRANT_AGE_SLACK_NS = 50_000_000n;

/**
 * Whether an answer that extended an earlier grant ({@linkcode
 * extendedExistingGrant}) can be extending our own: one of our requests
 * that may have been granted without our learning it, the earliest sent at
 * `sinceMs`. The lease's age on the server (its renewal time, `expiresAt`
 * minus the TTL, less `acquiredAt`: both the server's times) cannot be
 * longer than the time since that send on our clock, since the server saw
 * the request after we sent it and answered this one before we read it. An
 * older grant is another process's, made before we asked. The comparison
 * spans two clocks, so it allows 1 % of the interval and 50 ms.
 *
 * @param lease The record of the extension answer.
 * @param ttlSeconds The TTL the Acquire sent.
 * @param sinceMs Monotonic ms when the earliest request that may have been
 * granted was sent.
 * @param nowMs Monotonic ms now (the answer has been read).
 * @returns False when the grant is older than our asking.
 */
export function couldBeOurGrant(
  lease: LeaseRecord,
  ttlSeconds: number,
  sinceMs: number,
  nowMs: number,
): boolean {
  const ageNs = grantAgeNs(lease, ttlSeconds);
  if (ageNs === undefined) return true;
  const elapsedNs = BigInt(Math.ceil((nowMs - sinceMs) * 1e6));
  // The two intervals are measured on two clocks: allow a server clock that
  // runs fast or slews (1 %), and coarse timestamps (50 ms). A grant made
  // before we asked is normally older by far more.
  return ageNs <= elapsedNs + elapsedNs / 100n + GRANT_AGE_SLACK_NS;
}

/**
 * Our Acquires that may have been granted without our learning it (no
 * answer, or one we could not use), so that an extension of our own grant
 * seen next is not mistaken for another process's, nor another process's
 * for ours. Such a grant is ours only if it is no older than our first such
 * ask ({@linkcode couldBeOurGrant}), and only while it can still be alive:
 * unrenewed, it expired one TTL after the last such ask could have reached
 * the server.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const possible = new PossibleGrant(30);
 * // An Acquire sent at 1_000 ms (monotonic) timed out; the server saw it
 * // before 16_000 ms or never.
 * possible.asked(1_000, 15_000);
 * // The next answer, read at 3_000 ms, extended a grant made 1 s before its
 * // renewal: younger than our ask, so it may be ours.
 * const ours = {
 *   holder: "east/prod:pod:p1",
 *   fencingToken: 4,
 *   acquiredAt: "2026-01-01T00:00:00Z",
 *   expiresAt: "2026-01-01T00:00:31Z",
 * };
 * assert.equal(possible.explains(ours, 2_500, 3_000), true);
 * // A grant a minute older than our ask is another process's.
 * const older = { ...ours, acquiredAt: "2025-12-31T23:59:00Z" };
 * assert.equal(possible.explains(older, 2_500, 3_000), false);
 * ```
 */
export class PossibleGrant {
  #ttlSeconds: number;
  #since: number | undefined;
  #until = -Infinity;

  /** @param ttlSeconds The TTL every Acquire sends. */
  constructor(ttlSeconds: number) {
    this.#ttlSeconds = ttlSeconds;
  }

  /**
   * Records an Acquire that may have been granted.
   *
   * @param sentAt Monotonic ms when it was sent.
   * @param boundMs Its time bound: the server saw it before then, or never.
   */
  asked(sentAt: number, boundMs: number): void {
    // Earlier asks whose grant can no longer be alive explain nothing.
    if (this.#since === undefined || sentAt > this.#until) this.#since = sentAt;
    this.#until = sentAt + boundMs + this.#ttlSeconds * 1000;
  }

  /** Forgets them: the lease is settled (ours, or another holder's). */
  clear(): void {
    this.#since = undefined;
    this.#until = -Infinity;
  }

  /**
   * Whether an answer that extended an earlier grant can be extending one
   * of these.
   *
   * @param lease The extension answer's record.
   * @param sentAt Monotonic ms when the answered Acquire was sent.
   * @param nowMs Monotonic ms now (the answer has been read).
   * @returns True when that grant may be ours.
   */
  explains(lease: LeaseRecord, sentAt: number, nowMs: number): boolean {
    if (this.#since === undefined || sentAt > this.#until) return false;
    return couldBeOurGrant(lease, this.#ttlSeconds, this.#since, nowMs);
  }

  /**
   * Whether an `acquired:true` answer is another process's lease under
   * this holder identity: it extended an earlier grant
   * ({@linkcode extendedExistingGrant}) that none of our asks explains.
   * Says so at WARN ({@linkcode SHARED_HOLDER_MESSAGE}) and forgets the
   * asks when it is.
   *
   * @param lease The answer's record.
   * @param sentAt Monotonic ms when the answered Acquire was sent.
   * @param nowMs Monotonic ms now (the answer has been read).
   * @param logger Where the warning goes.
   * @returns True when the lease is another process's.
   */
  another(
    lease: LeaseRecord,
    sentAt: number,
    nowMs: number,
    logger: Logger,
  ): boolean {
    if (
      !extendedExistingGrant(lease, this.#ttlSeconds) ||
      this.explains(lease, sentAt, nowMs)
    ) return false;
    logger.warn(SHARED_HOLDER_MESSAGE, {
      current_fencing_token: lease.fencingToken,
      acquired_at: lease.acquiredAt,
    });
    this.clear();
    return true;
  }
}

/**
 * Whether the server may have granted a request that ended this way (no
 * answer, or one we could not use), so that an extension of our own grant
 * seen next is not mistaken for another process's.
 *
 * @param f How the Acquire failed.
 * @returns True when the server may have granted it.
 */
export function mayHaveBeenGranted(f: LeaseFailure): boolean {
  return f.kind === "timeout" || f.kind === "transport-error" ||
    f.kind === "bad-response" || (f.kind === "server-error" && f.status >= 500);
}

/**
 * What `acquire`, `run` and the sidecar log when another process holds the
 * lease under their holder identity (see {@linkcode extendedExistingGrant}),
 * one text so operators can search for one line.
 */
export const SHARED_HOLDER_MESSAGE: string =
  "the lease is already held under this holder identity by another process or pod; " +
  "waiting until it is released or expires (give every instance its own holder identity)";

/**
 * How long to send no Acquire after such an answer: every Acquire would
 * extend the other process's lease for it, and after one TTL (plus a second
 * for the server's clock to pass it) that lease has expired unless its
 * holder renewed it itself.
 *
 * @param ttlSeconds The TTL the Acquires carry.
 * @returns The quiet period in ms.
 */
export function sharedHolderQuietMs(ttlSeconds: number): number {
  return ttlSeconds * 1000 + 1000;
}
