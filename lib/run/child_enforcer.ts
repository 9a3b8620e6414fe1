/**
 * `run`'s {@linkcode Enforcer}: a close removes the markers, then stops the
 * attached command. The permission itself is the renewer's alone.
 *
 * @module
 */
import type { Enforcer, StopEvidence } from "../enforce/enforcer.ts";
import type { MarkerDeadlines } from "../state/marker.ts";
import type { ProcessGroup } from "../gate/process_group.ts";
import { aborted } from "../state/clock.ts";

/**
 * Removes every marker, each on its own: one that cannot be removed must
 * not keep the others passing.
 *
 * @throws The first removal's error, once all were tried.
 */
export async function removeMarkers(
  dirs: readonly { removeMarker(): Promise<void> }[],
): Promise<void> {
  const results = await Promise.allSettled(dirs.map((d) => d.removeMarker()));
  const failed = results.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
}

/** See the module doc; `marker` (a `ProbeEnforcer`) keeps the markers. */
export class ChildEnforcer implements Enforcer {
  #child: ProcessGroup | undefined;
  #stops = new Set<Promise<void>>();

  constructor(private marker: Enforcer) {}

  attach(child: ProcessGroup): void {
    this.#child = child;
  }

  detach(child: ProcessGroup): void {
    if (this.#child === child) this.#child = undefined;
  }

  open(d: MarkerDeadlines): Promise<void> {
    return this.marker.open(d);
  }

  /** The markers go first, so the gate's verdict fails before the stop signal reaches it. */
  async close(reason: string): Promise<void> {
    await this.marker.close(reason);
    const child = this.#child;
    if (child) {
      const stop = child.stop(reason);
      this.#stops.add(stop);
      // Its failure is workloadStopped()'s and dispose()'s to report.
      stop.finally(() => this.#stops.delete(stop)).catch(() => {});
    }
  }

  /** Stopped once its stops have finished and no command is attached. */
  async workloadStopped(signal?: AbortSignal): Promise<StopEvidence> {
    if (this.#stops.size > 0) {
      const done = Promise.all([...this.#stops]).then(() => true);
      const gaveUp = signal === undefined
        ? new Promise<boolean>(() => {})
        : aborted(signal).then(() => false);
      if (!await Promise.race([done, gaveUp])) {
        return {
          stopped: false,
          detail: "the command is still being stopped",
          stopping: true,
        };
      }
    }
    return this.#child === undefined
      ? { stopped: true, detail: "the command has exited" }
      : { stopped: false, detail: "the command is still running" };
  }

  async dispose(): Promise<void> {
    await Promise.all([...this.#stops]);
    await this.marker.dispose();
  }
}
