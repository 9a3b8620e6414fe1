/**
 * What the client puts on the wire, as pure functions: the API server URL
 * checked and split, each RPC's path and exact request body, the headers.
 * The spec's servers reject unknown fields, trailing data and non-int32
 * numbers, so bodies are built as text in the spec's field order rather
 * than by serialising an object. No I/O here, so every byte is testable
 * without a socket.
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
 * rpcPath(parseApiServer("https://gw/berth/"), { namespace: "prod", name: "checkout" }, "renew");
 * // "/berth/v1alpha1/namespaces/prod/leases/checkout/renew"
 * ```
 */
export function rpcPath(target: Target, key: LeaseKey, rpc: Rpc): string {
  return `${target.basePath}/v1alpha1/namespaces/${
    encodeURIComponent(key.namespace)
  }/leases/${encodeURIComponent(key.name)}/${rpc}`;
}

/** The Acquire body: `{"holder":...,"ttlSeconds":...}`. @throws {RangeError} on a bad TTL. */
export function acquireBody(holder: string, ttlSeconds: number): string {
  checkInt32("ttlSeconds", ttlSeconds);
  return `{"holder":${JSON.stringify(holder)},"ttlSeconds":${ttlSeconds}}`;
}

/** The Renew body, fields in spec order. @throws {RangeError} on a bad token or TTL. */
export function renewBody(
  holder: string,
  fencingToken: number,
  ttlSeconds: number,
): string {
  checkInt32("fencingToken", fencingToken);
  checkInt32("ttlSeconds", ttlSeconds);
  return `{"holder":${
    JSON.stringify(holder)
  },"fencingToken":${fencingToken},"ttlSeconds":${ttlSeconds}}`;
}

/** The Release body. @throws {RangeError} on a bad token. */
export function releaseBody(holder: string, fencingToken: number): string {
  checkInt32("fencingToken", fencingToken);
  return `{"holder":${JSON.stringify(holder)},"fencingToken":${fencingToken}}`;
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
