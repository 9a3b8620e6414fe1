/**
 * The wire both ways, the same over every transport: the API server URL,
 * the request bodies (the Go helper's bytes) and headers, and what an answer
 * means: what breaks the API's promises is `bad-response`, never a held
 * lease (docs/lease-client.md, "Request bodies" and "Answers").
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
import { VERSION } from "../version.ts";

export const INT32_MAX = 2147483647;

/** The API server URL, split: `hostname` without IPv6's brackets, `origin` as the URL spells it (for messages). */
export interface Target {
  secure: boolean;
  hostname: string;
  port: number;
  basePath: string;
  origin: string;
}

/**
 * Checks and splits the API server URL: a path prefix is kept (a gateway at
 * `https://gw/berth`), its trailing slashes dropped so no `//` is sent.
 *
 * @throws {Error} Naming what is wrong, credentials never echoed back.
 */
export function parseApiServer(apiServer: string): Target {
  const fail = (why: string, url = apiServer) =>
    new Error(
      `api server URL ${
        JSON.stringify(url)
      } ${why}; set --api-server / BERTH_API_SERVER to e.g. https://berth-api.berth-system.svc:8443`,
    );
  let url: URL;
  try {
    url = new URL(apiServer);
  } catch {
    throw fail("is not a valid URL");
  }
  if (url.username !== "" || url.password !== "") {
    // Named without the credentials: the password is a secret.
    url.username = url.password = "";
    throw fail(
      "(credentials removed here) must not carry credentials (use --api-key or --api-key-file)",
      url.href,
    );
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw fail(`has scheme ${url.protocol.slice(0, -1)}, want https or http`);
  }
  if (url.search !== "" || url.hash !== "") {
    throw fail("must not have a query or fragment");
  }
  const basePath = url.pathname.replace(/\/+$/, "");
  if (basePath.includes("//")) {
    throw fail("has an empty path segment");
  }
  const secure = url.protocol === "https:";
  return {
    secure,
    hostname: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: url.port === "" ? (secure ? 443 : 80) : Number(url.port),
    basePath,
    origin: url.origin,
  };
}

/**
 * A string as Go's `encoding/json` writes it (`<`, `>`, `&`, U+2028, U+2029
 * escaped too, a lone surrogate as `\ufffd`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(goJsonString("a<b>&\u2028"), '"a\\u003cb\\u003e\\u0026\\u2028"');
 * ```
 */
export function goJsonString(s: string): string {
  // Split only when needed: a `\p{...}` class is costly to make at its first
  // use, at every start (docs/benchmarks.md).
  const parts = (s.isWellFormed() ? [s] : s.split(/\p{Surrogate}/u)).map((p) =>
    JSON.stringify(p).slice(1, -1).replace(
      /[<>&\u2028\u2029]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
    )
  );
  return `"${parts.join("\\ufffd")}"`;
}

/**
 * An RPC's body as Go marshals the map of its fields: keys sorted.
 *
 * @throws {RangeError} On a token or TTL outside 1..2147483647 (a caller bug).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const body = requestBody({ holder: "h", ttlSeconds: 30, fencingToken: 4 });
 * assert.equal(body, '{"fencingToken":4,"holder":"h","ttlSeconds":30}');
 * ```
 */
export function requestBody(
  fields: { holder: string; fencingToken?: number; ttlSeconds?: number },
): string {
  const members = Object.entries(fields).sort(([a], [b]) => a < b ? -1 : 1)
    .map(([field, v]) => {
      if (typeof v === "string") return `"${field}":${goJsonString(v)}`;
      if (!Number.isInteger(v) || v < 1 || v > INT32_MAX) {
        throw new RangeError(
          `${field} must be an integer in 1..${INT32_MAX}, got ${v}`,
        );
      }
      return `"${field}":${v}`;
    });
  return `{${members.join(",")}}`;
}

/** The request headers of one RPC; Content-Length explicit, so both transports send the same bytes. */
export function requestHeaders(
  body: string,
  requestId: string,
  apiKey: string | undefined,
): Record<string, string> {
  return {
    "Content-Type": "application/json",
    Accept: "application/json",
    "User-Agent": `berth-acquire/${VERSION}`,
    "X-Request-Id": requestId,
    "Content-Length": String(new TextEncoder().encode(body).length),
    ...(apiKey === undefined ? {} : { Authorization: `Bearer ${apiKey}` }),
  };
}

/** What came back over the wire, the body cut at the transport's cap. */
export interface RawResponse {
  status: number;
  body: string;
  requestId?: string;
  location?: string;
}

