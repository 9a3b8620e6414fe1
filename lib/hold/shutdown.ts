/**
 * The renewer's last act: giving the lease back at shutdown without letting
 * the old workload outlive the next holder's start.
 *
 * A SIGTERM usually reaches the sidecar after the main containers have
 * stopped (native sidecars stop last), but not always: an in-place update of
 * the sidecar container or a manual kill stops it alone, while the workload
 * runs on. The moment the lease is released another pod may start, so the
 * release waits until the workload is known to be stopped (signal mode: no
 * target left and every due SIGKILL sent), or else until the enforcement
 * lead has passed since the permission closed: the lead is, by its definition,
 * the time the liveness probe (or the signal grace) needs to stop the workload.
 * When the lease's own deadline comes first there is nothing to gain: it
 * expires on its own.
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { Clock } from "../state/clock.ts";
import type { Enforcer, StopEvidence } from "../enforce/enforcer.ts";
import { describeFailure, type LeaseClient } from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";

/** What `waitForStop` needs. */
export interface StopWaitOptions {
  /** The enforcer that applied the permission's close. */
  enforcer: Enforcer;
  /** The renewer's clock. */
  clock: Clock;
  /** The enforcement lead (ms). */
  enforceLeadMs: number;
}

/**
 * Waits until the workload is known to be stopped, at most until the
 * enforcement lead has passed since `closedAt`.
 *
 * @param o The enforcer, clock and lead.
 * @param closedAt Monotonic ms at which the permission closed.
 * @returns What the enforcer knows when the wait ends.
 */
function waitForStop(
  o: StopWaitOptions,
  closedAt: number,
): Promise<StopEvidence> {
  const left = Math.max(0, closedAt + o.enforceLeadMs - o.clock.now());
  return o.enforcer.workloadStopped(o.clock.timeout(left));
}

/** What {@linkcode release} needs. */
export interface ReleaseOptions {
  /** The lease RPCs. */
  client: LeaseClient;
  /** The holder identity the lease is held for. */
  holder: string;
  /** The fencing token to release. */
  token: number;
  /** The renewer's clock. */
  clock: Clock;
  /** Where the outcome goes. */
  logger: Logger;
  /**
   * Whether this is the release at shutdown (logged with the Go helper's
   * words for it); false for a release while running (a reacquired lease
   * the state volume refused). Default true.
   */
  atShutdown?: boolean;
  /** Bound on the Release RPC (ms). */
  releaseTimeoutMs: number;
}

/**
 * Sends one Release, bounded by `releaseTimeoutMs` and deliberately not tied
 * to the shutdown signal (a second SIGTERM must not cut it short), and logs
 * the outcome.
 *
 * @param o The client, holder, token and bound.
 */
export async function release(o: ReleaseOptions): Promise<void> {
  const outcome = await o.client.release(
    o.holder,
    o.token,
    o.clock.timeout(o.releaseTimeoutMs),
  );
  const go = o.atShutdown !== false;
  if (outcome.kind === "released") {
    o.logger.info(go ? GO_MESSAGES.released : "lease released", {
      fencing_token: o.token,
    });
  } else if (outcome.kind === "conflict") {
    o.logger.info(
      go
        ? GO_MESSAGES.releaseConflict
        : "lease already belongs to another holder; nothing to release",
      { fencing_token: o.token },
    );
  } else {
    o.logger.warn(
      go
        ? GO_MESSAGES.releaseFailed
        : "lease release failed; it will expire on its own",
      {
        error: describeFailure(outcome),
        ...(go ? { detail: "the lease expires on its own" } : {}),
        fencing_token: o.token,
      },
    );
  }
}

/** Options for {@linkcode shutdownRelease}. */
export interface ShutdownReleaseOptions
  extends StopWaitOptions, ReleaseOptions {
  /** Whether to release: configured to, and the lease is held. */
  held: boolean;
  /** Why it is not held, when that is more than "the lease is not held". */
  notHeldReason?: string;
  /** Whether release on shutdown is configured (for the log line). */
  releaseOnShutdown: boolean;
  /** Whether the permission is open now (only looked at when not releasing). */
  permissionOpen: boolean;
  /** Monotonic ms at which the permission closed. */
  closedAt: number;
  /** Monotonic ms of the local lease deadline, when confirmed. */
  deadline: number | undefined;
  /**
   * Keep the lease when the enforcer says the marker could not be removed
   * (`StopEvidence.markerLeft`); default true. False for the release after
   * a refused token write, whose next tick would otherwise extend the kept
   * lease for no one, tick after tick.
   */
  keepWhenMarkerLeft?: boolean;
}

/**
 * Releases the lease once that is safe (see the module doc); lets it expire
 * when its deadline passes first. Logs which, and why. Without a release,
 * still waits (at most the lead) while the permission is closed, so a pending
 * SIGKILL lands before the enforcer is disposed.
 *
 * @param o The enforcer, clock, lead, client and when the permission
 * closed; the permission must be closed already when `held`.
 */
export async function shutdownRelease(
  o: ShutdownReleaseOptions,
): Promise<void> {
  const { clock, logger } = o;
  if (!o.held) {
    if (!o.permissionOpen) await waitForStop(o, o.closedAt);
    logger.info(GO_MESSAGES.noRelease, {
      reason: !o.releaseOnShutdown
        ? "release on shutdown is off"
        : o.notHeldReason ?? "the lease is not held",
    });
    return;
  }
  const evidence = await waitForStop(o, o.closedAt);
  if (evidence.markerLeft && o.keepWhenMarkerLeft !== false) {
    logger.error(
      "not releasing the lease: the health marker could not be removed, so the workload's liveness probe may pass until the deadline written in it; the lease expires on its own",
      { fencing_token: o.token },
    );
    return;
  }
  let why = "the workload is stopped";
  if (!evidence.stopped) {
    const wait = o.closedAt + o.enforceLeadMs - clock.now();
    if (wait > 0) {
      logger.info(
        "waiting for the enforcement lead to pass before releasing the lease",
        { detail: evidence.detail, wait_ms: Math.ceil(wait) },
      );
      await clock.sleep(wait);
    }
    why = "the enforcement lead has passed since the gate closed";
    if (o.deadline !== undefined && clock.now() >= o.deadline) {
      logger.warn(
        "not releasing the lease: its deadline passed before the workload was known to be stopped; it expires on its own",
        { detail: evidence.detail, fencing_token: o.token },
      );
      return;
    }
  }
  logger.info(`releasing the lease: ${why}`, {
    detail: evidence.detail,
    fencing_token: o.token,
  });
  await release(o);
}
