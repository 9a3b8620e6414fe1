/**
 * The development server's response bytes, written as the real server's Go
 * code writes them: `encoding/json` output (HTML characters escaped, a
 * trailing newline), RFC 3339 times with only the fractional digits needed,
 * the zero time for unset ones, and `net/http`'s plain-text answers. Pure, so
 * the exact bytes the contract fixes are in one place.
 *
 * @module
 */
import type { LeaseGrant } from "./store.ts";

/** Go's zero `time.Time`, what the contract answers for an unset time. */
const ZERO_TIME = "0001-01-01T00:00:00Z";

/** The content type of `net/http`'s plain-text answers (404, 405, probes). */
const PLAIN = "text/plain; charset=utf-8";

/**
 * Go's `time.RFC3339Nano` in UTC, as the real server answers with its SQLite
 * store: up to nine fractional digits, trailing zeros dropped.
 *
 * @param ms Unix milliseconds (a fraction carries the sub-millisecond
 *   digits, rounded to the nanosecond), or `null` for the zero time.
 * @returns E.g. `2026-05-07T00:00:01.5Z`, `2026-05-07T00:00:01.000123Z`, or
 *   `0001-01-01T00:00:00Z` for `null`.
 */
export function formatTime(ms: number | null): string {
  if (ms === null) return ZERO_TIME;
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

/**
 * JSON as Go's encoder writes it: `<`, `>`, `&`, U+2028 and U+2029 escaped.
 *
 * @param value Any JSON-serialisable value.
 * @returns The JSON text, without a trailing newline.
 */
function goJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/**
 * The body of a 200 Acquire or Renew answer: `holder` and `fencingToken`
 * omitted when empty (Go's `omitempty`), both times always present.
 *
 * @param g The store's answer.
 * @returns The JSON line, newline included.
 */
export function grantBody(g: LeaseGrant): string {
  const out: Record<string, unknown> = { acquired: g.acquired };
  if (g.holder !== "") out.holder = g.holder;
  if (g.fencingToken !== 0) out.fencingToken = g.fencingToken;
  out.expiresAt = formatTime(g.expiresAt);
  out.acquiredAt = formatTime(g.acquiredAt);
  return goJson(out) + "\n";
}

/**
 * A `net/http` plain-text answer with the request id: `http.Error`'s
 * headers (`X-Content-Type-Options: nosniff`), or with `nosniff: false` those
 * of a handler that sets only the content type (the real server's
 * `/healthz` and `/readyz`).
 *
 * @param status The HTTP status.
 * @param body The body, newline included.
 * @param id The request id, echoed as `X-Request-Id`.
 * @param extra More headers, e.g. `Allow`.
 * @param nosniff Whether to send `X-Content-Type-Options: nosniff` (default true).
 * @returns The response.
 */
export function plainResponse(
  status: number,
  body: string,
  id: string,
  extra?: HeadersInit,
  nosniff = true,
): Response {
  const headers = new Headers(extra);
  headers.set("content-type", PLAIN);
  if (nosniff) headers.set("x-content-type-options", "nosniff");
  headers.set("x-request-id", id);
  return new Response(body, { status, headers });
}

/**
 * A JSON answer with the request id.
 *
 * @param status The HTTP status.
 * @param body The JSON text, newline included.
 * @param id The request id, echoed as `X-Request-Id`.
 * @returns The response.
 */
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
 * The contract's error body: `{"error": message}`, except that a 5xx never
 * tells why and carries the request id instead, for the server log.
 *
 * @param status The HTTP status.
 * @param message The exact message of the contract (ignored for 5xx).
 * @param id The request id.
 * @returns The response.
 */
export function errorResponse(
  status: number,
  message: string,
  id: string,
): Response {
  const body = status >= 500
    ? { error: "internal error", requestId: id }
    : { error: message };
  return jsonResponse(status, goJson(body) + "\n", id);
}
