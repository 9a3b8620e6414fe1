/**
 * A DEVELOPMENT Berth lease server, kept in memory. It exists so that the
 * helper can be tried, demonstrated and tested end to end without a real
 * Berth API server, and so that chaos tests can make "the server" fail or
 * hang on demand. It follows the wire contract in `berth-api.md` closely
 * (paths, check order, exact messages, exact success bytes) because a client
 * that works against it must work against the real server; it is not a
 * production server: state is lost when the process exits.
 *
 * Where the contract leaves a choice open this server decides as follows:
 * - Release skips the "holder is required" check (the contract lists the
 *   holder checks as "release: only non-empty"); a non-empty holder is still
 *   limited to 253 bytes.
 * - A released record (tombstone) keeps its token and clears the holder and
 *   both times, so a lost Renew on it answers `acquired:false` with the token
 *   and zero times; a lost Renew on no record answers only the zero times.
 * - `not authorized for this namespace` is never answered: the contract
 *   defines no rule that ties a key to namespaces, only the holder rule.
 * - Injected faults act right after routing, before authentication: they
 *   model a server that is broken as a whole, not one bad request.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { aborted } from "../state/clock.ts";
import { decodeRequest, type Rpc } from "./request.ts";
import { type LeaseGrant, LeaseStore, StoreFailure } from "./store.ts";
import { createLogger, discardLogger, type Logger } from "../obs/log.ts";

/** The body limit of the contract; larger bodies are answered 413. */
export const MAX_BODY_BYTES = 4096;

const ZERO_TIME = "0001-01-01T00:00:00Z";
const encoder = new TextEncoder();

// ---------------------------------------------------------------------------
// Wire encoding

// Go's time.RFC3339Nano in UTC: fractional digits only as many as needed.
function formatTime(ms: number | null): string {
  if (ms === null) return ZERO_TIME;
  const iso = new Date(Math.floor(ms)).toISOString();
  return iso.replace(
    /\.(\d*?)0*Z$/,
    (_, digits: string) => digits === "" ? "Z" : `.${digits}Z`,
  );
}

// JSON as Go's encoder writes it: HTML characters and U+2028/9 escaped.
function goJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

function grantBody(g: LeaseGrant): string {
  const out: Record<string, unknown> = { acquired: g.acquired };
  if (g.holder !== "") out.holder = g.holder;
  if (g.fencingToken !== 0) out.fencingToken = g.fencingToken;
  out.expiresAt = formatTime(g.expiresAt);
  out.acquiredAt = formatTime(g.acquiredAt);
  return goJson(out) + "\n";
}

