/**
 * The helper's metrics: a tiny registry that writes the Prometheus text
 * exposition format 0.0.4 (counters, gauges, one histogram; no dependency),
 * and {@linkcode LeaseMetrics}, the `berth_acquire_*` set fed by the lease
 * client, the renewer and the enforcers. A scrape reads the lease state at
 * that moment, so the gauges never lag behind the renewer.
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import type { MarkerStore } from "../enforce/enforcer.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import type { ProcessTable } from "../enforce/proc.ts";
import type { RenewerObserver, RenewerStatus } from "../hold/status.ts";

/** The `Content-Type` a Prometheus server expects for the text format 0.0.4. */
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Label values by label name; every declared label must be given. */
export type Labels = Record<string, string>;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/**
 * A sample value as the text format spells it: Prometheus parses values
 * with Go's `ParseFloat`, which wants `+Inf`, `-Inf` and `NaN` rather than
 * JavaScript's `Infinity`; finite numbers print as JavaScript prints them,
 * which Go reads back exactly.
 */
export function formatSampleValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return Object.is(v, -0) ? "0" : String(v);
}

/** Escapes a label value: backslash, double quote and newline, as the format requires. */
export function escapeLabelValue(s: string): string {
  return s.replace(/[\\"\n]/g, (c) => c === "\n" ? "\\n" : `\\${c}`);
}

/** Escapes a HELP text: backslash and newline only (quotes stay), as the format requires. */
export function escapeHelp(s: string): string {
  return s.replace(/[\\\n]/g, (c) => c === "\n" ? "\\n" : "\\\\");
}

function formatLabels(names: readonly string[], values: readonly string[]) {
  if (names.length === 0) return "";
  return `{${
    names.map((n, i) => `${n}="${escapeLabelValue(values[i])}"`).join(",")
  }}`;
}

interface Metric {
  name: string;
  help: string;
  type: "counter" | "gauge" | "histogram";
  /** The sample lines, without the HELP and TYPE lines. */
  lines(): string[];
}

/**
 * A monotonically increasing count, optionally split by labels. Series
 * appear once first incremented; a counter without labels always shows
 * (starting at 0), so a rate over it is defined from the first scrape.
 */
export class Counter {
  #labelNames: readonly string[];
  #series = new Map<string, { values: string[]; value: number }>();

  /** Made by {@linkcode Registry.counter}. */
  constructor(labelNames: readonly string[]) {
    this.#labelNames = labelNames;
    if (labelNames.length === 0) {
      this.#series.set(JSON.stringify([]), { values: [], value: 0 });
    }
  }

  /** Adds `by` (default 1, never negative) to the series for `labels`. */
  inc(labels: Labels = {}, by = 1): void {
    if (!(by >= 0)) {
      throw new RangeError(`a counter only goes up (got ${by})`);
    }
    const values = labelValues(this.#labelNames, labels);
    const key = JSON.stringify(values);
    const s = this.#series.get(key) ?? { values, value: 0 };
    s.value += by;
    this.#series.set(key, s);
  }

  /** The current value for `labels` (0 when the series has not appeared). */
  get(labels: Labels = {}): number {
    const key = JSON.stringify(labelValues(this.#labelNames, labels));
    return this.#series.get(key)?.value ?? 0;
  }

  /** @internal The sample lines for `name`. */
  lines(name: string): string[] {
    return [...this.#series.values()].map((s) =>
      `${name}${formatLabels(this.#labelNames, s.values)} ${
        formatSampleValue(s.value)
      }`
    );
  }
}

function labelValues(names: readonly string[], labels: Labels): string[] {
  const given = Object.keys(labels);
  if (
    given.length !== names.length || names.some((n) => !(n in labels))
  ) {
    throw new Error(
      `labels {${given.join(",")}} do not match the declared {${
        names.join(",")
      }}`,
    );
  }
  return names.map((n) => labels[n]);
}

/**
 * A cumulative histogram of observed values (for example latencies in
 * seconds), with fixed upper bounds; `+Inf` is added implicitly.
 */
export class Histogram {
  #bounds: number[];
  #counts: number[];
  #sum = 0;
  #count = 0;

  /** Made by {@linkcode Registry.histogram}; `bounds` strictly increasing and finite. */
  constructor(bounds: readonly number[]) {
    for (let i = 0; i < bounds.length; i++) {
      if (
        !Number.isFinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])
      ) {
        throw new RangeError(
          `histogram bounds must be finite and strictly increasing (got ${
            bounds.join(", ")
          })`,
        );
      }
    }
    this.#bounds = [...bounds];
    this.#counts = bounds.map(() => 0);
  }

  /** Records one value. */
  observe(v: number): void {
    for (let i = 0; i < this.#bounds.length; i++) {
      if (v <= this.#bounds[i]) this.#counts[i]++;
    }
    this.#sum += v;
    this.#count++;
  }

  /** @internal The `_bucket`, `_sum` and `_count` lines for `name`. */
  lines(name: string): string[] {
    const out = this.#bounds.map((b, i) =>
      `${name}_bucket{le="${formatSampleValue(b)}"} ${this.#counts[i]}`
    );
    out.push(`${name}_bucket{le="+Inf"} ${this.#count}`);
    out.push(`${name}_sum ${formatSampleValue(this.#sum)}`);
    out.push(`${name}_count ${this.#count}`);
    return out;
  }
}

/**
 * Owns the metrics and writes them out. One instance per process; the names
 * are checked when registered, so a typo fails at start-up, not at a scrape.
 */
export class Registry {
  #metrics: Metric[] = [];

  /** Registers a counter; its name should end in `_total`. */
  counter(name: string, help: string, labelNames: string[] = []): Counter {
    for (const l of labelNames) {
      if (!LABEL_NAME.test(l) || l.startsWith("__") || l === "le") {
        throw new Error(`invalid label name ${JSON.stringify(l)}`);
      }
    }
    const c = new Counter(labelNames);
    this.#add({ name, help, type: "counter", lines: () => c.lines(name) });
    return c;
  }

  /**
   * Registers a gauge whose value is read at every scrape from `read`, so it
   * shows the state of that moment rather than the last time someone set it.
   */
  gauge(name: string, help: string, read: () => number): void {
    this.#add({
      name,
      help,
      type: "gauge",
      lines: () => [`${name} ${formatSampleValue(read())}`],
    });
  }

  /** Registers a histogram with these bucket upper bounds. */
  histogram(name: string, help: string, bounds: readonly number[]): Histogram {
    const h = new Histogram(bounds);
    this.#add({ name, help, type: "histogram", lines: () => h.lines(name) });
    return h;
  }

  /** The text exposition of every metric, in registration order, ending with a newline. */
  render(): string {
    let out = "";
    for (const m of this.#metrics) {
      out += `# HELP ${m.name} ${
        escapeHelp(m.help)
      }\n# TYPE ${m.name} ${m.type}\n`;
      for (const line of m.lines()) out += `${line}\n`;
    }
    return out;
  }

  #add(m: Metric): void {
    if (!METRIC_NAME.test(m.name)) {
      throw new Error(`invalid metric name ${JSON.stringify(m.name)}`);
    }
    if (this.#metrics.some((x) => x.name === m.name)) {
      throw new Error(`metric ${m.name} registered twice`);
    }
    this.#metrics.push(m);
  }
}

// ---------------------------------------------------------------------------
// The berth_acquire_* metrics.

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
export const RENEW_DURATION_BUCKETS: readonly number[] = [
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
   * True once the process is shutting down: a gate closed then is a
   * release, not a loss, and is not counted in `lease_losses_total`.
   */
  isStopping?: () => boolean;
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

  /** Registers every metric; see the README for their meaning. */
  constructor(options: LeaseMetricsOptions) {
    this.#o = options;
    const r = this.registry;
    r.gauge(
      "berth_acquire_lease_held",
      "1 while the lease is confirmed and the workload may run (the gate is open), else 0.",
      () => this.#o.status()?.gateOpen ? 1 : 0,
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
        return (deadline - this.#o.clock.now()) / 1000;
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

  /** The renewer hooks: losses (gate open -> closed outside shutdown) and reacquires. */
  observer(): RenewerObserver {
    return {
      changed: (status) => {
        if (this.#wasOpen && !status.gateOpen && !this.#o.isStopping?.()) {
          this.#losses.inc();
        }
        this.#wasOpen = status.gateOpen;
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
      write: async (d) => {
        await inner.write(d);
        this.countEnforcement("marker_written");
      },
      remove: async () => {
        await inner.remove();
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
