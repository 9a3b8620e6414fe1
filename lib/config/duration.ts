/**
 * Go's duration syntax (`30s`, `1m0s`, `2m30s`, `1h0m0s`, `1.5s`, `300ms`),
 * because the webhook writes `--max-age` and `--acquire-timeout` the way Go's
 * `time.Duration.String()` prints them. Pure, import-free and without `BigInt`
 * (a process's first `BigInt` costs it about 0.5 MiB): the probe loads this
 * module on every run.
 *
 * @module
 */

/** The units of Go's `time.ParseDuration`, in nanoseconds. */
const UNIT_NS: Readonly<Record<string, number>> = {
  ns: 1,
  us: 1_000,
  "\u00b5s": 1_000, // micro sign
  "\u03bcs": 1_000, // Greek mu
  ms: 1_000_000,
  s: 1_000_000_000,
  m: 60_000_000_000,
  h: 3_600_000_000_000,
};

/**
 * A non-negative number of nanoseconds up to 2^63, exact, as whole
 * milliseconds and the nanoseconds beyond them. Numbers instead of `BigInt`:
 * the first `BigInt` a process makes costs it about 0.5 MiB, and the probe
 * parses `--max-age` on every start.
 */
interface Span {
  /** Whole milliseconds (at most 9223372036854, exact in a double). */
  ms: number;
  /** Nanoseconds beyond `ms`, 0 to 999999. */
  ns: number;
}

/** 2^63 ns, the magnitude Go's parser accepts at most (for a negative value). */
const LIMIT: Span = { ms: 9_223_372_036_854, ns: 775_808 };
/** 2^63 − 1 ns, the largest positive `time.Duration`. */
const MAX_POSITIVE: Span = { ms: 9_223_372_036_854, ns: 775_807 };
/** (2^63 − 1) / 10 and 2^63, as digits: the bounds of Go's `leadingFraction`. */
const FRACTION_BOUND = "922337203685477580";
const LIMIT_DIGITS = "9223372036854775808";

function exceeds(a: Span, b: Span): boolean {
  return a.ms > b.ms || (a.ms === b.ms && a.ns > b.ns);
}

function add(a: Span, b: Span): Span {
  const ns = a.ns + b.ns;
  return { ms: a.ms + b.ms + Math.floor(ns / 1e6), ns: ns % 1e6 };
}

/** Whether the digit string `a` (no leading zeros) is above `b`. */
function digitsAbove(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b;
}

/**
 * `digits × unit` as a span, or `undefined` when it is above 2^63 ns (Go
 * rejects such a component, in `leadingInt` or in its `v > 1<<63/unit`).
 */
function scaled(digits: string, unit: number): Span | undefined {
  const d = digits.replace(/^0+/, "");
  if (digitsAbove(d, LIMIT_DIGITS)) return undefined;
  let span: Span;
  if (unit >= 1e6) {
    // More than 15 digits of ms or more is far above 2^63 ns; fewer are exact.
    if (d.length > 15) return undefined;
    span = { ms: Number(d) * (unit / 1e6), ns: 0 };
  } else {
    // ns and us: split at the millisecond digit, so 19 digits stay exact.
    const cut = unit === 1 ? 6 : 3;
    span = {
      ms: Number(d.slice(0, -cut) || "0"),
      ns: Number(d.slice(-cut) || "0") * unit,
    };
  }
  return exceeds(span, LIMIT) ? undefined : span;
}

/**
 * Go's `leadingFraction`: the fraction's digits as far as a uint64 holds
 * them, and the power of ten they were scaled by (further digits are
 * ignored).
 */
function leadingFraction(digits: string): { f: string; scale: number } {
  let f = "";
  let scale = 1;
  for (const c of digits) {
    if (digitsAbove(f, FRACTION_BOUND)) break;
    const y = (f + c).replace(/^0+/, "");
    if (digitsAbove(y, LIMIT_DIGITS)) break;
    f = y;
    scale *= 10;
  }
  return { f, scale };
}

/**
 * Parses a Go duration the way `time.ParseDuration` does (sign, decimal
 * fractions, the unit list, the int64 range, and its float64 arithmetic for
 * fractions), so a value the webhook accepts is accepted here and vice versa.
 * One deliberate difference: Go sums the parts in a uint64 that can wrap
 * (two parts of 2^63 ns each add up to 0 there); here such a sum is rejected.
 *
 * @param input The duration text, such as `1m30s`.
 * @returns Whether it is negative, and its magnitude.
 * @throws {RangeError} Naming the input when it is not a Go duration.
 */
