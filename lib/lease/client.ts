/**
 * The Berth lease API over HTTP(S): builds the exact requests a Berth v0.4
 * server accepts and turns every answer, and every way of not getting one,
 * into a {@linkcode GrantOutcome} or {@linkcode ReleaseOutcome}. It never
 * retries; retry policy belongs to the acquire loop and the renewer.
 *
 * It speaks through `node:https` / `node:http` rather than `fetch`: with
 * `Deno.createHttpClient` a `fetch` can trust extra CAs (`caCerts`) but has
 * no option to change the name the certificate is verified against nor to
 * skip verification (checked against Deno 2.9's `CreateHttpClientOptions`),
 * and the spec requires both. Those node modules cost start-up time, so only
 * this module loads them and the liveness probe never imports it.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { X509Certificate } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import * as tls from "node:tls";
import type { ApiKeySource } from "./api_key.ts";
import type {
  GrantOutcome,
  LeaseClient,
  LeaseFailure,
  LeaseKey,
  LeaseRecord,
  ReleaseOutcome,
} from "./rpc.ts";
import type { Logger } from "../obs/log.ts";
import { discardLogger } from "../obs/log.ts";
import { VERSION } from "../version.ts";

/**
 * The per-request bound when the caller gives none, the same as the
 * reference Go client's, so a hung API server can never block a caller.
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/**
 * The most response body read. Real answers are a few hundred bytes; a
 * larger one is a misconfigured endpoint (a proxy page, a wrong URL), and
 * reading it unbounded would let it eat the sidecar's memory.
 */
export const MAX_RESPONSE_BYTES = 64 * 1024;

/** Options for {@linkcode createHttpLeaseClient}. */
export interface HttpLeaseClientOptions {
  /**
   * Base URL of the Berth API server, `https://` (production) or `http://`
   * (development server). A path prefix is kept (`https://gw/berth` sends
   * `/berth/v1alpha1/...`); trailing slashes are dropped so no `//` is sent.
   * No query, fragment or credentials.
   */
  apiServer: string;
  /** The lease every call of this client is about. */
  key: LeaseKey;
  /** The bearer token source; without one no Authorization header is sent. */
  auth?: ApiKeySource;
  /**
   * A PEM file of CA certificates trusted in addition to the system roots
   * (for a server with a private CA). Read once, at construction; a file
   * with no certificate in it is an error.
   */
  caBundleFile?: string;
  /**
   * The name sent as TLS SNI and verified on the server certificate instead
   * of the URL's host, for servers reached by an address their certificate
   * does not name. The Host header still carries the URL's host.
   */
  serverName?: string;
  /**
   * Accepts any server certificate. Development only: anyone on the path can
   * then impersonate the server; a warning is logged at construction.
   */
  insecureSkipTlsVerify?: boolean;
  /**
   * Upper bound of one request in milliseconds (default
   * {@linkcode DEFAULT_REQUEST_TIMEOUT_MS}); the caller's signal may end it
   * sooner, never later.
   */
  requestTimeoutMs?: number;
  /** Receives construction warnings and per-request debug lines; default none. */
  logger?: Logger;
}

/** The parts of the base URL a node request needs. */
interface Target {
  secure: boolean;
  hostname: string;
  port: number;
  /** Path prefix without a trailing slash ("" for none). */
  basePath: string;
  /** `scheme://host:port` for messages. */
  origin: string;
}

/** What came back over the wire before it is interpreted. */
interface RawResponse {
  status: number;
  body: string;
  /** From the `X-Request-Id` response header. */
  requestId?: string;
}

const INT32_MAX = 2147483647;
const INT32_MIN = -2147483648;

/**
 * Builds the {@linkcode LeaseClient} the subcommands use. Everything that can
 * be wrong in the options (URL, CA bundle, key) throws here, at start-up,
 * with a message naming the input; after that, no call throws for anything
 * the server or the network does.
 */
