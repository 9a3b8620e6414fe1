/**
 * What the workload's permission (lib/hold/renewer.ts) does to the
 * workload. Closing it always removes the health marker first, so the main
 * container's liveness probe fails whatever else happens (the backstop);
 * `probe` mode ({@linkcode ProbeEnforcer}) does only that, `signal` mode
 * (signal.ts) also stops the workload's processes, and `run` stops its
 * command (lib/run/child_enforcer.ts).
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { Logger } from "../obs/log.ts";
import type { MarkerDeadlines } from "../state/marker.ts";

/** The health marker on the state volume; a `StateDir` is one. */
export interface MarkerStore {
  writeMarker(d: MarkerDeadlines): Promise<void>;
  /** A missing marker is no error. */
  removeMarker(): Promise<void>;
}

/** What an enforcer knows of the workload after a close: whether releasing the lease is safe. */
export interface StopEvidence {
  /** True only when the workload is known to be stopped. */
  stopped: boolean;
  /** Why, for the shutdown log line. */
  detail: string;
  /**
   * The last close could not remove the marker: the probe may pass, and a
   * restarted container run, until the deadline written in it, so the
   * lease must not be released before then.
   */
  markerLeft?: boolean;
  /**
   * A stop this enforcer started is unfinished (a process that got SIGTERM
   * still runs, or its SIGKILL is due): releasing now could let the
   * workload run beside the next holder's.
   */
  stopping?: true;
}

/** The workload's permission as the renewer drives it, whatever the mode. */
export interface Enforcer {
  /** Open or refreshed: (re)writes the marker; rejects when it cannot. */
  open(d: MarkerDeadlines): Promise<void>;
  /**
   * Closed (the lease lost or about to be): removes the marker, then stops
   * the workload, and keeps stopping what restarts until `open()` or
   * `dispose()`. Called on every tick while the lease is lost, each call
   * re-applying at once. Never rejects: the sidecar must not crash.
   */
  close(reason: string): Promise<void>;
  /**
   * After a close: resolves once the workload is known to be stopped, as
   * soon as this enforcer cannot know it, or when `signal` aborts (not
   * stopped then). Never rejects.
   */
  workloadStopped(signal: AbortSignal): Promise<StopEvidence>;
  /** Ends background scans and timers, a pending SIGKILL too: call it after {@linkcode Enforcer.workloadStopped}. */
  dispose(): Promise<void>;
}

/**
 * Removes the marker, logging instead of throwing: a permission that closes
 * must go on to stop the workload even when the volume refuses. Returns
 * false when the marker is left ({@linkcode StopEvidence.markerLeft}).
 */
export async function removeMarker(
  marker: MarkerStore,
  logger: Logger,
  reason: string,
): Promise<boolean> {
  try {
    await marker.removeMarker();
    return true;
  } catch (e) {
    logger.warn(GO_MESSAGES.enforceFailed, {
      detail:
        "cannot remove the health marker; the workload's liveness probe may keep passing until the deadline written in the marker",
      reason,
      error: e,
    });
    return false;
  }
}

/** Options for {@linkcode ProbeEnforcer}. */
export interface ProbeEnforcerOptions {
  marker: MarkerStore;
  logger: Logger;
}

/**
 * `probe` mode: the main container's liveness probe does the stopping, so
 * the permission is the marker alone, and the sidecar never knows when the
 * workload has stopped (the enforcement lead bounds it).
 */
export class ProbeEnforcer implements Enforcer {
  #o: ProbeEnforcerOptions;
  #markerLeft = false;

  constructor(options: ProbeEnforcerOptions) {
    this.#o = options;
  }

  open(d: MarkerDeadlines): Promise<void> {
    return this.#o.marker.writeMarker(d);
  }

  async close(reason: string): Promise<void> {
    this.#markerLeft = !await removeMarker(
      this.#o.marker,
      this.#o.logger,
      reason,
    );
  }

  workloadStopped(): Promise<StopEvidence> {
    return Promise.resolve({
      stopped: false,
      detail:
        "probe enforcement cannot see the workload's processes; its liveness probe stops it within the enforcement lead",
      ...(this.#markerLeft ? { markerLeft: true } : {}),
    });
  }

  dispose(): Promise<void> {
    return Promise.resolve();
  }
}
