/**
 * The renewer: keeps a held lease alive against a local, monotonic deadline,
 * closes the gate (stops the workload through an {@linkcode Enforcer}) before
 * that deadline when the lease cannot be confirmed, and reacquires.
 *
 * This is where the product's promise lives, so the rules are spelled out:
 * - The deadline is the send time of the last successful Renew/Acquire plus
 *   the TTL (see `hold.ts`). The gate closes `enforceLeadMs` before it, on a
 *   timer of its own, even while an RPC is in flight.
 * - 409 or `acquired:false` lose the lease at once; any other failure leaves
 *   the local deadline in charge.
 * - A success re-opens the gate only while its own closing time is ahead.
 * - While the lease is lost, every tick re-applies the enforcer (a restarted
 *   container is stopped again) and tries to acquire.
 *
 * @module
 */
import { aborted, type Clock } from "../state/clock.ts";
import type { Enforcer } from "../enforce/enforcer.ts";
import {
  classifyAcquire,
  classifyRenew,
  deadlineFrom,
  extendedExistingGrant,
  gateClosesAt,
  mayHaveBeenGranted,
  renewBound,
  SHARED_HOLDER_MESSAGE,
  sharedHolderQuietMs,
} from "./deadline.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import { describeFailure } from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";
import type { MarkerDeadlines } from "../state/marker.ts";

/**
 * What the renewer reads and writes on the state volume: the init
 * container's handoff on start-up, and the holder and token whenever they
 * change, so a restarted sidecar and the workload see the current token.
 */
export interface HandoffStore {
  /** The `holder` file; undefined when absent. */
  readHolder(): string | undefined;
  /** The `token` file; undefined when absent; throws when it is not a positive int32. */
  readToken(): number | undefined;
  /** The deadlines inside the health marker; undefined when absent or not ours. */
  readMarkerDeadlines(): MarkerDeadlines | undefined;
  /** Persists the holder (atomic). */
  writeHolder(holder: string): Promise<void>;
  /** Persists the fencing token (atomic). */
  writeToken(token: number): Promise<void>;
}

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
  /** How long before the local deadline the gate closes (ms). */
  enforceLeadMs: number;
  /** Stops and re-admits the workload. */
  enforcer: Enforcer;
  /** The state volume. */
  store: HandoffStore;
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
}

/**
 * Hooks for the health endpoint and the metrics, so they are computed from
 * the renewer's own state instead of a second reading of the files. All
 * optional; none may throw.
 */
export interface RenewerObserver {
  /** After every state change (gate opened or closed, token changed). */
  changed?(status: RenewerStatus): void;
  /** After every RPC, with its outcome kind and how long it took (ms). */
  rpc?(
    rpc: "acquire" | "renew" | "release",
    outcome: string,
    latencyMs: number,
  ): void;
  /** The server said the lease is gone (409 or `acquired:false` on renew). */
  lost?(reason: string): void;
  /** The lease was acquired again after it was lost or refused. */
  reacquired?(token: number): void;
}

/** A snapshot of the renewer, for health checks and metrics. */
export interface RenewerStatus {
  /** True while the workload may run: the lease is confirmed and the gate is open. */
  gateOpen: boolean;
  /** The fencing token held or last held (0: never held). */
  token: number;
  /** Monotonic ms at which the gate closes, when the lease is confirmed. */
  gateClosesAt?: number;
  /** Monotonic ms of the local lease deadline, when the lease is confirmed. */
  deadline?: number;
  /** Why the gate is closed, when it is. */
  reason?: string;
}

/**
 * Runs the sidecar's lease loop until `shutdown` aborts. One instance per
 * process; call {@linkcode Renewer.run} once.
 */
export class Renewer {
  #o:
    & Required<Omit<RenewerOptions, "observer">>
    & Pick<RenewerOptions, "observer">;
  #token = 0;
  /** Monotonic deadline of the confirmed lease; undefined until confirmed. */
  #deadline: number | undefined;
  /** Set when the server said the lease is gone; cleared by a successful acquire. */
  #lost: string | undefined;
  #gateOpen = false;
  #reason: string | undefined = "starting";
  /** Aborted and replaced whenever the deadline moves, to re-arm the gate timer. */
  #rearm = new AbortController();
  /**
   * Set when another process holds the lease under this same holder
   * identity: until then no Acquire is sent, because each one would extend
   * that process's lease for it.
   */
  #quietUntil: number | undefined;
  /** Whether the last Acquire may have been granted without our learning the token. */
  #maybeGranted = false;
  /** Serialises enforcer calls so they apply in the order they were decided. */
  #enforcing: Promise<void> = Promise.resolve();

