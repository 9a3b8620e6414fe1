/**
 * A tiny Prometheus registry that writes the text exposition format 0.0.4,
 * tested byte for byte; the `berth_acquire_*` set is `lib/cmd/lease_keeper.ts`.
 * @module
 */

/** The `Content-Type` a Prometheus server expects for the text format 0.0.4. */
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Label values by label name; every declared label must be given. */
export type Labels = Record<string, string>;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** A sample value as Go's `ParseFloat` reads it: `+Inf`, `-Inf`, `NaN` (not JavaScript's `Infinity`). */
export function formatSampleValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (Math.abs(v) === Infinity) return v > 0 ? "+Inf" : "-Inf";
  return Object.is(v, -0) ? "0" : String(v);
}

/** Escapes a label value: backslash, double quote and newline. */
export function escapeLabelValue(s: string): string {
  return s.replace(/[\\"\n]/g, (c) => c === "\n" ? "\\n" : `\\${c}`);
}

/** Escapes a HELP text: backslash and newline only (quotes stay). */
export function escapeHelp(s: string): string {
  return s.replace(/[\\\n]/g, (c) => c === "\n" ? "\\n" : "\\\\");
}

function formatLabels(names: readonly string[], values: readonly string[]) {
  if (names.length === 0) return "";
  return `{${
    names.map((n, i) => `${n}="${escapeLabelValue(values[i])}"`).join(",")
  }}`;
}

function checkLabelNames(names: readonly string[], reserved: string[]): void {
  for (const l of names) {
    if (!LABEL_NAME.test(l) || l.startsWith("__") || reserved.includes(l)) {
      throw new Error(`invalid label name ${JSON.stringify(l)}`);
    }
  }
}

/**
 * A monotonically increasing count, optionally split by labels. A series
 * appears once first incremented; a counter without labels shows from the
 * start (at 0), so a rate over it is defined from the first scrape.
 */
export class Counter {
  #labelNames: readonly string[];
  #series = new Map<string, { values: string[]; value: number }>();

  constructor(labelNames: readonly string[]) {
    this.#labelNames = labelNames;
    if (labelNames.length === 0) this.inc({}, 0);
  }

  /** Adds `by` (default 1, never negative) to the series for `labels`. */
  inc(labels: Labels = {}, by = 1): void {
    if (!(by >= 0)) {
      throw new RangeError(`a counter only goes up (got ${by})`);
    }
    const values = this.#values(labels);
    const key = JSON.stringify(values);
    const s = this.#series.get(key) ?? { values, value: 0 };
    s.value += by;
    this.#series.set(key, s);
  }

  /** The current value for `labels` (0 when the series has not appeared). */
  get(labels: Labels = {}): number {
    return this.#series.get(JSON.stringify(this.#values(labels)))?.value ?? 0;
  }

  /** @internal The sample lines for `name`. */
  lines(name: string): string[] {
    return [...this.#series.values()].map((s) =>
      `${name}${formatLabels(this.#labelNames, s.values)} ${
        formatSampleValue(s.value)
      }`
    );
  }

  #values(labels: Labels): string[] {
    const names = this.#labelNames;
    const given = Object.keys(labels);
    if (given.length !== names.length || names.some((n) => !(n in labels))) {
      throw new Error(
        `labels {${given.join(",")}} do not match the declared {${
          names.join(",")
        }}`,
      );
    }
    return names.map((n) => labels[n]);
  }
}

/** A cumulative histogram with fixed finite upper bounds; `+Inf` is implicit. */
export class Histogram {
  #bounds: number[];
  #counts: number[];
  #sum = 0;
  #count = 0;

  constructor(bounds: readonly number[]) {
    if (bounds.some((b, i) => !Number.isFinite(b) || b <= bounds[i - 1])) {
      throw new RangeError(
        `histogram bounds must be finite and strictly increasing (got ${
          bounds.join(", ")
        })`,
      );
    }
    this.#bounds = [...bounds];
    this.#counts = bounds.map(() => 0);
  }

  /** Records one value. */
  observe(v: number): void {
    this.#bounds.forEach((b, i) => v <= b && this.#counts[i]++);
    this.#sum += v;
    this.#count++;
  }

  /** @internal The `_bucket`, `_sum` and `_count` lines for `name`. */
  lines(name: string): string[] {
    return [
      ...this.#bounds.map((b, i) =>
        `${name}_bucket{le="${formatSampleValue(b)}"} ${this.#counts[i]}`
      ),
      `${name}_bucket{le="+Inf"} ${this.#count}`,
      // To the microsecond: a sum of seconds gathers float noise otherwise.
      `${name}_sum ${formatSampleValue(Math.round(this.#sum * 1e6) / 1e6)}`,
      `${name}_count ${this.#count}`,
    ];
  }
}

/** Owns the metrics and writes them out; names are checked when registered, not at a scrape. */
export class Registry {
  #metrics: {
    name: string;
    help: string;
    type: "counter" | "gauge" | "histogram";
    lines(): string[];
  }[] = [];

  /** Registers a counter; its name should end in `_total`. */
  counter(name: string, help: string, labelNames: string[] = []): Counter {
    checkLabelNames(labelNames, ["le"]);
    const c = new Counter(labelNames);
    this.#add(name, help, "counter", () => c.lines(name));
    return c;
  }

  /** Registers a gauge read at every scrape. */
  gauge(name: string, help: string, read: () => number): void {
    this.#add(
      name,
      help,
      "gauge",
      () => [`${name} ${formatSampleValue(read())}`],
    );
  }

  /**
   * Registers an info metric: one series, value 1, whose labels name what
   * the other metrics are about (`berth_acquire_lease_info{lease=...} 1`).
   */
  info(name: string, help: string, labels: Labels): void {
    const names = Object.keys(labels);
    checkLabelNames(names, []);
    const line = `${name}${formatLabels(names, Object.values(labels))} 1`;
    this.#add(name, help, "gauge", () => [line]);
  }

  histogram(name: string, help: string, bounds: readonly number[]): Histogram {
    const h = new Histogram(bounds);
    this.#add(name, help, "histogram", () => h.lines(name));
    return h;
  }

  /** The text exposition of every metric, in registration order. */
  render(): string {
    return this.#metrics.map((m) =>
      `# HELP ${m.name} ${escapeHelp(m.help)}\n# TYPE ${m.name} ${m.type}\n` +
      m.lines().map((line) => `${line}\n`).join("")
    ).join("");
  }

  #add(
    name: string,
    help: string,
    type: "counter" | "gauge" | "histogram",
    lines: () => string[],
  ): void {
    if (!METRIC_NAME.test(name)) {
      throw new Error(`invalid metric name ${JSON.stringify(name)}`);
    }
    if (this.#metrics.some((x) => x.name === name)) {
      throw new Error(`metric ${name} registered twice`);
    }
    this.#metrics.push({ name, help, type, lines });
  }
}
