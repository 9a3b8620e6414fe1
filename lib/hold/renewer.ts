/**
 * The renewer of the sidecar (and of `run`): keeps a held lease alive
 * against its local deadline (lease.ts) and closes the workload's permission
 * to run `enforceLeadMs` before it, on a timer of its own (`#arm`) that
 * fires even while an RPC hangs. 409 or `acquired:false` lose the lease at
 * once; any other failure leaves the deadline in charge; a success reopens
 * the permission only while its closing time is ahead. While the lease is
 * not held, every tick closes the permission again (the kubelet may have
 * restarted the container) and tries to acquire. Decisions change at once
 * and reach the enforcer later, in order (`applied`). Log lines and the Go
 * helper call an open permission "the gate is open".
 *
 * @module
 */
import { bounded } from "../state/clock.ts";
import { Attempts } from "./attempts.ts";
import { classifyRenew, type GrantOutcome } from "../lease/rpc.ts";
import type { Enforcer } from "../enforce/enforcer.ts";
import { GO_MESSAGES as GO } from "../obs/go_messages.ts";
import {
  type LeaseParams,
  markerDeadlines,
  markerRewrite,
  releaseWhenSafe,
  type RenewerObserver,
  type RenewerStatus,
  stopWait,
} from "./lease.ts";
import { persistHandoff, readHandoff, type RenewerStore } from "./handoff.ts";
import { openMarker, reportRenewal } from "./report.ts";
import type { MarkerDeadlines } from "../state/marker.ts";

/** Options for {@linkcode Renewer}. */
export interface RenewerOptions extends LeaseParams {
  enforcer: Enforcer;
  store: RenewerStore;
  releaseOnShutdown: boolean;
  /** See `AttemptsOptions.guardSharedHolder`: true only for a holder identity given explicitly. */
  guardSharedHolder: boolean;
  observer?: RenewerObserver;
}

/** Runs the lease loop until `shutdown` aborts; `run` is called once. */
export class Renewer {
  #p: RenewerOptions;
  #token = 0;
  /** Why the lease is gone or unusable; cleared by a grant. */
  #lost: string | undefined;
  #deadline: number | undefined;
  #open = false;
  #reason = "starting";
  #closedAt; // start-up counts: the permission starts closed
  #applying = Promise.resolve();
  #unapplied = 0;
  #marker = { failing: false };
  /** The open permission's marker, written again at `#refreshAt` unless a renewal is first. */
  #shown: MarkerDeadlines | undefined;
  #refreshAt = Infinity;
  #cancelTimer: (() => void) | undefined;
  #running = false;
  #saved = { holder: false, token: 0 };
  #attempts: Attempts;
  #quietUntil = -Infinity;
  /** Granted while stopping: released whatever the setting, no workload ran on it. */
  #unusedGrant = false;
  #held = false;