export function createHttpLeaseClient(
  options: HttpLeaseClientOptions,
): LeaseClient {
  const logger = options.logger ?? discardLogger;
  const target = parseApiServer(options.apiServer);
  const { namespace, name } = options.key;
  if (namespace === "" || name === "") {
    throw new Error(
      `lease key ${
        JSON.stringify(`${namespace}/${name}`)
      }: namespace and name must both be non-empty`,
    );
  }
  const timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(
      `requestTimeoutMs must be a positive number of milliseconds, got ${timeoutMs}`,
    );
  }
  const tlsOptions = buildTlsOptions(options, target, logger);
  const leasePath = `${target.basePath}/v1alpha1/namespaces/${
    encodeURIComponent(namespace)
  }/leases/${encodeURIComponent(name)}`;

  const send = async (
    rpc: "acquire" | "renew" | "release",
    body: string,
    signal: AbortSignal,
  ): Promise<RawResponse | LeaseFailure> => {
    const bounded = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]);
    if (bounded.aborted) return abortFailure(bounded.reason);
    const key = await options.auth?.current();
    if (bounded.aborted) return abortFailure(bounded.reason);
    const requestId = newRequestId();
    const headers: Record<string, string> = {
      "Content-Type": "application/json",
      Accept: "application/json",
      "User-Agent": `berth-acquire/${VERSION}`,
      "X-Request-Id": requestId,
      "Content-Length": String(Buffer.byteLength(body)),
    };
    if (key !== undefined) headers.Authorization = `Bearer ${key.reveal()}`;
    const path = `${leasePath}/${rpc}`;
    logger.debug("lease request", { rpc, path, request_id: requestId });
    const result = await exchange(
      target,
      { path, headers, ...tlsOptions },
      body,
      bounded,
    );
    if ("kind" in result) {
      logger.debug("lease request failed", {
        rpc,
        request_id: requestId,
        kind: result.kind,
        error: result.message,
      });
    } else {
      logger.debug("lease response", {
        rpc,
        request_id: result.requestId ?? requestId,
        status: result.status,
      });
    }
    return result;
  };

  return {
    async acquire(holder, ttlSeconds, signal) {
      checkInt32("ttlSeconds", ttlSeconds);
      const body = `{"holder":${
        JSON.stringify(holder)
      },"ttlSeconds":${ttlSeconds}}`;
      return grantOutcome(await send("acquire", body, signal));
    },
    async renew(holder, fencingToken, ttlSeconds, signal) {
      checkInt32("fencingToken", fencingToken);
      checkInt32("ttlSeconds", ttlSeconds);
      const body = `{"holder":${
        JSON.stringify(holder)
      },"fencingToken":${fencingToken},"ttlSeconds":${ttlSeconds}}`;
      return grantOutcome(await send("renew", body, signal));
    },
    async release(holder, fencingToken, signal) {
      checkInt32("fencingToken", fencingToken);
      const body = `{"holder":${
        JSON.stringify(holder)
      },"fencingToken":${fencingToken}}`;
      return releaseOutcome(await send("release", body, signal));
    },
  };
}

/** A caller bug, not a server answer: config validation keeps these in range. */
function checkInt32(field: string, value: number): void {
  if (!Number.isInteger(value) || value < 1 || value > INT32_MAX) {
    throw new RangeError(
      `${field} must be an integer in 1..${INT32_MAX}, got ${value}`,
    );
  }
}

