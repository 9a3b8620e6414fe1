/**
 * What the client makes of an answer, as pure functions of the status, two
 * headers and the body text, the same over every transport; and the removal
 * of the API key from everything a server sent back (a server or proxy that
 * echoes the `Authorization` header would otherwise put the key into error
 * messages, a logged holder, a health endpoint's text).
 *
 * Nothing here trusts the body: a grant for another holder, a token that is
 * not a JSON int32 literal, a timestamp that is not RFC 3339 are all
 * `bad-response`, never a held lease.
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
  /** From the `X-Request-Id` header, when printable. */
  requestId?: string;
  location?: string;
}

type Redact = (text: string) => string;

/** The request an answer is for. */
export interface AnswerContext {
  /** A grant must name it. */
  holder: string;
  /** Named in 3xx and 404 messages. */
  url: string;
  /** Applied to server text before it is cut to an excerpt, so no part of a secret survives the cut. */
  redact?: Redact;
}

/**
 * Interprets an Acquire or Renew answer: `acquired` only for a 200 whose
 * body keeps every promise of the API and names `ctx.holder`.
 */
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

/** Interprets a Release answer: 204 (or 200) is success, whatever the body. */
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
  // The fix of an answer no wait can heal: plain HTTP sent to a TLS port, or
  // a server that is not a Berth API server. Never for a 3xx (it has its own
  // advice), a 5xx other than 501 (a gateway's page while the server
  // restarts heals), or a Berth status with the API's JSON error.
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
 * The body as a JSON object, or why it is not one; with the text of its
 * `fencingToken` as written (a reviver's `context.source`): `JSON.parse`
 * reads `1.0` and `1e0` as 1, and a token must be an integer literal. With
 * duplicate members, the last one's, as `JSON.parse` keeps it.
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

/**
 * An Acquire/Renew body checked against the API's promises, or what broke
 * them. Unknown fields are ignored so a newer server stays usable.
 */
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

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-](\d{2}):(\d{2}))$/;

/**
 * RFC 3339 as Go's encoder writes it: up to 9 fractional digits, `Z` or a
 * numeric offset, fields in range (second 60 allowed for a leap second).
 */
function isRfc3339(s: string): boolean {
  const m = RFC3339.exec(s);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  const lastDay = new Date(0);
  lastDay.setUTCFullYear(year, month, 0);
  return month >= 1 && month <= 12 && day >= 1 &&
    day <= lastDay.getUTCDate() && hour <= 23 && minute <= 59 &&
    second <= 60 &&
    (m[9] === undefined || (Number(m[9]) <= 23 && Number(m[10]) <= 59));
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
 * @param secrets The keys to remove; empty ones are ignored.
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

/**
 * `outcome` with every server-derived string redacted: the message and
 * request id of a failure, the holder and timestamps of a lease record.
 */
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
