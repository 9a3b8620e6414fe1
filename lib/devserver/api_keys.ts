/**
 * Static API keys of the development server: `key-id:sha256hex` specs, the
 * bearer-token check (401) and the tenant rule on the holder (403). Only the
 * SHA-256 of each token is configured, so a key spec can sit in a command
 * line or a manifest without being the secret itself.
 *
 * `not authorized for this namespace` is never answered: the contract
 * defines no rule that ties a key to namespaces, only the holder rule.
 *
 * @module
 */

/** One configured key: the tenant it stands for and its token's digest. */
export interface ApiKey {
  /** The caller's tenant; holders must be it or start with `<keyId>/`. */
  keyId: string;
  /** Lower-case hex SHA-256 of the bearer token. */
  sha256: string;
}

/**
 * Parses the `--api-key` specs. An error names the key's position, never its
 * value, since a user may have pasted the token itself by mistake.
 *
 * @param specs Each `key-id:sha256hex` (the id may contain colons; the last one separates).
 * @param source What the specs are called in the error, e.g. `--api-key`.
 * @returns The keys, digests in lower case.
 * @throws {Error} On a spec without a key id or without 64 hex digits.
 */
export function parseApiKeys(
  specs: readonly string[],
  source = "API key",
): ApiKey[] {
  return specs.map((spec, index) => {
    const at = spec.lastIndexOf(":");
    const keyId = at < 0 ? "" : spec.slice(0, at);
    const hex = at < 0 ? "" : spec.slice(at + 1);
    if (keyId === "" || !/^[0-9a-fA-F]{64}$/.test(hex)) {
      throw new Error(
        `${source} #${
          index + 1
        } is not "key-id:sha256hex": give a non-empty key id (the caller's tenant), a colon, and the 64 hex digits of the SHA-256 of the API key (e.g. printf %s "$API_KEY" | sha256sum)`,
      );
    }
    return { keyId, sha256: hex.toLowerCase() };
  });
}

/** What {@linkcode authenticate} found: a tenant, or the exact 401 message. */
export type Authentication =
  | { ok: true; tenant: string }
  | { ok: false; message: string };

/**
 * Checks an `Authorization` header against the keys as the real server
 * does: the `Bearer ` prefix exactly (case-sensitive, one space), then the
 * rest trimmed of white space as Go's `strings.TrimSpace` trims it (Unicode
 * spaces included), then the token's digest, compared in constant time.
 *
 * The header arrives as `Deno.serve` gives it: outer blanks already removed,
 * one character per byte, and two `Authorization` headers joined with
 * `", "` (the real server would read the first; here the joined value is
 * one token that matches no key, so the answer is 401 `unauthorized`).
 *
 * @param keys The configured keys (non-empty: without keys nothing is checked).
 * @param header The request's `Authorization` header, `null` when absent.
 * @returns The key id of the matching key, or the 401 message.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"; // "test"
 * const keys = parseApiKeys([`team:${sha}`]);
 * assert.deepEqual(await authenticate(keys, "Bearer   test  "), { ok: true, tenant: "team" });
 * assert.equal((await authenticate(keys, "bearer test")).ok, false);
 * ```
 */
export async function authenticate(
  keys: readonly ApiKey[],
  header: string | null,
): Promise<Authentication> {
  const token = header?.startsWith("Bearer ")
    ? goTrimSpace(byteStringBytes(header.slice(7)))
    : new Uint8Array();
  if (token.length === 0) {
    return { ok: false, message: "missing or malformed Authorization header" };
  }
  const hash = await sha256Hex(token);
  const tenant = keys.find((k) => sameHex(k.sha256, hash))?.keyId;
  return tenant === undefined
    ? { ok: false, message: "unauthorized" }
    : { ok: true, tenant };
}

// A header value as its bytes (Deno gives one character per byte).
function byteStringBytes(s: string): Uint8Array {
  return Uint8Array.from(s, (c) => c.charCodeAt(0) & 0xff);
}

// The UTF-8 forms of the white space Go's strings.TrimSpace removes
// (unicode.IsSpace): ASCII blanks, U+0085, U+00A0, U+1680, U+2000-U+200A,
// U+2028, U+2029, U+202F, U+205F and U+3000.
const SPACES: Uint8Array[] = [
  "\t",
  "\n",
  "\v",
  "\f",
  "\r",
  " ",
  "\u0085",
  "\u00a0",
  "\u1680",
  ..."\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a",
  "\u2028",
  "\u2029",
  "\u202f",
  "\u205f",
  "\u3000",
].map((c) => new TextEncoder().encode(c));

function startsWithAt(b: Uint8Array, at: number, seq: Uint8Array): boolean {
  if (at < 0 || at + seq.length > b.length) return false;
  return seq.every((x, i) => b[at + i] === x);
}

// Go's strings.TrimSpace on raw bytes (invalid UTF-8 is kept, as Go keeps it).
function goTrimSpace(b: Uint8Array): Uint8Array {
  let start = 0;
  let end = b.length;
  for (;;) {
    const seq = SPACES.find((s) => start < end && startsWithAt(b, start, s));
    if (!seq) break;
    start += seq.length;
  }
  for (;;) {
    const seq = SPACES.find((s) =>
      end - s.length >= start && startsWithAt(b, end - s.length, s)
    );
    if (!seq) break;
    end -= seq.length;
  }
  return b.subarray(start, end);
}

/**
 * The tenant rule: a holder must be the key id or start with `<key-id>/`.
 *
 * @param tenant The authenticated key id.
 * @param holder The request's holder.
 * @returns Whether the request may act for that holder (else 403).
 */
export function holderAllowed(tenant: string, holder: string): boolean {
  return holder === tenant || holder.startsWith(`${tenant}/`);
}

async function sha256Hex(data: Uint8Array): Promise<string> {
  const copy = new Uint8Array(data); // digest wants its own ArrayBuffer
  return new Uint8Array(await crypto.subtle.digest("SHA-256", copy)).toHex();
}

// Compares every character so timing does not reveal how much matched.
function sameHex(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
