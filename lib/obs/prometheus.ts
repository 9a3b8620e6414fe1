/**
 * A tiny Prometheus registry that writes the text exposition format 0.0.4
 * (counters, gauges, histograms; no dependency). Apart from the
 * `berth_acquire_*` set (`lib/cmd/lease_metrics.ts`) because it knows nothing of leases:
 * it is the format, tested byte for byte.
 *
 * @module
 */

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
 *
 * @param v The value.
 * @returns Its text-format spelling.
 */
export function formatSampleValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return Object.is(v, -0) ? "0" : String(v);
}

/**
 * Escapes a label value: backslash, double quote and newline, as the format requires.
 *
 * @param s The raw value.
 * @returns The escaped value, without quotes.
 */
export function escapeLabelValue(s: string): string {
  return s.replace(/[\\"\n]/g, (c) => c === "\n" ? "\\n" : `\\${c}`);
}

/**
 * Escapes a HELP text: backslash and newline only (quotes stay), as the format requires.
 *
 * @param s The raw HELP text.
 * @returns The escaped text.
 */
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
    // To the microsecond: a sum of seconds gathers float noise otherwise.
    out.push(
      `${name}_sum ${formatSampleValue(Math.round(this.#sum * 1e6) / 1e6)}`,
    );
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

  /**
   * Registers an info metric: one series, value 1, whose labels name what
   * the other metrics are about (`berth_acquire_lease_info{lease=...} 1`),
   * to join on in queries.
   *
   * @param name The metric name; by convention it ends in `_info`.
   * @param help The help line.
   * @param labels The labels and their values.
   */
  info(name: string, help: string, labels: Labels): void {
    const names = Object.keys(labels);
    for (const l of names) {
      if (!LABEL_NAME.test(l) || l.startsWith("__")) {
        throw new Error(`invalid label name ${JSON.stringify(l)}`);
      }
    }
    const line = `${name}${formatLabels(names, names.map((n) => labels[n]))} 1`;
    this.#add({ name, help, type: "gauge", lines: () => [line] });
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