function parseApiServer(apiServer: string): Target {
  const hint =
    "set --api-server / BERTH_API_SERVER to e.g. https://berth-api.berth-system.svc:8443";
  let url: URL;
  try {
    url = new URL(apiServer);
  } catch {
    throw new Error(
      `api server URL ${JSON.stringify(apiServer)} is not a valid URL; ${hint}`,
    );
  }
  const fail = (why: string) =>
    new Error(`api server URL ${JSON.stringify(apiServer)} ${why}; ${hint}`);
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw fail(`has scheme ${url.protocol.slice(0, -1)}, want https or http`);
  }
  if (url.username !== "" || url.password !== "") {
    throw fail("must not carry credentials (use --api-key or --api-key-file)");
  }
  if (url.search !== "" || url.hash !== "") {
    throw fail("must not have a query or fragment");
  }
  const basePath = url.pathname.replace(/\/+$/, "");
  if (basePath.includes("//")) throw fail("has an empty path segment");
  const secure = url.protocol === "https:";
  return {
    secure,
    // URL keeps IPv6 literals in brackets; sockets want the bare address.
    hostname: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: url.port === "" ? (secure ? 443 : 80) : Number(url.port),
    basePath,
    origin: url.origin,
  };
}

function buildTlsOptions(
  options: HttpLeaseClientOptions,
  target: Target,
  logger: Logger,
): https.RequestOptions {
  const given = [
    options.caBundleFile !== undefined && "--ca-bundle-file",
    options.serverName !== undefined && "--server-name",
    options.insecureSkipTlsVerify && "--insecure-skip-tls-verify",
  ].filter((x): x is string => typeof x === "string");
  if (!target.secure) {
    if (given.length > 0) {
      logger.warn("TLS options have no effect on an http:// API server", {
        api_server: target.origin,
        options: given.join(","),
      });
    }
    if (options.auth !== undefined) {
      logger.warn(
        "the API key is sent unencrypted to an http:// API server; use https outside development",
        { api_server: target.origin },
      );
    }
    return {};
  }
  const out: https.RequestOptions = {};
  if (options.caBundleFile !== undefined) {
    out.ca = [...tls.rootCertificates, ...readCaBundle(options.caBundleFile)];
  }
  const serverName = options.serverName;
  if (serverName !== undefined) {
    if (serverName === "") {
      throw new Error(
        "the TLS server name override is empty; set --server-name / BERTH_SERVER_NAME to the name on the server certificate, or unset it",
      );
    }
    out.servername = serverName;
    out.checkServerIdentity = (_host, cert) =>
      tls.checkServerIdentity(serverName, cert);
  }
  if (options.insecureSkipTlsVerify) {
    out.rejectUnauthorized = false;
    logger.warn(
      "INSECURE: TLS certificate verification of the API server is DISABLED (--insecure-skip-tls-verify); anyone on the network path can impersonate it, see the API key and steal the lease; use only in development",
      { api_server: target.origin },
    );
  }
  return out;
}

/** The PEM certificates in `path`, checked to parse, or a configuration error naming the file. */
function readCaBundle(path: string): string[] {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (e) {
    throw new Error(
      `CA bundle file ${path} cannot be read (${
        (e as Error).message
      }); set --ca-bundle-file / BERTH_CA_BUNDLE_FILE to a readable PEM file`,
    );
  }
  const pems = text.match(
    /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g,
  ) ?? [];
  if (pems.length === 0) {
    throw new Error(
      `CA bundle file ${path} contains no PEM certificate (no "-----BEGIN CERTIFICATE-----" block); give the CA certificate(s) of the API server in PEM form`,
    );
  }
  pems.forEach((pem, i) => {
    try {
      new X509Certificate(pem);
    } catch (e) {
      throw new Error(
        `CA bundle file ${path}: certificate ${
          i + 1
        } of ${pems.length} is not a valid certificate (${
          (e as Error).message
        })`,
      );
    }
  });
  return pems;
}

/** 32 hex characters: inside the `[A-Za-z0-9_-]{1,64}` the server honours. */
function newRequestId(): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(16)),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
}

/**
 * One POST on a fresh connection (no keep-alive agent, so nothing pooled
 * keeps the process alive once the work is done). Resolves, never rejects.
 */
