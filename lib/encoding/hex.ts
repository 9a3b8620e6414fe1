/**
 * Lower-case hexadecimal encoding of bytes: digests compared as text, random
 * request ids and file-name suffixes. One helper so every hex string the
 * project writes has the same alphabet and width.
 *
 * @module
 */

/**
 * Encodes bytes as lower-case hex, two digits per byte.
 *
 * @param bytes The bytes to encode.
 * @returns A string of `2 * bytes.length` characters of `[0-9a-f]`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(encodeHex(new Uint8Array([0, 15, 255])), "000fff");
 * ```
 */
export function encodeHex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

/**
 * Random bytes from the platform's CSPRNG, hex-encoded.
 *
 * @param byteCount How many random bytes; the result has twice as many characters.
 * @returns Lower-case hex, e.g. 32 characters for 16 bytes.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.match(randomHex(16), /^[0-9a-f]{32}$/); // e.g. "3f9c0b7e5a1d4c2e8f6b0a9d7c5e3f1a"
 * ```
 */
export function randomHex(byteCount: number): string {
  return encodeHex(crypto.getRandomValues(new Uint8Array(byteCount)));
}
