/**
 * Request bodies of the development server, decoded the way the real
 * server's Go decoder does (first value only, unknown fields refused, int32
 * range, case-insensitive field names, the first error wins), so the
 * development server answers malformed requests with the real server's 400
 * messages.
 *
 * @module
 */
import { goQuote } from "../encoding/go_quote.ts";
import { MAX_FENCING_TOKEN } from "./store.ts";

/** The three lease RPCs, as they appear in the path. */
export type Rpc = "acquire" | "renew" | "release";

const MIN_INT32 = -2147483648;

type JsonValue =
  | { type: "object"; members: [string, JsonValue][] }
  | { type: "array" }
  | { type: "string"; value: string }
  | { type: "number"; raw: string }
  | { type: "bool" }
  | { type: "null" };

class JsonSyntaxError extends Error {}

class JsonReader {
  pos = 0;
  constructor(readonly text: string) {}

  skipSpace(): void {
    while (
      this.pos < this.text.length && " \t\n\r".includes(this.text[this.pos])
    ) {
      this.pos++;
    }
  }

  atEnd(): boolean {
    return this.pos >= this.text.length;
  }

  fail(context: string): never {
    if (this.atEnd()) throw new JsonSyntaxError("unexpected EOF");
    const c = String.fromCodePoint(this.text.codePointAt(this.pos)!);
    throw new JsonSyntaxError(
      `invalid character ${quoteChar(c)} ${context}`,
    );
  }

  value(): JsonValue {
    this.skipSpace();
    const c = this.text[this.pos];
    if (c === "{") return this.object();
    if (c === "[") return this.array();
    if (c === '"') return { type: "string", value: this.string() };
    if (c === "-" || (c >= "0" && c <= "9")) return this.number();
    if (c === "t") return this.literal("true", { type: "bool" });
    if (c === "f") return this.literal("false", { type: "bool" });
    if (c === "n") return this.literal("null", { type: "null" });
    return this.fail("looking for beginning of value");
  }

  object(): JsonValue {
    this.pos++;
    const members: [string, JsonValue][] = [];
    this.skipSpace();
    if (this.text[this.pos] === "}") {
      this.pos++;
      return { type: "object", members };
    }
    for (;;) {
      this.skipSpace();
      if (this.text[this.pos] !== '"') {
        this.fail("looking for beginning of object key string");
      }
      const key = this.string();
      this.skipSpace();
      if (this.text[this.pos] !== ":") this.fail("after object key");
      this.pos++;
      members.push([key, this.value()]);
      this.skipSpace();
      const c = this.text[this.pos];
      if (c === ",") {
        this.pos++;
        continue;
      }
      if (c === "}") {
        this.pos++;
        return { type: "object", members };
      }
      this.fail("after object key:value pair");
    }
  }

  array(): JsonValue {
    this.pos++;
    this.skipSpace();
    if (this.text[this.pos] === "]") {
      this.pos++;
      return { type: "array" };
    }
    for (;;) {
      this.value();
      this.skipSpace();
      const c = this.text[this.pos];
      if (c === ",") {
        this.pos++;
        continue;
      }
      if (c === "]") {
        this.pos++;
        return { type: "array" };
      }
      this.fail("after array element");
    }
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
      if (c !== "\\") {
        out += c;
        this.pos++;
        continue;
      }
      this.pos++;
      const e = this.text[this.pos];
      const simple: Record<string, string> = {
        '"': '"',
        "\\": "\\",
        "/": "/",
        b: "\b",
        f: "\f",
        n: "\n",
        r: "\r",
        t: "\t",
      };
      if (e !== undefined && e in simple) {
        out += simple[e];
        this.pos++;
        continue;
      }
      if (e !== "u") this.fail("in string escape code");
      this.pos++;
      const unit = this.hex4();
      if (unit >= 0xd800 && unit < 0xdc00) {
        // A high surrogate must be followed by an escaped low one; Go
        // replaces anything else with U+FFFD.
        if (this.text.startsWith("\\u", this.pos)) {
          const save = this.pos;
          this.pos += 2;
          const low = this.hex4();
          if (low >= 0xdc00 && low < 0xe000) {
            out += String.fromCharCode(unit, low);
            continue;
          }
          this.pos = save;
        }
        out += "\ufffd";
      } else if (unit >= 0xdc00 && unit < 0xe000) {
        out += "\ufffd";
      } else {
        out += String.fromCharCode(unit);
      }
    }
  }

  hex4(): number {
    for (let i = 0; i < 4; i++) {
      if (!/[0-9a-fA-F]/.test(this.text[this.pos + i] ?? "")) {
        this.pos += i;
        this.fail("in \\u hexadecimal character escape");
      }
    }
    const v = parseInt(this.text.slice(this.pos, this.pos + 4), 16);
    this.pos += 4;
    return v;
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

  literal(word: string, v: JsonValue): JsonValue {
    for (let i = 0; i < word.length; i++) {
      if (this.text[this.pos] !== word[i]) {
        this.fail(`in literal ${word} (expecting ${quoteChar(word[i])})`);
      }
      this.pos++;
    }
    return v;
  }
}

