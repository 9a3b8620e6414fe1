/**
 * The renewer: keeps a held lease alive against a local, monotonic deadline,
 * closes the workload's permission to run (stops the workload through an
 * {@linkcode Enforcer}) before that deadline when the lease cannot be
 * confirmed, and reacquires.
 *
 * This is where the product's promise lives, so the rules are spelled out:
 * - The deadline is the send time of the last successful Renew/Acquire plus
 *   the TTL (see `deadline.ts`). The permission closes `enforceLeadMs`
 *   before it, on a timer of its own, even while an RPC is in flight
 *   (`permission_control.ts`: the workload's permission, its deadline and that
 *   timer).
 * - 409 or `acquired:false` lose the lease at once; any other failure leaves
 *   the local deadline in charge.
 * - A success re-opens the permission only while its own closing time is
 *   ahead.
 * - While the lease is lost, every tick re-applies the enforcer (a restarted
 *   container is stopped again) and tries to acquire.
 * - A reacquired token the state volume refuses is kept in memory (so the
 *   next answer is not mistaken for another process's), and the lease is
 *   released: a token the workload cannot read is worth nothing.
 * - At shutdown the lease is released only once the workload is known to be
 *   stopped or the enforcement lead has passed since the permission closed (see
 *   `shutdown.ts`).
 *
 * What it logs about a renewal that did not confirm the lease is worded in
 * `renew_report.ts`; about a token the state volume refused, in
 * `renewer_store.ts`.
 *
 * @module
 */
import { bounded, type Clock } from "../state/clock.ts";
import { type Enforcer, reportingMarkerWrites } from "../enforce/enforcer.ts";
import { classifyRenew, deadlineFrom, renewBound } from "./deadline.ts";
import type { LeaseClient, LeaseFailure } from "../lease/rpc.ts";
import { RejectionLog } from "./rejection_log.ts";
import {
  permissionLeft,
  reportLost,
  reportPastDeadline,
  reportUnconfirmed,
} from "./renew_report.ts";
import type { Logger } from "../obs/log.ts";
import {
  HandoffWriter,
  readHandoff,
  type RenewerStore,
  reportPersistFailure,
} from "./renewer_store.ts";
import { PermissionControl } from "./permission_control.ts";
import { Reacquirer } from "./reacquire.ts";
import { shutdownRelease } from "./shutdown.ts";
import type { RenewerObserver, RenewerStatus } from "./status.ts";

export type { RenewerStore } from "./renewer_store.ts";
export type { RenewerObserver, RenewerStatus } from "./status.ts";

/** Options for {@linkcode Renewer}. */
export interface RenewerOptions {
  /** The lease RPCs. */
  client: LeaseClient;
  /** The configured holder identity; the only one this renewer ever renews or releases for. */
  holder: string;
  /** TTL sent with every Renew/Acquire, whole seconds. */
  ttlSeconds: number;
  /** Interval between renewals (ms); also bounds each RPC. */
  heartbeatMs: number;
  /** How long before the local deadline the permission closes (ms). */
  enforceLeadMs: number;
  /** Stops and re-admits the workload. */
  enforcer: Enforcer;
  /** The state volume. */
  store: RenewerStore;
  /** Monotonic and boot-time clocks; a fake one in tests. */
  clock: Clock;
  /** Where lifecycle events go. */
  logger: Logger;
  /** Release the lease when shutting down while it is held. */
  releaseOnShutdown: boolean;
  /** Bound on the shutdown Release (ms); default 5000. */
  releaseTimeoutMs?: number;
  /** Told about every RPC and state change, for the health endpoint and metrics. */
  observer?: RenewerObserver;
  /**
   * Who renews: the `sidecar` (default), or `run`, whose handoff is its own
   * acquire (which said `lease acquired` already: the adoption is logged at
   * DEBUG only) and whose marker is read by its command's gate, not by a
   * liveness probe (a refused marker write says so).
   */
  role?: "sidecar" | "run";
}

/**
 * Runs the sidecar's lease loop until `shutdown` aborts. One instance per
 * process; call {@linkcode Renewer.run} once.
 */
export class Renewer {
  #o:
    & Required<Omit<RenewerOptions, "observer" | "role">>
    & Pick<RenewerOptions, "observer" | "role">;
  /** The configured enforcer, reporting refused marker writes once per run of them. */
  #enforcer: Enforcer;
  #token = 0;
  /** Set when the server said the lease is gone; cleared by a successful acquire. */
  #lost: string | undefined;
  /** Whether the workload may run, its deadline, and the timer that closes it. */
  #control: PermissionControl;
  /** Writes the holder and token, knowing what the volume holds. */
  #writer: HandoffWriter;
  /** Sends the Acquires while the lease is not held. */
  #reacquirer: Reacquirer;
  /** Set when a reacquire was granted after the stop: no workload ran on it. */
  #unusedGrant = false;
  /** Says a renewal failure that names its fix at ERROR, once a minute. */
  #fixes: RejectionLog;

