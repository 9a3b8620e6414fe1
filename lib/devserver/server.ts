/**
 * A DEVELOPMENT Berth lease server, kept in memory. It exists so that the
 * helper can be tried, demonstrated and tested end to end without a real
 * Berth API server, and so that chaos tests can make "the server" fail or
 * hang on demand. It follows the wire contract in `berth-api.md` closely
 * (paths, check order, exact messages, exact success bytes) because a client
 * that works against it must work against the real server; it is not a
 * production server: state is lost when the process exits.
 *
 * This module is the listener and the request path: a request id, then
 * routing (`routing.ts`), then any injected fault (`faults.ts`), then the
 * lease RPC (`lease_rpc.ts`: API keys, body decoding, the store); beside it
 * the real server's clean-up sweep runs on a timer that stops with the
 * server. The `dev-server` subcommand around it is `lib/cmd/dev_server.ts`;
 * `docs/dev-server.md` lists where it still differs from the real server.
 *
 * @module
 */
import { parseApiKeys } from "./api_keys.ts";
import { type DevServerFaults, FaultSwitch } from "./faults.ts";
import { type LeaseRpcContext, serveLeaseRpc } from "./lease_rpc.ts";
import { ListenError, listenerUrl } from "../net/addr.ts";
import { discardLogger, type Logger } from "../obs/log.ts";
import type { Rpc } from "./request.ts";
import { routeRequest } from "./routing.ts";
import { LeaseStore } from "./store.ts";
import { errorResponse } from "./wire.ts";

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
   * token). When given, lease RPCs require `Authorization: Bearer <API key>`
   * and a holder equal to the key id or starting with `<key-id>/`. Empty or
   * absent: no authentication.
   */
  apiKeys?: string[];
  /**
   * Wall clock in Unix milliseconds, fractions allowed (they carry the
   * sub-millisecond digits of the answered times); injectable so tests
   * control expiry and clean-up. Default: the system clock in steps of
   * 1/1024 ms ({@linkcode systemClockMs}).
   */
  now?: () => number;
  /**
   * How often the clean-up sweep runs, in milliseconds; default 30000, as the
   * real server. The sweep turns records expired for more than 5 minutes into
   * tombstones. The timer stops with the server.
   */
  sweepIntervalMs?: number;
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
  rpcCount(rpc: Rpc): number;
  /**
   * Runs the clean-up sweep now, at the server's clock, as the timer does.
   *
   * @returns How many records it turned into tombstones.
   */
  sweep(): number;
  /** Stops listening and finishes in-flight requests (hanging ones answer 500). */
  close(): Promise<void>;
}

/**
 * Starts the server and resolves once it listens. It is the one entry point
 * so that tests, the demo and the `dev-server` subcommand all run the same
 * code.
 *
 * @param options Address, TLS, API keys, clock and logger; all optional.
 * @returns The running server; close it, or `await using` it.
 * @throws {ListenError} When the address cannot be bound (the message names it).
 * @throws {Error} On an unreadable TLS file (named) or a malformed API key (by position).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * await using server = await startDevServer();
 * const health = await fetch(`${server.url}/healthz`);
 * assert.equal(await health.text(), "ok\n");
 * server.faults.failNext(); // the next lease RPC answers 500
 * const answer = await fetch(`${server.url}/v1alpha1/namespaces/prod/leases/checkout/acquire`, {
 *   method: "POST",
 *   headers: { "content-type": "application/json" },
 *   body: JSON.stringify({ holder: "east/prod:pod:p1", ttlSeconds: 30 }),
 * });
 * await answer.body?.cancel();
 * assert.equal(answer.status, 500);
 * ```
 */
