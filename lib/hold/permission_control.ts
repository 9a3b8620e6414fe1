/**
 * The renewer's control of the workload's permission by the local deadline:
 * a confirmation re-opens the {@linkcode Permission} only while its closing
 * time (deadline minus lead) is ahead; one timer closes it at that time,
 * even while an RPC is in flight; every change is reported to the observer.
 * Kept apart from the lease loop (renewer.ts) because these four (confirm,
 * close, the timer, the status) share the deadline and nothing else.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import type { Enforcer } from "../enforce/enforcer.ts";
 * import { createLogger } from "../obs/log.ts";
 * import { systemClock } from "../state/clock.ts";
 *
 * const enforcer: Enforcer = {
 *   open: () => Promise.resolve(),
 *   close: () => Promise.resolve(),
 *   workloadStopped: () => Promise.resolve({ kind: "stopped" } as never),
 *   dispose: () => Promise.resolve(),
 * };
 * const control = new PermissionControl({
 *   ttlSeconds: 15,
 *   enforceLeadMs: 5_000,
 *   enforcer,
 *   clock: systemClock,
 *   logger: createLogger({ write: () => {} }),
 *   token: () => 7,
 * });
 * control.start();
 * const sentAt = systemClock.now();
 * control.confirm(sentAt, "renewed"); // open until deadline - lead
 * assert.equal(control.status().permissionOpen, true);
 * assert.equal(control.status().permissionClosesAt, sentAt + 10_000);
 * control.close("lease lost: held by another holder");
 * assert.equal(control.status().reason, "lease lost: held by another holder");
 * control.stop();
 * await control.whenApplied();
 * ```
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { Enforcer } from "../enforce/enforcer.ts";
import type { Logger } from "../obs/log.ts";
import {
  deadlineFrom,
  markerDeadlines,
  permissionClosesAt,
} from "./deadline.ts";
import { Permission } from "./permission.ts";
import type { RenewerObserver, RenewerStatus } from "./status.ts";

/** Why the timer closes the permission (also the shutdown's late check). */
const NOT_CONFIRMED_IN_TIME =
  "the lease was not confirmed in time: its local deadline is near";

/** Options for {@linkcode PermissionControl}. */
export interface PermissionControlOptions {
  /** TTL of every Renew/Acquire, whole seconds: a confirmation's deadline. */
  ttlSeconds: number;
  /** How long before the local deadline the permission closes (ms). */
  enforceLeadMs: number;
  /** Applies each decision to the workload. */
  enforcer: Enforcer;
  /** Monotonic, boot-time and wall clocks, and the timer. */
  clock: Clock;
  /** Gets the transitions and late confirmations. */
  logger: Logger;
  /** Told about every change. */
  observer?: RenewerObserver;
  /** The fencing token held or last held, for the status and the logs. */
  token(): number;
  /**
   * `run` says a close once (`gate closed: stopping the workload`, with the
   * reason), so the Go helper's line before it, which `renew` keeps, is
   * DEBUG there. Default: the sidecar.
   */
  role?: "sidecar" | "run";
}

/** The permission, its deadline and its closing timer; see the module doc. */
export class PermissionControl {
  #o: PermissionControlOptions;
  #permission: Permission;
  /** Monotonic deadline of the confirmed lease; undefined until confirmed. */
  #deadline: number | undefined;
  /** Cancels the pending closing timer; set only between start and stop. */
  #cancelCloseTimer: (() => void) | undefined;
  #running = false;

  /** @param options See {@linkcode PermissionControlOptions}. */
  constructor(options: PermissionControlOptions) {
    this.#o = options;
    this.#permission = new Permission(options);
  }

  /** Monotonic deadline of the confirmed lease; undefined until confirmed or once lost. */
  get deadline(): number | undefined {
    return this.#deadline;
  }

  /** Moves the deadline without re-arming the timer (a loss, an unused grant). */
  set deadline(deadline: number | undefined) {
    this.#deadline = deadline;
  }

  /** Whether the workload may run, as decided. */
  get isOpen(): boolean {
    return this.#permission.isOpen;
  }

  /** Why the workload may not run; undefined while it may. */
  get reason(): string | undefined {
    return this.#permission.reason;
  }

  /** Monotonic ms when the permission was last withdrawn. */
  get closedAt(): number {
    return this.#permission.closedAt;
  }

  /** Whether every decision so far has been applied to the workload. */
  get applied(): boolean {
    return this.#permission.applied;
  }

  /**
   * Resolves once the decisions made so far have been applied.
   *
   * @returns A promise that never rejects.
   */
  whenApplied(): Promise<void> {
    return this.#permission.whenApplied();
  }

