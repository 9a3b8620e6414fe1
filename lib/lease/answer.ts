/**
 * What the client makes of an answer, as pure functions the same over every
 * transport, and the removal of the API key from everything a server sent
 * back (a server or proxy may echo the `Authorization` header). Nothing here
 * trusts the body: a grant for another holder, a token that is not a JSON
 * int32 literal, a timestamp that is not RFC 3339 are all `bad-response`,
 * never a held lease.
 *
 * @module
 */
import {
  FIXES,
  type GrantOutcome,
  type LeaseFailure,
  type LeaseRecord,
  type ReleaseOutcome,
} from "./rpc.ts";
import { INT32_MAX } from "./wire.ts";

/** What came back over the wire, the body cut at the transport's cap. */
export interface RawResponse {
  status: number;
  body: string;
  requestId?: string;
  location?: string;
}

type Redact = (text: string) => string;

/** The request an answer is for: a grant must name its holder. */
export interface AnswerContext {
  holder: string;
  url: string;
  /** Applied to server text before it is cut, so no part of a secret survives the cut. */
  redact?: Redact;
}

/** An Acquire or Renew answer: `acquired` only for a 200 that keeps every promise of the API. */
export function grantOutcome(r: RawResponse, ctx: AnswerContext): GrantOutcome {
  if (r.status !== 200) return statusFailure(r, "200", ctx);
  const parsed = parseJsonObject(r.body);
  // Every answer of the API is a JSON object: this one is someone else's.
  if (typeof parsed === "string") return bad(r, parsed, ctx, FIXES.notBerth);
  const redact = ctx.redact ?? ((t) => t);
  const record = parseGrant(parsed, redact);
  if (typeof record === "string") return bad(r, record, ctx);
  const { acquired, lease } = record;
  if (acquired && lease.holder !== ctx.holder) {
    const [got, want] = [show(lease.holder, redact), show(ctx.holder, redact)];
    return bad(
      r,
      `"acquired" is true but "holder" is ${got}, not the holder requested (${want})`,
      ctx,
    );
  }
  const kind = acquired ? "acquired" : "not-acquired";
  return { kind, lease, requestId: r.requestId };
}

/** A Release answer: 204 (or 200) is success, whatever the body. */
export function releaseOutcome(
  r: RawResponse,
  ctx: AnswerContext,
): ReleaseOutcome {
  return r.status === 204 || r.status === 200
    ? { kind: "released", requestId: r.requestId }
    : statusFailure(r, "204 or 200", ctx);
}

function statusFailure(
  r: RawResponse,
  expected: string,
  ctx: AnswerContext,
): LeaseFailure {
  const { status, body } = r;
  const parsed = parseJsonObject(body);
  const envelope = typeof parsed === "string" ? undefined : parsed.value;
  const error = envelope?.error;
  let message: string;
  let requestId = r.requestId;
  if (typeof error === "string") {
    message = excerpt(error, ctx);
    const id = envelope?.requestId;
    if (typeof id === "string" && id !== "") requestId = excerpt(id, ctx);
  } else if (isHtml(body)) {
    const title = /<title[^>]*>([^<]*)<\/title>/i.exec(body)?.[1];
    const named = title?.trim()
      ? ` titled ${JSON.stringify(excerpt(title, ctx))}`
      : "";
    message = `an HTML page${named}, not the API's JSON`;
  } else {
    message = excerpt(body, ctx);
  }
  if (status === 409) return { kind: "conflict", message, requestId };
  // No fix for a 3xx (its own advice), a 5xx but 501 (a gateway's page while
  // the server restarts heals), or a Berth status with the API's JSON error.
  let fix: string | undefined;
  if (
    status === 400 && ctx.url.startsWith("http:") && PLAIN_ON_TLS.test(body)
  ) {
    fix = FIXES.useHttps;
  } else if (status >= 200 && status < 300) {
    fix = envelope !== undefined || body === "" ? undefined : FIXES.notBerth;
  } else if (
    status < 300 || (status >= 400 && status < 500) || status === 501
  ) {
    const foreign = !BERTH.has(status) && typeof error !== "string";
    fix = isHtml(body) || foreign ? FIXES.notBerth : undefined;
  }
  const withFix = fix === undefined ? {} : { fix };
  if (status >= 200 && status < 300) {
    message = `unexpected success status (want ${expected}): ${message}`;
    return { kind: "bad-response", status, message, requestId, ...withFix };
  }
  if (status >= 300 && status < 400) {
    message = r.location
      ? `redirect to ${excerpt(r.location, ctx)}`
      : "a redirect without a Location header";
  }
  const url = ctx.url;
  return { kind: "server-error", status, message, requestId, url, ...withFix };
}

/** What a Berth API server answers a POST on its lease paths with (the spec's, and its router's 405 and 307). */
const BERTH = new Set([200, 204, 307, 400, 401, 403, 404, 405, 409, 413, 500]);

/** What the Go TLS server (and nginx) answer to plain HTTP on a TLS port. */
const PLAIN_ON_TLS =
  /Client sent an HTTP request to an HTTPS server|plain HTTP request was sent to HTTPS port/i;

function isHtml(body: string): boolean {
  return /^\s*<(?:!doctype|html|head|body|\?xml|title|h1)/i.test(body);
}

function bad(
  r: RawResponse,
  why: string,
  ctx: AnswerContext,
  fix?: string,
): LeaseFailure {
  return {
    kind: "bad-response",
    status: r.status,
    message: `${why}; body: ${excerpt(r.body, ctx)}`,
    requestId: r.requestId,
    ...(fix === undefined ? {} : { fix }),
  };
}

