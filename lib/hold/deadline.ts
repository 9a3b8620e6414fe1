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

/** The lease deadline an answer confirms: send time plus the TTL, on the monotonic clock. */
export function deadlineFrom(sentAt: number, ttlSeconds: number): number {
  return sentAt + ttlSeconds * 1000;
}

/**
 * When the gate closes for a deadline: early enough that the workload is
 * stopped (probe period + timeout + grace, or the signal grace) before the
 * server may give the lease to someone else.
 */
export function gateClosesAt(deadline: number, enforceLeadMs: number): number {
  return deadline - enforceLeadMs;
}

/**
 * How long one renew may take: never past the next heartbeat and never past
 * the lease deadline, so a hung server cannot hold the renewer beyond the
 * point where it must act.
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
  /** The lease is gone now (409, `acquired:false`, or a token the server should never change). */
  | { kind: "lost"; reason: string }
  /** No answer that counts; the lease stands until its local deadline. */
  | { kind: "unconfirmed"; reason: string }
  /** The caller is shutting down. */
  | { kind: "cancelled" };

/**
 * Classifies a Renew answer. Only a definite answer from the server loses
 * the lease at once; every failure to get one (5xx, timeout, network) leaves
 * the local deadline in charge, because the lease may well still be ours.
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
          reason:
            `the server renewed with fencing token ${outcome.lease.fencingToken}, ` +
            `not the held ${heldToken}; treating the lease as lost`,
        };
      }
      return { kind: "confirmed" };
    case "not-acquired":
      return {
        kind: "lost",
        reason: outcome.lease.holder
          ? `the server refused the renewal: the lease is held by ${outcome.lease.holder}`
          : "the server refused the renewal: the lease expired or was released",
      };
    case "conflict":
      return { kind: "lost", reason: describeFailure(outcome) };
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

/** Classifies an Acquire answer for the acquire loop and the renewer's reacquire. */
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
 * Whether an `acquired:true` answer extended a lease that this same holder
 * identity already held, rather than granting it afresh. The server answers
 * a live holder's Acquire like a Renew (same token, `acquiredAt` kept), so
 * two processes that share one holder identity would both be told they hold
 * the lease. A fresh grant has `acquiredAt` equal to the renewal time
 * (`expiresAt` minus the TTL just sent); an extension has an older one. Both
 * times are the server's, so clock skew does not matter. Unknown or zero
 * times (old servers) answer false.
 */
export function extendedExistingGrant(
  lease: LeaseRecord,
  ttlSeconds: number,
): boolean {
  const acquiredAt = Date.parse(lease.acquiredAt);
  const expiresAt = Date.parse(lease.expiresAt);
  if (!Number.isFinite(acquiredAt) || !Number.isFinite(expiresAt)) return false;
  if (acquiredAt <= 0 || expiresAt <= 0) return false; // year 1: unset
  const renewedAt = expiresAt - ttlSeconds * 1000;
  // A few milliseconds of tolerance for a server that reads its clock twice.
  return renewedAt - acquiredAt > 5;
}

/**
 * Whether the server may have granted a request that ended this way (no
 * answer, or one we could not use), so that an extension of our own grant
 * seen next is not mistaken for another process's.
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
export const SHARED_HOLDER_MESSAGE =
  "the lease is already held under this holder identity by another process or pod; " +
  "waiting until it is released or expires (give every instance its own holder identity)";

/**
 * How long to send no Acquire after such an answer: every Acquire would
 * extend the other process's lease for it, and after one TTL (plus a second
 * for the server's clock to pass it) that lease has expired unless its
 * holder renewed it itself.
 */
export function sharedHolderQuietMs(ttlSeconds: number): number {
  return ttlSeconds * 1000 + 1000;
}
