/**
 * What the client makes of an answer, as pure functions of the status, the
 * headers it reads and the body text: a {@linkcode GrantOutcome} or
 * {@linkcode ReleaseOutcome}. Kept apart from the transports so the same
 * classification holds over every transport, and so every hostile
 * answer is a unit test without a socket.
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
import { INT32_MAX, INT32_MIN } from "./wire.ts";

/** What came back over the wire before it is interpreted. */
export interface RawResponse {
  /** The HTTP status. */
  status: number;
  /** The body as UTF-8 text, at most the transport's cap. */
  body: string;
  /** From the `X-Request-Id` response header, when printable. */
  requestId?: string;
  /** The `Location` header, for a redirect. */
  location?: string;
}

/** What the decoder needs to know about the request the answer is for. */
export interface AnswerContext {
  /** The holder the request was sent for: a grant must name it. */
  holder: string;
  /** The URL requested, named in 3xx and 404 messages. */
  url: string;
  /**
   * Removes secrets from server text before it is cut to an excerpt (so no
   * part of a secret survives the cut). Default: keeps text as is.
   */
  redact?: (text: string) => string;
}

/**
 * An `X-Request-Id` header value worth repeating in messages: printable
 * ASCII, at most 128 characters; anything else is dropped.
 */
export function headerRequestId(value: string | null): string | undefined {
  return value !== null && /^[\x21-\x7e]{1,128}$/.test(value)
    ? value
    : undefined;
}

/**
 * Interprets an Acquire or Renew answer.
 *
 * @param r The answer.
 * @param ctx The request it answers.
 * @returns `acquired` only for a 200 whose body keeps every promise of the
 * API and names `ctx.holder`; otherwise the matching failure.
 */
export function grantOutcome(r: RawResponse, ctx: AnswerContext): GrantOutcome {
  if (r.status !== 200) return statusFailure(r, [200], ctx);
  const parsed = parseJsonObject(r.body);
  if (typeof parsed === "string") {
    // Every answer of the API is a JSON object: this one is someone else's.
    return badResponse(r, parsed, ctx, FIXES.notBerth);
  }
  const redact = ctx.redact ?? ((t: string) => t);
  const record = parseGrant(parsed, numberLiterals(parsed), redact);
  if (typeof record === "string") return badResponse(r, record, ctx);
  const { acquired, lease } = record;
  if (acquired && lease.holder !== ctx.holder) {
    return badResponse(
      r,
      `"acquired" is true but "holder" is ${
        show(lease.holder, redact)
      }, not the holder requested (${show(ctx.holder, redact)})`,
      ctx,
    );
  }
  return {
    kind: acquired ? "acquired" : "not-acquired",
    lease,
    requestId: r.requestId,
  };
}

/**
 * Interprets a Release answer: 204 (or 200) is success, whatever the body.
 *
 * @param r The answer.
 * @param ctx The request it answers.
 */
export function releaseOutcome(
  r: RawResponse,
  ctx: AnswerContext,
): ReleaseOutcome {
  if (r.status === 204 || r.status === 200) {
    return { kind: "released", requestId: r.requestId };
  }
  return statusFailure(r, [204, 200], ctx);
}

/** A 409, a redirect, an unexpected success status, or any other status. */
function statusFailure(
  r: RawResponse,
  expected: number[],
  ctx: AnswerContext,
): LeaseFailure {
  const envelope = parseJsonObject(r.body);
  const errorShape = typeof envelope !== "string" &&
    typeof envelope.error === "string";
  let message: string;
  let requestId = r.requestId;
  if (typeof envelope !== "string" && typeof envelope.error === "string") {
    message = excerpt(envelope.error, ctx);
    if (typeof envelope.requestId === "string" && envelope.requestId !== "") {
      requestId = excerpt(envelope.requestId, ctx);
    }
  } else if (isHtml(r.body)) {
    const title = /<title[^>]*>([^<]*)<\/title>/i.exec(r.body)?.[1];
    message = `an HTML page${
      title?.trim() ? ` titled ${JSON.stringify(excerpt(title, ctx))}` : ""
    }, not the API's JSON`;
  } else {
    message = excerpt(r.body, ctx);
  }
  if (r.status === 409) return { kind: "conflict", message, requestId };
  const fix = answerFix(r, typeof envelope !== "string", errorShape, ctx);
  const withFix = fix === undefined ? {} : { fix };
  if (r.status >= 200 && r.status < 300) {
    return {
      kind: "bad-response",
      status: r.status,
      message: `unexpected success status (want ${
        expected.join(" or ")
      }): ${message}`,
      requestId,
      ...withFix,
    };
  }
  if (r.status >= 300 && r.status < 400) {
    message = r.location === undefined || r.location === ""
      ? "a redirect without a Location header"
      : `redirect to ${excerpt(r.location, ctx)}`;
  }
  return {
    kind: "server-error",
    status: r.status,
    message,
    requestId,
    url: ctx.url,
    ...withFix,
  };
}

/**
 * The statuses a Berth API server answers a POST on its lease paths with
 * (the spec's, and 405 and 307 of its router).
 */
const BERTH_STATUSES = new Set([
  200,
  204,
  307,
  400,
  401,
  403,
  404,
  405,
  409,
  413,
  500,
]);

/** What the Go TLS server (and nginx) answer to plain HTTP on a TLS port. */
const PLAIN_ON_TLS =
  /Client sent an HTTP request to an HTTPS server|plain HTTP request was sent to HTTPS port/i;

