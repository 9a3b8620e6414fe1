/**
 * Enforcement: what the workload's permission (lib/hold/permission.ts) does
 * to the workload. The health marker is always removed when it closes, so the main
 * container's liveness probe fails whatever else happens (the backstop).
 * `probe` mode ({@linkcode ProbeEnforcer}) does only that; `signal` mode
 * (`signal.ts`) also stops the workload's processes at once through the
 * shared PID namespace, and keeps stopping the ones the kubelet restarts
 * while the lease is lost.
 *
 * The interface lives apart from the signal enforcer, so that each mode's
 * rules are read in one place and `run`'s enforcer implements the same
 * interface without the signal mode's matching.
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { Logger } from "../obs/log.ts";
import type { MarkerDeadlines } from "../state/marker.ts";

/**
 * What the enforcers need from the state volume. It is injected rather than
 * imported so the enforcers can be tested with an in-memory fake and the
 * state directory's safety rules live in one place.
 */
export interface MarkerStore {
  /** Atomically (re)writes the health marker with these deadlines. */
  writeMarker(d: MarkerDeadlines): Promise<void>;
  /** Removes the health marker; a missing marker is not an error. */
  removeMarker(): Promise<void>;
}

/**
 * What an enforcer knows about the workload after the permission closed, so the
 * renewer can tell whether releasing the lease at shutdown is safe.
 */
export interface StopEvidence {
  /** True only when the workload is known to be stopped. */
  stopped: boolean;
  /** Why, in this project's words, for the shutdown log line. */
  detail: string;
  /**
   * True when the last close could not remove the health marker: the
   * liveness probe may pass until the deadline written in it, and a
   * restarted container run, whatever else is known, so the lease must not
   * be released before that deadline (it expires on its own then).
   */
  markerLeft?: boolean;
  /**
   * Set while a stop this enforcer started is unfinished (a process that got
   * SIGTERM still runs, or its SIGKILL is due): the lease must not be
   * released before it finished, or the workload could run beside the next
   * holder's.
   */
  stopping?: true;
}

/**
 * The workload's permission as the renewer drives it, so the renewer does not care which
 * enforcement mode was configured.
 */
export interface Enforcer {
  /**
   * Permission open or refreshed: (re)writes the marker with these deadlines;
   * signal mode also stops scanning and forgets the TERM times. Rejects when
   * the marker cannot be written.
   */
  open(d: MarkerDeadlines): Promise<void>;
  /**
   * Permission closed (lease lost or about to be): removes the marker first; signal
   * mode then signals the targets and, until `open()`/`dispose()`, keeps
   * scanning for restarted ones. Idempotent and meant to be called on every
   * renewer tick while the lease is lost; each call re-applies at once.
   * Never rejects: failures are logged, the sidecar must not crash.
   */
  close(reason: string): Promise<void>;
  /**
   * After {@linkcode Enforcer.close}: resolves once the workload is known to
   * be stopped, or as soon as this enforcer cannot know it, or when `signal`
   * aborts (then `stopped` is false). Never rejects.
   *
   * @param signal Bounds the wait; the renewer aborts it when the
   * enforcement lead has passed since the permission closed.
   */
  workloadStopped(signal: AbortSignal): Promise<StopEvidence>;
  /**
   * Stops background scanning and timers (a pending SIGKILL too: call it
   * after {@linkcode Enforcer.workloadStopped}); used at shutdown and in
   * tests.
   */
  dispose(): Promise<void>;
}

/**
 * Removes the marker, logging instead of throwing: a permission that closes must
 * go on to stop the workload even when the volume refuses.
 *
 * @param marker The marker store.
 * @param logger Where the failure goes.
 * @param reason Why the permission closed, for the log line.
 * @returns False when the marker could not be removed (see
 * {@linkcode StopEvidence.markerLeft}).
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

/**
 * `inner`, with refused marker writes reported: the first of a run of
 * failures as an ERROR that names the write and (through the error) the
 * path, and the recovery as an INFO; the probe meanwhile reports the marker
 * absent or stale, as if the lease were not confirmed, so the operator must
 * find this line. `open()` then resolves: the permission's decision stands.
 *
 * @param inner The enforcer to wrap.
 * @param logger Where the report goes.
 * @param consequence What a refused write does to the workload, and what to
 * do; default the liveness probe's view of it (a sidecar's marker).
 * @returns An enforcer that behaves like `inner` otherwise.
 */
export function reportingMarkerWrites(
  inner: Enforcer,
  logger: Logger,
  consequence =
    "the workload's liveness probe will report it absent or stale (make the state volume writable: it is read-only or full)",
): Enforcer {
  let failing = false;
  return {
    async open(d) {
      try {
        await inner.open(d);
      } catch (error) {
        if (!failing) {
          logger.warn(GO_MESSAGES.enforcerReleaseFailed, {
            detail:
              `the lease is confirmed, but the health marker cannot be written; ${consequence}`,
            write: "health marker",
            error,
          });
        }
        failing = true;
        return;
      }
      if (failing) logger.info("the health marker is written again");
      failing = false;
    },
    close: (reason) => inner.close(reason),
    workloadStopped: (signal) => inner.workloadStopped(signal),
    dispose: () => inner.dispose(),
  };
}

/** Options for {@linkcode ProbeEnforcer}. */
export interface ProbeEnforcerOptions {
  /** The health marker on the state volume. */
  marker: MarkerStore;
  /** Where a failure to remove the marker is reported. */
  logger: Logger;
}

/**
 * `probe` mode: the liveness probe of the main container does the stopping,
 * so the permission is only the marker's presence, and the sidecar never knows
 * when the workload has stopped (the enforcement lead bounds it).
 */
export class ProbeEnforcer implements Enforcer {
  #o: ProbeEnforcerOptions;
  /** Whether the last close left the marker (see {@linkcode StopEvidence.markerLeft}). */
  #markerLeft = false;

  /** See {@linkcode ProbeEnforcerOptions}. */
  constructor(options: ProbeEnforcerOptions) {
    this.#o = options;
  }

  /** Writes the marker. */
  open(d: MarkerDeadlines): Promise<void> {
    return this.#o.marker.writeMarker(d);
  }

  /** Removes the marker (a failure is logged). */
  async close(reason: string): Promise<void> {
    this.#markerLeft = !await removeMarker(
      this.#o.marker,
      this.#o.logger,
      reason,
    );
  }

  /** Answers at once: probe mode cannot see the workload's processes. */
  workloadStopped(): Promise<StopEvidence> {
    return Promise.resolve({
      stopped: false,
      detail:
        "probe enforcement cannot see the workload's processes; its liveness probe stops it within the enforcement lead",
      ...(this.#markerLeft ? { markerLeft: true } : {}),
    });
  }

  /** Nothing to stop. */
  dispose(): Promise<void> {
    return Promise.resolve();
  }
}