function exchange(
  target: Target,
  request: https.RequestOptions,
  body: string,
  signal: AbortSignal,
): Promise<RawResponse | LeaseFailure> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (v: RawResponse | LeaseFailure) => {
      if (done) return;
      done = true;
      signal.removeEventListener("abort", onAbort);
      resolve(v);
    };
    const options: https.RequestOptions = {
      ...request,
      method: "POST",
      hostname: target.hostname,
      port: target.port,
      agent: false,
    };
    const onResponse = (res: http.IncomingMessage) => {
      const status = res.statusCode ?? 0;
      const requestId = headerRequestId(res.headers["x-request-id"]);
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        if (done) return;
        size += chunk.length;
        if (size > MAX_RESPONSE_BYTES) {
          finish({
            kind: "bad-response",
            status,
            message: `response body exceeds ${
              MAX_RESPONSE_BYTES / 1024
            } KiB; is --api-server pointing at the Berth API server?`,
            requestId,
          });
          res.destroy();
          req.destroy();
          return;
        }
        chunks.push(chunk);
      });
      res.on("end", () =>
        finish({
          status,
          body: Buffer.concat(chunks).toString("utf8"),
          requestId,
        }));
      res.on(
        "error",
        (e: Error) => finish(failureOf(e, signal, target, request)),
      );
      res.on("close", () => {
        // Connection dropped mid-body without an `error` event.
        if (!res.complete) {
          finish(
            failureOf(
              new Error("connection closed before the response was complete"),
              signal,
              target,
              request,
            ),
          );
        }
      });
    };
    const req = target.secure
      ? https.request(options, onResponse)
      : http.request(options, onResponse);
    req.on(
      "error",
      (e: Error) => finish(failureOf(e, signal, target, request)),
    );
    const onAbort = () => {
      finish(abortFailure(signal.reason));
      req.destroy();
    };
    signal.addEventListener("abort", onAbort, { once: true });
    req.end(body);
  });
}

function headerRequestId(
  value: string | string[] | undefined,
): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  return v !== undefined && /^[\x21-\x7e]{1,128}$/.test(v) ? v : undefined;
}

function abortFailure(reason: unknown): LeaseFailure {
  const timedOut = reason instanceof Error && reason.name === "TimeoutError";
  return timedOut
    ? { kind: "timeout", message: "no answer within the request's time bound" }
    : { kind: "aborted", message: "the request was cancelled" };
}

const UNTRUSTED = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_UNTRUSTED",
  "CERT_SIGNATURE_FAILURE",
]);

/** A transport error, worded so the operator knows which option to look at. */
function failureOf(
  e: Error,
  signal: AbortSignal,
  target: Target,
  request: https.RequestOptions,
): LeaseFailure {
  if (signal.aborted) return abortFailure(signal.reason);
  const code = (e as { code?: unknown }).code;
  const where = target.origin;
  const verified = request.servername ?? target.hostname;
  let message: string;
  if (typeof code === "string" && UNTRUSTED.has(code)) {
    message =
      `${where}: the server certificate is not trusted (${e.message}); if the server uses a private CA, pass its certificate with --ca-bundle-file / BERTH_CA_BUNDLE_FILE`;
  } else if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    message =
      `${where}: the server certificate is not valid for ${verified} (${e.message}); if the certificate names another host, set --server-name / BERTH_SERVER_NAME to that name`;
  } else if (code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID") {
    message =
      `${where}: the server certificate is outside its validity period (${e.message}); renew it or check this node's clock`;
  } else if (code === "ECONNREFUSED") {
    message =
      `${where}: connection refused (${e.message}); is the API server running and is --api-server / BERTH_API_SERVER right?`;
  } else if (code === "ENOTFOUND" || code === "EAI_AGAIN") {
    message =
      `${where}: cannot resolve ${target.hostname} (${e.message}); check --api-server / BERTH_API_SERVER and the cluster DNS`;
  } else {
    message = `${where}: ${
      typeof code === "string" ? `${code}: ` : ""
    }${e.message}`;
  }
  return { kind: "transport-error", message };
}