export type Redact = (text: string) => string;

/** The request an answer is for (a grant must name its holder); `redact` applies before a cut, so no part of a secret survives it. */
export type AnswerContext = { holder: string; url: string; redact?: Redact };

/** An Acquire or Renew answer: `acquired` only for a 200 that keeps every promise of the API. */
export function grantOutcome(r: RawResponse, ctx: AnswerContext): GrantOutcome {
  if (r.status !== 200) return statusFailure(r, "200", ctx);
  const bad = (why: string, fix?: string): LeaseFailure => ({
    kind: "bad-response",
    status: r.status,
    message: `${why}; body: ${excerpt(r.body, ctx)}`,
    requestId: r.requestId,
    ...(fix === undefined ? {} : { fix }),
  });
  const parsed = parseJsonObject(r.body);
  // Every answer of the API is a JSON object: this one is someone else's.
  if (typeof parsed === "string") return bad(parsed, FIXES.notBerth);
  const redact = ctx.redact ?? ((t) => t);
  const record = parseGrant(parsed, redact);
  if (typeof record === "string") return bad(record);
  const { acquired, lease } = record;
  if (acquired && lease.holder !== ctx.holder) {
    const [got, want] = [show(lease.holder, redact), show(ctx.holder, redact)];
    return bad(
      `"acquired" is true but "holder" is ${got}, not the holder requested (${want})`,
    );
  }
  const kind = acquired ? "acquired" : "not-acquired";
  return { kind, lease, requestId: r.requestId };
}

/**
 * A Release answer: 204 is success, and a 200 whose body is empty or a JSON
 * object; any other 200 (a page from something that is not the API) is not.
 */
export function releaseOutcome(
  r: RawResponse,
  ctx: AnswerContext,
): ReleaseOutcome {
  const empty = r.body.trim() === "" ||
    typeof parseJsonObject(r.body) !== "string";
  return r.status === 204 || (r.status === 200 && empty)
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
  let fix: string | undefined;
  if (
    status === 400 && ctx.url.startsWith("http:") && PLAIN_ON_TLS.test(body)
  ) {
    fix = FIXES.useHttps;
  } else if (status >= 200 && status < 300) {
    fix = envelope !== undefined || body === "" ? undefined : FIXES.notBerth;
  } else if (
    // A gateway's 408 or 429 in front of the API heals with a wait.
    (status < 300 || (status >= 400 && status < 500) || status === 501) &&
    status !== 408 && status !== 429
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

/** The statuses a Berth API server answers on its lease paths (its router's 405 and 307 among them). */
const BERTH = new Set([200, 204, 307, 400, 401, 403, 404, 405, 409, 413, 500]);

/** What the Go TLS server (and nginx) answer to plain HTTP on a TLS port. */
const PLAIN_ON_TLS =
  /Client sent an HTTP request to an HTTPS server|plain HTTP request was sent to HTTPS port/i;

const isHtml = (body: string) =>
  /^\s*<(?:!doctype|html|head|body|\?xml|title|h1)/i.test(body);

/** A short, single-line, printable, redacted piece of server text. */
function excerpt(text: string, ctx: AnswerContext): string {
  // Controls, line separators and format characters (a bidi override could
  // reorder the line it lands in) become one space.
  const flat = (ctx.redact?.(text) ?? text)
    // deno-lint-ignore no-control-regex
    .replace(/[\x00-\x1f\x7f-\x9f\u2028\u2029\p{Cf}]+/gu, " ").trim();
  if (flat === "") return "(empty body)";
  return flat.length > 200 ? `${flat.slice(0, 200)}...` : flat;
}

/** The body as a JSON object, or why not; with its `fencingToken` as written (the last duplicate's), since a token must be an integer literal. */
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
    return `"fencingToken" must be at least 1 when "acquired" is true, got ${
      got(fencingToken)
    }`;
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
  /^(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d{1,9})?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;

function isRfc3339(s: string): boolean {
  const m = RFC3339.exec(s);
  const lastDay = new Date(0);
  if (m) lastDay.setUTCFullYear(Number(m[1]), Number(m[2]), 0);
  return m !== null && Number(m[3]) <= lastDay.getUTCDate();
}

/** A server value for a message: JSON, redacted, then cut to 60 characters. */
function show(v: unknown, redact: Redact): string {
  if (v === undefined) return "nothing";
  const s = redact(JSON.stringify(v) ?? String(v));
  return s.length > 60 ? `${s.slice(0, 60)}...` : s;
}
