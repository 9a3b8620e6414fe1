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
        } is not "key-id:sha256hex": give a non-empty key id (the caller's tenant), a colon, and the 64 hex digits of the SHA-256 of the bearer token (e.g. printf %s "$TOKEN" | sha256sum)`,
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
 * Checks an `Authorization` header against the keys: the `Bearer ` prefix
 * exactly, then the token's digest, compared in constant time.
 *
 * @param keys The configured keys (non-empty: without keys nothing is checked).
 * @param header The request's `Authorization` header, `null` when absent.
 * @returns The key id of the matching key, or the 401 message.
 */
export async function authenticate(
  keys: readonly ApiKey[],
  header: string | null,
): Promise<Authentication> {
  const token = header?.startsWith("Bearer ") ? header.slice(7) : "";
  if (token === "") {
    return { ok: false, message: "missing or malformed Authorization header" };
  }
  const hash = await sha256Hex(token);
  const tenant = keys.find((k) => sameHex(k.sha256, hash))?.keyId;
  return tenant === undefined
    ? { ok: false, message: "unauthorized" }
    : { ok: true, tenant };
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

async function sha256Hex(text: string): Promise<string> {
  const data = new TextEncoder().encode(text);
  return new Uint8Array(await crypto.subtle.digest("SHA-256", data)).toHex();
}

// Compares every character so timing does not reveal how much matched.
function sameHex(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
