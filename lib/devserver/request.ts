/**
 * Request bodies of the development server, decoded as the real server's Go
 * decoder does (first value only, unknown fields refused, int32 range,
 * case-insensitive field names, the first error wins), so malformed requests
 * get the real server's 400 messages.
 *
 * @module
 */
import { goQuote } from "../obs/log.ts";
import { MAX_FENCING_TOKEN } from "./store.ts";

/** The three lease RPCs, as they appear in the path. */
export type Rpc = "acquire" | "renew" | "release";

type JsonValue =
  | { type: "object"; members: [string, JsonValue][] }
  | { type: "string"; value: string }
  | { type: "number"; raw: string }
  | { type: "array" | "bool" | "null" };

class JsonSyntaxError extends Error {}

const SIMPLE_ESCAPES: Record<string, string> = {
  '"': '"',
  "\\": "\\",
  "/": "/",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
};

// Go's scanner, for one value, with its error texts.
class JsonReader {
  pos = 0;
  constructor(readonly text: string) {}

  skipSpace(): void {
    while (" \t\n\r".includes(this.text[this.pos] ?? "x")) this.pos++;
  }

  atEnd(): boolean {
    return this.pos >= this.text.length;
  }

  fail(context: string): never {
    if (this.atEnd()) throw new JsonSyntaxError("unexpected EOF");
    const c = String.fromCodePoint(this.text.codePointAt(this.pos)!);
    throw new JsonSyntaxError(`invalid character ${quoteChar(c)} ${context}`);
  }

  value(): JsonValue {
    this.skipSpace();
    const c = this.text[this.pos];
    if (c === "{" || c === "[") return this.composite(c === "{");
    if (c === '"') return { type: "string", value: this.string() };
    if (c === "-" || (c >= "0" && c <= "9")) return this.number();
    if (c === "t") return this.literal("true", "bool");
    if (c === "f") return this.literal("false", "bool");
    if (c === "n") return this.literal("null", "null");
    return this.fail("looking for beginning of value");
  }

  // An object (its members kept) or an array (its elements only checked).
  composite(object: boolean): JsonValue {
    const close = object ? "}" : "]";
    const members: [string, JsonValue][] = [];
    this.pos++;
    this.skipSpace();
    for (let first = true;; first = false) {
      if (first && this.text[this.pos] === close) break;
      if (object) {
        this.skipSpace();
        if (this.text[this.pos] !== '"') {
          this.fail("looking for beginning of object key string");
        }
        const key = this.string();
        this.skipSpace();
        if (this.text[this.pos] !== ":") this.fail("after object key");
        this.pos++;
        members.push([key, this.value()]);
      } else this.value();
      this.skipSpace();
      const c = this.text[this.pos];
      if (c === close) break;
      if (c !== ",") {
        this.fail(
          object ? "after object key:value pair" : "after array element",
        );
      }
      this.pos++;
    }
    this.pos++;
    return object ? { type: "object", members } : { type: "array" };
  }

  string(): string {
    this.pos++;
    let out = "";
    for (;;) {
      if (this.atEnd()) this.fail("in string literal");
      const c = this.text[this.pos];
      if (c === '"') {
        this.pos++;
        return out;
      }
      if (c < " ") this.fail("in string literal");
      this.pos++;
      if (c !== "\\") {
        out += c;
        continue;
      }
      const e = this.text[this.pos];
      if (e !== undefined && e in SIMPLE_ESCAPES) {
        out += SIMPLE_ESCAPES[e];
        this.pos++;
        continue;
      }
      if (e !== "u") this.fail("in string escape code");
      this.pos++;
      const unit = this.hex4();
      // A high surrogate must be followed by an escaped low one; Go replaces
      // anything else, and a lone low one, with U+FFFD.
      if (
        unit >= 0xd800 && unit < 0xdc00 && this.text.startsWith("\\u", this.pos)
      ) {
        const save = this.pos;
        this.pos += 2;
        const low = this.hex4();
        if (low >= 0xdc00 && low < 0xe000) {
          out += String.fromCharCode(unit, low);
          continue;
        }
        this.pos = save;
      }
      out += unit >= 0xd800 && unit < 0xe000
        ? "\ufffd"
        : String.fromCharCode(unit);
    }
  }

  hex4(): number {
    for (let i = 0; i < 4; i++) {
      if (!/[0-9a-fA-F]/.test(this.text[this.pos + i] ?? "")) {
        this.pos += i;
        this.fail("in \\u hexadecimal character escape");
      }
    }
    this.pos += 4;
    return parseInt(this.text.slice(this.pos - 4, this.pos), 16);
  }

