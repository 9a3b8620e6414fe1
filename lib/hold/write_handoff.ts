/**
 * Writing the handoff after an acquisition: holder, token and health marker
 * written to the state directory (and the probe installed) for the roles
 * that come next, the sidecar and the probe, or `run`'s own renewer. When
 * the volume cannot be written the lease is given back at once, so the
 * standby does not wait a whole TTL for a lease nobody will renew. The
 * renewer reads the handoff back with `readHandoff` (renewer_store.ts).
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import type { Config } from "../config/config.ts";
import { deadlineFrom, permissionClosesAt } from "./deadline.ts";
import type { AcquiredLease } from "./acquire_loop.ts";
import { describeFailure, type LeaseClient } from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";
import type { MarkerDeadlines } from "../state/marker.ts";
import type { StateDir } from "../state/state_dir.ts";

/**
 * The marker `acquire` hands over: in runtime-singleton mode it carries the
 * deadline of this acquisition, so the workload cannot outlive the lease even
 * if the sidecar never starts; in startup-gate mode nobody renews, so it
 * carries none and only its presence counts.
 */
export function handoffMarker(
  config: Pick<Config, "mode" | "ttlSeconds" | "enforceLeadMs">,
  sent: Pick<AcquiredLease, "sentAtBoot" | "sentAtWall">,
): MarkerDeadlines | undefined {
  if (config.mode === "startup-gate") return undefined;
  const leaseDeadlineBootMs = deadlineFrom(sent.sentAtBoot, config.ttlSeconds);
  const leaseDeadlineWallMs = deadlineFrom(sent.sentAtWall, config.ttlSeconds);
  return {
    leaseDeadlineBootMs,
    gateClosesBootMs: permissionClosesAt(
      leaseDeadlineBootMs,
      config.enforceLeadMs,
    ),
    leaseDeadlineWallMs,
    gateClosesWallMs: permissionClosesAt(
      leaseDeadlineWallMs,
      config.enforceLeadMs,
    ),
  };
}

/** Options for {@linkcode writeHandoff}. */
export interface WriteHandoffOptions {
  /** The state directory to write. */
  state: StateDir;
  /** Mode, TTL, lead (for the marker), holder and state directory (for messages). */
  config: Pick<
    Config,
    "mode" | "ttlSeconds" | "enforceLeadMs" | "holder" | "stateDir"
  >;
  /** The lease just acquired. */
  lease: AcquiredLease;
  /** To release the lease when the state cannot be written. */
  client: LeaseClient;
  /** Bounds that release. */
  clock: Clock;
  /** Reports a failure. */
  logger: Logger;
  /**
   * Also install the probe `<state>/check`, last (the init container does,
   * with this function; `run` does not: false).
   */
  installCheck: false | (() => Promise<void>);
}

/**
 * Writes holder, token and marker (and the probe) for the roles that come
 * next. When the volume cannot be written the marker is removed and the
 * lease released at once (bounded, 5 s), so the standby does not wait a
 * whole TTL for a lease nobody will renew; returns false then.
 */
export async function writeHandoff(o: WriteHandoffOptions): Promise<boolean> {
  const { state, config, lease, client, clock, logger } = o;
  try {
    await state.writeHolder(config.holder);
    await state.writeToken(lease.token);
    await state.writeMarker(handoffMarker(config, lease));
    if (o.installCheck) await o.installCheck();
    return true;
  } catch (e) {
    logger.error("cannot write the state volume; releasing the lease", {
      error: e,
      state_dir: config.stateDir,
      fencing_token: lease.token,
    });
    // A marker written before the failure would pass the probe (and
    // `status`) for a lease given back; one that stays keeps the lease.
    try {
      await state.removeMarker();
    } catch (r) {
      logger.error(
        "not releasing the lease: the health marker in the state directory cannot be removed, so the probe may keep passing on it; the lease expires on its own",
        { error: r, fencing_token: lease.token },
      );
      return false;
    }
    const released = await client.release(
      config.holder,
      lease.token,
      clock.timeout(5_000),
    );
    if (released.kind !== "released") {
      logger.warn("release failed; the lease expires on its own", {
        error: describeFailure(released),
      });
    }
    return false;
  }
}
