/**
 * Structured logs on stderr, in the two shapes operators feed to their log
 * pipelines: `key=value` text in the style of Go's slog (what the helper this
 * project replaces printed, so existing queries keep working) and one JSON
 * object per line.
 *
 * @module
 */

/** The two output shapes; `text` is the default because it is what upstream printed. */
export type LogFormat = "text" | "json";

/** Severity, spelled as slog spells it so that log queries carry over. */
export type LogLevel = "DEBUG" | "INFO" | "WARN" | "ERROR";

/** Extra structured fields on one record (lease, namespace, holder, fencing_token, ...). */
export type LogFields = Record<string, unknown>;

/**
 * What every module logs through, so that tests can capture records and the
 * format is chosen once at start-up rather than by each caller.
 */
export interface Logger {
  /** Chatter useful when debugging a deployment; hidden unless the level allows it. */
  debug(msg: string, fields?: LogFields): void;
  /** Normal lifecycle events (lease acquired, renewed, released). */
  info(msg: string, fields?: LogFields): void;
  /** Something an operator should look at, but the helper carries on. */
  warn(msg: string, fields?: LogFields): void;
  /** A failure: the helper is about to exit or the lease is in danger. */
  error(msg: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every record, so context is given once. */
  with(fields: LogFields): Logger;
}

/** Options for {@linkcode createLogger}. */
export interface LoggerOptions {
  /** Output shape; default `text`. */
  format?: LogFormat;
  /** Lowest level written; default `INFO`. */
  level?: LogLevel;
  /** Where a finished line (with its newline) goes; default stderr. */
  write?: (line: string) => void;
  /** Wall clock for the `time` field; injectable so tests get stable output. */
  now?: () => Date;
}

const ORDER: Record<LogLevel, number> = {
  DEBUG: 0,
  INFO: 1,
  WARN: 2,
  ERROR: 3,
};
const encoder = new TextEncoder();

/**
 * Writes a line to stderr. A line that cannot be written (stderr closed: the
 * container runtime's log pipe gone) is dropped: logging is never a reason
 * for a lease decision or a stop not to happen, and every caller logs before
 * it acts.
 */
function stderrWrite(line: string): void {
  const bytes = encoder.encode(line);
  let off = 0;
  try {
    while (off < bytes.length) {
      off += Deno.stderr.writeSync(bytes.subarray(off));
    }
  } catch {
    // dropped; see above
  }
}

/**
 * Parses a `--log-format` / `BERTH_LOG_FORMAT` value, so that a typo is a
 * start-up error instead of silently falling back to text.
 *
 * @param value The value as given.
 * @param source Where it came from, for the message.
 * @returns The format.
 * @throws {Error} For anything but `text` or `json`.
 */
export function parseLogFormat(value: string, source: string): LogFormat {
  if (value === "text" || value === "json") return value;
  throw new Error(`${source}=${JSON.stringify(value)}: want "text" or "json"`);
}

/** The values `--log-level` / `BERTH_LOG_LEVEL` take, lowest first. */
export const LOG_LEVELS: readonly string[] = ["debug", "info", "warn", "error"];

/**
 * Parses a `--log-level` / `BERTH_LOG_LEVEL` value (any case), so that a
 * typo is a start-up error instead of silently logging at INFO.
 *
 * @param value The value as given.
 * @param source Where it came from, for the message.
 * @returns The lowest level written.
 * @throws {Error} For anything but debug, info, warn or error.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(parseLogLevel("warn", "--log-level"), "WARN");
 * assert.throws(() => parseLogLevel("verbose", "BERTH_LOG_LEVEL"));
 * ```
 */
export function parseLogLevel(value: string, source: string): LogLevel {
  const lower = value.toLowerCase();
  if (LOG_LEVELS.includes(lower)) return lower.toUpperCase() as LogLevel;
  throw new Error(
    `${source}=${
      JSON.stringify(value)
    }: want "debug", "info", "warn" or "error"`,
  );
}

/**
 * Builds a logger. Values that are `Error`s log their message; values with a
 * `toJSON` (such as a redacted secret) log what that returns, so a secret
 * wrapped in {@linkcode Secret} can never reach the output.
 *
 * @param options Format, level, sink and clock; all optional.
 * @returns The logger.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const lines: string[] = [];
 * const log = createLogger({
 *   format: "json",
 *   write: (line) => lines.push(line),
 *   now: () => new Date(0),
 * });
 * log.info("lease acquired", { fencing_token: 4 });
 * assert.deepEqual(JSON.parse(lines[0]), {
 *   time: "1970-01-01T00:00:00.000Z",
 *   level: "INFO",
 *   msg: "lease acquired",
 *   fencing_token: 4,
 * });
 * ```
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const format = options.format ?? "text";
  const min = ORDER[options.level ?? "INFO"];
  const write = options.write ?? stderrWrite;
  const now = options.now ?? (() => new Date());
  const make = (base: LogFields): Logger => {
    const emit = (level: LogLevel, msg: string, fields?: LogFields) => {
      if (ORDER[level] < min) return;
      const all = { ...base, ...fields };
      write(
        format === "json"
          ? jsonLine(now(), level, msg, all)
          : textLine(now(), level, msg, all),
      );
    };
    return {
      debug: (m, f) => emit("DEBUG", m, f),
      info: (m, f) => emit("INFO", m, f),
      warn: (m, f) => emit("WARN", m, f),
      error: (m, f) => emit("ERROR", m, f),
      with: (f) => make({ ...base, ...f }),
    };
  };
  return make({});
}

/** A logger that drops everything; for callers that were given none. */
export const discardLogger: Logger = createLogger({ write: () => {} });

function plain(value: unknown): unknown {
  if (value instanceof Error) return value.message;
  if (
    value !== null && typeof value === "object" &&
    typeof (value as { toJSON?: unknown }).toJSON === "function"
  ) {
    return (value as { toJSON: () => unknown }).toJSON();
  }
  return value;
}

function jsonLine(
  time: Date,
  level: LogLevel,
  msg: string,
  fields: LogFields,
): string {
  const out: Record<string, unknown> = { time: time.toISOString(), level, msg };
  for (const [k, v] of Object.entries(fields)) {
    if (v !== undefined) out[k] = plain(v);
  }
  return JSON.stringify(out) + "\n";
}

// slog quotes a value when it is empty or holds a space, `=`, `"` or a
// non-printable character; we follow that so lines parse the same way.
function textValue(value: unknown): string {
  const v = plain(value);
  const s = typeof v === "string"
    ? v
    : typeof v === "object" && v !== null
    ? JSON.stringify(v)
    : String(v);
  // deno-lint-ignore no-control-regex
  return s === "" || /[\s="\\\x00-\x1f\x7f]/u.test(s) ? JSON.stringify(s) : s;
}

function textLine(
  time: Date,
  level: LogLevel,
  msg: string,
  fields: LogFields,
): string {
  let line = `time=${time.toISOString()} level=${level} msg=${textValue(msg)}`;
  for (const [k, v] of Object.entries(fields)) {
    if (v !== undefined) line += ` ${k}=${textValue(v)}`;
  }
  return line + "\n";
}

/**
 * Holds an API key so that no log call, error message or `JSON.stringify` of
 * a config can print it: only {@linkcode Secret.reveal} gives the value, and
 * the one place that calls it builds the Authorization header.
 */
export class Secret {
  #value: string;
  /** Wraps `value`; nothing but `reveal()` gives it back. */
  constructor(value: string) {
    this.#value = value;
  }
  /** The key itself; call it only to build the Authorization header. */
  reveal(): string {
    return this.#value;
  }
  /** What logs and JSON see instead of the key. */
  toJSON(): string {
    return "[redacted]";
  }
  /** What string interpolation sees instead of the key. */
  toString(): string {
    return "[redacted]";
  }
}
