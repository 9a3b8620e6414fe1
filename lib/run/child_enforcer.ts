/**
 * The {@linkcode Enforcer} of `run`: closing the permission removes the
 * markers (the user's, when a state directory is configured, and the private
 * one `run`'s `gate` watches) and then stops the attached command. It keeps
 * no copy of the permission: whether the lease is held is the renewer's
 * decision alone (`Renewer.status()`), which `run` reads before it starts a
 * command, and the gate in front of the command only lets it run while the
 * marker that this enforcer writes passes.
 *
 * @module
 */
import type { Enforcer, StopEvidence } from "../enforce/enforcer.ts";
import type { MarkerDeadlines } from "../state/marker.ts";
import type { ProcessGroup } from "../gate/process_group.ts";
import { aborted } from "../state/clock.ts";

/** The markers {@linkcode ChildEnforcer} keeps: usually a `ProbeEnforcer`. */
export interface ChildEnforcerOptions {
  /** Writes and removes the markers. */
  marker: Enforcer;
}

/** See the module doc. */
export class ChildEnforcer implements Enforcer {
  #o: ChildEnforcerOptions;
  #child: ProcessGroup | undefined;
  #stops = new Set<Promise<void>>();

  /** See {@linkcode ChildEnforcerOptions}. */
  constructor(options: ChildEnforcerOptions) {
    this.#o = options;
  }

  /** The command a close stops from now on. */
  attach(child: ProcessGroup): void {
    this.#child = child;
  }

  /** Forgets the command once it is gone. */
  detach(child: ProcessGroup): void {
    if (this.#child === child) this.#child = undefined;
  }

  open(d: MarkerDeadlines): Promise<void> {
    return this.#o.marker.open(d);
  }

  /**
   * Removes the markers first, so the command's gate already sees its
   * verdict fail when the stop signal reaches it, then stops the command.
   */
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

  /**
   * Stopped once its stops have finished and no command is attached; not
   * stopped when `signal` aborts first.
   */
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
