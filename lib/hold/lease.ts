/**
 * A held lease seen locally, and its release. Its deadline is the moment the
 * last successful Renew/Acquire was *sent* plus the TTL, on this process's
 * monotonic clock: the server received the request later, so its expiry is
 * never earlier, whatever its clock says (`expiresAt` is ignored). The
 * workload's permission closes `enforceLeadMs` before it, so the workload
 * is stopped before the server may hand the lease over.
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";
import { bounded, type Clock } from "../state/clock.ts";
import type { Enforcer, StopEvidence } from "../enforce/enforcer.ts";
import { describeFailure, type LeaseClient } from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";
import {
  type MarkerDeadlines,
  WEBHOOK_PROBE_MAX_AGE_MS,
} from "../state/marker.ts";

/** What the acquire loop and the renewer work with (validated by the configuration). */
export interface LeaseParams {
  client: LeaseClient;
  /** The only identity this process acquires, renews or releases for. */
  holder: string;
  ttlSeconds: number;
  heartbeatMs: number;
  enforceLeadMs: number;
  clock: Clock;
  logger: Logger;
}

/** The renewer's state, for the health endpoint, the metrics and `run`. */
export interface RenewerStatus {
  permissionOpen: boolean;
  /** The fencing token held or last held (0: never held). */
  token: number;
  /** Monotonic ms, while the lease is confirmed. */
  permissionClosesAt?: number;
  deadline?: number;
  /** Why the permission is closed, in this project's words only (no server text). */
  reason?: string;
}

/** Told about every change; a throw is logged and goes no further. */
export interface RenewerObserver {
  changed?(status: RenewerStatus): void;
  reacquired?(token: number): void;
}

/** Two thirds of the probe's max-age: a third is left for a late timer and the probe's period. */
export const MARKER_REFRESH_MS = WEBHOOK_PROBE_MAX_AGE_MS * 2 / 3;

/**
 * Whether the open permission's marker, rewritten with its deadlines when no
 * renewal did (a heartbeat as long as the probe's `--max-age`, renewals
 * failing within the lease's time: the probe must not call a live sidecar
 * dead), may be written at `since`, and when again
 * ({@linkcode MARKER_REFRESH_MS} later): never after the permission's
 * `closesAt` less the probe's max-age, so that a probe that reads the mtime
 * alone (the Go helper's) stops the workload by the deadline.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.deepEqual(markerRewrite(0, 120_000), { write: true, next: 20_000 });
 * assert.deepEqual(markerRewrite(80_000, 120_000), { write: true, next: 90_000 });
 * assert.deepEqual(markerRewrite(90_000, 120_000), { write: true, next: Infinity });
 * assert.equal(markerRewrite(90_001, 120_000).write, false);
 * ```
 */
export function markerRewrite(
  since: number,
  closesAt: number,
): { write: boolean; next: number } {
  const last = closesAt - WEBHOOK_PROBE_MAX_AGE_MS;
  const next = since < last
    ? Math.min(since + MARKER_REFRESH_MS, last)
    : Infinity;
  return { write: since <= last, next };
}

/**
 * The deadlines the health marker carries for a lease `leftMs` from now,
 * given the boot-time clock (which the probe and a restarted sidecar read)
 * and the wall clock (in case the boot clock is not shared after all).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const d = markerDeadlines(20_000, 4_000, 500_000, 1_700_000_000_000);
 * assert.equal(d.leaseDeadlineBootMs, 520_000);
 * assert.equal(d.gateClosesBootMs, 516_000);
 * assert.equal(d.gateClosesWallMs, 1_700_000_016_000);
 * ```
 */
export function markerDeadlines(
  leftMs: number,
  enforceLeadMs: number,
  bootNow: number,
  wallNow: number,
): MarkerDeadlines {
  return {
    leaseDeadlineBootMs: bootNow + leftMs,
    gateClosesBootMs: bootNow + leftMs - enforceLeadMs,
    leaseDeadlineWallMs: wallNow + leftMs,
    gateClosesWallMs: wallNow + leftMs - enforceLeadMs,
  };
}

