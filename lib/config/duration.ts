/**
 * Go's duration syntax (`30s`, `1m0s`, `300ms`), read as Go's
 * `time.ParseDuration` reads it (printed by `formatDurationMs` in
 * `lib/state/marker.ts`, on the probe's path). It makes no `BigInt` (a
 * process's first costs it memory): nanoseconds up to 2^63 are whole
 * milliseconds and the rest.
 *
 * @module
 */

// deno-fmt-ignore
const UNIT_NS: Readonly<Record<string, number>> = {
  ns: 1, us: 1e3, "\u00b5s": 1e3, "\u03bcs": 1e3, ms: 1e6, s: 1e9, m: 6e10, h: 3.6e12,
};

type Span = { ms: number; ns: number };

// 2^63 ns, the most Go's parser accepts (for a negative value), and 2^63 - 1.
const LIMIT: Span = { ms: 9_223_372_036_854, ns: 775_808 };
const MAX_POSITIVE: Span = { ms: 9_223_372_036_854, ns: 775_807 };
// (2^63 - 1) / 10 and 2^63 as digits: the bounds of Go's leadingFraction.
const FRACTION_BOUND = "922337203685477580";
const LIMIT_DIGITS = "9223372036854775808";

function exceeds(a: Span, b: Span): boolean {
  return a.ms > b.ms || (a.ms === b.ms && a.ns > b.ns);
}

function add(a: Span, b: Span): Span {
  const ns = a.ns + b.ns;
  return { ms: a.ms + b.ms + Math.floor(ns / 1e6), ns: ns % 1e6 };
}

function digitsAbove(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b;
}

// `digits × unit`, or undefined above 2^63 ns, where Go rejects a component.
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

// Go's `leadingFraction`: the digits a uint64 holds, and their scale.
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

// Go's `time.ParseDuration`: sign, fractions, its units, the int64 range and
// its float64 arithmetic for fractions; but a sum Go's uint64 wraps is refused.
function parseGoDuration(input: string): { negative: boolean; span: Span } {
  const bad = (why = "invalid duration") =>
    new RangeError(`${why} ${JSON.stringify(input)}`);
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
    if (!u) throw bad("missing unit in duration");
    const unit = UNIT_NS[u[0]];
    if (unit === undefined) {
      throw bad(`unknown unit ${JSON.stringify(u[0])} in duration`);
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
 * Parses a Go duration into whole milliseconds, rounded up so a bound is
 * never shortened. A negative one is refused, naming `what`, or with
 * `negative: "zero"` read as 0 (the probe's `--max-age`: presence only).
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(parseDurationMs("1m30s", "--max-age"), 90_000);
 * assert.equal(parseDurationMs("1ns", "--max-age"), 1);
 * assert.equal(parseDurationMs("-1s", "--max-age", { negative: "zero" }), 0);
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