export async function startDevServer(
  options: DevServerOptions = {},
): Promise<DevServer> {
  const keys = parseApiKeys(options.apiKeys ?? []);
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

  const now = options.now ?? systemClockMs;
  const ctx: HandlerContext = {
    keys,
    now,
    log: options.logger ?? discardLogger,
    store,
    faults,
    closing: closing.signal,
    counts,
    isReady: () => ready,
  };
  const address = {
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 0,
  };
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    server = Deno.serve(
      { ...address, ...tls, onListen: () => {} },
      (req) => handle(ctx, req),
    );
  } catch (e) {
    throw new ListenError(address, e);
  }

  const log = options.logger ?? discardLogger;
  const sweep = () => {
    const cleaned = store.sweep(now());
    if (cleaned > 0) log.info("expired leases cleaned up", { count: cleaned });
    return cleaned;
  };
  const timer = setInterval(sweep, options.sweepIntervalMs ?? 30_000);
  closing.signal.addEventListener("abort", () => clearInterval(timer));

  let closed: Promise<void> | undefined;
  const close = () => {
    closed ??= (async () => {
      closing.abort();
      await server.shutdown();
    })();
    return closed;
  };
  return {
    url: listenerUrl(server.addr, tls ? "https" : "http"),
    port: server.addr.port,
    store,
    faults,
    setReady: (r) => {
      ready = r;
    },
    rpcCount: (rpc) => counts[rpc],
    sweep,
    close,
    [Symbol.asyncDispose]: close,
  };
}

/**
 * The default clock: Unix milliseconds with a sub-millisecond fraction, so
 * answered times carry nine fractional digits as the real server's SQLite
 * store answers them (`Date.now()` alone gives whole milliseconds). The
 * fraction is a multiple of 1/1024 ms (about a microsecond), which a double
 * holds exactly at this magnitude, so `expiresAt` minus the TTL is exactly
 * the renewal time in every answer. It runs on the monotonic clock from an
 * offset taken from the wall clock, taken again when the two part by more
 * than a second (the wall clock was set).
 *
 * @returns Unix milliseconds, e.g. `1778112000123.4560546875`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const t = systemClockMs();
 * assert.ok(Math.abs(t - Date.now()) < 1000);
 * assert.equal((t * 1024) % 1, 0);
 * ```
 */
export function systemClockMs(): number {
  const wall = Date.now();
  if (Math.abs(clockOffset + performance.now() - wall) > 1000) {
    clockOffset = wall - performance.now();
  }
  return Math.round((clockOffset + performance.now()) * 1024) / 1024;
}

let clockOffset = -Infinity;

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

interface HandlerContext extends LeaseRpcContext {
  faults: FaultSwitch;
  closing: AbortSignal;
  counts: Record<Rpc, number>;
  isReady: () => boolean;
}

async function handle(ctx: HandlerContext, req: Request): Promise<Response> {
  const id = requestIdOf(req.headers);
  let res: Response;
  try {
    res = await serve(ctx, req, id);
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

async function serve(
  ctx: HandlerContext,
  req: Request,
  id: string,
): Promise<Response> {
  const target = routeRequest(req, id, ctx.isReady());
  if (target instanceof Response) return target;
  ctx.counts[target.rpc]++;
  const fault = await ctx.faults.apply(ctx.closing);
  if (fault === "fail") {
    ctx.log.warn("injected fault: answering 500", {
      request_id: id,
      rpc: target.rpc,
    });
  }
  if (fault !== "serve") return errorResponse(500, "internal error", id);
  return await serveLeaseRpc(ctx, req, id, target);
}

// ---------------------------------------------------------------------------
// Request ids, as the real server derives them: an inbound X-Request-Id of
// [A-Za-z0-9_-]{1,64}, else the trace id of a traceparent, else 32 random
// hex digits. Two X-Request-Id headers reach here joined with ", ", which
// is never a valid id, so the next rule decides (the real server reads the
// first header).

const REQUEST_ID = /^[A-Za-z0-9_-]{1,64}$/;

function requestIdOf(headers: Headers): string {
  const inbound = headers.get("x-request-id");
  if (inbound !== null && REQUEST_ID.test(inbound)) return inbound;
  return traceIdOf(headers.get("traceparent")) ??
    crypto.getRandomValues(new Uint8Array(16)).toHex();
}

/**
 * The trace id of a `traceparent` header by the real server's rule, which
 * is looser than W3C Trace Context: any two characters, `-`, 32 lower-case
 * hex digits, `-`, and anything after. The version (`ff` included), the
 * parent id, the flags and all-zero ids are not looked at.
 */
function traceIdOf(header: string | null): string | undefined {
  if (header === null || header.length < 36) return undefined;
  const traceId = header.slice(3, 35);
  if (header[2] !== "-" || header[35] !== "-") return undefined;
  return /^[0-9a-f]{32}$/.test(traceId) ? traceId : undefined;
}