  /** Validates nothing: the config module already did; see {@linkcode RenewerOptions}. */
  constructor(options: RenewerOptions) {
    this.#o = { releaseTimeoutMs: 5000, ...options };
  }

  /** The current state, for health checks and metrics. */
  status(): RenewerStatus {
    return {
      gateOpen: this.#gateOpen,
      token: this.#token,
      deadline: this.#deadline,
      gateClosesAt: this.#deadline === undefined
        ? undefined
        : gateClosesAt(this.#deadline, this.#o.enforceLeadMs),
      reason: this.#gateOpen ? undefined : this.#reason,
    };
  }

  /**
   * Adopts the handoff, then renews at the heartbeat until `shutdown`
   * aborts; then releases when configured and held. Resolves when done.
   */
  async run(shutdown: AbortSignal): Promise<void> {
    const { clock, heartbeatMs } = this.#o;
    this.#adoptHandoff();
    const stopTimer = new AbortController();
    const timer = this.#gateTimer(
      AbortSignal.any([shutdown, stopTimer.signal]),
    );
    try {
      while (!shutdown.aborted) {
        const tickStart = clock.now();
        if (this.#renewable()) await this.#renewOnce(shutdown);
        else await this.#reacquireOnce(shutdown);
        if (shutdown.aborted) break;
        await clock.sleep(tickStart + heartbeatMs - clock.now(), shutdown);
      }
    } finally {
      stopTimer.abort();
      await timer;
      await this.#enforcing;
    }
    await this.#releaseOnShutdown();
    await this.#o.enforcer.dispose();
  }

  /** True while a Renew (rather than an Acquire) is the right call. */
  #renewable(): boolean {
    if (this.#token <= 0 || this.#lost !== undefined) return false;
    return this.#deadline === undefined || this.#o.clock.now() < this.#deadline;
  }

  #adoptHandoff(): void {
    const { store, holder, logger, clock, ttlSeconds } = this.#o;
    let fileHolder: string | undefined;
    let token: number | undefined;
    try {
      fileHolder = store.readHolder();
      token = store.readToken();
    } catch (e) {
      logger.warn(
        "cannot read the init container's handoff; acquiring afresh",
        { error: e },
      );
    }
    if (fileHolder === undefined || token === undefined) {
      this.#close("no lease handed over by the init container; acquiring");
      return;
    }
    if (fileHolder !== holder) {
      logger.warn(
        "the state volume names another holder; never renewing or releasing its lease, acquiring as the configured holder",
        { file_holder: fileHolder },
      );
      this.#close("the handed-over lease belongs to another holder");
      return;
    }
    this.#token = token;
    let marker: MarkerDeadlines | undefined;
    try {
      marker = store.readMarkerDeadlines();
    } catch (e) {
      logger.warn(
        "cannot read the health marker's deadline; confirming the lease first",
        { error: e },
      );
    }
    if (marker) {
      // The marker's deadline is on the boot-time clock that every container
      // of the node shares, so it survives a sidecar restart. Trust it only
      // while it lies in the future and no further than one TTL away.
      // The wall-clock copy, when present, can only shorten it.
      const left = Math.min(
        marker.leaseDeadlineBootMs - clock.bootNow(),
        marker.leaseDeadlineWallMs === undefined
          ? Infinity
          : marker.leaseDeadlineWallMs - clock.wallNow(),
      );
      if (left > 0 && left <= ttlSeconds * 1000) {
        this.#deadline = clock.now() + left;
        if (clock.now() < gateClosesAt(this.#deadline, this.#o.enforceLeadMs)) {
          this.#gateOpen = true;
          this.#reason = undefined;
          logger.info(
            "adopted the lease; the workload keeps running while it is confirmed",
            {
              fencing_token: token,
              deadline_in_ms: Math.round(left),
            },
          );
          this.#changed();
          return;
        }
      }
    }
    this.#close("confirming the handed-over lease before the workload may run");
  }

  async #renewOnce(shutdown: AbortSignal): Promise<void> {
    const { client, holder, ttlSeconds, heartbeatMs, clock, logger } = this.#o;
    const token = this.#token;
    const sentAt = clock.now();
    const bound = renewBound(sentAt, heartbeatMs, this.#deadline);
    const outcome = await client.renew(
      holder,
      token,
      ttlSeconds,
      AbortSignal.any([clock.timeout(bound), shutdown]),
    );
    this.#o.observer?.rpc?.("renew", outcome.kind, clock.now() - sentAt);
    const verdict = classifyRenew(outcome, token);
    switch (verdict.kind) {
      case "confirmed":
        this.#confirm(sentAt, "renewed");
        return;
      case "lost":
        this.#lost = verdict.reason;
        this.#deadline = undefined;
        this.#o.observer?.lost?.(verdict.reason);
        logger.error("lease lost; stopping the workload", {
          reason: verdict.reason,
          fencing_token: token,
        });
        this.#close(`lease lost: ${verdict.reason}`);
        return;
      case "unconfirmed": {
        const closes = this.status().gateClosesAt;
        logger.warn(
          "lease renewal failed; the workload keeps running until the gate closes",
          {
            error: verdict.reason,
            fencing_token: token,
            gate_closes_in_ms: closes === undefined
              ? undefined
              : Math.max(0, Math.round(closes - clock.now())),
          },
        );
        return;
      }
      case "cancelled":
        return;
    }
  }

  async #reacquireOnce(shutdown: AbortSignal): Promise<void> {
    const { client, holder, ttlSeconds, heartbeatMs, clock, logger, store } =
      this.#o;
    // Re-apply first: the kubelet may have restarted the container since the last tick.
    this.#close(this.#reason ?? "lease not held");
    if (this.#quietUntil !== undefined && clock.now() < this.#quietUntil) {
      return;
    }
    const sentAt = clock.now();
    const outcome = await client.acquire(
      holder,
      ttlSeconds,
      AbortSignal.any([clock.timeout(heartbeatMs), shutdown]),
    );
    this.#o.observer?.rpc?.("acquire", outcome.kind, clock.now() - sentAt);
    const verdict = classifyAcquire(outcome);
    const maybeGranted = this.#maybeGranted;
    this.#maybeGranted = verdict.kind === "failed" &&
      mayHaveBeenGranted(verdict.failure);
    switch (verdict.kind) {
      case "acquired": {
        if (
          verdict.token !== this.#token && !maybeGranted &&
          extendedExistingGrant(verdict.lease, ttlSeconds)
        ) {
          // Not our grant: another process or pod uses this holder identity.
          logger.warn(SHARED_HOLDER_MESSAGE, {
            current_fencing_token: verdict.token,
            acquired_at: verdict.lease.acquiredAt,
          });
          this.#quietUntil = clock.now() + sharedHolderQuietMs(ttlSeconds);
          return;
        }
        const previous = this.#token;
        this.#token = verdict.token;
        this.#lost = undefined;
        try {
          if (previous === 0) await store.writeHolder(holder);
          if (previous !== verdict.token) await store.writeToken(verdict.token);
        } catch (e) {
          logger.error(
            "cannot persist the new fencing token; the workload stays stopped",
            {
              error: e,
              fencing_token: verdict.token,
            },
          );
          this.#token = previous;
          this.#lost =
            "the fencing token could not be written to the state volume";
          return;
        }
        this.#confirm(sentAt, "lease reacquired");
        this.#o.observer?.reacquired?.(verdict.token);
        return;
      }
      case "held":
        logger.info("lease held by another holder; waiting", {
          current_holder: verdict.holder,
          current_fencing_token: verdict.token,
        });
        return;
      case "failed":
        logger.warn("lease acquire failed; retrying", {
          error: verdict.reason,
        });
        return;
      case "cancelled":
        return;
    }
  }

