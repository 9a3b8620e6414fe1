/**
 * What the client puts on the wire, as pure functions: the API server URL
 * checked and split, the request bodies and headers. The bodies are byte for
 * byte the Go helper's (docs/lease-client.md, "Request bodies").
 *
 * @module
 */
import { VERSION } from "../version.ts";

export const INT32_MAX = 2147483647;

/** The API server URL, checked and split: IPv6 without brackets, the scheme's default port, the path prefix without a trailing slash. */
export interface Target {
  secure: boolean;
  hostname: string;
  port: number;
  basePath: string;
  /** `scheme://host:port` as the URL spells it, for messages. */
  origin: string;
}

/**
 * Checks and splits the API server URL: a path prefix is kept (a gateway at
 * `https://gw/berth`), its trailing slashes dropped so no `//` is sent.
 *
 * @throws {Error} Naming what is wrong, credentials never echoed back.
 */
export function parseApiServer(apiServer: string): Target {
  const fail = (url: string, why: string) =>
    new Error(
      `api server URL ${
        JSON.stringify(url)
      } ${why}; set --api-server / BERTH_API_SERVER to e.g. https://berth-api.berth-system.svc:8443`,
    );
  let url: URL;
  try {
    url = new URL(apiServer);
  } catch {
    throw fail(apiServer, "is not a valid URL");
  }
  if (url.username !== "" || url.password !== "") {
    // Named without the credentials: the password is a secret.
    url.username = url.password = "";
    throw fail(
      url.href,
      "(credentials removed here) must not carry credentials (use --api-key or --api-key-file)",
    );
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    const scheme = url.protocol.slice(0, -1);
    throw fail(apiServer, `has scheme ${scheme}, want https or http`);
  }
  if (url.search !== "" || url.hash !== "") {
    throw fail(apiServer, "must not have a query or fragment");
  }
  const basePath = url.pathname.replace(/\/+$/, "");
  if (basePath.includes("//")) {
    throw fail(apiServer, "has an empty path segment");
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
 * A string as Go's `encoding/json` writes it: `<`, `>`, `&`, U+2028 and
 * U+2029 escaped too, and a lone surrogate as `\ufffd` (as Go writes invalid
 * UTF-8).
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
 * An RPC's body as Go marshals the map of its fields: keys sorted.
 *
 * @throws {RangeError} On a token or TTL outside 1..2147483647 (a caller
 * bug: config validation keeps them in range).
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

/**
 * The request headers of one RPC. Content-Length is given explicitly so
 * both transports send the same bytes; no Authorization without a key.
 */
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
