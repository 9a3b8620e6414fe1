/**
 * What the client puts on the wire, as pure functions: the API server URL
 * checked and split, each RPC's path and exact request body, the headers.
 * The bodies are byte for byte the Go helper's: Go marshals a map, so the
 * keys come out sorted, and its encoder escapes `<`, `>`, `&`, U+2028 and
 * U+2029 (and writes invalid UTF-8 as `\ufffd`), which `JSON.stringify`
 * does not. No I/O here, so every byte is testable without a socket.
 *
 * @module
 */
import type { LeaseKey } from "./rpc.ts";
import { VERSION } from "../version.ts";

/** The largest value of a JSON int32 field. */
export const INT32_MAX = 2147483647;
/** The smallest value of a JSON int32 field. */
export const INT32_MIN = -2147483648;

/** The API server URL, checked and split into what a request needs. */
export interface Target {
  /** `https:` (true) or `http:` (false). */
  secure: boolean;
  /** Host name or address, IPv6 without brackets. */
  hostname: string;
  /** Port, the scheme's default when the URL has none. */
  port: number;
  /** Path prefix without a trailing slash ("" for none). */
  basePath: string;
  /** `scheme://host:port` for messages (the URL's own spelling). */
  origin: string;
}

/** The three RPCs, as the last path segment names them. */
export type Rpc = "acquire" | "renew" | "release";

const URL_HINT =
  "set --api-server / BERTH_API_SERVER to e.g. https://berth-api.berth-system.svc:8443";

/**
 * Checks and splits the API server URL. A path prefix is kept (a gateway
 * at `https://gw/berth`); trailing slashes are dropped so no `//` is sent.
 *
 * @param apiServer The `--api-server` value.
 * @returns The parts every request needs.
 * @throws {Error} When it is not an http(s) URL, carries credentials (never
 * echoed back), a query or fragment, or an empty path segment.
 */
export function parseApiServer(apiServer: string): Target {
  let url: URL;
  try {
    url = new URL(apiServer);
  } catch {
    throw new Error(
      `api server URL ${
        JSON.stringify(apiServer)
      } is not a valid URL; ${URL_HINT}`,
    );
  }
  if (url.username !== "" || url.password !== "") {
    // Named without the credentials: the password is a secret.
    url.username = "";
    url.password = "";
    throw new Error(
      `api server URL ${
        JSON.stringify(url.href)
      } (credentials removed here) must not carry credentials (use --api-key or --api-key-file); ${URL_HINT}`,
    );
  }
  const fail = (why: string) =>
    new Error(
      `api server URL ${JSON.stringify(apiServer)} ${why}; ${URL_HINT}`,
    );
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw fail(`has scheme ${url.protocol.slice(0, -1)}, want https or http`);
  }
  if (url.search !== "" || url.hash !== "") {
    throw fail("must not have a query or fragment");
  }
  const basePath = url.pathname.replace(/\/+$/, "");
  if (basePath.includes("//")) throw fail("has an empty path segment");
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
 * The path of one RPC on one lease, each key part escaped as one segment.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(
 *   rpcPath(parseApiServer("https://gw/berth/"), { namespace: "prod", name: "checkout" }, "renew"),
 *   "/berth/v1alpha1/namespaces/prod/leases/checkout/renew",
 * );
 * ```
 */
export function rpcPath(target: Target, key: LeaseKey, rpc: Rpc): string {
  return `${target.basePath}/v1alpha1/namespaces/${
    encodeURIComponent(key.namespace)
  }/leases/${encodeURIComponent(key.name)}/${rpc}`;
}

/**
 * A string as Go's `encoding/json` writes it: `JSON.stringify`'s escapes
 * (the same short ones, `\u00xx` in lower case for the other control
 * characters, U+007F as is), plus `\u003c`, `\u003e`, `\u0026`, `\u2028`
 * and `\u2029`; a lone surrogate, which UTF-8 cannot carry, is `\ufffd`, as
 * Go writes each byte of invalid UTF-8. Checked against Go 1.26's
 * `json.Marshal` (tests/lease/wire_test.ts holds its output).
 *
 * @param s The string.
 * @returns Its JSON text, quotes included.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(goJsonString("a<b>&\u2028"), '"a\\u003cb\\u003e\\u0026\\u2028"');
 * ```
 */