  /** Records a success sent at `sentAt`; re-opens the gate only if that leaves time. */
  #confirm(sentAt: number, what: string): void {
    const { clock, ttlSeconds, enforceLeadMs, logger } = this.#o;
    const deadline = deadlineFrom(sentAt, ttlSeconds);
    const now = clock.now();
    this.#deadline = deadline;
    this.#rearm.abort();
    this.#rearm = new AbortController();
    if (now >= gateClosesAt(deadline, enforceLeadMs)) {
      logger.warn(
        "the server confirmed the lease too late to let the workload run",
        {
          fencing_token: this.#token,
          late_by_ms: Math.round(now - gateClosesAt(deadline, enforceLeadMs)),
        },
      );
      this.#close("the last confirmation arrived after its own deadline");
      return;
    }
    const wasOpen = this.#gateOpen;
    this.#gateOpen = true;
    this.#reason = undefined;
    const boot = clock.bootNow();
    const wall = clock.wallNow();
    const closes = gateClosesAt(deadline, enforceLeadMs);
    const marker: MarkerDeadlines = {
      leaseDeadlineBootMs: boot + (deadline - now),
      gateClosesBootMs: boot + (closes - now),
      leaseDeadlineWallMs: wall + (deadline - now),
      gateClosesWallMs: wall + (closes - now),
    };
    this.#enforce((e) => e.open(marker));
    if (!wasOpen) logger.info(what, { fencing_token: this.#token });
    else logger.debug(what, { fencing_token: this.#token });
    this.#changed();
  }

  /** Closes (or re-applies the closed) gate; logs only on the transition. */
  #close(reason: string, shutdown = false): void {
    if (this.#gateOpen || this.#reason !== reason) {
      if (this.#gateOpen && shutdown) {
        this.#o.logger.info("gate closed for the release at shutdown", {
          reason,
        });
      } else if (this.#gateOpen) {
        this.#o.logger.warn("gate closed: stopping the workload", { reason });
      }
      this.#gateOpen = false;
      this.#reason = reason;
      this.#changed();
    }
    this.#enforce((e) => e.close(reason));
  }

