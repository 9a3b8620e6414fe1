/**
 * Keeps the API key out of everything a server sent back. A server or proxy
 * that echoes the `Authorization` header would otherwise put the key into
 * error messages, a logged holder, or a health endpoint's text; the client
 * applies this to every outcome it returns, so nothing downstream can leak it.
 *
 * @module
 */
import type { GrantOutcome, ReleaseOutcome } from "./rpc.ts";

/** What stands where a key was. */
const REDACTED = "[redacted API key]";

/**
 * A function that replaces every occurrence of each secret in a text, in the
 * spellings a server may echo it in: as is, JSON-escaped (Go's encoder also
 * escapes `<`, `>`, `&`) and percent-encoded (a redirect's `Location`).
 *
 * @param secrets The keys to remove; empty ones are ignored.
 * @returns The redacting function (identity for no secrets).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(
 *   redactor(["s3cret"])("echo: Bearer s3cret"),
 *   "echo: Bearer [redacted API key]",
 * );
 * ```
 */
export function redactor(secrets: string[]): (text: string) => string {
  const forms = new Set<string>();
  for (const s of secrets) {
    if (s === "") continue;
    const json = JSON.stringify(s).slice(1, -1);
    forms.add(s);
    forms.add(json);
    forms.add(
      json.replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`),
    );
    forms.add(encodeURIComponent(s));
  }
  // Longest first, so a form that contains another is replaced whole.
  const list = [...forms].sort((a, b) => b.length - a.length);
  if (list.length === 0) return (text) => text;
  return (text) => {
    let out = text;
    for (const f of list) out = out.split(f).join(REDACTED);
    return out;
  };
}

/**
 * `outcome` with every server-derived string redacted: the message and
 * request id of a failure, the holder and timestamps of a lease record.
 */
export function redactOutcome<T extends GrantOutcome | ReleaseOutcome>(
  outcome: T,
  redact: (text: string) => string,
): T {
  const out = { ...outcome } as Record<string, unknown>;
  for (const field of ["message", "requestId"]) {
    if (typeof out[field] === "string") {
      out[field] = redact(out[field] as string);
    }
  }
  if ("lease" in outcome) {
    const l = outcome.lease;
    out.lease = {
      ...l,
      holder: redact(l.holder),
      expiresAt: redact(l.expiresAt),
      acquiredAt: redact(l.acquiredAt),
    };
  }
  return out as T;
}