function parseGoDuration(input: string): { negative: boolean; span: Span } {
  const bad = () => new RangeError(`invalid duration ${JSON.stringify(input)}`);
  let s = input;
  let negative = false;
  if (s !== "" && (s[0] === "-" || s[0] === "+")) {
    negative = s[0] === "-";
    s = s.slice(1);
  }
  if (s === "0") return { negative, span: { ms: 0, ns: 0 } };
  if (s === "") throw bad();
  let total: Span = { ms: 0, ns: 0 };
  while (s !== "") {
    const m = /^(\d*)(?:\.(\d*))?/.exec(s)!;
    const whole = m[1];
    const frac = m[2] ?? "";
    if (whole === "" && frac === "") throw bad();
    // Go's leadingInt fails on more than 2^63 before the unit is looked at.
    if (digitsAbove(whole.replace(/^0+/, ""), LIMIT_DIGITS)) throw bad();
    s = s.slice(m[0].length);
    const u = /^[^\d.]+/.exec(s);
    if (!u) {
      throw new RangeError(`missing unit in duration ${JSON.stringify(input)}`);
    }
    const unit = UNIT_NS[u[0]];
    if (unit === undefined) {
      throw new RangeError(
        `unknown unit ${JSON.stringify(u[0])} in duration ${
          JSON.stringify(input)
        }`,
      );
    }
    s = s.slice(u[0].length);
    let v = scaled(whole, unit);
    if (v === undefined) throw bad();
    const { f, scale } = leadingFraction(frac);
    if (f !== "") {
      // Go: v += uint64(float64(f) * (float64(unit) / scale)), at most 3.6e12.
      const ns = Math.trunc(Number(f) * (unit / scale));
      v = add(v, { ms: Math.floor(ns / 1e6), ns: ns % 1e6 });
      if (exceeds(v, LIMIT)) throw bad();
    }
    total = add(total, v);
    if (exceeds(total, LIMIT)) throw bad();
  }
  if (!negative && exceeds(total, MAX_POSITIVE)) throw bad();
  return { negative, span: total };
}

/**
 * Parses a Go duration into milliseconds (rounded up to the next whole
 * millisecond, so a bound is never shortened), rejecting negative values
 * because no duration option of this tool means anything below zero.
 *
 * @param input The duration text, such as `30s` or `1m0s`.
 * @param what The option it came from, to name in the error (`--max-age`).
 * @param options `negative: "zero"` reads a negative duration as 0 instead
 * of refusing it (the probe's `--max-age`, where the Go helper reads zero or
 * less as "presence only").
 * @returns Whole milliseconds, 0 or more.
 * @throws {RangeError} Naming the option and the input, when it is not a Go
 * duration or is negative (unless `negative` is `zero`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(parseDurationMs("1m30s", "--max-age"), 90_000);
 * assert.equal(parseDurationMs("1ns", "--max-age"), 1);
 * ```
 */
export function parseDurationMs(
  input: string,
  what: string,
  options: { negative?: "refuse" | "zero" } = {},
): number {
  let parsed: { negative: boolean; span: Span };
  try {
    parsed = parseGoDuration(input);
  } catch (e) {
    throw new RangeError(
      `${what}: ${
        (e as Error).message
      } (use Go duration syntax such as 30s, 1m0s, 1.5s or 300ms)`,
    );
  }
  const { negative, span } = parsed;
  if (negative && (span.ms > 0 || span.ns > 0)) {
    if (options.negative === "zero") return 0;
    throw new RangeError(
      `${what}: ${JSON.stringify(input)} must not be negative`,
    );
  }
  return span.ms + (span.ns > 0 ? 1 : 0);
}

/**
 * Formats milliseconds the way Go's `Duration.String()` does (`15s`, `1m0s`,
 * `1.5s`, `300ms`), so that the probe's reason lines read like the flags the
 * operator wrote.
 */
export function formatDurationMs(ms: number): string {
  if (ms === 0) return "0s";
  const neg = ms < 0;
  let rest = Math.abs(Math.round(ms));
  if (rest < 1000) return `${neg ? "-" : ""}${rest}ms`;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = Math.floor(rest / 1000);
  const frac = rest - s * 1000;
  let out = `${s}${
    frac ? "." + String(frac).padStart(3, "0").replace(/0+$/, "") : ""
  }s`;
  if (h > 0) out = `${h}h${m}m${out}`;
  else if (m > 0) out = `${m}m${out}`;
  return (neg ? "-" : "") + out;
}
