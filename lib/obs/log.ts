/**
 * Structured logs on stderr, in the two shapes operators feed to their log
 * pipelines: `key=value` text in the style of Go's slog (what the Go helper
 * printed, so existing queries keep working) and one JSON object per line;
 * a text value is quoted as Go's `strconv.Quote` (`%q`) quotes it.
 *
 * @module
 */

/** The two output shapes; `text` is the default. */
export type LogFormat = "text" | "json";

/** Severity, spelled as slog spells it. */
export type LogLevel = "DEBUG" | "INFO" | "WARN" | "ERROR";

/** Extra structured fields on one record (lease, namespace, holder, fencing_token, ...). */
export type LogFields = Record<string, unknown>;

/** What every module logs through; `with` gives a logger that adds `fields` to every record. */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  with(fields: LogFields): Logger;
}

/** Options for {@linkcode createLogger}: unless given, `text` from `INFO` up, each line (newline included) to stderr. */
export interface LoggerOptions {
  format?: LogFormat;
  level?: LogLevel;
  write?: (line: string) => void;
  now?: () => Date;
}

const LEVELS: readonly LogLevel[] = ["DEBUG", "INFO", "WARN", "ERROR"];
const encoder = new TextEncoder();

// A line that cannot be written (stderr closed: the container runtime's log
// pipe gone) is dropped: logging is never a reason for a lease decision or a
// stop not to happen, and every caller logs before it acts.
function stderrWrite(line: string): void {
  const bytes = encoder.encode(line);
  try {
    for (let off = 0; off < bytes.length;) {
      off += Deno.stderr.writeSync(bytes.subarray(off));
    }
  } catch {
    // dropped
  }
}

/** Parses a `--log-format` / `BERTH_LOG_FORMAT` value: a typo is a start-up error naming `source`. */
export function parseLogFormat(value: string, source: string): LogFormat {
  if (value === "text" || value === "json") return value;
  throw new Error(`${source}=${JSON.stringify(value)}: want "text" or "json"`);
}

/**
 * Parses a `--log-level` / `BERTH_LOG_LEVEL` value (any case): a typo is a start-up error naming `source`.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(parseLogLevel("warn", "--log-level"), "WARN");
 * assert.throws(() => parseLogLevel("verbose", "BERTH_LOG_LEVEL"));
 * ```
 */
export function parseLogLevel(value: string, source: string): LogLevel {
  const level = LEVELS.find((l) => l.toLowerCase() === value.toLowerCase());
  if (level) return level;
  throw new Error(
    `${source}=${
      JSON.stringify(value)
    }: want "debug", "info", "warn" or "error"`,
  );
}

/**
 * Builds a logger. An `Error` value logs its message, a value with a `toJSON`
 * (a {@linkcode Secret}) what that returns, so a secret never reaches the output.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const lines: string[] = [];
 * const log = createLogger({ write: (l) => lines.push(l), now: () => new Date(0) });
 * log.with({ lease: "web" }).info("lease acquired", { fencing_token: 4 });
 * assert.equal(lines[0], 'time=1970-01-01T00:00:00.000Z level=INFO msg="lease acquired" lease=web fencing_token=4\n');
 * ```
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const { format = "text", write = stderrWrite } = options;
  const min = LEVELS.indexOf(options.level ?? "INFO");
  const now = options.now ?? (() => new Date());
  const make = (base: LogFields): Logger => {
    const emit = (level: LogLevel) => (msg: string, fields?: LogFields) => {
      if (LEVELS.indexOf(level) < min) return;
      const time = now().toISOString();
      const all = Object.entries({ ...base, ...fields })
        .filter(([, v]) => v !== undefined);
      if (format === "json") {
        const out: LogFields = { time, level, msg };
        for (const [k, v] of all) out[k] = plain(v);
        return write(JSON.stringify(out) + "\n");
      }
      let line = `time=${time} level=${level} msg=${textValue(msg)}`;
      for (const [k, v] of all) line += ` ${k}=${textValue(v)}`;
      write(line + "\n");
    };
    return {
      debug: emit("DEBUG"),
      info: emit("INFO"),
      warn: emit("WARN"),
      error: emit("ERROR"),
      with: (f) => make({ ...base, ...f }),
    };
  };
  return make({});
}

/** A logger that drops everything; for callers that were given none. */
export const discardLogger: Logger = createLogger({ write: () => {} });

function plain(value: unknown): unknown {
  if (value instanceof Error) return value.message;
  const toJSON = (value as { toJSON?: unknown } | null)?.toJSON;
  return typeof value === "object" && typeof toJSON === "function"
    ? toJSON.call(value)
    : value;
}

// Quoted as slog quotes (with `strconv.Quote`): when empty or holding a
// space, `=`, `"`, an ASCII control, or a character Go does not print, so a
// bidi override in a holder or in server text cannot reorder the line.
function textValue(value: unknown): string {
  const v = plain(value);
  const s = typeof v === "string"
    ? v
    : typeof v === "object" && v !== null
    ? JSON.stringify(v)
    : String(v);
  const quote = s === "" ||
    // deno-lint-ignore no-control-regex
    /[ ="\x00-\x1f\x7f]/.test(s) ||
    (/[\u0080-\uffff]/.test(s) &&
      [...s].some((ch) => ch > "\x7f" && goQuote(ch).length !== ch.length + 2));
  return quote ? goQuote(s) : s;
}

/**
 * Holds an API key so that no log call, error message or `JSON.stringify` of
 * a config can print it: only {@linkcode Secret.reveal} gives the value.
 */
export class Secret {
  #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  /** The key itself; call it only to build the Authorization header. */
  reveal(): string {
    return this.#value;
  }
  toJSON(): string {
    return "[redacted]";
  }
  toString(): string {
    return "[redacted]";
  }
}

const ESCAPES: Record<string, string> = {
  "\x07": "\\a",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
  "\v": "\\v",
  "\\": "\\\\",
  '"': '\\"',
};

// unicode.IsPrint: no space but the ASCII one is printable. Made at the
// first quote, and not from a literal: V8 builds a literal's Unicode classes
// when it parses the module, which would cost every start without a code
// cache, as the binary has none (docs/benchmarks.md).
let printable: RegExp | undefined;

/**
 * Quotes `s` as Go's `strconv.Quote` does; a lone surrogate becomes U+FFFD.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(goQuote('a"\u0001\u00a0\u00e9'), '"a\\"\\x01\\u00a0\u00e9"');
 * ```
 */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s.toWellFormed()) {
    const cp = ch.codePointAt(0)!;
    if (ESCAPES[ch] !== undefined) out += ESCAPES[ch];
    else if (cp >= 0x20 && cp < 0x7f) out += ch; // ASCII: no class to make
    else if (
      (printable ??= new RegExp("^[\\p{L}\\p{M}\\p{N}\\p{P}\\p{S} ]$", "u"))
        .test(ch)
    ) {
      out += ch;
    } else if (cp < 0x80) out += `\\x${cp.toString(16).padStart(2, "0")}`;
    else if (cp < 0x10000) out += `\\u${cp.toString(16).padStart(4, "0")}`;
    else out += `\\U${cp.toString(16).padStart(8, "0")}`;
  }
  return out + '"';
}