  number(): JsonValue {
    const m = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/.exec(
      this.text.slice(this.pos),
    );
    if (!m) {
      this.pos++;
      this.fail("in numeric literal");
    }
    this.pos += m[0].length;
    return { type: "number", raw: m[0] };
  }

  literal(word: string, type: "bool" | "null"): JsonValue {
    for (const expected of word) {
      if (this.text[this.pos] !== expected) {
        this.fail(`in literal ${word} (expecting ${quoteChar(expected)})`);
      }
      this.pos++;
    }
    return { type };
  }
}

// The character as Go's decoder names it (its quoteChar): by its first byte,
// read as a rune and quoted by strconv.Quote in single quotes (so a
// byte-order mark is 'ï', a control character '\x01').
function quoteChar(c: string): string {
  const b = new TextEncoder().encode(c)[0];
  if (b === 0x27) return "'\\''";
  if (b === 0x22) return `'"'`;
  return `'${goQuote(String.fromCharCode(b)).slice(1, -1)}'`;
}

/** Each RPC's Go request type, as the decoder names it, and its fields (`holder` a string, the others int32). */
const REQUESTS: Record<Rpc, [string, (keyof LeaseRequest)[]]> = {
  acquire: ["AcquireRequest", ["holder", "ttlSeconds"]],
  renew: ["RenewRequest", ["holder", "fencingToken", "ttlSeconds"]],
  release: ["ReleaseRequest", ["holder", "fencingToken"]],
};

/** A decoded request body; fields absent from the body are 0 or "". */
export interface LeaseRequest {
  holder: string;
  fencingToken: number;
  ttlSeconds: number;
}

/**
 * Decodes one request body as the real server's Go decoder does: a syntax
 * error in the first value wins, then the first type or unknown-field error,
 * then data after the first value. Field names match case-insensitively and
 * `null` leaves a field unset, as in Go.
 *
 * @returns The request, or the exact 400 message.
 */
export function decodeRequest(
  rpc: Rpc,
  text: string,
): { ok: true; request: LeaseRequest } | { ok: false; message: string } {
  const reader = new JsonReader(text);
  reader.skipSpace();
  if (reader.atEnd()) return { ok: false, message: "invalid json body: EOF" };
  let value: JsonValue;
  try {
    value = reader.value();
  } catch (e) {
    if (!(e instanceof JsonSyntaxError)) throw e;
    return { ok: false, message: `invalid json body: ${e.message}` };
  }
  const request: LeaseRequest = { holder: "", fencingToken: 0, ttlSeconds: 0 };
  const error = assignFields(rpc, value, request);
  if (error) return { ok: false, message: `invalid json body: json: ${error}` };
  reader.skipSpace();
  if (!reader.atEnd()) {
    return { ok: false, message: "request body must contain one JSON object" };
  }
  return { ok: true, request };
}

// Go's decoder errors name the struct: `Go value of type api.AcquireRequest`
// for the body as a whole, `Go struct field AcquireRequest.ttlSeconds` for a
// field (by its JSON name, whatever the case of the key).
function assignFields(
  rpc: Rpc,
  value: JsonValue,
  out: LeaseRequest,
): string | undefined {
  const [goType, names] = REQUESTS[rpc];
  if (value.type === "null") return undefined;
  if (value.type !== "object") {
    return `cannot unmarshal ${value.type} into Go value of type api.${goType}`;
  }
  let first: string | undefined;
  for (const [key, v] of value.members) {
    const field = names.find((n) => n === key) ??
      names.find((n) => n.toLowerCase() === key.toLowerCase());
    if (field === undefined) first ??= `unknown field ${goQuote(key)}`;
    if (field === undefined || v.type === "null") continue;
    const into = `into Go struct field ${goType}.${field} of type ${
      field === "holder" ? "string" : "int32"
    }`;
    if (field === "holder" && v.type === "string") out.holder = v.value;
    else if (field !== "holder" && v.type === "number") {
      const n = /^-?\d+$/.test(v.raw) ? Number(v.raw) : NaN;
      if (
        !Number.isInteger(n) || n < -MAX_FENCING_TOKEN - 1 ||
        n > MAX_FENCING_TOKEN
      ) {
        first ??= `cannot unmarshal number ${v.raw} ${into}`;
      } else out[field] = n === 0 ? 0 : n; // no -0
    } else first ??= `cannot unmarshal ${v.type} ${into}`;
  }
  return first;
}
