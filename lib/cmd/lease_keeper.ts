/**
 * The lease keeping of `renew`, the sidecar, and of `run`: the lease client,
 * the `berth_acquire_*` metrics it and the renewer feed, the health endpoint
 * that serves them, and the renewer. The renewer's decision is the one
 * source: the metrics, the health endpoint and `run`'s supervision read it
 * from the renewer, a scrape at that moment, so the gauges never lag behind.
 *
 * @module
 */
import type { Config } from "../config/config.ts";
import type { Enforcer, MarkerStore } from "../enforce/enforcer.ts";
import type { ProcessTable } from "../enforce/proc.ts";
import type { RenewerStore } from "../hold/handoff.ts";
import type { RenewerObserver, RenewerStatus } from "../hold/lease.ts";
import { Renewer } from "../hold/renewer.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";
import { type Counter, type Histogram, Registry } from "../obs/prometheus.ts";
import type { Clock } from "../state/clock.ts";
import { startFullCollections } from "./full_collection.ts";
import { type HealthAddr, startHealthServer } from "./health.ts";
import { clientFor } from "./startup.ts";

/** What the metrics read: the renewer's state now, the clock of its deadlines, whether the process shuts down (a permission closed then is a release, not a loss), the lease `berth_acquire_lease_info` names. */
export interface LeaseMetricsOptions {
  status: () => RenewerStatus | undefined;
  clock: Pick<Clock, "now">;
  isStopping?: () => boolean;
  lease?: { lease: string; namespace: string; holder: string };
}

/**
 * The `berth_acquire_*` metrics of one lease (docs/run-and-gate.md,
 * Metrics). RPCs are counted by wrapping the lease client (so `run`'s first
 * acquire and the shutdown release count too); losses and reacquires come
 * from the renewer's observer; enforcement actions from the wrapped marker
 * store and process table, so the enforcers know nothing of metrics.
 */
export class LeaseMetrics {
  #registry = new Registry();
  #o: LeaseMetricsOptions;
  #rpc: Counter;
  #renewDuration: Histogram;
  #losses: Counter;
  #reacquires: Counter;
  #actions: Counter;
  #wasOpen = false;

  constructor(options: LeaseMetricsOptions) {
    this.#o = options;
    const r = this.#registry;
    if (options.lease) {
      r.info(
        "berth_acquire_lease_info",
        "Always 1; its labels name the lease (lease, namespace) and this process's holder identity.",
        options.lease,
      );
    }
    r.gauge(
      "berth_acquire_lease_held",
      "1 while the lease is confirmed and the workload may run (the gate is open), else 0.",
      () => this.#o.status()?.permissionOpen ? 1 : 0,
    );
    r.gauge(
      "berth_acquire_fencing_token",
      "Fencing token of the lease held or last held; 0 before the first acquisition.",
      () => this.#o.status()?.token ?? 0,
    );
    r.gauge(
      "berth_acquire_lease_deadline_seconds",
      "Seconds until the local lease deadline (last confirmed send + TTL); 0 when no lease is confirmed, negative once passed.",
      () => {
        const deadline = this.#o.status()?.deadline;
        if (deadline === undefined) return 0;
        // To the millisecond: the clock's fractions are noise here.
        return Math.round(deadline - this.#o.clock.now()) / 1000;
      },
    );
    // Prometheus's default buckets: a local API server (milliseconds) to one
    // about to miss the heartbeat (seconds).
    this.#renewDuration = r.histogram(
      "berth_acquire_renew_duration_seconds",
      "Duration of Renew RPCs in seconds, whatever their outcome (cancelled ones excluded).",
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    );
    this.#rpc = r.counter(
      "berth_acquire_rpc_total",
      "Lease RPCs by rpc (acquire, renew, release) and outcome (acquired, not-acquired, released, conflict, server-error, bad-response, transport-error, timeout, aborted).",
      ["rpc", "outcome"],
    );
    this.#losses = r.counter(
      "berth_acquire_lease_losses_total",
      "Times the gate closed on a confirmed lease: the server said it was gone, or it was not confirmed before its local deadline.",
    );
    this.#reacquires = r.counter(
      "berth_acquire_reacquires_total",
      "Times the lease was acquired again by the renewer after it was lost or not handed over.",
    );
    this.#actions = r.counter(
      "berth_acquire_enforcement_actions_total",
      "Enforcement actions by action: marker_written, marker_removed, sigterm, sigkill.",
      ["action"],
    );
  }

  /** The exposition text for a scrape. */
  render(): string {
    return this.#registry.render();
  }

  /** Counts one enforcement action. */
  countEnforcement(
    action: "marker_written" | "marker_removed" | "sigterm" | "sigkill",
  ): void {
    this.#actions.inc({ action });
  }

  /** The renewer's hooks, each change then passed to `onChange`: a loss is the permission going from open to closed outside shutdown. */
  observer(onChange?: (status: RenewerStatus) => void): RenewerObserver {
    return {
      changed: (status) => {
        const closed = this.#wasOpen && !status.permissionOpen;
        if (closed && !this.#o.isStopping?.()) this.#losses.inc();
        this.#wasOpen = status.permissionOpen;
        onChange?.(status);
      },
      reacquired: () => this.#reacquires.inc(),
    };
  }

  /** `inner`, counting every RPC by outcome and timing the renewals. */
  instrumentClient(inner: LeaseClient): LeaseClient {
    const timed = async <T extends { kind: string }>(
      rpc: "acquire" | "renew" | "release",
      call: () => Promise<T>,
    ): Promise<T> => {
      const t0 = this.#o.clock.now();
      const out = await call();
      this.#rpc.inc({ rpc, outcome: out.kind });
      if (rpc === "renew" && out.kind !== "aborted") {
        this.#renewDuration.observe((this.#o.clock.now() - t0) / 1000);
      }
      return out;
    };
    return {
      acquire: (holder, ttl, signal) =>
        timed("acquire", () => inner.acquire(holder, ttl, signal)),
      renew: (holder, token, ttl, signal) =>
        timed("renew", () => inner.renew(holder, token, ttl, signal)),
      release: (holder, token, signal) =>
        timed("release", () => inner.release(holder, token, signal)),
    };
  }

  /** `inner`, counting each marker write and removal that succeeded. */
  markerStore(inner: MarkerStore): MarkerStore {
    return {
      writeMarker: async (d) => {
        await inner.writeMarker(d);
        this.countEnforcement("marker_written");
      },
      removeMarker: async () => {
        await inner.removeMarker();
        this.countEnforcement("marker_removed");
      },
    };
  }

  /** `inner`, counting each SIGTERM and SIGKILL delivered. */
  processTable(inner: ProcessTable): ProcessTable {
    return {
      selfPid: inner.selfPid,
      parentPid: inner.parentPid,
      selfExe: inner.selfExe,
      list: () => inner.list(),
      get: (pid) => inner.get(pid),
      fileId: (path) => inner.fileId(path),
      kill: (pid, signal) => {
        const result = inner.kill(pid, signal);
        if (result === "sent") {
          this.countEnforcement(signal === "SIGTERM" ? "sigterm" : "sigkill");
        }
        return result;
      },
    };
  }
}