  /** The current state, for health checks and metrics. */
  status(): RenewerStatus {
    return {
      permissionOpen: this.#permission.isOpen,
      token: this.#o.token(),
      deadline: this.#deadline,
      permissionClosesAt: this.#deadline === undefined
        ? undefined
        : permissionClosesAt(this.#deadline, this.#o.enforceLeadMs),
      reason: this.#permission.reason,
    };
  }

  /** Arms the closing timer from here on (the lease loop started). */
  start(): void {
    this.#running = true;
    this.#armCloseTimer();
  }

  /** Leaves no timer from here on (the lease loop ended). */
  stop(): void {
    this.#running = false;
    this.#armCloseTimer();
  }

  /**
   * Takes a handed-over lease that has `leftMs` to run: when its closing
   * time is still ahead, the permission is open (the marker handed over
   * lets the workload run already; the enforcer is not told).
   *
   * @param leftMs How long the handed-over lease still runs.
   * @returns Whether the permission is open now (the caller logs it, then
   * calls {@linkcode changed}); when not, the caller closes it.
   */
  adopt(leftMs: number): boolean {
    const { clock, enforceLeadMs } = this.#o;
    this.#deadline = clock.now() + leftMs;
    if (clock.now() >= permissionClosesAt(this.#deadline, enforceLeadMs)) {
      return false;
    }
    this.#permission.adopt();
    return true;
  }

  /**
   * Records a success sent at `sentAt`; re-opens the permission only if
   * that leaves time before its closing time, and re-arms the timer.
   *
   * @param sentAt Monotonic ms the confirmed request was sent.
   * @param what What confirmed it: a Renew or a reacquire's Acquire (its
   * line is the Go helper's; INFO when it re-opens, else DEBUG).
   * @throws When the boot-time clock cannot be read: the permission is
   * then as it was.
   */
  confirm(sentAt: number, what: "renewed" | "reacquired"): void {
    const { clock, ttlSeconds, enforceLeadMs, logger } = this.#o;
    const deadline = deadlineFrom(sentAt, ttlSeconds);
    const now = clock.now();
    this.#deadline = deadline;
    if (now >= permissionClosesAt(deadline, enforceLeadMs)) {
      logger.warn(
        what === "reacquired" ? GO_MESSAGES.acquireLate : GO_MESSAGES.renewLate,
        {
          detail:
            "the server confirmed the lease too late to let the workload run",
          fencing_token: this.#o.token(),
          late_by_ms: Math.round(
            now - permissionClosesAt(deadline, enforceLeadMs),
          ),
        },
      );
      this.close("the last confirmation arrived after its own deadline");
      return;
    }
    // Everything that can fail (the boot-time clock is a file read) comes
    // before the permission changes: a throw leaves it as it was. The other
    // clocks are read first and the monotonic one after them, so time spent
    // reading them (a loaded node) moves the marker's deadlines earlier, never
    // later than the local deadline.
    const bootNow = clock.bootNow();
    const wallNow = clock.wallNow();
    const marker = markerDeadlines(
      deadline,
      enforceLeadMs,
      clock.now(),
      bootNow,
      wallNow,
    );
    const msg = what === "reacquired"
      ? GO_MESSAGES.reacquired
      : GO_MESSAGES.leaseRenewed;
    if (this.#permission.open(marker)) {
      logger.info(msg, {
        fencing_token: this.#o.token(),
        detail: "the gate is open: the workload may run",
      });
    } else logger.debug(msg, { fencing_token: this.#o.token() });
    this.#armCloseTimer();
    this.changed();
  }

  /**
   * Closes (or re-applies the closed) permission; see
   * {@linkcode Permission.close}.
   *
   * @param reason Why, for the log, the probe and the status.
   * @param shutdown True for the close before a release at shutdown.
   */
  close(reason: string, shutdown = false): void {
    if (!this.#permission.close(reason, shutdown)) return;
    this.#cancelCloseTimer?.();
    this.#cancelCloseTimer = undefined;
    this.changed();
  }

  /**
   * Does what the closing timer would have done when it fell due while the
   * loop was ending (a process frozen past it wakes with the stop pending,
   * and the timer was cancelled with the loop), and waits until applied.
   */
  async closeIfDue(): Promise<void> {
    const deadline = this.#deadline;
    if (
      this.#permission.isOpen && deadline !== undefined &&
      this.#o.clock.now() >= permissionClosesAt(deadline, this.#o.enforceLeadMs)
    ) {
      this.#deadlineReached();
      await this.#permission.whenApplied();
    }
  }

  /** The closing time came before a confirmation: the Go helper's line, then the close. */
  #deadlineReached(): void {
    const say = this.#o.role === "run"
      ? this.#o.logger.debug
      : this.#o.logger.warn;
    say(GO_MESSAGES.localDeadline, {
      detail:
        "the lease was not confirmed in time: the workload is stopped the enforce lead before its local deadline",
      fencing_token: this.#o.token(),
    });
    this.close(NOT_CONFIRMED_IN_TIME);
  }

  /**
   * Tells the observer (metrics, the health endpoint, `run`). Its failure is
   * logged and goes no further: it must never keep a closing permission from
   * being enforced, nor end the sidecar from inside the closing timer.
   */
  changed(): void {
    try {
      this.#o.observer?.changed?.(this.status());
    } catch (e) {
      this.#o.logger.error("a lease status observer failed", {
        error: e instanceof Error ? e.message : String(e),
      });
    }
  }

  /**
   * (Re-)arms the one timer that closes the permission at deadline minus
   * lead, even while an RPC is in flight; called whenever the deadline
   * moves. While the permission is closed, or outside start and stop, no
   * timer is left.
   */
  #armCloseTimer(): void {
    const { clock, enforceLeadMs } = this.#o;
    this.#cancelCloseTimer?.();
    this.#cancelCloseTimer = undefined;
    if (
      !this.#running || !this.#permission.isOpen ||
      this.#deadline === undefined
    ) {
      return;
    }
    const wait = permissionClosesAt(this.#deadline, enforceLeadMs) -
      clock.now();
    if (wait <= 0) {
      this.#deadlineReached();
      return;
    }
    this.#cancelCloseTimer = clock.after(wait, () => this.#armCloseTimer());
  }
}
