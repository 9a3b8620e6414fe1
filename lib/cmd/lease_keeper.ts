/**
 * The wiring every lease-keeping process shares (`renew`, the sidecar, and
 * `run`): the instrumented lease client, the metrics that observe the
 * renewer, the health endpoint that serves them, and the renewer itself.
 * Written once so both roles report the permission's state in the same way:
 * the renewer's decision is the only source, and the metrics, the health
 * endpoint and `run`'s supervision read it from the renewer.
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import type { Config } from "../config/config.ts";
import type { Enforcer } from "../enforce/enforcer.ts";
import {
  type HealthAddr,
  type HealthServer,
  startHealthServer,
} from "./health.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";
import { LeaseMetrics } from "./lease_metrics.ts";
import { Renewer } from "../hold/renewer.ts";
import type { RenewerStatus } from "../hold/lease.ts";
import type { RenewerStore } from "../hold/handoff.ts";
import { clientFor } from "./client_for.ts";
import { startFullCollections } from "./full_collection.ts";

/** Options for {@linkcode LeaseKeeper.open}. */
export interface LeaseKeeperOptions {
  /** The resolved configuration. */
  config: Config;
  /** Receives every record. */
  logger: Logger;
  /** Monotonic and boot-time clocks. */
  clock: Clock;
  /** The lease RPCs; default the client the configuration describes. */
  client?: LeaseClient;
  /** Where to serve /healthz and /metrics; undefined: not served. */
  healthAddr?: HealthAddr;
}

/** What a process reports before its renewer exists (`run` still acquiring). */
const WAITING: RenewerStatus = {
  permissionOpen: false,
  token: 0,
  reason: "waiting to acquire the lease",
};

/**
 * One process's lease keeping: client, metrics, health endpoint and (once
 * {@linkcode LeaseKeeper.renewer} is called) the renewer they observe.
 */
export class LeaseKeeper {
  /** The metrics of this lease. */
  readonly metrics: LeaseMetrics;
  /** The lease client, counted by the metrics. */
  readonly client: LeaseClient;
  #o: LeaseKeeperOptions;
  #renewer: Renewer | undefined;
  #stopping = false;
  #health: HealthServer | undefined;
  #collections: Disposable | undefined;

  private constructor(
    o: LeaseKeeperOptions,
    metrics: LeaseMetrics,
    client: LeaseClient,
  ) {
    this.#o = o;
    this.metrics = metrics;
    this.client = client;
  }

  /**
   * Builds the client and the metrics, starts the health endpoint and the
   * periodic full collections (`full_collection.ts`).
   *
   * @throws {Error} when the client cannot be built (CA bundle, key file)
   * or the listener cannot be opened: a start-up failure.
   */
  static async open(o: LeaseKeeperOptions): Promise<LeaseKeeper> {
    // The metrics read the keeper they are built for.
    const ref: { keeper?: LeaseKeeper } = {};
    const metrics = new LeaseMetrics({
      status: () => ref.keeper?.status(),
      clock: o.clock,
      isStopping: () => ref.keeper?.isStopping ?? false,
      lease: {
        lease: o.config.leaseName,
        namespace: o.config.leaseNamespace,
        holder: o.config.holder,
      },
    });
    const client = metrics.instrumentClient(
      o.client ?? await clientFor(o.config, o.logger, o.clock),
    );
    const keeper = new LeaseKeeper(o, metrics, client);
    ref.keeper = keeper;
    if (o.healthAddr) {
      keeper.#health = startHealthServer({
        ...o.healthAddr,
        status: () => keeper.status(),
        clock: o.clock,
        metrics: () => metrics.render(),
        logger: o.logger,
      });
    }
    keeper.#collections = startFullCollections();
    return keeper;
  }

  /** The renewer's state, or "waiting to acquire" before it exists. */
  status(): RenewerStatus {
    return this.#renewer?.status() ?? WAITING;
  }

  /**
   * Creates the renewer (once) with the configured timings, observed by the
   * metrics and then by `onChange`.
   *
   * @param enforcer What closing the permission does.
   * @param store The handoff it adopts and the token it persists.
   * @param guardSharedHolder See `RenewerOptions.guardSharedHolder`.
   * @param onChange Told about every change of the permission or the token.
   * @returns The renewer; call `run` on it.
   */
  renewer(
    enforcer: Enforcer,
    store: RenewerStore,
    guardSharedHolder: boolean,
    onChange?: (status: RenewerStatus) => void,
  ): Renewer {
    const { config, clock, logger } = this.#o;
    const observer = this.metrics.observer();
    this.#renewer = new Renewer({
      ...config,
      client: this.client,
      clock,
      logger,
      enforcer,
      store,
      guardSharedHolder,
      observer: {
        ...observer,
        changed: (s) => {
          observer.changed?.(s);
          onChange?.(s);
        },
      },
    });
    return this.#renewer;
  }

  /** Whether {@linkcode LeaseKeeper.stopping} was called. */
  get isStopping(): boolean {
    return this.#stopping;
  }

  /** From now on a closing permission is a release, not a loss (metrics). */
  stopping(): void {
    this.#stopping = true;
  }

  /** Stops the periodic full collections and closes the health endpoint. */
  async close(): Promise<void> {
    this.#collections?.[Symbol.dispose]();
    await this.#health?.close();
  }
}
