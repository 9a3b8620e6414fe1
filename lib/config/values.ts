/**
 * How one configuration value is read from its text, exactly as the Go
 * helper read it (`strconv.Atoi`, `strconv.ParseBool`, `time.ParseDuration`),
 * so that a pod spec that worked upstream works here and a value upstream
 * refused is refused here too.
 *
 * @module
 */
import { flagBoolean } from "./argv.ts";
import { parseDurationMs } from "./duration.ts";
import { ConfigError } from "./error.ts";
import {
  type LogFormat,
  type LogLevel,
  parseLogFormat,
  parseLogLevel,
} from "../obs/log.ts";

/** How a setting's text is parsed. */
export type ValueKind =
  | "string"
  | "integer"
  | "boolean"
  | "duration"
  | "log-format"
  | "log-level";

/** A parsed value; `undefined` for a duration of 0 ("none"). */
export type ParsedValue =
  | string
  | number
  | boolean
  | LogFormat
  | LogLevel
  | undefined;

/**
 * Parses a boolean exactly as Go's `strconv.ParseBool` does, the parser
 * upstream used for env and flags, so values that worked there work here.
 *
 * @param value The text as given.
 * @param source Where it came from, for the message (`BERTH_X` or `--x`).
 * @returns The boolean.
 * @throws {ConfigError} For any other spelling, listing the accepted ones.
 */
export function parseBoolean(value: string, source: string): boolean {
  try {
    return flagBoolean(value, source);
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
}

/**
 * Parses a plain base-10 integer as Go's `strconv.Atoi` does (`+30` and `030`
 * are 30; ` 30`, `30s`, `3.0`, `0x1e` and "" are errors), refusing values
 * beyond the safe integer range instead of rounding them.
 *
 * @param value The text as given.
 * @param source Where it came from, for the message.
 * @returns The integer (never `-0`).
 * @throws {ConfigError} `BERTH_TTL_SECONDS="soon": must be an integer number of seconds`.
 */
function parseInteger(value: string, source: string): number {
  const what = `${source}=${
    JSON.stringify(value)
  }: must be an integer number of seconds`;
  if (!/^[+-]?[0-9]+$/.test(value)) throw new ConfigError(what);
  const n = Number(value);
  if (!Number.isSafeInteger(n)) {
    throw new ConfigError(`${what} (this one is out of range)`);
  }
  return n === 0 ? 0 : n; // no -0
}

/**
 * How the Go helper reads an integer flag: its flag parser reads integers as
 * Go source does (`strconv.ParseInt(s, 0, 64)`): `0x1e`, `0o36`, `0b11110` and
 * `3_0` are 30, and a leading zero means octal (`030` is 24, `08` an error).
 *
 * @param text The flag's value.
 * @returns The number Go reads (a bigint, unbounded), or undefined when Go
 * refuses the text.
 */
export function goFlagInteger(text: string): bigint | undefined {
  let s = text;
  let sign = 1n;
  if (s.startsWith("+") || s.startsWith("-")) {
    if (s[0] === "-") sign = -1n;
    s = s.slice(1);
  }
  if (s === "") return undefined;
  let base = 10;
  let digits = s;
  if (s[0] === "0" && s.length > 1) {
    const p = s[1].toLowerCase();
    if (s.length >= 3 && (p === "b" || p === "o" || p === "x")) {
      base = p === "b" ? 2 : p === "o" ? 8 : 16;
      digits = s.slice(2);
    } else {
      base = 8;
      digits = s.slice(1);
    }
  }
  if (digits.includes("_") && !goUnderscoresOk(s)) return undefined;
  let n = 0n;
  let any = false;
  for (const c of digits) {
    if (c === "_") continue;
    const d = parseInt(c, 36);
    if (Number.isNaN(d) || d >= base) return undefined;
    n = n * BigInt(base) + BigInt(d);
    any = true;
  }
  if (!any && base !== 8) return undefined;
  return sign * n;
}

// Go's strconv.underscoreOK: each "_" sits between digits (a base prefix
// counts as one), and the number does not end in one.
function goUnderscoresOk(s: string): boolean {
  let saw = "^";
  let i = 0;
  let hex = false;
  if (s.length >= 2 && s[0] === "0" && /[box]/i.test(s[1])) {
    i = 2;
    saw = "0";
    hex = s[1].toLowerCase() === "x";
  }
  for (; i < s.length; i++) {
    if (/[0-9]/.test(s[i]) || (hex && /[a-f]/i.test(s[i]))) {
      saw = "0";
    } else if (s[i] === "_") {
      if (saw !== "0") return false;
      saw = "_";
    } else {
      if (saw === "_") return false;
      saw = "!";
    }
  }
  return saw !== "_";
}

/**
 * Parses an integer flag: a plain base-10 integer, as env values are, but
 * refusing the texts the Go helper's flag parser reads as another number
 * (`030` is 24 there) or reads where plain decimal does not (`0x1e`, `3_0`),
 * saying how Go reads them, so a fleet that mixes both helpers never runs two
 * different values from one pod spec.
 *
 * @param value The flag's value.
 * @param source The flag, for the message (`--ttl-seconds`).
 * @returns The integer.
 * @throws {ConfigError} For a malformed value, or one Go reads differently.
 */
function parseFlagInteger(value: string, source: string): number {
  const go = goFlagInteger(value);
  const decimal = /^[+-]?[0-9]+$/.test(value) ? BigInt(value) : undefined;
  if (go === decimal || (go === undefined && decimal === undefined)) {
    return parseInteger(value, source);
  }
  const what = `${source}=${JSON.stringify(value)}`;
  if (go === undefined) {
    throw new ConfigError(
      `${what}: the Go helper refuses it (a leading zero means octal there); write ${decimal} without the leading zero, which both helpers read alike`,
    );
  }
  if (decimal === undefined) {
    throw new ConfigError(
      `${what}: the Go helper reads it as ${go} (Go integer syntax), this one reads plain decimal only; write ${go}`,
    );
  }
  throw new ConfigError(
    `${what}: the Go helper reads a leading zero as octal (${go}, not ${decimal}); write ${go} or ${decimal} without the leading zero, which both helpers read alike`,
  );
}

/**
 * Parses one setting's text by its kind. A duration of 0 means "none" and
 * parses to `undefined`.
 *
 * @param kind How to parse.
 * @param value The text as given.
 * @param source Where it came from, for the message.
 * @param origin `flag` for a command-line flag, whose integers must also
 * read the same in the Go helper's flag parser; default `env`.
 * @returns The parsed value.
 * @throws {ConfigError} Naming `source` and what it must be.
 */
export function parseValue(
  kind: ValueKind,
  value: string,
  source: string,
  origin: "env" | "flag" = "env",
): ParsedValue {
  try {
    switch (kind) {
      case "string":
        return value;
      case "integer":
        return origin === "flag"
          ? parseFlagInteger(value, source)
          : parseInteger(value, source);
      case "boolean":
        return parseBoolean(value, source);
      case "duration": {
        const ms = parseDurationMs(value, source);
        return ms === 0 ? undefined : ms;
      }
      case "log-format":
        return parseLogFormat(value, source);
      case "log-level":
        return parseLogLevel(value, source);
    }
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError((e as Error).message);
  }
}