/** A short, single-line, printable, redacted piece of server text. */
function excerpt(text: string, ctx: AnswerContext): string {
  const clean = ctx.redact?.(text) ?? text;
  // deno-lint-ignore no-control-regex
  const flat = clean.replace(/[\x00-\x1f\x7f]+/g, " ").trim();
  if (flat === "") return "(empty body)";
  return flat.length > 200 ? `${flat.slice(0, 200)}...` : flat;
}

/**
 * The body as a JSON object, or why it is not one; with its `fencingToken`
 * as written (the last duplicate's, as `JSON.parse` keeps it): `JSON.parse`
 * reads `1.0` and `1e0` as 1, and a token must be an integer literal.
 */
function parseJsonObject(
  body: string,
): { value: Record<string, unknown>; token?: string } | string {
  const tokens = new Map<unknown, string>();
  let value: unknown;
  try {
    value = JSON.parse(body, function (key, v, context?: { source?: string }) {
      if (key === "fencingToken" && typeof v === "number" && context?.source) {
        tokens.set(this, context.source);
      }
      return v;
    });
  } catch {
    return "response body is not JSON";
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return "response body is not a JSON object";
  }
  return { value: value as Record<string, unknown>, token: tokens.get(value) };
}

/** The grant, or which promise it broke; unknown fields are ignored so a newer server stays usable. */
function parseGrant(
  { value, token: literal }: { value: Record<string, unknown>; token?: string },
  redact: Redact,
): { acquired: boolean; lease: LeaseRecord } | string {
  const { acquired, holder, fencingToken, expiresAt, acquiredAt } = value;
  const got = (v: unknown) => show(v, redact);
  if (typeof acquired !== "boolean") {
    return `"acquired" must be a boolean, got ${got(acquired)}`;
  }
  if (holder !== undefined && typeof holder !== "string") {
    return `"holder" must be a string, got ${got(holder)}`;
  }
  if (
    fencingToken !== undefined &&
    (typeof fencingToken !== "number" || literal === undefined ||
      !/^-?(0|[1-9][0-9]*)$/.test(literal) || fencingToken < -INT32_MAX - 1 ||
      fencingToken > INT32_MAX)
  ) {
    const text = literal === undefined
      ? got(fencingToken)
      : redact(literal).slice(0, 60);
    return `"fencingToken" must be a JSON integer in int32 range, got ${text}`;
  }
  const token = (fencingToken as number | undefined) ?? 0;
  if (acquired && token < 1) {
    const text = got(fencingToken);
    return `"fencingToken" must be at least 1 when "acquired" is true, got ${text}`;
  }
  for (const [field, v] of Object.entries({ expiresAt, acquiredAt })) {
    if (typeof v !== "string" || !isRfc3339(v)) {
      return `"${field}" must be an RFC 3339 timestamp, got ${got(v)}`;
    }
  }
  return {
    acquired,
    lease: {
      holder: (holder as string | undefined) ?? "",
      fencingToken: token,
      expiresAt: expiresAt as string,
      acquiredAt: acquiredAt as string,
    },
  };
}

/** RFC 3339 as Go writes it: up to 9 fractional digits, fields in range (second 60: a leap second). */
const RFC3339 =
  /^(\d{4})-(0[1-9]|1[0-2])-(\d\d)[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d{1,9})?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;

function isRfc3339(s: string): boolean {
  const m = RFC3339.exec(s);
  const lastDay = new Date(0);
  if (m) lastDay.setUTCFullYear(Number(m[1]), Number(m[2]), 0);
  return m !== null && Number(m[3]) >= 1 &&
    Number(m[3]) <= lastDay.getUTCDate();
}

/** A server value for a message: JSON, redacted, then cut to 60 characters. */
function show(v: unknown, redact: Redact): string {
  if (v === undefined) return "nothing";
  const s = redact(JSON.stringify(v) ?? String(v));
  return s.length > 60 ? `${s.slice(0, 60)}...` : s;
}

/**
 * A function that replaces every occurrence of each secret in a text, in the
 * spellings a server may echo it in: as is, JSON-escaped (Go's encoder also
 * escapes `<`, `>`, `&`) and percent-encoded (a redirect's `Location`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(redactor(["k3y"])("Bearer k3y"), "Bearer [redacted API key]");
 * ```
 */
export function redactor(secrets: string[]): Redact {
  const forms = new Set<string>();
  for (const s of secrets.filter((s) => s !== "")) {
    const json = JSON.stringify(s).slice(1, -1);
    const goJson = json.replace(
      /[<>&]/g,
      (c) => `\\u00${c.charCodeAt(0).toString(16)}`,
    );
    forms.add(s).add(json).add(goJson).add(encodeURIComponent(s));
  }
  // Longest first, so a form that contains another is replaced whole.
  const list = [...forms].sort((a, b) => b.length - a.length);
  return (text) =>
    list.reduce((out, f) => out.split(f).join("[redacted API key]"), text);
}

/** `outcome` with every server-derived string redacted. */
export function redactOutcome<T extends GrantOutcome | ReleaseOutcome>(
  outcome: T,
  redact: Redact,
): T {
  const out = { ...outcome } as Record<string, unknown>;
  for (const field of ["message", "requestId"]) {
    if (typeof out[field] === "string") out[field] = redact(out[field]);
  }
  if ("lease" in outcome) {
    const { holder, expiresAt, acquiredAt } = outcome.lease;
    out.lease = {
      ...outcome.lease,
      holder: redact(holder),
      expiresAt: redact(expiresAt),
      acquiredAt: redact(acquiredAt),
    };
  }
  return out as T;
}
