// Go duration syntax: what time.ParseDuration accepts and rejects, its int64
// range to the nanosecond, rounding up to whole milliseconds, and the
// Duration.String() form of the probe's reason lines.
import assert from "node:assert/strict";
import { parseDurationMs } from "../../lib/config/duration.ts";
import {
  formatDurationMs,
  WEBHOOK_PROBE_MAX_AGE,
  WEBHOOK_PROBE_MAX_AGE_MS,
} from "../../lib/state/marker.ts";

const parse = (s: string) => parseDurationMs(s, "--max-age");

Deno.test("the forms the webhook writes, and Go's other spellings", () => {
  const cases: [string, number][] = [
    ["30s", 30_000],
    ["1m0s", 60_000],
    ["2m30s", 150_000],
    ["1h0m0s", 3_600_000],
    ["1.5s", 1_500],
    ["300ms", 300],
    [".5s", 500],
    ["5.s", 5_000],
    ["1.5h", 5_400_000],
    ["+5s", 5_000],
    ["1h1m1s1ms", 3_661_001],
    ["0", 0],
    ["+0", 0],
    ["-0", 0],
    ["0s", 0],
    ["-0s", 0],
    ["0.000s", 0],
  ];
  for (const [input, ms] of cases) assert.equal(parse(input), ms, input);
});

Deno.test("a whole number of one unit reads exactly, up to Go's range", () => {
  const cases: [string, number][] = [
    ["999999h", 3_599_996_400_000],
    ["1000000h", 3_600_000_000_000],
    ["999999m", 59_999_940_000],
    ["0001000m", 60_000_000],
    ["999999ms", 999_999],
    ["1000000ms", 1_000_000],
    ["007s", 7_000],
    ["2562047h", 9_223_369_200_000],
  ];
  for (const [input, ms] of cases) assert.equal(parse(input), ms, input);
});

Deno.test("below a millisecond rounds up, so a bound is never shortened", () => {
  const cases: [string, number][] = [
    ["1ns", 1],
    ["999999ns", 1],
    ["1000000ns", 1],
    ["1000001ns", 2],
    ["1500us", 2],
    ["1500\u00b5s", 2], // micro sign
    ["1500\u03bcs", 2], // Greek mu
    ["0.000001ms", 1], // 1 ns
    ["0.0000001ms", 0], // 0.1 ns: Go truncates the fraction to whole ns
    ["1.0000000000000000000000001s", 1_000], // 1e-16 ns: truncated
  ];
  for (const [input, ms] of cases) assert.equal(parse(input), ms, input);
});

Deno.test("the int64 nanosecond range, exactly at its edges", () => {
  // 2^63 - 1 ns is the largest Duration; in milliseconds, rounded up.
  assert.equal(parse("9223372036854775807ns"), 9_223_372_036_855);
  assert.equal(parse("2562047h47m16.854775807s"), 9_223_372_036_855);
  assert.equal(parse("9223372036854775us"), 9_223_372_036_855);
  for (
    const input of [
      "9223372036854775808ns",
      "2562047h47m16.854775808s",
      "2562048h",
      "9223372036854776us",
      "106751991167301d",
      "100000000000000000000ns",
      "9999999999999999999999h",
      "2562047h47m16s1s",
      // Go's uint64 sum wraps to 0 here and accepts it; rejected on purpose.
      "9223372036854775808ns9223372036854775808ns",
    ]
  ) {
    assert.throws(
      () => parse(input),
      input === "106751991167301d"
        ? /unknown unit "d"/
        : /--max-age: invalid duration .* \(use Go duration syntax/,
      input,
    );
  }
  // -2^63 ns is a valid Duration, so the complaint is its sign.
  assert.throws(
    () => parse("-9223372036854775808ns"),
    /--max-age: "-9223372036854775808ns" must not be negative/,
  );
});

Deno.test("malformed input is named, with what is wrong", () => {
  const cases: [string, RegExp][] = [
    ["", /invalid duration ""/],
    ["-", /invalid duration "-"/],
    ["s", /invalid duration "s"/],
    [".", /invalid duration "."/],
    [".s", /invalid duration ".s"/],
    ["1", /missing unit in duration "1"/],
    ["1.5", /missing unit in duration "1.5"/],
    ["00", /missing unit in duration "00"/],
    ["1s2", /missing unit in duration "1s2"/],
    ["1x", /unknown unit "x" in duration "1x"/],
    ["1 s", /unknown unit " s" in duration "1 s"/],
    ["1h-5m", /unknown unit "h-" in duration "1h-5m"/],
    ["soon", /invalid duration "soon"/],
    // An integer part above 2^63 is Go's first complaint, before the unit.
    ["99999999999999999999x", /invalid duration "99999999999999999999x"/],
    ["99999999999999999999", /invalid duration "99999999999999999999"/],
  ];
  for (const [input, message] of cases) {
    assert.throws(() => parse(input), message, JSON.stringify(input));
  }
  assert.throws(() => parse("-5s"), /--max-age: "-5s" must not be negative/);
});

Deno.test("formatDurationMs prints what Go's Duration.String() prints", () => {
  const cases: [number, string][] = [
    [0, "0s"],
    [1, "1ms"],
    [300, "300ms"],
    [1_500, "1.5s"],
    [15_000, "15s"],
    [60_000, "1m0s"],
    [90_250, "1m30.25s"],
    [3_600_000, "1h0m0s"],
    [-1_500, "-1.5s"],
  ];
  for (const [ms, text] of cases) assert.equal(formatDurationMs(ms), text);
});

Deno.test("what formatDurationMs prints, parseDurationMs reads back", () => {
  for (const ms of [0, 1, 999, 1_000, 1_001, 59_999, 61_000, 3_599_999]) {
    assert.equal(parse(formatDurationMs(ms)), ms);
  }
});

Deno.test("the webhook's --max-age, which main.ts reads without this parser, is the milliseconds it stands for", () => {
  assert.equal(parse(WEBHOOK_PROBE_MAX_AGE), WEBHOOK_PROBE_MAX_AGE_MS);
  assert.equal(
    formatDurationMs(WEBHOOK_PROBE_MAX_AGE_MS),
    WEBHOOK_PROBE_MAX_AGE,
  );
});
