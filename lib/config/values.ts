/**
 * How one configuration value is read from its text, exactly as the Go
 * helper read it (`strconv.Atoi`, `strconv.ParseBool`, `time.ParseDuration`),
 * so that a pod spec that worked upstream works here and a value upstream
 * refused is refused here too.
 *
 * @module
 */
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

const TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const FALSE = new Set(["0", "f", "F", "FALSE", "false", "False"]);

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
  if (TRUE.has(value)) return true;
  if (FALSE.has(value)) return false;
  throw new ConfigError(
    `${source}=${
      JSON.stringify(value)
    }: must be a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false or False)`,
  );
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
 * Parses one setting's text by its kind. A duration of 0 means "none" and
 * parses to `undefined`.
 *
 * @param kind How to parse.
 * @param value The text as given.
 * @param source Where it came from, for the message.
 * @returns The parsed value.
 * @throws {ConfigError} Naming `source` and what it must be.
 */
export function parseValue(
  kind: ValueKind,
  value: string,
  source: string,
): ParsedValue {
  try {
    switch (kind) {
      case "string":
        return value;
      case "integer":
        return parseInteger(value, source);
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
