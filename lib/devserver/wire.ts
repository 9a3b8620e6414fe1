/**
 * The development server's response bytes, as the real server's Go code
 * writes them: `encoding/json` output (HTML characters escaped, a trailing
 * newline), RFC 3339 times with only the fractional digits needed, the zero
 * time for unset ones, and `net/http`'s plain-text answers.
 *
 * @module
 */
import type { LeaseGrant } from "./store.ts";

// Go's time.RFC3339Nano in UTC, as the real server answers with its SQLite
// store: up to nine fractional digits (a fraction of `ms` carries those below
// the millisecond), trailing zeros dropped; null (unset) is Go's zero time.
function formatTime(ms: number | null): string {
  if (ms === null) return "0001-01-01T00:00:00Z";
  let whole = Math.floor(ms);
  let subNanos = Math.round((ms - whole) * 1e6);
  if (subNanos >= 1e6) {
    whole += 1;
    subNanos -= 1e6;
  }
  const nanos = (whole % 1000) * 1e6 + subNanos;
  const seconds = new Date(whole - (whole % 1000)).toISOString().slice(0, 19);
  const digits = String(nanos).padStart(9, "0").replace(/0+$/, "");
  return `${seconds}${digits === "" ? "" : `.${digits}`}Z`;
}

// JSON as Go's encoder writes it: `<`, `>`, `&`, U+2028 and U+2029 escaped,
// and a newline.
function goJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  ) + "\n";
}

/** The body of a 200 Acquire or Renew answer: `holder` and `fencingToken` omitted when empty (Go's `omitempty`). */
export function grantBody(g: LeaseGrant): string {
  return goJson({
    acquired: g.acquired,
    holder: g.holder === "" ? undefined : g.holder,
    fencingToken: g.fencingToken === 0 ? undefined : g.fencingToken,
    expiresAt: formatTime(g.expiresAt),
    acquiredAt: formatTime(g.acquiredAt),
  });
}

/**
 * A `net/http` plain-text answer with the request id: `http.Error`'s headers
 * (`X-Content-Type-Options: nosniff`), or without `nosniff` those of a handler
 * that sets only the content type (the real server's `/healthz` and `/readyz`).
 */
export function plainResponse(
  status: number,
  body: string | null,
  id: string,
  extra: HeadersInit = {},
  nosniff = true,
): Response {
  const headers = new Headers(extra);
  headers.set("content-type", "text/plain; charset=utf-8");
  if (nosniff) headers.set("x-content-type-options", "nosniff");
  headers.set("x-request-id", id);
  return new Response(body, { status, headers });
}

/** A JSON answer (`body` newline included) with the request id. */
export function jsonResponse(
  status: number,
  body: string,
  id: string,
): Response {
  return new Response(body, {
    status,
    headers: { "content-type": "application/json", "x-request-id": id },
  });
}

/**
 * The contract's error body, `{"error": message}`, except that a 5xx never
 * tells why and carries the request id instead, for the server log.
 */
export function errorResponse(
  status: number,
  message: string,
  id: string,
): Response {
  const body = status >= 500
    ? { error: "internal error", requestId: id }
    : { error: message };
  return jsonResponse(status, goJson(body), id);
}