  constructor(p: RenewerOptions) {
    this.#p = p;
    this.#closedAt = p.clock.now();
    this.#attempts = new Attempts({
      ...p,
      boundMs: p.heartbeatMs,
      ownToken: () => this.#token,
      lines: { held: GO.waitingToReacquire, failed: GO.reacquireFailed },
    });
  }

  /** Whether every decision so far has reached the enforcer. */
  get applied(): boolean {
    return this.#unapplied === 0;
  }

  /** @returns Resolves (never rejects) once the decisions so far are applied. */
  whenApplied(): Promise<void> {
    return this.#applying;
  }

  /** @returns The current state, for the health endpoint, the metrics and `run`. */
  status(): RenewerStatus {
    const [d, lead] = [this.#deadline, this.#p.enforceLeadMs];
    return {
      permissionOpen: this.#open,
      token: this.#token,
      deadline: d,
      permissionClosesAt: d === undefined ? undefined : d - lead,
      reason: this.#open ? undefined : this.#reason,
    };
  }

  /**
   * Adopts the handoff and renews (or reacquires) every heartbeat until
   * `shutdown`; then releases when configured and safe. Never rejects: a
   * tick that throws (an unreadable boot clock) closes the permission.
   */
  async run(shutdown: AbortSignal): Promise<void> {
    const { clock, heartbeatMs, logger } = this.#p;
    this.#running = true;
    let failedBefore: string | undefined;
    try {
      this.#adopt();
      while (!shutdown.aborted) {
        const tickStart = clock.now();
        try {
          const held = this.#token > 0 && this.#lost === undefined &&
            clock.now() < (this.#deadline ?? Infinity);
          await (held ? this.#renew(shutdown) : this.#reacquire(shutdown));
          failedBefore = undefined;
        } catch (e) {
          const error = e instanceof Error ? e.message : String(e);
          if (error !== failedBefore) {
            logger.error(
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
      this.#running = false;
      this.#arm();
      try {
        await this.#applying;
        await this.#shutdown();
      } catch (error) {
        logger.error("the release at shutdown failed", { error });
      } finally {
        await this.#p.enforcer.dispose();
      }
    }
  }

  #adopt(): void {
    const { clock, logger } = this.#p;
    const h = readHandoff(this.#p);
    if (h.kind === "none") return this.#close(h.reason);
    this.#token = h.token;
    this.#saved = { holder: true, token: h.token };
    if (h.leftMs !== undefined) this.#deadline = clock.now() + h.leftMs;
    const closesAt = this.status().permissionClosesAt;
    if (closesAt === undefined || clock.now() >= closesAt) {
      return this.#close(
        "confirming the handed-over lease before the workload may run",
      );
    }
    // The handed-over marker lets the workload run already; `#arm` rewrites it.
    this.#open = this.#held = true;
    this.#shown = h.marker;
    this.#refreshAt = clock.now();
    logger.info(
      "adopted the lease; the workload keeps running while it is confirmed",
      { fencing_token: h.token, deadline_in_ms: Math.round(h.leftMs!) },
    );
    this.#arm();
    this.#changed();
  }

  async #renew(shutdown: AbortSignal): Promise<void> {
    const { client, holder, ttlSeconds, heartbeatMs, clock } = this.#p;
    const token = this.#token;
    const sentAt = clock.now();
    // Never past the next heartbeat, nor past the deadline: a hung server
    // cannot hold the loop beyond the point where it must act.
    const left = (this.#deadline ?? Infinity) - sentAt;
    using call = bounded(clock, Math.min(heartbeatMs, left), shutdown);
    const outcome = await client.renew(holder, token, ttlSeconds, call.signal);
    const v = classifyRenew(outcome, token, holder);
    if (v.kind === "cancelled") return;
    if (v.kind === "confirmed") {
      this.#attempts.forget();
      return this.#confirm(sentAt, false);
    }
    const past = v.kind === "unconfirmed" &&
      clock.now() >= (this.#deadline ?? Infinity);
    const closesAt = this.status().permissionClosesAt!;
    reportRenewal(this.#p.logger, v, token, {
      past,
      closesInMs: this.#open ? closesAt - clock.now() : undefined,
      rejections: this.#attempts,
      heartbeatMs,
    });
    if (v.kind === "lost") {
      this.#lost = v.summary;
      this.#deadline = undefined;
      this.#close(`lease lost: ${v.summary}`);
    } else if (past) {
      this.#close("the lease was not confirmed by its local deadline");
    }
  }

  async #reacquire(shutdown: AbortSignal): Promise<void> {
    const { client, holder, ttlSeconds, heartbeatMs, clock } = this.#p;
    this.#close(this.#open ? "lease not held" : this.#reason);
    if (clock.now() < this.#quietUntil) return;
    const sentAt = clock.now();
    let outcome: GrantOutcome;
    {
      // Not cut short by a shutdown: the server may grant it all the same,
      // and a grant whose answer was never read could not be released.
      using call = bounded(clock, heartbeatMs);
      outcome = await client.acquire(holder, ttlSeconds, call.signal);
    }
    const a = this.#attempts.record(outcome, sentAt, heartbeatMs);
    if (a.kind === "shared") this.#quietUntil = clock.now() + a.quietMs;
    if (a.kind !== "granted") return;
    // Ours from here on, even if the volume refuses it: the next answer for
    // this token is our own grant, never another process's.
    this.#token = a.token;
    this.#lost = undefined;
    this.#attempts.forget();
    if (!shutdown.aborted && !await this.#persist(sentAt, shutdown)) return;
    if (shutdown.aborted) {
      this.#deadline = sentAt + ttlSeconds * 1000;
      this.#unusedGrant = true;
      return this.#p.logger.info(
        "lease reacquired while shutting down; the workload stays stopped",
        { fencing_token: a.token },
      );
    }
    this.#confirm(sentAt, true);
    this.#p.observer?.reacquired?.(a.token);
  }

  /**
   * Writes the new token; when the volume keeps refusing, releases the
   * lease once that is safe (a token the workload cannot read is worth
   * nothing) and returns false: the next tick tries a new grant.
   */
  async #persist(sentAt: number, shutdown: AbortSignal): Promise<boolean> {
    const token = this.#token;
    const failed = await persistHandoff(this.#p, token, this.#saved, shutdown);
    if (!failed) return true;
    this.#lost = `the ${failed} file could not be written to the state volume`;
    this.#close(`lease not usable: ${this.#lost}`);
    await this.#applying;
    const deadline = sentAt + this.#p.ttlSeconds * 1000;
    await releaseWhenSafe(this.#p, this.#closedAt, token, deadline, shutdown);
    return false;
  }

  /** Records a success sent at `sentAt`; reopens the permission only while its closing time is ahead. */
  #confirm(sentAt: number, reacquired: boolean): void {
    const { clock, ttlSeconds, enforceLeadMs, logger } = this.#p;
    const deadline = sentAt + ttlSeconds * 1000;
    const fencing_token = this.#token;
    if (clock.now() >= deadline - enforceLeadMs) {
      this.#deadline = deadline;
      logger.warn(reacquired ? GO.acquireLate : GO.renewLate, {
        detail:
          "the server confirmed the lease too late to let the workload run",
        fencing_token,
        late_by_ms: Math.round(clock.now() - (deadline - enforceLeadMs)),
      });
      return this.#close(
        "the last confirmation arrived after its own deadline",
      );
    }
    // Read before anything changes, so that a throw changes nothing; the
    // monotonic clock last, so time spent reading moves the marker's
    // deadlines earlier, never later.
    const [bootNow, wallNow] = [clock.bootNow(), clock.wallNow()];
    const left = deadline - clock.now();
    this.#deadline = deadline;
    const marker = markerDeadlines(left, enforceLeadMs, bootNow, wallNow);
    // A process that never held the lease (its handoff lapsed) acquires it.
    const msg = !reacquired
      ? GO.leaseRenewed
      : (this.#held ? GO.reacquired : GO.leaseAcquired);
    const detail = "the gate is open: the workload may run";
    if (this.#open) logger.debug(msg, { fencing_token });
    else logger.info(msg, { fencing_token, detail });
    this.#open = this.#held = true;
    this.#show(marker);
    this.#arm();
    this.#changed();
  }

  /** Closes the permission, or applies the closed one again; logs only the transition from open. */
  #close(reason: string, atShutdown = false): void {
    const changed = this.#open || this.#reason !== reason;
    if (this.#open) {
      const { logger } = this.#p;
      if (atShutdown) {
        logger.info("gate closed for the release at shutdown", { reason });
      } else {
        logger.warn("gate closed: stopping the workload", { reason });
      }
      this.#closedAt = this.#p.clock.now();
    }
    this.#open = false;
    this.#reason = reason;
    const failure = changed ? GO.enforceFailed : GO.reenforceFailed;
    this.#apply((e) => e.close(reason), failure);
    if (!changed) return;
    this.#arm();
    this.#changed();
  }

  /** Queues writing the open permission's marker; `#arm` writes it again. */
  #show(marker = this.#shown!): void {
    const closesAt = this.status().permissionClosesAt!;
    this.#shown = marker;
    this.#refreshAt = markerRewrite(this.#p.clock.now(), closesAt).next;
    this.#apply(
      (e) => openMarker(e, marker, this.#p.logger, this.#marker),
      GO.enforcerReleaseFailed,
    );
  }

  /** Queues one decision behind the earlier ones; a failure is logged, never thrown. */
  #apply(action: (e: Enforcer) => Promise<void>, failure: string): void {
    this.#unapplied++;
    this.#applying = this.#applying.then(() => action(this.#p.enforcer))
      .catch((error) => this.#p.logger.warn(failure, { error }))
      .finally(() => void this.#unapplied--);
  }

  /** (Re-)arms the one timer of the open permission: it closes it at deadline minus lead, and rewrites its marker until then; none outside `run`. */
  #arm(): void {
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    if (!this.#running || this.#closeIfDue() || !this.#open) return;
    const now = this.#p.clock.now();
    const closesAt = this.status().permissionClosesAt!;
    if (now >= this.#refreshAt) {
      this.#refreshAt = Infinity; // not written when woken too late
      if (markerRewrite(now, closesAt).write) this.#show();
    }
    const at = Math.min(this.#refreshAt, closesAt);
    this.#cancelTimer = this.#p.clock.after(at - now, () => this.#arm());
  }

  /** Closes the open permission once its closing time has come; says whether it did. */
  #closeIfDue(): boolean {
    const closesAt = this.status().permissionClosesAt;
    if (!this.#open || !(this.#p.clock.now() >= closesAt!)) return false;
    this.#p.logger.warn(GO.localDeadline, {
      detail:
        "the lease was not confirmed in time: the workload is stopped the enforce lead before its local deadline",
      fencing_token: this.#token,
    });
    this.#close(
      "the lease was not confirmed in time: its local deadline is near",
    );
    return true;
  }

  #changed(): void {
    try {
      this.#p.observer?.changed?.(this.status());
    } catch (error) {
      this.#p.logger.error("a lease status observer failed", { error });
    }
  }

  async #shutdown(): Promise<void> {
    const { clock, logger, releaseOnShutdown, enforcer, enforceLeadMs } =
      this.#p;
    // A process frozen past the closing time wakes with the stop pending and
    // the timer gone with the loop.
    if (this.#closeIfDue()) await this.#applying;
    // Past its local deadline the lease is no longer ours to release.
    const expired = clock.now() >= (this.#deadline ?? Infinity);
    if (
      !(releaseOnShutdown || this.#unusedGrant) || this.#token <= 0 ||
      this.#lost !== undefined || expired
    ) {
      // Still wait (at most the lead), so that a pending SIGKILL lands
      // before the enforcer is disposed.
      const leadLeft = this.#closedAt + enforceLeadMs - clock.now();
      if (!this.#open) await stopWait(enforcer, clock, leadLeft);
      return logger.info(GO.noRelease, {
        reason: !releaseOnShutdown
          ? "release on shutdown is off"
          : expired
          ? "its local deadline has passed: it is no longer ours to release"
          : "the lease is not held",
      });
    }
    this.#close("the lease is being released at shutdown", true);
    await this.#applying;
    const { token, deadline } = this.status();
    await releaseWhenSafe(this.#p, this.#closedAt, token, deadline);
  }
}