/** Options for {@linkcode LeaseKeeper.open}: `client` by default the one the configuration describes; without `healthAddr` /healthz and /metrics are not served. */
export interface LeaseKeeperOptions {
  config: Config;
  logger: Logger;
  clock: Clock;
  client?: LeaseClient;
  healthAddr?: HealthAddr;
}

/**
 * One process's lease keeping: client, metrics, health endpoint, the
 * periodic full collections, and (once {@linkcode LeaseKeeper.renewer} is
 * called) the renewer they observe.
 */
export class LeaseKeeper {
  readonly metrics: LeaseMetrics;
  /** The lease client, counted by the metrics. */
  readonly client: LeaseClient;
  #o: LeaseKeeperOptions;
  #renewer: Renewer | undefined;
  #stopping = false;
  #health: { close(): Promise<void> } | undefined;
  #collections: Disposable;

  private constructor(o: LeaseKeeperOptions, client: LeaseClient) {
    this.#o = o;
    this.metrics = new LeaseMetrics({
      status: () => this.status(),
      clock: o.clock,
      isStopping: () => this.#stopping,
      lease: {
        lease: o.config.leaseName,
        namespace: o.config.leaseNamespace,
        holder: o.config.holder,
      },
    });
    this.client = this.metrics.instrumentClient(client);
    if (o.healthAddr) {
      this.#health = startHealthServer({
        ...o.healthAddr,
        status: () => this.status(),
        clock: o.clock,
        metrics: () => this.metrics.render(),
        logger: o.logger,
      });
    }
    this.#collections = startFullCollections();
  }

  /**
   * Builds the client, starts the health endpoint and the full collections.
   * @throws {Error} When the client cannot be built (CA bundle, key file) or
   * the listener cannot be opened: a start-up failure.
   */
  static async open(o: LeaseKeeperOptions): Promise<LeaseKeeper> {
    return new LeaseKeeper(
      o,
      o.client ?? await clientFor(o.config, o.logger, o.clock),
    );
  }

  /** The renewer's state; before it exists (`run` still acquiring), waiting. */
  status(): RenewerStatus {
    return this.#renewer?.status() ??
      {
        permissionOpen: false,
        token: 0,
        reason: "waiting to acquire the lease",
      };
  }

  /**
   * Creates the renewer (once) with the configured timings, the enforcer,
   * the store of its handoff and token, observed by the metrics and then by
   * `onChange`; call `run` on it.
   */
  renewer(
    enforcer: Enforcer,
    store: RenewerStore,
    guardSharedHolder: boolean,
    onChange?: (status: RenewerStatus) => void,
  ): Renewer {
    const { config, clock, logger } = this.#o;
    this.#renewer = new Renewer({
      ...config,
      client: this.client,
      clock,
      logger,
      enforcer,
      store,
      guardSharedHolder,
      observer: this.metrics.observer(onChange),
    });
    return this.#renewer;
  }

  /** From now on a closing permission is a release, not a loss (metrics). */
  stopping(): void {
    this.#stopping = true;
  }

  /** Stops the full collections and closes the health endpoint. */
  async close(): Promise<void> {
    this.#collections[Symbol.dispose]();
    await this.#health?.close();
  }
}