export function goJsonString(s: string): string {
  const parts = s.split(/\p{Surrogate}/u).map((p) =>
    JSON.stringify(p).slice(1, -1).replace(
      /[<>&\u2028\u2029]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
    )
  );
  return `"${parts.join("\\ufffd")}"`;
}

/**
 * The Acquire body, `{"holder":...,"ttlSeconds":...}`.
 *
 * @param holder The holder identity.
 * @param ttlSeconds The TTL, 1..2147483647.
 * @returns The body, as the Go helper sends it.
 * @throws {RangeError} On a TTL out of range.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(acquireBody("a/b", 30), '{"holder":"a/b","ttlSeconds":30}');
 * ```
 */
export function acquireBody(holder: string, ttlSeconds: number): string {
  checkInt32("ttlSeconds", ttlSeconds);
  return `{"holder":${goJsonString(holder)},"ttlSeconds":${ttlSeconds}}`;
}

/**
 * The Renew body, `{"fencingToken":...,"holder":...,"ttlSeconds":...}`.
 *
 * @param holder The holder identity.
 * @param fencingToken The token held, 1..2147483647.
 * @param ttlSeconds The TTL, 1..2147483647.
 * @returns The body, as the Go helper sends it.
 * @throws {RangeError} On a token or TTL out of range.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(renewBody("h", 4, 30), '{"fencingToken":4,"holder":"h","ttlSeconds":30}');
 * ```
 */
export function renewBody(
  holder: string,
  fencingToken: number,
  ttlSeconds: number,
): string {
  checkInt32("fencingToken", fencingToken);
  checkInt32("ttlSeconds", ttlSeconds);
  return `{"fencingToken":${fencingToken},"holder":${
    goJsonString(holder)
  },"ttlSeconds":${ttlSeconds}}`;
}

/**
 * The Release body, `{"fencingToken":...,"holder":...}`.
 *
 * @param holder The holder identity.
 * @param fencingToken The token held, 1..2147483647.
 * @returns The body, as the Go helper sends it.
 * @throws {RangeError} On a token out of range.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(releaseBody("h", 4), '{"fencingToken":4,"holder":"h"}');
 * ```
 */
export function releaseBody(holder: string, fencingToken: number): string {
  checkInt32("fencingToken", fencingToken);
  return `{"fencingToken":${fencingToken},"holder":${goJsonString(holder)}}`;
}

/** A caller bug, not a server answer: config validation keeps these in range. */
function checkInt32(field: string, value: number): void {
  if (!Number.isInteger(value) || value < 1 || value > INT32_MAX) {
    throw new RangeError(
      `${field} must be an integer in 1..${INT32_MAX}, got ${value}`,
    );
  }
}

/**
 * The request headers of one RPC. Content-Length is given explicitly so
 * both transports send the same bytes.
 *
 * @param body The request body (its UTF-8 length is sent).
 * @param requestId Sent as `X-Request-Id` so server logs can be correlated.
 * @param apiKey The bearer token, or undefined to send no Authorization.
 */
export function requestHeaders(
  body: string,
  requestId: string,
  apiKey: string | undefined,
): Record<string, string> {
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    Accept: "application/json",
    "User-Agent": `berth-acquire/${VERSION}`,
    "X-Request-Id": requestId,
    "Content-Length": String(new TextEncoder().encode(body).length),
  };
  if (apiKey !== undefined) headers.Authorization = `Bearer ${apiKey}`;
  return headers;
}

/** 32 hex characters: inside the `[A-Za-z0-9_-]{1,64}` the server honours. */
export function newRequestId(): string {
  return crypto.getRandomValues(new Uint8Array(16)).toHex();
}