  /** Validates nothing: the config module already did; see {@linkcode RenewerOptions}. */
  constructor(options: RenewerOptions) {
    this.#o = { releaseTimeoutMs: 5000, ...options };
    this.#enforcer = reportingMarkerWrites(
      options.enforcer,
      options.logger,
      options.role === "run"
        ? "if it is run's own marker (in TMPDIR), the command's gate stops the command at the last confirmed deadline, and if it is the one in --state-dir, its readers see it go stale (make the directory the error names writable: it is read-only or full)"
        : undefined,
    );
    this.#control = new PermissionControl({
      ...options,
      enforcer: this.#enforcer,
      token: () => this.#token,
    });
    this.#reacquirer = new Reacquirer({
      ...options,
      quiet: options.role === "run",
    });
    this.#fixes = new RejectionLog(options.logger, options.clock);
    this.#writer = new HandoffWriter(
      options.store,
      options.holder,
      options.clock,
    );
  }

  /**
   * Whether every decision on the permission so far has been applied to the
   * workload. The decision ({@linkcode status}) changes at once; the enforcer
   * applies decisions in order, later. A command started on an open decision
   * while an earlier close is still queued would be stopped by that close.
   */
  get applied(): boolean {
    return this.#control.applied;
  }

  /**
   * Resolves once the decisions made so far have been applied.
   *
   * @returns A promise that never rejects.
   */
  whenApplied(): Promise<void> {
    return this.#control.whenApplied();
  }

  /** The current state, for health checks and metrics. */
  status(): RenewerStatus {
    return this.#control.status();
  }

  /**
   * Adopts the handoff, then renews at the heartbeat until `shutdown`
   * aborts; then releases when configured and held, once that is safe.
   *
   * @param shutdown Aborts the lease loop (a stop signal).
   * @returns Resolves when the release (or the decision not to) is done.
   */
  async run(shutdown: AbortSignal): Promise<void> {
    const { clock, heartbeatMs } = this.#o;
    this.#adoptHandoff();
    this.#control.start();
    try {
      let failedBefore: string | undefined;
      while (!shutdown.aborted) {
        const tickStart = clock.now();
        try {
          if (this.#renewable()) await this.#renewOnce(shutdown);
          else await this.#reacquireOnce(shutdown);
          failedBefore = undefined;
        } catch (e) {
          // Fail closed and keep going: a tick that throws (an unreadable
          // boot-time clock, say) must neither leave the permission open nor
          // end the sidecar without a word.
          const error = e instanceof Error ? e.message : String(e);
          if (error !== failedBefore) {
            this.#o.logger.error(
              "the lease loop failed; the gate stays closed until a renewal succeeds",
              { error },
            );
          }
          failedBefore = error;
          this.#close(`the lease loop failed: ${error}`);
        }
        if (shutdown.aborted) break;
        await clock.sleep(tickStart + heartbeatMs - clock.now(), shutdown);
      }
    } finally {
      this.#control.stop();
      await this.#control.whenApplied();
    }
    await this.#shutdown();
    await this.#enforcer.dispose();
  }

  /** True while a Renew (rather than an Acquire) is the right call. */
  #renewable(): boolean {
    if (this.#token <= 0 || this.#lost !== undefined) return false;
    const deadline = this.#control.deadline;
    return deadline === undefined || this.#o.clock.now() < deadline;
  }

  #adoptHandoff(): void {
    const { store, holder, logger, clock, ttlSeconds } = this.#o;
    const handoff = readHandoff(
      store,
      holder,
      clock,
      ttlSeconds,
      logger,
      this.#o.role === "run",
    );
    if (handoff.kind === "none") {
      this.#close(handoff.reason);
      return;
    }
    this.#token = handoff.token;
    this.#writer.adopted(handoff.token);
    if (handoff.leftMs !== undefined) {
      if (this.#control.adopt(handoff.leftMs)) {
        (this.#o.role === "run" ? logger.debug : logger.info)(
          "adopted the lease; the workload keeps running while it is confirmed",
          {
            fencing_token: handoff.token,
            deadline_in_ms: Math.round(handoff.leftMs),
          },
        );
        this.#control.changed();
        return;
      }
    }
    this.#close("confirming the handed-over lease before the workload may run");
  }

  async #renewOnce(shutdown: AbortSignal): Promise<void> {
    const { client, holder, ttlSeconds, heartbeatMs, clock, logger } = this.#o;
    const token = this.#token;
    const sentAt = clock.now();
    const bound = renewBound(sentAt, heartbeatMs, this.#control.deadline);
    using call = bounded(clock, bound, shutdown);
    const outcome = await client.renew(holder, token, ttlSeconds, call.signal);
    const verdict = classifyRenew(outcome, token);
    switch (verdict.kind) {
      case "confirmed":
        this.#fixes.reset();
        this.#control.confirm(sentAt, "renewed");
        return;
      case "lost":
        this.#lost = verdict.summary;
        this.#control.deadline = undefined;
        reportLost(logger, verdict, token);
        this.#close(`lease lost: ${verdict.summary}`);
        return;
      case "unconfirmed": {
        // Every answer but a grant or a loss is a failure here.
        const deadline = this.#control.deadline;
        if (deadline !== undefined && clock.now() >= deadline) {
          // Failed at (or after) the local deadline; the next tick reacquires.
          reportPastDeadline(logger, verdict.reason, token);
          this.#close("the lease was not confirmed by its local deadline");
          return;
        }
        reportUnconfirmed({
          logger,
          fixes: this.#fixes,
          failure: outcome as LeaseFailure,
          reason: verdict.reason,
          heartbeatMs,
          token,
          permission: permissionLeft(
            this.#control.isOpen,
            this.status().permissionClosesAt,
            clock.now(),
          ),
        });
        return;
      }
      case "cancelled":
        return;
    }
  }

  async #reacquireOnce(shutdown: AbortSignal): Promise<void> {
    // Re-apply first: the kubelet may have restarted the container since the last tick.
    this.#close(this.#control.reason ?? "lease not held");
    const grant = await this.#reacquirer.attempt(this.#token);
    if (grant === undefined) return;
    // Ours from here on, even if the volume refuses it: the next answer
    // for this token is our own grant, never another process's.
    this.#token = grant.token;
    this.#lost = undefined;
    if (!shutdown.aborted) {
      if (!await this.#persist(grant.token, grant.sentAt, shutdown)) return;
    }
    if (shutdown.aborted) {
      // Granted while stopping: the workload gets none of it (the permission
      // stays closed); the shutdown releases it, whatever the setting.
      this.#control.deadline = deadlineFrom(grant.sentAt, this.#o.ttlSeconds);
      this.#unusedGrant = true;
      this.#o.logger.info(
        "lease reacquired while shutting down; the workload stays stopped",
        { fencing_token: grant.token },
      );
      return;
    }
    this.#control.confirm(grant.sentAt, "reacquired");
    this.#o.observer?.reacquired?.(grant.token);
  }

  /**
   * Writes the holder and token the workload reads; when the volume keeps
   * refusing, releases the lease (a token the workload cannot read is held
   * for nothing) and returns false, so the next tick tries again with a new
   * grant. The release waits, as at shutdown, until the workload stopped at
   * the loss is known to be gone or the lead has passed since the permission
   * closed: a command still in its grace must not run beside the next holder.
   */
  async #persist(
    token: number,
    sentAt: number,
    shutdown: AbortSignal,
  ): Promise<boolean> {
    const failure = await this.#writer.persist(token, shutdown);
    if (failure === undefined) return true;
    reportPersistFailure(this.#o.logger, failure, token);
    this.#lost =
      `the ${failure.write} file could not be written to the state volume`;
    this.#close(`lease not usable: ${this.#lost}`);
    await this.#control.whenApplied();
    await shutdownRelease({
      ...this.#o,
      atShutdown: false,
      enforcer: this.#enforcer,
      held: true,
      keepWhenMarkerLeft: false,
      permissionOpen: false,
      token,
      closedAt: this.#control.closedAt,
      deadline: deadlineFrom(sentAt, this.#o.ttlSeconds),
    });
    return false;
  }

  /** Closes (or re-applies the closed) permission; see {@linkcode PermissionControl.close}. */
  #close(reason: string, shutdown = false): void {
    this.#control.close(reason, shutdown);
  }

  /** Closes the permission for a release, then hands over to `shutdown.ts`. */
  async #shutdown(): Promise<void> {
    const { clock } = this.#o;
    // The permission's closing timer may have fallen due while the loop was
    // ending.
    await this.#control.closeIfDue();
    const deadline = this.#control.deadline;
    // A lease whose local deadline has passed is no longer ours to release
    // (another holder may have it).
    const expired = deadline !== undefined && clock.now() >= deadline;
    // A grant no workload ran on is released even when releases are off:
    // kept, it would only hold the lease for no one until it expired.
    const held = (this.#o.releaseOnShutdown || this.#unusedGrant) &&
      this.#token > 0 && this.#lost === undefined && !expired;
    if (held) {
      this.#close("the lease is being released at shutdown", true);
      await this.#control.whenApplied();
    }
    await shutdownRelease({
      ...this.#o,
      enforcer: this.#enforcer,
      held,
      ...(expired
        ? {
          notHeldReason:
            "its local deadline has passed: it is no longer ours to release",
        }
        : {}),
      permissionOpen: this.#control.isOpen,
      token: this.#token,
      closedAt: this.#control.closedAt,
      deadline: this.#control.deadline,
    });
  }
}