  #enforce(action: (e: Enforcer) => Promise<void>): void {
    this.#enforcing = this.#enforcing.then(() => action(this.#o.enforcer))
      .catch((e) => {
        this.#o.logger.error("enforcement failed", { error: e });
      });
  }

  #changed(): void {
    this.#o.observer?.changed?.(this.status());
  }

  /** Closes the gate at deadline minus lead, even while an RPC is in flight. */
  async #gateTimer(stop: AbortSignal): Promise<void> {
    const { clock } = this.#o;
    while (!stop.aborted) {
      const rearm = this.#rearm.signal;
      const closes = this.status().gateClosesAt;
      const wait = this.#gateOpen && closes !== undefined
        ? closes - clock.now()
        : Infinity;
      if (wait <= 0) {
        this.#close(
          "the lease was not confirmed in time: its local deadline is near",
        );
        continue;
      }
      if (wait === Infinity) await aborted(AbortSignal.any([stop, rearm]));
      else await clock.sleep(wait, AbortSignal.any([stop, rearm]));
    }
  }

  async #releaseOnShutdown(): Promise<void> {
    const {
      client,
      holder,
      releaseOnShutdown,
      releaseTimeoutMs,
      clock,
      logger,
    } = this.#o;
    if (!releaseOnShutdown || this.#token <= 0 || this.#lost !== undefined) {
      logger.info("shutting down without releasing the lease", {
        reason: !releaseOnShutdown
          ? "release on shutdown is off"
          : "the lease is not held",
      });
      return;
    }
    // Native sidecars stop after the main containers, so the workload is gone
    // by now; closing the gate first still keeps it from running on a lease
    // we are about to give away if this sidecar was stopped on its own.
    this.#close("the lease is being released at shutdown", true);
    await this.#enforcing;
    // Deliberately not tied to the shutdown signal: a second SIGTERM must not cut it short.
    const outcome = await client.release(
      holder,
      this.#token,
      clock.timeout(releaseTimeoutMs),
    );
    if (outcome.kind === "released") {
      logger.info("lease released", { fencing_token: this.#token });
    } else if (outcome.kind === "conflict") {
      logger.info(
        "lease already belongs to another holder; nothing to release",
        {
          fencing_token: this.#token,
        },
      );
    } else {
      logger.warn("lease release failed; it will expire on its own", {
        error: describeFailure(outcome),
        fencing_token: this.#token,
      });
    }
  }
}