// ---------------------------------------------------------------------------
// Validation of the path keys (after authorization, as the contract orders)

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN =
  /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function keyError(namespace: string, name: string): string | undefined {
  if (namespace.length > 63 || !DNS_LABEL.test(namespace)) {
    return `invalid namespace ${
      JSON.stringify(namespace)
    }: must be an RFC 1123 label (1-63 characters of [a-z0-9-], starting and ending with a letter or digit)`;
  }
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    return `invalid name ${
      JSON.stringify(name)
    }: must be an RFC 1123 subdomain (1-253 characters of [a-z0-9.-], each dot-separated part starting and ending with a letter or digit)`;
  }
  if (namespace.length + 1 + name.length > 253) {
    return `invalid key ${
      JSON.stringify(`${namespace}/${name}`)
    }: namespace, "/" and name together must be at most 253 characters`;
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// API keys

interface ApiKey {
  keyId: string;
  sha256: string;
}

/**
 * Parses `key-id:sha256hex`. The error names the position, never the value,
 * since a user may have pasted the token itself by mistake.
 */
function parseApiKey(spec: string, index: number): ApiKey {
  const at = spec.lastIndexOf(":");
  const keyId = at < 0 ? "" : spec.slice(0, at);
  const hex = at < 0 ? "" : spec.slice(at + 1);
  if (keyId === "" || !/^[0-9a-fA-F]{64}$/.test(hex)) {
    throw new Error(
      `API key #${
        index + 1
      } is not "key-id:sha256hex": give a non-empty key id (the caller's tenant), a colon, and the 64 hex digits of the SHA-256 of the bearer token (e.g. printf %s "$TOKEN" | sha256sum)`,
    );
  }
  return { keyId, sha256: hex.toLowerCase() };
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", encoder.encode(text));
  return Array.from(
    new Uint8Array(digest),
    (b) => b.toString(16).padStart(2, "0"),
  )
    .join("");
}

// Compares every character so timing does not reveal how much matched.
function sameHex(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

// ---------------------------------------------------------------------------
// Request ids

const REQUEST_ID = /^[A-Za-z0-9_-]{1,64}$/;
const TRACEPARENT =
  /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

function requestIdOf(headers: Headers): string {
  const inbound = headers.get("x-request-id");
  if (inbound !== null && REQUEST_ID.test(inbound)) return inbound;
  const trace = traceIdOf(headers.get("traceparent"));
  if (trace) return trace;
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// W3C Trace Context: version ff is invalid, version 00 has exactly four
// fields, and all-zero trace or parent ids are invalid.
function traceIdOf(header: string | null): string | undefined {
  const m = header === null ? null : TRACEPARENT.exec(header.trim());
  if (!m) return undefined;
  const [, version, traceId, parentId, , rest] = m;
  if (version === "ff" || (version === "00" && rest !== undefined)) {
    return undefined;
  }
  if (/^0+$/.test(traceId) || /^0+$/.test(parentId)) return undefined;
  return traceId;
}

// ---------------------------------------------------------------------------
// Routing, as Go's ServeMux does it

/** The three lease RPCs. */

const LEASE_PATH =
  /^\/v1alpha1\/namespaces\/([^/]+)\/leases\/([^/]+)\/(acquire|renew|release)$/;

// Go's cleanPath: path.Clean, keeping a trailing slash.
function cleanPath(p: string): string {
  if (p === "") return "/";
  if (p[0] !== "/") p = "/" + p;
  const out: string[] = [];
  for (const seg of p.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  let np = "/" + out.join("/");
  if (p.endsWith("/") && np !== "/") np += "/";
  return np;
}

// As Go's htmlEscape, for the body of a redirect.
function htmlEscape(s: string): string {
  const map: Record<string, string> = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    '"': "&#34;",
    "'": "&#39;",
  };
  return s.replace(/[&<>"']/g, (c) => map[c]);
}

// Percent-decoding of one segment; null on a malformed escape (which Go's
// server rejects before routing).
function unescapeSegment(seg: string): string | null {
  if (!/^(?:[^%]|%[0-9a-fA-F]{2})*$/.test(seg)) return null;
  const bytes: number[] = [];
  for (let i = 0; i < seg.length; i++) {
    if (seg[i] === "%") {
      bytes.push(parseInt(seg.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...encoder.encode(seg[i]));
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

// ---------------------------------------------------------------------------
// Fault injection

/**
 * Switches that make the server misbehave on purpose, for chaos tests of
 * the helper: answer lease RPCs with 500, or hold them unanswered. Faults
 * apply to the three lease RPCs only (never to `/healthz` or `/readyz`) and
 * act right after routing, before authentication.
 */
export interface DevServerFaults {
  /** The next `count` lease RPCs answer `500 internal error` (default 1). */
  failNext(count?: number): void;
  /** Every lease RPC answers `500 internal error` until {@linkcode clear}. */
  failAll(): void;
  /**
   * The next `count` lease RPCs are not answered (default 1) until the
   * fault is cleared (then they are served normally, even when their client
   * has given up meanwhile, as a slow real server would still apply them)
   * or the server closes (then they answer 500, as a real server does when
   * a stuck store call is cancelled at shutdown).
   */
  hangNext(count?: number): void;
  /** Every lease RPC hangs as in {@linkcode hangNext} until {@linkcode clear}. */
  hangAll(): void;
  /** Removes any fault and lets every hanging request proceed. */
  clear(): void;
  /** How many requests are hanging right now, so tests can wait for one. */
  readonly hanging: number;
}

class FaultSwitch implements DevServerFaults {
  #kind: "error" | "hang" | null = null;
  #remaining = 0;
  #released = new AbortController();
  hanging = 0;

  failNext(count = 1): void {
    this.#set("error", count);
  }
  failAll(): void {
    this.#set("error", Infinity);
  }
  hangNext(count = 1): void {
    this.#set("hang", count);
  }
  hangAll(): void {
    this.#set("hang", Infinity);
  }
  clear(): void {
    this.#kind = null;
    this.#remaining = 0;
    this.#released.abort();
    this.#released = new AbortController();
  }

  #set(kind: "error" | "hang", count: number): void {
    if (!(count >= 1)) {
      throw new RangeError(`fault count must be at least 1, got ${count}`);
    }
    this.#kind = kind;
    this.#remaining = count;
  }

  // The fault that applies to the request arriving now, if any.
  take(): { kind: "error" } | { kind: "hang"; released: AbortSignal } | null {
    const kind = this.#kind;
    if (kind === null) return null;
    if (--this.#remaining <= 0) this.#kind = null;
    return kind === "error"
      ? { kind }
      : { kind, released: this.#released.signal };
  }
}

// ---------------------------------------------------------------------------
// The server

/** Options for {@linkcode startDevServer}; every field is optional. */
export interface DevServerOptions {
  /** Address to listen on; default `127.0.0.1` (never exposed by default). */
  hostname?: string;
  /** Port to listen on; default 0, any free port (read it from `DevServer.port`). */
  port?: number;
  /** Serve HTTPS with these PEM files instead of plain HTTP. */
  tls?: {
    /** PEM certificate chain, server certificate first. */
    certFile: string;
    /** PEM private key of that certificate. */
    keyFile: string;
  };
  /**
   * Static API keys as `key-id:sha256hex` (hex SHA-256 of the bearer
   * token). When given, lease RPCs require `Authorization: Bearer <token>`
   * and a holder equal to the key id or starting with `<key-id>/`. Empty or
   * absent: no authentication.
   */
  apiKeys?: string[];
  /** Wall clock in Unix milliseconds; injectable so tests control expiry. Default `Date.now`. */
  now?: () => number;
  /** Where request and lease events are logged; default: nowhere. */
  logger?: Logger;
}

/** A running development server, with the controls tests need. */
export interface DevServer extends AsyncDisposable {
  /** Base URL, e.g. `http://127.0.0.1:41234`; what the helper's API server setting takes. */
  url: string;
  /** The port actually bound (useful with `port: 0`). */
  port: number;
  /** The lease records, for tests that seed or inspect state directly. */
  store: LeaseStore;
  /** Fault injection for chaos tests. */
  faults: DevServerFaults;
  /** Makes `/readyz` answer `200 ok` (true, the start state) or `503 not ready`. */
  setReady(ready: boolean): void;
  /** How many requests each lease RPC has received, faulted ones included. */
  rpcCount(rpc: "acquire" | "renew" | "release"): number;
  /** Stops listening and finishes in-flight requests (hanging ones answer 500). */
  close(): Promise<void>;
}

/**
 * Starts the server and resolves once it listens. It is the one entry point
 * so that tests, the demo and the `dev-server` subcommand all run the same
 * code. Throws on an unreadable TLS file or a malformed API key.
 */
export async function startDevServer(
  options: DevServerOptions = {},
): Promise<DevServer> {
  const keys = (options.apiKeys ?? []).map(parseApiKey);
  const now = options.now ?? Date.now;
  const log = options.logger ?? discardLogger;
  const store = new LeaseStore();
  const faults = new FaultSwitch();
  const closing = new AbortController();
  const counts = { acquire: 0, renew: 0, release: 0 };
  let ready = true;

  let tls: { cert: string; key: string } | undefined;
  if (options.tls) {
    tls = {
      cert: await readPem(options.tls.certFile, "TLS certificate"),
      key: await readPem(options.tls.keyFile, "TLS private key"),
    };
  }

  const ctx: HandlerContext = {
    keys,
    now,
    log,
    store,
    faults,
    closing: closing.signal,
    counts,
    isReady: () => ready,
  };
  const server = Deno.serve({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 0,
    ...tls,
    onListen: () => {},
  }, (req) => handle(ctx, req));

  const addr = server.addr;
  const host = addr.hostname.includes(":")
    ? `[${addr.hostname}]`
    : addr.hostname;
  const url = `${tls ? "https" : "http"}://${host}:${addr.port}`;
  let closed: Promise<void> | undefined;
  const close = () => {
    closed ??= (async () => {
      closing.abort();
      await server.shutdown();
    })();
    return closed;
  };
  return {
    url,
    port: addr.port,
    store,
    faults,
    setReady: (r) => {
      ready = r;
    },
    rpcCount: (rpc) => counts[rpc],
    close,
    [Symbol.asyncDispose]: close,
  };
}

async function readPem(path: string, what: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    throw new Error(
      `cannot read the ${what} ${path}: ${
        (e as Error).message
      }; give a readable PEM file`,
    );
  }
}

interface HandlerContext {
  keys: ApiKey[];
  now: () => number;
  log: Logger;
  store: LeaseStore;
  faults: FaultSwitch;
  closing: AbortSignal;
  counts: Record<Rpc, number>;
  isReady: () => boolean;
}

const PLAIN = "text/plain; charset=utf-8";

function plain(status: number, body: string, id: string, extra?: HeadersInit) {
  const headers = new Headers(extra);
  headers.set("content-type", PLAIN);
  headers.set("x-content-type-options", "nosniff");
  headers.set("x-request-id", id);
  return new Response(body, { status, headers });
}

function json(status: number, body: string, id: string): Response {
  return new Response(body, {
    status,
    headers: { "content-type": "application/json", "x-request-id": id },
  });
}

function errorResponse(status: number, message: string, id: string): Response {
  const body = status >= 500
    ? { error: "internal error", requestId: id }
    : { error: message };
  return json(status, goJson(body) + "\n", id);
}

async function handle(ctx: HandlerContext, req: Request): Promise<Response> {
  const id = requestIdOf(req.headers);
  let res: Response;
  try {
    res = await route(ctx, req, id);
  } catch (e) {
    ctx.log.error("internal error", { request_id: id, error: e });
    res = errorResponse(500, "internal error", id);
  }
  ctx.log.debug("request", {
    request_id: id,
    method: req.method,
    url: req.url,
    status: res.status,
  });
  return res;
}

async function route(
  ctx: HandlerContext,
  req: Request,
  id: string,
): Promise<Response> {
  // req.url keeps the raw request target (no dot-segment removal).
  const target = req.url.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, "");
  const q = target.indexOf("?");
  const path = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? "" : target.slice(q);
  const clean = cleanPath(path);
  if (clean !== path) {
    const location = clean + query;
    const body = req.method === "GET"
      ? `<a href="${htmlEscape(location)}">Moved Permanently</a>.\n\n`
      : null;
    const headers = new Headers({ location, "x-request-id": id });
    if (req.method === "GET" || req.method === "HEAD") {
      headers.set("content-type", "text/html; charset=utf-8");
    }
    return new Response(body, { status: 301, headers });
  }
  if (path === "/healthz" || path === "/readyz") {
    if (req.method !== "GET" && req.method !== "HEAD") {
      return plain(405, "Method Not Allowed\n", id, { allow: "GET, HEAD" });
    }
    const up = path === "/healthz" || ctx.isReady();
    const res = plain(up ? 200 : 503, up ? "ok\n" : "not ready\n", id);
    return req.method === "HEAD"
      ? new Response(null, { status: res.status, headers: res.headers })
      : res;
  }
  const m = LEASE_PATH.exec(path);
  if (!m) return plain(404, "404 page not found\n", id);
  if (req.method !== "POST") {
    return plain(405, "Method Not Allowed\n", id, { allow: "POST" });
  }
  const namespace = unescapeSegment(m[1]);
  const name = unescapeSegment(m[2]);
  if (namespace === null || name === null) {
    return plain(400, "400 Bad Request\n", id);
  }
  const rpc = m[3] as Rpc;
  ctx.counts[rpc]++;
  const fault = ctx.faults.take();
  if (fault?.kind === "error") {
    ctx.log.warn("injected fault: answering 500", { request_id: id, rpc });
    return errorResponse(500, "internal error", id);
  }
  if (fault?.kind === "hang") {
    ctx.faults.hanging++;
    try {
      await aborted(AbortSignal.any([fault.released, ctx.closing]));
    } finally {
      ctx.faults.hanging--;
    }
    if (!fault.released.aborted) {
      return errorResponse(500, "internal error", id);
    }
  }
  return await lease(ctx, req, id, rpc, namespace, name);
}

async function lease(
  ctx: HandlerContext,
  req: Request,
  id: string,
  rpc: Rpc,
  namespace: string,
  name: string,
): Promise<Response> {
  const fail = (status: number, message: string) => {
    ctx.log.debug("request rejected", {
      request_id: id,
      status,
      error: message,
    });
    return errorResponse(status, message, id);
  };

  let tenant: string | undefined;
  if (ctx.keys.length > 0) {
    const header = req.headers.get("authorization");
    const token = header?.startsWith("Bearer ") ? header.slice(7) : "";
    if (token === "") {
      return fail(401, "missing or malformed Authorization header");
    }
    const hash = await sha256Hex(token);
    tenant = ctx.keys.find((k) => sameHex(k.sha256, hash))?.keyId;
    if (tenant === undefined) return fail(401, "unauthorized");
  }

  const body = await readBody(req);
  if (body === null) {
    return fail(413, `request body must be at most ${MAX_BODY_BYTES} bytes`);
  }
  const decoded = decodeRequest(rpc, body);
  if (!decoded.ok) return fail(400, decoded.message);
  const { holder, fencingToken, ttlSeconds } = decoded.request;

  if (holder === "" && rpc !== "release") {
    return fail(400, "holder is required");
  }
  if (encoder.encode(holder).length > 253) {
    return fail(400, "holder must be at most 253 bytes");
  }
  if (rpc === "renew" && fencingToken === 0) {
    return fail(400, "fencingToken must be non-zero");
  }
  if (rpc !== "release" && ttlSeconds <= 0) {
    return fail(400, "ttlSeconds must be positive");
  }
  if (
    tenant !== undefined && holder !== tenant &&
    !holder.startsWith(`${tenant}/`)
  ) {
    return fail(403, "holder not authorized for this identity");
  }
  const invalidKey = keyError(namespace, name);
  if (invalidKey) return fail(400, invalidKey);

  const now = ctx.now();
  const fields = { request_id: id, namespace, lease: name, holder };
  try {
    if (rpc === "release") {
      const outcome = ctx.store.release(
        namespace,
        name,
        holder,
        fencingToken,
        now,
      );
      if (outcome === "conflict") {
        return fail(409, "lease held by another identity or token");
      }
      ctx.log.info("lease released", {
        ...fields,
        fencing_token: fencingToken,
      });
      return new Response(null, {
        status: 204,
        headers: { "x-request-id": id },
      });
    }
    const grant = rpc === "acquire"
      ? ctx.store.acquire(namespace, name, holder, ttlSeconds, now)
      : ctx.store.renew(namespace, name, holder, fencingToken, ttlSeconds, now);
    ctx.log.info(
      grant.acquired
        ? `lease ${rpc === "acquire" ? "acquired" : "renewed"}`
        : `${rpc} refused`,
      {
        ...fields,
        acquired: grant.acquired,
        fencing_token: grant.fencingToken,
      },
    );
    return json(200, grantBody(grant), id);
  } catch (e) {
    if (!(e instanceof StoreFailure)) throw e;
    ctx.log.error("internal error", { ...fields, error: e });
    return errorResponse(500, "internal error", id);
  }
}

// The body as text, or null when it exceeds the limit (read no further).
async function readBody(req: Request): Promise<string | null> {
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) return null;
  if (req.body === null) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = req.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > MAX_BODY_BYTES) return null;
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  const all = new Uint8Array(size);
  let off = 0;
  for (const c of chunks) {
    all.set(c, off);
    off += c.length;
  }
  return new TextDecoder().decode(all);
}

// ---------------------------------------------------------------------------
// The `dev-server` subcommand

const HELP = `berth-acquire dev-server: a DEVELOPMENT Berth lease server

This is a development server: it keeps leases in memory only, so all state
(holders, fencing tokens) is lost when it exits. It is for trying the helper,
demos and tests. It is NOT for production: use a real Berth API server there.

Usage:
  berth-acquire dev-server [flags]

Flags:
  --listen HOST:PORT       address to listen on (default 127.0.0.1:8080;
                           port 0 picks a free port)
  --tls-cert-file PATH     serve HTTPS with this PEM certificate (needs --tls-key-file)
  --tls-key-file PATH      PEM private key for --tls-cert-file
  --api-key KEY_ID:SHA256  require "Authorization: Bearer <token>" whose SHA-256
                           (hex) is SHA256; KEY_ID is the caller's tenant, and
                           holders must be KEY_ID or start with KEY_ID/.
                           Repeatable. Hash a token with: printf %s TOKEN | sha256sum
  --help                   show this help

On start it prints one line on stdout: "berth dev-server listening on URL".
It runs until SIGINT or SIGTERM, then exits 0.
`;

/**
 * Parses `--listen`: `host:port`, `[v6]:port`, or `:port` (all interfaces,
 * as Go reads it).
 */
function parseListen(value: string): { hostname: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:\[\]]*)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) {
    throw new Error(
      `--listen ${
        JSON.stringify(value)
      }: want HOST:PORT with a port 0-65535, e.g. 127.0.0.1:8080 or [::1]:8080`,
    );
  }
  const hostname = m[1] ?? m[2];
  return { hostname: hostname === "" ? "0.0.0.0" : hostname, port };
}

/**
 * The `berth-acquire dev-server` subcommand: starts the server from flags,
 * prints its URL and serves until SIGINT/SIGTERM. Returns the exit code
 * (0 after a signal, 1 on a usage or start-up error).
 */
export async function main(args: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        listen: { type: "string", default: "127.0.0.1:8080" },
        "tls-cert-file": { type: "string" },
        "tls-key-file": { type: "string" },
        "api-key": { type: "string", multiple: true },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    console.error(
      `berth-acquire dev-server: ${(e as Error).message}\n\n${HELP}`,
    );
    return 1;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const logger = createLogger();
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  let server: DevServer;
  try {
    const certFile = values["tls-cert-file"];
    const keyFile = values["tls-key-file"];
    if ((certFile === undefined) !== (keyFile === undefined)) {
      throw new Error(
        "--tls-cert-file and --tls-key-file go together: give both for HTTPS, or neither for plain HTTP",
      );
    }
    server = await startDevServer({
      ...parseListen(values.listen),
      tls: certFile && keyFile ? { certFile, keyFile } : undefined,
      apiKeys: values["api-key"] ?? [],
      logger,
    });
  } catch (e) {
    console.error(`berth-acquire dev-server: ${(e as Error).message}`);
    return 1;
  }
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  try {
    logger.warn(
      "development server: leases live in memory and are lost on exit; not for production",
      { url: server.url, api_keys: (values["api-key"] ?? []).length },
    );
    console.log(`berth dev-server listening on ${server.url}`);
    await aborted(stop.signal);
    logger.info("shutting down");
    await server.close();
    return 0;
  } finally {
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
  }
}