/**
 * Releases `token`, bounded and tied to no shutdown signal (a second
 * SIGTERM must not cut it short), and logs the outcome: in the Go helper's
 * words `atShutdown`, in this project's otherwise.
 */
export async function releaseLease(
  p: Pick<LeaseParams, "client" | "holder" | "clock" | "logger">,
  token: number,
  atShutdown: boolean,
): Promise<void> {
  const outcome = await p.client.release(
    p.holder,
    token,
    p.clock.timeout(5_000), // a slow server, within a pod's grace period
  );
  if (outcome.kind === "released") {
    p.logger.info(atShutdown ? GO_MESSAGES.released : "lease released", {
      fencing_token: token,
    });
  } else if (outcome.kind === "conflict") {
    p.logger.info(
      atShutdown
        ? GO_MESSAGES.releaseConflict
        : "lease already belongs to another holder; nothing to release",
      { fencing_token: token },
    );
  } else {
    p.logger.warn(
      atShutdown
        ? GO_MESSAGES.releaseFailed
        : "lease release failed; it will expire on its own",
      {
        error: describeFailure(outcome),
        ...(atShutdown ? { detail: "the lease expires on its own" } : {}),
        fencing_token: token,
      },
    );
  }
}

/**
 * Releases the lease once that is safe: the moment it is released another
 * pod may start, so only once the workload is known to be stopped, or else
 * once the lead (by its definition, how long stopping takes) has passed
 * since the permission closed and no stop the enforcer started is
 * unfinished. Lets the lease expire when its deadline comes first, or, for
 * a release while the loop runs, a shutdown.
 *
 * @param closedAt Monotonic ms the permission closed.
 * @param running The shutdown signal of a release while the loop runs.
 */
export async function releaseWhenSafe(
  p: LeaseParams & { enforcer: Enforcer },
  closedAt: number,
  token: number,
  deadline: number | undefined,
  running?: AbortSignal,
): Promise<void> {
  const { clock, logger, ttlSeconds, enforcer } = p;
  const leadLeft = () => closedAt + p.enforceLeadMs - clock.now();
  let ev = await stopWait(enforcer, clock, leadLeft(), running);
  // A marker left in place may pass the probe until the deadline in it. (After
  // a refused token write, kept, the next tick would extend it for no one.)
  if (ev.markerLeft && !running) {
    return logger.error(
      "not releasing the lease: the health marker could not be removed, so the workload's liveness probe may pass until the deadline written in it; the lease expires on its own",
      { fencing_token: token },
    );
  }
  if (!ev.stopped) {
    const wait = leadLeft();
    if (wait > 0) {
      logger.info(
        "waiting for the enforcement lead to pass before releasing the lease",
        { detail: ev.detail, wait_ms: Math.ceil(wait) },
      );
      await clock.sleep(wait, running);
    }
    // A stop the enforcer started (a SIGKILL still due) finishes first,
    // however long its grace: the next holder must not start beside it.
    const until = deadline ?? clock.now() + ttlSeconds * 1000;
    if (ev.stopping) {
      ev = await stopWait(enforcer, clock, until - clock.now(), running);
    }
    const unsafe = running?.aborted
      ? "shutting down before the workload was known to be stopped"
      : clock.now() >= (deadline ?? Infinity)
      ? "its deadline passed before the workload was known to be stopped"
      : ev.stopping && !ev.stopped
      ? "a stop of the workload has not finished by the lease's deadline"
      : undefined;
    if (unsafe !== undefined) {
      return logger.warn(
        `not releasing the lease: ${unsafe}; it expires on its own`,
        { detail: ev.detail, fencing_token: token },
      );
    }
  }
  logger.info(
    `releasing the lease: ${
      ev.stopped
        ? "the workload is stopped"
        : "the enforcement lead has passed since the gate closed"
    }`,
    { detail: ev.detail, fencing_token: token },
  );
  await releaseLease(p, token, !running);
}

/** What the enforcer knows of the workload within `ms` (or until `cut`). */
export async function stopWait(
  enforcer: Enforcer,
  clock: Clock,
  ms: number,
  cut?: AbortSignal,
): Promise<StopEvidence> {
  using w = bounded(clock, ms, ...(cut ? [cut] : []));
  return await enforcer.workloadStopped(w.signal);
}
