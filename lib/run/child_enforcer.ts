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

/** Options for {@linkcode ChildEnforcer}. */
export interface ChildEnforcerOptions {
  /** Keeps the markers: a `ProbeEnforcer`. */
  marker: Enforcer;
}

/** See the module doc. */
export class ChildEnforcer implements Enforcer {
  #o: ChildEnforcerOptions;
  #child: ProcessGroup | undefined;
  #stops = new Set<Promise<void>>();

  constructor(options: ChildEnforcerOptions) {
    this.#o = options;
  }

  attach(child: ProcessGroup): void {
    this.#child = child;
  }

  detach(child: ProcessGroup): void {
    if (this.#child === child) this.#child = undefined;
  }

  open(d: MarkerDeadlines): Promise<void> {
    return this.#o.marker.open(d);
  }

  /** The markers go first, so the gate's verdict fails before the stop signal reaches it. */
  async close(reason: string): Promise<void> {
    await this.#o.marker.close(reason);
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
    await this.#o.marker.dispose();
  }
}