/** Interprets an Acquire or Renew answer. */
function grantOutcome(r: RawResponse | LeaseFailure): GrantOutcome {
  if ("kind" in r) return r;
  if (r.status !== 200) return statusFailure(r, [200]);
  const parsed = parseJsonObject(r.body);
  if (typeof parsed === "string") return badResponse(r, parsed);
  const record = parseGrant(parsed);
  if (typeof record === "string") return badResponse(r, record);
  const { acquired, lease } = record;
  return {
    kind: acquired ? "acquired" : "not-acquired",
    lease,
    requestId: r.requestId,
  };
}

/** Interprets a Release answer: 204 (or 200) is success, whatever the body. */
function releaseOutcome(r: RawResponse | LeaseFailure): ReleaseOutcome {
  if ("kind" in r) return r;
  if (r.status === 204 || r.status === 200) {
    return { kind: "released", requestId: r.requestId };
  }
  return statusFailure(r, [204, 200]);
}

/** A 409, an unexpected success status, or any other status, as the matching failure. */
function statusFailure(r: RawResponse, expected: number[]): LeaseFailure {
  const envelope = parseJsonObject(r.body);
  let message: string;
  let requestId = r.requestId;
  if (typeof envelope !== "string" && typeof envelope.error === "string") {
    message = envelope.error;
    if (typeof envelope.requestId === "string" && envelope.requestId !== "") {
      requestId = envelope.requestId;
    }
  } else {
    message = excerpt(r.body);
  }
  if (r.status === 409) return { kind: "conflict", message, requestId };
  if (r.status >= 200 && r.status < 300) {
    return {
      kind: "bad-response",
      status: r.status,
      message: `unexpected success status (want ${
        expected.join(" or ")
      }): ${message}`,
      requestId,
    };
  }
  return { kind: "server-error", status: r.status, message, requestId };
}

function badResponse(r: RawResponse, why: string): LeaseFailure {
  return {
    kind: "bad-response",
    status: r.status,
    message: `${why}; body: ${excerpt(r.body)}`,
    requestId: r.requestId,
  };
}

/** A short, single-line, printable piece of a body for a message. */
function excerpt(body: string): string {
  // deno-lint-ignore no-control-regex
  const flat = body.replace(/[\x00-\x1f\x7f]+/g, " ").trim();
  if (flat === "") return "(empty body)";
  return flat.length > 200 ? `${flat.slice(0, 200)}...` : flat;
}

function parseJsonObject(body: string): Record<string, unknown> | string {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    return "response body is not JSON";
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    return "response body is not a JSON object";
  }
  return v as Record<string, unknown>;
}

/**
 * Validates an Acquire/Renew body against the API's promises, or says what
 * broke them. Unknown fields are ignored so a newer server stays usable.
 */
function parseGrant(
  body: Record<string, unknown>,
): { acquired: boolean; lease: LeaseRecord } | string {
  const { acquired, holder, fencingToken, expiresAt, acquiredAt } = body;
  if (typeof acquired !== "boolean") {
    return `"acquired" must be a boolean, got ${show(acquired)}`;
  }
  if (holder !== undefined && typeof holder !== "string") {
    return `"holder" must be a string, got ${show(holder)}`;
  }
  if (
    fencingToken !== undefined &&
    !(Number.isInteger(fencingToken) && (fencingToken as number) >= INT32_MIN &&
      (fencingToken as number) <= INT32_MAX)
  ) {
    return `"fencingToken" must be an int32 integer, got ${show(fencingToken)}`;
  }
  const token = (fencingToken as number | undefined) ?? 0;
  if (acquired && token < 1) {
    return `"fencingToken" must be at least 1 when "acquired" is true, got ${
      show(fencingToken)
    }`;
  }
  for (
    const [field, v] of [["expiresAt", expiresAt], [
      "acquiredAt",
      acquiredAt,
    ]] as const
  ) {
    if (typeof v !== "string" || !isRfc3339(v)) {
      return `"${field}" must be an RFC 3339 timestamp, got ${show(v)}`;
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

function show(v: unknown): string {
  if (v === undefined) return "nothing";
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 60 ? `${s.slice(0, 60)}...` : s;
}
