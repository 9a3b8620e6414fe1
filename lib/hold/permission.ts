/**
 * The workload's permission to run: the one record of whether the workload
 * may run, why not, and since when; and the queue that applies each decision
 * to the {@linkcode Enforcer} in the order it was made. The renewer decides
 * when to open and close it; this module keeps the decision and applies it.
 * (The logs, the health marker's `gate_closes_*` fields and the Go helper
 * call an open permission "the gate is open"; in the code, `gate` names the
 * subcommand, lib/gate/, which enforces the same marker in the main
 * container.)
 *
 * A decision changes at once, its application later (the enforcer writes
 * files and sends signals), so {@linkcode Permission.applied} tells whether a
 * close is still queued: a command started on an open decision while an
 * earlier close waits would be stopped by that close.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { markerDeadlines } from "./deadline.ts";
 * import { discardLogger } from "../obs/log.ts";
 * import { systemClock as clock } from "../state/clock.ts";
 * // An enforcer that records what it is told (production: the marker writer).
 * const told: string[] = [];
 * const enforcer = {
 *   open: async () => void told.push("open"),
 *   close: async (reason: string) => void told.push(`close: ${reason}`),
 *   workloadStopped: async () => ({ stopped: true, detail: "stopped" }),
 *   dispose: async () => {},
 * };
 * const permission = new Permission({ enforcer, clock, logger: discardLogger });
 * assert.equal(permission.reason, "starting");
 * const deadline = clock.now() + 30_000; // the local lease deadline
 * permission.open(markerDeadlines(deadline, 5_000, clock.now(), clock.bootNow(), clock.wallNow()));
 * permission.close("lease lost: held by another holder");
 * assert.equal(permission.isOpen, false); // decided at once,
 * await permission.whenApplied(); // applied in order: the marker is gone, the workload stopped
 * assert.deepEqual(told, ["open", "close: lease lost: held by another holder"]);
 * ```
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { Clock } from "../state/clock.ts";
import type { Enforcer } from "../enforce/enforcer.ts";
import type { Logger } from "../obs/log.ts";
import type { MarkerDeadlines } from "../state/marker.ts";

/** Options for {@linkcode Permission}. */
export interface PermissionOptions {
  /** Applies each decision to the workload. */
  enforcer: Enforcer;
  /** Times the closes ({@linkcode Permission.closedAt}). */
  clock: Clock;
  /** Gets the close transitions, and any enforcement that failed. */
  logger: Logger;
}

/** Whether the workload may run; starts closed, for the reason "starting". */
export class Permission {
  #o: PermissionOptions;
  #open = false;
  #reason = "starting";
  #closedAt: number;
  #enforcing: Promise<void> = Promise.resolve();
  #unapplied = 0;

  /** @param options See {@linkcode PermissionOptions}. */
  constructor(options: PermissionOptions) {
    this.#o = options;
    this.#closedAt = options.clock.now();
  }

  /** Whether the workload may run, as decided (see {@linkcode applied}). */
  get isOpen(): boolean {
    return this.#open;
  }

  /** Why the workload may not run; undefined while it may. */
  get reason(): string | undefined {
    return this.#open ? undefined : this.#reason;
  }

  /** Monotonic ms when the permission was last withdrawn; start-up counts, as it starts closed. */
  get closedAt(): number {
    return this.#closedAt;
  }

  /** Whether every decision so far has been applied to the workload. */
  get applied(): boolean {
    return this.#unapplied === 0;
  }

  /**
   * Resolves once the decisions made so far have been applied.
   *
   * @returns A promise that never rejects.
   */
  whenApplied(): Promise<void> {
    return this.#enforcing;
  }

  /**
   * Marks the permission open without telling the enforcer: for a lease handed
   * over with its marker, which already lets the workload run.
   */
  adopt(): void {
    this.#open = true;
  }

  /**
   * Opens the permission (or renews the open one) with the marker's deadlines.
   *
   * @param marker What the health marker is to say.
   * @returns Whether the permission was closed before.
   */
  open(marker: MarkerDeadlines): boolean {
    const wasClosed = !this.#open;
    this.#open = true;
    this.#apply((e) => e.open(marker), GO_MESSAGES.enforcerReleaseFailed);
    return wasClosed;
  }

  /**
   * Closes the permission, or applies the closed one again (a restarted container
   * is stopped again); logs only on the transition from open.
   *
   * @param reason Why, for the log, the probe and the status.
   * @param shutdown True for the close before a release at shutdown, which
   * is logged as expected rather than as a warning.
   * @returns Whether the state changed: it was open, or closed for another
   * reason.
   */
  close(reason: string, shutdown = false): boolean {
    const changed = this.#open || this.#reason !== reason;
    if (this.#open) {
      if (shutdown) {
        this.#o.logger.info("gate closed for the release at shutdown", {
          reason,
        });
      } else {
        this.#o.logger.warn("gate closed: stopping the workload", { reason });
      }
      this.#closedAt = this.#o.clock.now();
    }
    const failure = this.#open || this.#reason !== reason
      ? GO_MESSAGES.enforceFailed
      : GO_MESSAGES.reenforceFailed;
    this.#open = false;
    this.#reason = reason;
    this.#apply((e) => e.close(reason), failure);
    return changed;
  }

  /** Queues one decision behind the earlier ones; a failure is logged, never thrown. */
  #apply(action: (e: Enforcer) => Promise<void>, failure: string): void {
    this.#unapplied++;
    this.#enforcing = this.#enforcing.then(() => action(this.#o.enforcer))
      .catch((e) => {
        this.#o.logger.warn(failure, { error: e });
      })
      .finally(() => {
        this.#unapplied--;
      });
  }
}
