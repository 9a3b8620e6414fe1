/**
 * The local view of a held lease, as pure functions: when it ends, when the
 * workload must already be stopped, and what an RPC's answer means for it.
 *
 * The deadline is the moment the last successful Renew/Acquire was *sent*
 * plus the TTL, on this process's monotonic clock. The server received the
 * request after we sent it, so its own expiry is never earlier than ours,
 * whatever its clock says; `expiresAt` in the answer is therefore ignored.
 *
 * @module
 */
import {
  describeFailure,
  type GrantOutcome,
  type LeaseFailure,
  type LeaseRecord,
} from "../lease/rpc.ts";
import type { MarkerDeadlines } from "../state/marker.ts";

/**
 * The lease deadline an answer confirms: send time plus the TTL, on the monotonic clock.
 *
 * @param sentAt Monotonic ms when the request was sent.
 * @param ttlSeconds The TTL the request carried.
 * @returns The deadline in monotonic ms.
 * @example
 * ```ts
 * deadlineFrom(1_000, 10); // 11_000
 * ```
 */
export function deadlineFrom(sentAt: number, ttlSeconds: number): number {
  return sentAt + ttlSeconds * 1000;
}

/**
 * When the gate closes for a deadline: early enough that the workload is
 * stopped (probe period + timeout + grace, or the signal grace) before the
 * server may give the lease to someone else.
 *
 * @param deadline The lease deadline (monotonic ms).
 * @param enforceLeadMs The enforcement lead.
 * @returns When the gate closes (monotonic ms).
 */
export function gateClosesAt(deadline: number, enforceLeadMs: number): number {
  return deadline - enforceLeadMs;
}

/**
 * The deadlines the marker carries for a lease deadline on the monotonic
 * clock: the same moments on the boot-time clock (which the probe and a
 * restarted sidecar read) and on the wall clock (in case the boot clock is
 * not shared after all).
 *
 * @param deadline Monotonic ms of the lease deadline.
 * @param enforceLeadMs The enforcement lead.
 * @param now The monotonic clock now.
 * @param bootNow The boot-time clock now.
 * @param wallNow The wall clock now.
 * @returns The deadlines the health marker is written with.
 */
export function markerDeadlines(
  deadline: number,
  enforceLeadMs: number,
  now: number,
  bootNow: number,
  wallNow: number,
): MarkerDeadlines {
  const closes = gateClosesAt(deadline, enforceLeadMs);
  return {
    leaseDeadlineBootMs: bootNow + (deadline - now),
    gateClosesBootMs: bootNow + (closes - now),
    leaseDeadlineWallMs: wallNow + (deadline - now),
    gateClosesWallMs: wallNow + (closes - now),
  };
}

/**
 * How much of a handed-over lease is left, from the deadlines a health
 * marker carries (a restarted sidecar adopts them). The boot-time deadline
 * is on the clock every container of the node shares; the wall-clock copy,
 * when present, can only shorten it. Trusted only while it lies in the
 * future and no further than one TTL away.
 *
 * @param marker The deadlines read from the marker.
 * @param bootNow The boot-time clock now (ms).
 * @param wallNow The wall clock now (ms since the epoch).
 * @param ttlSeconds The configured TTL.
 * @returns Milliseconds left, or `undefined` when the marker cannot be trusted.
 */
export function adoptedDeadlineMs(
  marker: MarkerDeadlines,
  bootNow: number,
  wallNow: number,
  ttlSeconds: number,
): number | undefined {
  const left = Math.min(
    marker.leaseDeadlineBootMs - bootNow,
    marker.leaseDeadlineWallMs === undefined
      ? Infinity
      : marker.leaseDeadlineWallMs - wallNow,
  );
  return left > 0 && left <= ttlSeconds * 1000 ? left : undefined;
}

/**
 * How long one renew may take: never past the next heartbeat and never past
 * the lease deadline, so a hung server cannot hold the renewer beyond the
 * point where it must act.
 *
 * @param now The monotonic clock when the renew is sent.
 * @param heartbeatMs The heartbeat.
 * @param deadline The lease deadline, when confirmed.
 * @returns The bound in ms, never negative.
 */
export function renewBound(
  now: number,
  heartbeatMs: number,
  deadline: number | undefined,
): number {
  const untilDeadline = deadline === undefined ? heartbeatMs : deadline - now;
  return Math.max(0, Math.min(heartbeatMs, untilDeadline));
}