/** An HTML page (an error page of a proxy, a web server's listing). */
function isHtml(body: string): boolean {
  return /^\s*<(?:!doctype|html|head|body|\?xml|title|h1)/i.test(body);
}

/**
 * The fix of an answer no wait can heal, if it is one: plain HTTP sent to a
 * TLS port, or a server that is not a Berth API server (an HTML page, or a
 * status no Berth server gives without the API's JSON error). A 3xx (its
 * own what-to-do), and a 5xx other than 501 (a gateway's page while the
 * server restarts heals), never have one; nor does any Berth status with
 * the API's JSON body.
 */
function answerFix(
  r: RawResponse,
  json: boolean,
  errorShape: boolean,
  ctx: AnswerContext,
): string | undefined {
  if (
    r.status === 400 && ctx.url.startsWith("http:") && PLAIN_ON_TLS.test(r.body)
  ) {
    return FIXES.useHttps;
  }
  if (r.status >= 300 && r.status < 400) return undefined;
  if (r.status >= 500 && r.status !== 501) return undefined;
  if (r.status >= 200 && r.status < 300) {
    return json || r.body === "" ? undefined : FIXES.notBerth;
  }
  if (isHtml(r.body)) return FIXES.notBerth;
  if (!BERTH_STATUSES.has(r.status) && !errorShape) return FIXES.notBerth;
  return undefined;
}

function badResponse(
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

/** A short, single-line, printable, redacted piece of server text for a message. */
function excerpt(text: string, ctx: AnswerContext): string {
  const clean = (ctx.redact ?? ((s: string) => s))(text);
  // deno-lint-ignore no-control-regex
  const flat = clean.replace(/[\x00-\x1f\x7f]+/g, " ").trim();
  if (flat === "") return "(empty body)";
  return flat.length > 200 ? `${flat.slice(0, 200)}...` : flat;
}

/** The literal text of each number of each object `JSON.parse` built, by member name. */
const literals = new WeakMap<object, Map<string, string>>();

/**
 * The body as a JSON object, or why it is not one. The text of its numbers
 * as written is kept (a reviver's `context.source`) for
 * {@linkcode numberLiterals}: `JSON.parse` reads `1.0` and `1e0` as 1.
 */
function parseJsonObject(body: string): Record<string, unknown> | string {
  let v: unknown;
  try {
    v = JSON.parse(
      body,
      function (
        this: object,
        key: string,
        value: unknown,
        context?: { source?: string },
      ) {
        if (typeof value === "number" && context?.source !== undefined) {
          let m = literals.get(this);
          if (m === undefined) literals.set(this, m = new Map());
          m.set(key, context.source);
        }
        return value;
      },
    );
  } catch {
    return "response body is not JSON";
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    return "response body is not a JSON object";
  }
  return v as Record<string, unknown>;
}

/**
 * The numbers of an object {@linkcode parseJsonObject} made, as written
 * (with duplicate members, the last one's, as `JSON.parse` keeps it).
 */
function numberLiterals(o: object): Map<string, string> {
  return literals.get(o) ?? new Map();
}

/**
 * Validates an Acquire/Renew body against the API's promises, or says what
 * broke them. Unknown fields are ignored so a newer server stays usable.
 * `numbers` holds the body's numbers as written: JSON.parse reads `1.0` and
 * `1e0` as 1, so the token's literal is checked there.
 */
function parseGrant(
  body: Record<string, unknown>,
  numbers: Map<string, string>,
  redact: (text: string) => string,
): { acquired: boolean; lease: LeaseRecord } | string {
  const { acquired, holder, fencingToken, expiresAt, acquiredAt } = body;
  const showV = (v: unknown) => show(v, redact);
  if (typeof acquired !== "boolean") {
    return `"acquired" must be a boolean, got ${showV(acquired)}`;
  }
  if (holder !== undefined && typeof holder !== "string") {
    return `"holder" must be a string, got ${showV(holder)}`;
  }
  if (fencingToken !== undefined) {
    const literal = numbers.get("fencingToken");
    if (
      typeof fencingToken !== "number" || literal === undefined ||
      !/^-?(0|[1-9][0-9]*)$/.test(literal) || fencingToken < INT32_MIN ||
      fencingToken > INT32_MAX
    ) {
      return `"fencingToken" must be a JSON integer in int32 range, got ${
        literal !== undefined
          ? redact(literal).slice(0, 60)
          : showV(fencingToken)
      }`;
    }
  }
  const token = (fencingToken as number | undefined) ?? 0;
  if (acquired && token < 1) {
    return `"fencingToken" must be at least 1 when "acquired" is true, got ${
      showV(fencingToken)
    }`;
  }
  for (
    const [field, v] of [
      ["expiresAt", expiresAt],
      ["acquiredAt", acquiredAt],
    ] as const
  ) {
    if (typeof v !== "string" || !isRfc3339(v)) {
      return `"${field}" must be an RFC 3339 timestamp, got ${showV(v)}`;
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
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) {
    return false;
  }
  if (hour > 23 || minute > 59 || second > 60) return false;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) {
    return false;
  }
  return true;
}

function daysIn(year: number, month: number): number {
  if (month === 2) {
    const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
    return leap ? 29 : 28;
  }
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** A server value for a message: JSON, redacted, then cut to 60 characters. */
function show(v: unknown, redact: (text: string) => string): string {
  if (v === undefined) return "nothing";
  const s = redact(JSON.stringify(v) ?? String(v));
  return s.length > 60 ? `${s.slice(0, 60)}...` : s;
}
