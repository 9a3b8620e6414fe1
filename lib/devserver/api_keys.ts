/**
 * Static API keys of the development server: `key-id:sha256hex` specs and the
 * bearer-token check (401). Only the SHA-256 of each token is configured, so a
 * key spec can sit in a command line or a manifest without being the secret.
 * `not authorized for this namespace` is never answered: the contract ties a
 * key to no namespace, only to holders (the tenant rule, `lease_rpc.ts`).
 *
 * @module
 */

/** One configured key: the tenant it stands for and the lower-case hex SHA-256 of its token. */
export interface ApiKey {
  keyId: string;
  sha256: string;
}

/**
 * Parses `key-id:sha256hex` specs (the id may hold colons). An error names the
 * key's position in `source`, never its value: it may be the token pasted.
 */
export function parseApiKeys(
  specs: readonly string[],
  source = "API key",
): ApiKey[] {
  return specs.map((spec, index) => {
    const m = /^(.+):([0-9a-fA-F]{64})$/s.exec(spec);
    if (!m) {
      throw new Error(
        `${source} #${
          index + 1
        } is not "key-id:sha256hex": give a non-empty key id (the caller's tenant), a colon, and the 64 hex digits of the SHA-256 of the API key (e.g. printf %s "$API_KEY" | sha256sum)`,
      );
    }
    return { keyId: m[1], sha256: m[2].toLowerCase() };
  });
}

// The white space Go's strings.TrimSpace removes (unicode.IsSpace), each as
// its UTF-8 bytes in a string of one char a byte, as Deno gives a header.
const SPACE = [
  ..."\t\n\v\f\r \u0085\u00a0\u1680\u2028\u2029\u202f\u205f\u3000",
  ...Array.from({ length: 11 }, (_, i) => String.fromCharCode(0x2000 + i)),
].map((c) => String.fromCharCode(...new TextEncoder().encode(c))).join("|");
const TRIM_SPACE = new RegExp(`^(?:${SPACE})+|(?:${SPACE})+$`, "g");

// Compares every character, so timing does not reveal how much matched.
function sameHex(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * Checks an `Authorization` header against the keys as the real server does:
 * the `Bearer ` prefix exactly (case-sensitive, one space), then the rest
 * trimmed as Go's `strings.TrimSpace` trims it (Unicode spaces included, on
 * the raw bytes), then the token's digest, compared in constant time. Two
 * `Authorization` headers arrive joined with `", "`, one token that matches
 * no key (the real server would read the first).
 *
 * @returns The key id of the matching key, or the exact 401 message.
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
): Promise<{ ok: true; tenant: string } | { ok: false; message: string }> {
  const token = header?.startsWith("Bearer ")
    ? header.slice(7).replace(TRIM_SPACE, "")
    : "";
  if (token === "") {
    return { ok: false, message: "missing or malformed Authorization header" };
  }
  const bytes = Uint8Array.from(token, (c) => c.charCodeAt(0) & 0xff);
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))
    .toHex();
  const tenant = keys.find((k) => sameHex(k.sha256, hash))?.keyId;
  return tenant === undefined
    ? { ok: false, message: "unauthorized" }
    : { ok: true, tenant };
}
