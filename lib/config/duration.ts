/**
 * Go's duration syntax (`30s`, `1m0s`, `2m30s`, `1h0m0s`, `1.5s`, `300ms`),
 * because the webhook writes `--max-age` and `--acquire-timeout` the way Go's
 * `time.Duration.String()` prints them. Pure and import-free: the probe loads
 * this module on every run.
 *
 * @module
 */

const UNIT_NS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  "µs": 1_000n, // U+00B5 micro sign
  "μs": 1_000n, // U+03BC Greek mu
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

const MAX_NS = (1n << 63n) - 1n;

/**
 * Parses a Go duration into nanoseconds, following `time.ParseDuration`
 * exactly (sign, decimal fractions, unit list, the int64 range), so a value
 * the webhook accepts is accepted here and vice versa. Throws a `RangeError`
 * naming the input when it is not one.
 */
export function parseGoDurationNs(input: string): bigint {
  const bad = () => new RangeError(`invalid duration ${JSON.stringify(input)}`);
  let s = input;
  let negative = false;
  if (s !== "" && (s[0] === "-" || s[0] === "+")) {
    negative = s[0] === "-";
    s = s.slice(1);
  }
  if (s === "0") return 0n;
  if (s === "") throw bad();
  let total = 0n;
  while (s !== "") {
    const m = /^(\d*)(?:\.(\d*))?/.exec(s)!;
    const whole = m[1];
    const frac = m[2] ?? "";
    if (whole === "" && frac === "") throw bad();
    if (m[0] === ".") throw bad();
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
    let v = (whole === "" ? 0n : BigInt(whole)) * unit;
    if (frac !== "") {
      // Go keeps the fraction exact to the nanosecond and truncates beyond it.
      const digits = BigInt(frac);
      const scale = 10n ** BigInt(frac.length);
      v += (digits * unit) / scale;
    }
    total += v;
    if (total > MAX_NS + (negative ? 1n : 0n)) throw bad();
  }
  return negative ? -total : total;
}

/**
 * Parses a Go duration into milliseconds (rounded up to the next whole
 * millisecond, so a bound is never shortened), rejecting negative values
 * because no duration option of this tool means anything below zero.
 */
export function parseDurationMs(input: string, what: string): number {
  let ns: bigint;
  try {
    ns = parseGoDurationNs(input);
  } catch (e) {
    throw new RangeError(
      `${what}: ${
        (e as Error).message
      } (use Go duration syntax such as 30s, 1m0s, 1.5s or 300ms)`,
    );
  }
  if (ns < 0n) {
    throw new RangeError(
      `${what}: ${JSON.stringify(input)} must not be negative`,
    );
  }
  return Number((ns + 999_999n) / 1_000_000n);
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
