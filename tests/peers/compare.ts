/**
 * How the peer tier compares two answers: the status, the headers that
 * matter, and the body with what legitimately differs between two runs
 * replaced by its kind (times, random request ids). Pure functions.
 *
 * @module
 */
import type { RawRequest, RawResponse } from "./raw_http.ts";

/** The headers compared (names in lower case); others vary by server software. */
export const COMPARED_HEADERS = [
  "content-type",
  "allow",
  "location",
  "x-request-id",
  "x-content-type-options",
  "www-authenticate",
  "retry-after",
] as const;

/** An answer reduced to what must be equal on both servers. */
export interface Normalized {
  /** HTTP status. */
  status: number;
  /** The compared headers that are present. */
  headers: Record<string, string>;
  /** Parsed JSON with times and ids replaced by their kind, or the text. */
  body: unknown;
}

const TIME =
  /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/**
 * The kind of a time value: `zero` for Go's zero time, `time` for a valid
 * RFC 3339 time with 0-9 fractional digits, else the value itself (so a
 * malformed time shows as a difference).
 *
 * @param v A body value.
 * @returns Its kind.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(timeKind("0001-01-01T00:00:00Z"), "zero");
 * assert.equal(timeKind("2026-12-02T02:54:09.617758469Z"), "time");
 * ```
 */
export function timeKind(v: unknown): unknown {
  if (typeof v !== "string" || !TIME.test(v)) return v;
  return v.startsWith("0001-01-01T00:00:00") ? "zero" : "time";
}

function headerValues(req: RawRequest, name: string): string[] {
  return (req.headers ?? []).filter(([k]) => k.toLowerCase() === name).map((
    [, v],
  ) => v);
}

/**
 * What an `X-Request-Id` answer means relative to the request: the inbound
 * id echoed, a traceparent's trace id, a fresh random id, or none.
 *
 * @param value The answer's header, if any.
 * @param req The request sent.
 * @returns `=x-request-id[i]`, `=traceparent`, `<random>`, `<none>` or the value.
 */
export function requestIdKind(
  value: string | undefined,
  req: RawRequest,
): string {
  if (value === undefined) return "<none>";
  const sent = headerValues(req, "x-request-id");
  const i = sent.indexOf(value);
  if (i >= 0) return `=x-request-id[${i}]`;
  for (const tp of headerValues(req, "traceparent")) {
    if (tp.split("-")[1] === value) return "=traceparent";
  }
  if (/^[0-9a-f]{32}$/.test(value)) return "<random>";
  return value;
}

/**
 * Reduces an answer to what both servers must agree on.
 *
 * @param res The answer.
 * @param req The request it answers.
 * @param ignore Header names not to compare.
 * @returns The normalised answer.
 */
export function normalize(
  res: RawResponse,
  req: RawRequest,
  ignore: readonly string[] = [],
): Normalized {
  const headers: Record<string, string> = {};
  for (const name of COMPARED_HEADERS) {
    if (ignore.includes(name)) continue;
    const v = res.headers[name];
    if (name === "x-request-id") headers[name] = requestIdKind(v, req);
    else if (v !== undefined) headers[name] = v;
  }
  let body: unknown = res.body;
  try {
    if (res.body.trim() !== "") body = JSON.parse(res.body);
  } catch { /* not JSON: compared as text */ }
  if (body !== null && typeof body === "object" && !Array.isArray(body)) {
    const o: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(body)) {
      if (k === "expiresAt" || k === "acquiredAt") o[k] = timeKind(v);
      else if (k === "requestId") o[k] = requestIdKind(v as string, req);
      else o[k] = v;
    }
    body = o;
  }
  return { status: res.status, headers, body };
}

function canonical(v: unknown): string {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  const o = v as Record<string, unknown>;
  return `{${
    Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(",")
  }}`;
}

/**
 * The differences between two normalised answers, one line each; empty when
 * they agree. Field order in a JSON body is not compared.
 *
 * @param real The upstream server's.
 * @param dev The development server's.
 * @returns The differing parts.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const a = { status: 200, headers: {}, body: { acquired: true } };
 * assert.deepEqual(differences(a, a), []);
 * assert.equal(differences(a, { ...a, status: 409 }).length, 1);
 * ```
 */
export function differences(real: Normalized, dev: Normalized): string[] {
  const out: string[] = [];
  if (real.status !== dev.status) {
    out.push(`status: real ${real.status}, dev ${dev.status}`);
  }
  const names = new Set([
    ...Object.keys(real.headers),
    ...Object.keys(dev.headers),
  ]);
  for (const n of names) {
    if (real.headers[n] !== dev.headers[n]) {
      out.push(
        `header ${n}: real ${JSON.stringify(real.headers[n])}, dev ${
          JSON.stringify(dev.headers[n])
        }`,
      );
    }
  }
  if (canonical(real.body) !== canonical(dev.body)) {
    out.push(`body: real ${canonical(real.body)}, dev ${canonical(dev.body)}`);
  }
  return out;
}