/** What a Renew answer means for a lease held with a known token. */
export type RenewVerdict =
  /** The server extended the lease; the new deadline counts from the send time. */
  | { kind: "confirmed" }
  /**
   * The lease is gone now (409, `acquired:false`, or a token the server
   * should never change). `reason` is for the log and may quote the server;
   * `summary` is in this project's words only, for the unauthenticated
   * `/healthz` and the gate's reason.
   */
  | { kind: "lost"; reason: string; summary: string }
  /** No answer that counts; the lease stands until its local deadline. */
  | { kind: "unconfirmed"; reason: string }
  /** The caller is shutting down. */
  | { kind: "cancelled" };

/**
 * Classifies a Renew answer. Only a definite answer from the server loses
 * the lease at once; every failure to get one (5xx, timeout, network) leaves
 * the local deadline in charge, because the lease may well still be ours.
 *
 * @param outcome The Renew's outcome.
 * @param heldToken The token the Renew was sent with.
 * @returns What it means for the held lease.
 */
export function classifyRenew(
  outcome: GrantOutcome,
  heldToken: number,
): RenewVerdict {
  switch (outcome.kind) {
    case "acquired":
      if (outcome.lease.fencingToken !== heldToken) {
        return {
          kind: "lost",
          summary: "the server renewed with another fencing token",
          reason:
            `the server renewed with fencing token ${outcome.lease.fencingToken}, ` +
            `not the held ${heldToken}; treating the lease as lost`,
        };
      }
      return { kind: "confirmed" };
    case "not-acquired":
      return {
        kind: "lost",
        summary: "the server refused the renewal",
        reason: outcome.lease.holder
          ? `the server refused the renewal: the lease is held by ${outcome.lease.holder}`
          : "the server refused the renewal: the lease expired or was released",
      };
    case "conflict":
      return {
        kind: "lost",
        summary:
          "the server answered 409: the lease belongs to another holder or token",
        reason: describeFailure(outcome),
      };
    case "aborted":
      return { kind: "cancelled" };
    default:
      return {
        kind: "unconfirmed",
        reason: describeFailure(outcome as LeaseFailure),
      };
  }
}

/** What an Acquire answer means for a caller that does not hold the lease. */
export type AcquireVerdict =
  /** Ours now, with this fencing token; `lease` is the server's record. */
  | { kind: "acquired"; token: number; lease: LeaseRecord }
  /** Another live holder has it; poll again at the heartbeat. */
  | { kind: "held"; holder: string; token: number }
  /** No usable answer; retry. */
  | { kind: "failed"; reason: string; failure: LeaseFailure }
  /** The caller is shutting down. */
  | { kind: "cancelled" };

/**
 * Classifies an Acquire answer for the acquire loop and the renewer's reacquire.
 *
 * @param outcome The Acquire's outcome.
 * @returns What it means for a caller that does not hold the lease.
 */
export function classifyAcquire(outcome: GrantOutcome): AcquireVerdict {
  switch (outcome.kind) {
    case "acquired":
      return {
        kind: "acquired",
        token: outcome.lease.fencingToken,
        lease: outcome.lease,
      };
    case "not-acquired":
      return {
        kind: "held",
        holder: outcome.lease.holder,
        token: outcome.lease.fencingToken,
      };
    case "aborted":
      return { kind: "cancelled" };
    default:
      return {
        kind: "failed",
        reason: describeFailure(outcome),
        failure: outcome,
      };
  }
}

/**
 * The smallest gap between a lease's `acquiredAt` and the renewal an answer
 * reports that counts as an extension (see {@linkcode extendedExistingGrant}),
 * in nanoseconds. A server that reads its clock once per request (as the dev
 * server does) gives a fresh grant a gap of exactly 0; the tolerance covers
 * one that reads it twice (microseconds apart), and it is the window left to
 * two processes that share one holder identity (see the README's Known
 * limits): Acquires that reach the server less than 1 ms apart both succeed.
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
 * parseTimeNs("1970-01-01T00:00:01.5Z"); // 1_500_000_000n
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
 * const possible = new PossibleGrant(30);
 * possible.asked(sentAt, boundMs); // a timeout
 * possible.explains(answer.lease, sentAt, clock.now()); // ours?
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