/**
 * The character as Go's decoder names it: by its first byte, read as a
 * rune and quoted as `strconv.Quote` quotes it (so a byte-order mark is
 * `'ï'`, a control character `'\x01'`).
 */
function quoteChar(c: string): string {
  const b = new TextEncoder().encode(c)[0];
  if (b === 0x27) return "'\\''";
  if (b === 0x22) return `'"'`;
  return `'${goQuoteRune(b)}'`;
}

const GO_ESCAPES: Record<number, string> = {
  0x07: "\\a",
  0x08: "\\b",
  0x09: "\\t",
  0x0a: "\\n",
  0x0b: "\\v",
  0x0c: "\\f",
  0x0d: "\\r",
  0x5c: "\\\\",
};

/** One rune below U+0100 as Go's `strconv.Quote` writes it, without the quotes. */
function goQuoteRune(r: number): string {
  const hex = (n: number, w: number) => n.toString(16).padStart(w, "0");
  if (GO_ESCAPES[r] !== undefined) return GO_ESCAPES[r];
  if (r < 0x20 || r === 0x7f) return `\\x${hex(r, 2)}`;
  // U+0080-U+009F are controls, U+00A0 and U+00AD not printable in Go's sense.
  if ((r >= 0x80 && r < 0xa0) || r === 0xa0 || r === 0xad) {
    return `\\u${hex(r, 4)}`;
  }
  return String.fromCharCode(r);
}

/** Field names and Go types of one RPC's request. */
type FieldSpec = Record<string, "string" | "int32">;

/** The Go request type of each RPC, as the decoder names it in its errors. */
const GO_TYPE: Record<Rpc, string> = {
  acquire: "AcquireRequest",
  renew: "RenewRequest",
  release: "ReleaseRequest",
};

const FIELDS: Record<Rpc, FieldSpec> = {
  acquire: { holder: "string", ttlSeconds: "int32" },
  renew: { holder: "string", fencingToken: "int32", ttlSeconds: "int32" },
  release: { holder: "string", fencingToken: "int32" },
};

/** A decoded request body; fields absent from the body are 0 / "". */
export interface LeaseRequest {
  /** The holder identity. */
  holder: string;
  /** The fencing token (renew, release). */
  fencingToken: number;
  /** The TTL in whole seconds (acquire, renew). */
  ttlSeconds: number;
}

/** The decoder's answer: a request, or the exact 400 message. */
export type Decoded =
  | { ok: true; request: LeaseRequest }
  | { ok: false; message: string };

/**
 * Decodes one request body the way the real server's Go decoder does: a
 * syntax error in the first value wins, then the first type or unknown-field
 * error, then data after the first value. Field names match
 * case-insensitively and `null` leaves a field unset, as in Go.
 */
export function decodeRequest(rpc: Rpc, text: string): Decoded {
  const reader = new JsonReader(text);
  reader.skipSpace();
  if (reader.atEnd()) return { ok: false, message: "invalid json body: EOF" };
  let value: JsonValue;
  try {
    value = reader.value();
  } catch (e) {
    if (e instanceof JsonSyntaxError) {
      return { ok: false, message: `invalid json body: ${e.message}` };
    }
    throw e;
  }
  const request: LeaseRequest = { holder: "", fencingToken: 0, ttlSeconds: 0 };
  const error = assignFields(GO_TYPE[rpc], FIELDS[rpc], value, request);
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
  goType: string,
  spec: FieldSpec,
  value: JsonValue,
  out: LeaseRequest,
): string | undefined {
  if (value.type === "null") return undefined;
  if (value.type !== "object") {
    return `cannot unmarshal ${value.type} into Go value of type api.${goType}`;
  }
  let first: string | undefined;
  const names = Object.keys(spec);
  for (const [key, v] of value.members) {
    const field = names.find((n) => n === key) ??
      names.find((n) => n.toLowerCase() === key.toLowerCase());
    let err: string | undefined;
    if (field === undefined) {
      err = `unknown field ${goQuote(key)}`;
    } else if (v.type !== "null") {
      const where = `Go struct field ${goType}.${field}`;
      err = spec[field] === "string"
        ? assignString(where, v, out)
        : assignInt32(where, field as "fencingToken" | "ttlSeconds", v, out);
    }
    first ??= err;
  }
  return first;
}

function assignString(
  where: string,
  v: JsonValue,
  out: LeaseRequest,
): string | undefined {
  if (v.type !== "string") {
    return `cannot unmarshal ${v.type} into ${where} of type string`;
  }
  out.holder = v.value;
  return undefined;
}

function assignInt32(
  where: string,
  field: "fencingToken" | "ttlSeconds",
  v: JsonValue,
  out: LeaseRequest,
): string | undefined {
  if (v.type !== "number") {
    return `cannot unmarshal ${v.type} into ${where} of type int32`;
  }
  const n = /^-?\d+$/.test(v.raw) ? Number(v.raw) : NaN;
  if (!Number.isInteger(n) || n < MIN_INT32 || n > MAX_FENCING_TOKEN) {
    return `cannot unmarshal number ${v.raw} into ${where} of type int32`;
  }
  out[field] = n === 0 ? 0 : n; // no -0
  return undefined;
}
