/**
 * The helper's metrics: {@linkcode LeaseMetrics}, the `berth_acquire_*` set
 * fed by the lease client, the renewer and the enforcers, written out by the
 * registry of `prometheus.ts`. A scrape reads the lease state at that
 * moment, so the gauges never lag behind the renewer.
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import type { MarkerStore } from "../enforce/enforcer.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import type { ProcessTable } from "../enforce/proc.ts";
import type { RenewerObserver, RenewerStatus } from "../hold/lease.ts";
import { type Counter, type Histogram, Registry } from "../obs/prometheus.ts";

/** What `berth_acquire_enforcement_actions_total{action}` counts. */
export type EnforcementAction =
  | "marker_written"
  | "marker_removed"
  | "sigterm"
  | "sigkill";

/**
 * Bucket bounds of `berth_acquire_renew_duration_seconds`: Prometheus's
 * default buckets, which span a local API server (milliseconds) to one that
 * is about to miss the heartbeat (seconds).
 */
const RENEW_DURATION_BUCKETS: readonly number[] = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
];

/**
 * Wrappers that count what the enforcers do, so `enforcerFor` (renew) and
 * `run` can be instrumented without the enforcers knowing about metrics.
 */
export interface EnforcementWrappers {
  /** Counts successful marker writes and removals. */
  markerStore(inner: MarkerStore): MarkerStore;
  /** Counts SIGTERMs and SIGKILLs actually sent. */
  processTable(inner: ProcessTable): ProcessTable;
}

/** Options for {@linkcode LeaseMetrics}. */
export interface LeaseMetricsOptions {
  /** The renewer's state now; `undefined` while there is no renewer yet (`run` still waiting). */
  status: () => RenewerStatus | undefined;
  /** The monotonic clock the status's deadlines are on. */
  clock: Pick<Clock, "now">;
  /**
   * True once the process is shutting down: a permission closed then is a
   * release, not a loss, and is not counted in `lease_losses_total`.
   */
  isStopping?: () => boolean;
  /**
   * The lease these metrics are about, shown by `berth_acquire_lease_info`;
   * undefined: no info metric.
   */
  lease?: { lease: string; namespace: string; holder: string };
}

/**
 * The `berth_acquire_*` metrics of one lease, and the hooks that feed them.
 * RPCs are counted by wrapping the lease client (so the initial acquire of
 * `run` and the shutdown release count too); losses and reacquires come from
 * the renewer's observer; enforcement actions from wrapped marker store and
 * process table.
 */
export class LeaseMetrics implements EnforcementWrappers {
  /** The registry; {@linkcode LeaseMetrics.render} writes it out. */
  readonly registry: Registry = new Registry();
  #o: LeaseMetricsOptions;
  #rpc: Counter;
  #renewDuration: Histogram;
  #losses: Counter;
  #reacquires: Counter;
  #actions: Counter;
  #wasOpen = false;

  /** Registers every metric; see docs/run-and-gate.md (Metrics) for their meaning. */
  constructor(options: LeaseMetricsOptions) {
    this.#o = options;
    const r = this.registry;
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
    this.#renewDuration = r.histogram(
      "berth_acquire_renew_duration_seconds",
      "Duration of Renew RPCs in seconds, whatever their outcome (cancelled ones excluded).",
      RENEW_DURATION_BUCKETS,
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
    return this.registry.render();
  }

  /** Counts one enforcement action. */
  countEnforcement(action: EnforcementAction): void {
    this.#actions.inc({ action });
  }

  /** The renewer hooks: losses (the permission going from open to closed outside shutdown) and reacquires. */
  observer(): RenewerObserver {
    return {
      changed: (status) => {
        if (
          this.#wasOpen && !status.permissionOpen && !this.#o.isStopping?.()
        ) {
          this.#losses.inc();
        }
        this.#wasOpen = status.permissionOpen;
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

  /** `inner`, counting `marker_written` / `marker_removed` for each one that succeeded. */
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

  /** `inner`, counting `sigterm` / `sigkill` for each signal actually delivered. */
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
