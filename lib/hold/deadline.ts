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
import { GO_MESSAGES } from "../obs/go_messages.ts";
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
 * import assert from "node:assert/strict";
 * assert.equal(deadlineFrom(1_000, 10), 11_000);
 * ```
 */
export function deadlineFrom(sentAt: number, ttlSeconds: number): number {
  return sentAt + ttlSeconds * 1000;
}

/**
 * When the permission closes for a deadline: early enough that the workload is
 * stopped (probe period + timeout + grace, or the signal grace) before the
 * server may give the lease to someone else.
 *
 * @param deadline The lease deadline (monotonic ms).
 * @param enforceLeadMs The enforcement lead.
 * @returns When the permission closes (the marker's `gate_closes_*`) (monotonic ms).
 */
export function permissionClosesAt(
  deadline: number,
  enforceLeadMs: number,
): number {
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
  const closes = permissionClosesAt(deadline, enforceLeadMs);
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
   * `/healthz` and the reason the permission closes with. `message` is the Go
   * helper's log message for the same event, when it has one.
   */
  | {
    kind: "lost";
    reason: string;
    summary: string;
    message?: string;
    holder?: string;
  }
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
        message: GO_MESSAGES.renewHeldByAnother,
        holder: outcome.lease.holder || undefined,
        reason: outcome.lease.holder
          ? `the server refused the renewal: the lease is held by ${outcome.lease.holder}`
          : "the server refused the renewal: the lease expired or was released",
      };
    case "conflict":
      return {
        kind: "lost",
        message: GO_MESSAGES.renewConflict,
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
