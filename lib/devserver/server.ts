/**
 * A DEVELOPMENT Berth lease server, in memory (docs/dev-server.md): it answers
 * as the wire contract says, because a client that works against it must work
 * against the real server, and chaos tests make it fail or hang on demand.
 * This module is the listener and the request path: a request id, routing
 * (`routing.ts`), any injected fault, then the lease RPC (`lease_rpc.ts`);
 * beside it the clean-up sweep runs on a timer that stops with the server.
 *
 * @module
 */
import { parseApiKeys } from "./api_keys.ts";
import { serveLeaseRpc } from "./lease_rpc.ts";
import { ListenError, listenerUrl } from "../net/addr.ts";
import { discardLogger, type Logger } from "../obs/log.ts";
import type { Rpc } from "./request.ts";
import { routeRequest } from "./routing.ts";
import { aborted } from "../state/clock.ts";
import { LeaseStore } from "./store.ts";
import { errorResponse } from "./wire.ts";

/**
 * Options for {@linkcode startDevServer}, as docs/dev-server.md describes
 * them: by default `127.0.0.1`, a free port, plain HTTP, no API keys, the
 * clock {@linkcode systemClockMs}, a sweep every 30000 ms, no logs.
 */
export interface DevServerOptions {
  hostname?: string;
  port?: number;
  /** PEM files: serve HTTPS. */
  tls?: { certFile: string; keyFile: string };
  /** `key-id:sha256hex` each. */
  apiKeys?: string[];
  /** Unix milliseconds, fractions allowed. */
  now?: () => number;
  sweepIntervalMs?: number;
  logger?: Logger;
}

/**
 * A running development server (`url` e.g. `http://127.0.0.1:41234`) with the
 * controls tests need, as docs/dev-server.md describes them.
 */
export interface DevServer extends AsyncDisposable {
  url: string;
  port: number;
  store: LeaseStore;
  faults: DevServerFaults;
  setReady(ready: boolean): void;
  rpcCount(rpc: Rpc): number;
  sweep(): number;
  close(): Promise<void>;
}

/**
 * Switches that make the lease RPCs (never `/healthz` or `/readyz`) answer
 * `500 internal error` or hang, for chaos tests. They act right after routing,
 * before authentication: they model a server broken as a whole. A hanging
 * request is served once the fault is cleared (even when its client gave up,
 * as a slow real server would still apply it), or answers 500 when the server
 * closes (as a stuck store call cancelled at shutdown).
 */
export class DevServerFaults {
  #kind: "fail" | "hang" | null = null;
  #remaining = 0;
  #released = new AbortController();
  #hanging = 0;

  /** How many requests are hanging right now, so tests can wait for one. */
  get hanging(): number {
    return this.#hanging;
  }
  failNext(count = 1): void {
    this.#set("fail", count);
  }
  failAll(): void {
    this.#set("fail", Infinity);
  }
  hangNext(count = 1): void {
    this.#set("hang", count);
  }
  hangAll(): void {
    this.#set("hang", Infinity);
  }
  /** Removes any fault and lets every hanging request proceed. */
  clear(): void {
    this.#kind = null;
    this.#released.abort();
    this.#released = new AbortController();
  }

  /** @internal What the lease RPC arriving now does: `serve`, `fail`, or `closing` (hung until the server closed). */
  async apply(closing: AbortSignal): Promise<"serve" | "fail" | "closing"> {
    const kind = this.#kind;
    if (kind === null) return "serve";
    if (--this.#remaining <= 0) this.#kind = null;
    if (kind === "fail") return "fail";
    const released = this.#released.signal;
    this.#hanging++;
    try {
      await aborted(AbortSignal.any([released, closing]));
    } finally {
      this.#hanging--;
    }
    return released.aborted ? "serve" : "closing";
  }

  #set(kind: "fail" | "hang", count: number): void {
    if (!(count >= 1)) {
      throw new RangeError(`fault count must be at least 1, got ${count}`);
    }
    this.#kind = kind;
    this.#remaining = count;
  }
}

/**
 * Starts the server and resolves once it listens: the one entry point of
 * tests, the demo and the `dev-server` subcommand.
 * @throws {ListenError} When the address cannot be bound.
 * @throws {Error} On an unreadable TLS file (named) or a malformed API key (by position).
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
  const faults = new DevServerFaults();
  const closing = new AbortController();
  const counts = { acquire: 0, renew: 0, release: 0 };
  const now = options.now ?? systemClockMs;
  const log = options.logger ?? discardLogger;
  let ready = true;
  const readPem = (path: string, what: string) =>
    Deno.readTextFile(path).catch((e: Error) => {
      throw new Error(
        `cannot read the ${what} ${path}: ${e.message}; give a readable PEM file`,
      );
    });
  const tls = options.tls && {
    cert: await readPem(options.tls.certFile, "TLS certificate"),
    key: await readPem(options.tls.keyFile, "TLS private key"),
  };

  const serve = async (req: Request, id: string): Promise<Response> => {
    const target = routeRequest(req, id, ready);
    if (target instanceof Response) return target;
    counts[target.rpc]++;
    const fault = await faults.apply(closing.signal);
    if (fault === "fail") {
      log.warn("injected fault: answering 500", {
        request_id: id,
        rpc: target.rpc,
      });
    }
    if (fault !== "serve") return errorResponse(500, "internal error", id);
    return await serveLeaseRpc({ keys, now, log, store }, req, id, target);
  };
  const handle = async (req: Request): Promise<Response> => {
    const id = requestIdOf(req.headers);
    const res = await serve(req, id).catch((e) => {
      log.error("internal error", { request_id: id, error: e });
      return errorResponse(500, "internal error", id);
    });
    log.debug("request", {
      request_id: id,
      method: req.method,
      url: req.url,
      status: res.status,
    });
    return res;
  };

  const address = {
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 0,
  };
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    server = Deno.serve({ ...address, ...tls, onListen: () => {} }, handle);
  } catch (e) {
    throw new ListenError(address, e);
  }
  const sweep = () => {
    const cleaned = store.sweep(now());
    if (cleaned > 0) log.info("expired leases cleaned up", { count: cleaned });
    return cleaned;
  };
  const timer = setInterval(sweep, options.sweepIntervalMs ?? 30_000);
  let closed: Promise<void> | undefined;
  const close = () =>
    closed ??= (async () => {
      clearInterval(timer);
      closing.abort();
      await server.shutdown();
    })();
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
 * The default clock: Unix milliseconds in steps of 1/1024 ms, so answered
 * times carry nine fractional digits as the real server's SQLite store answers
 * them, and a double holds them exactly (`expiresAt` minus the TTL is exactly
 * the renewal time). Monotonic, from an offset to the wall clock taken again
 * when the two part by more than a second.
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

// The request id by the real server's rules (docs/dev-server.md); two
// X-Request-Id headers reach here joined with ", ", never a valid id.
function requestIdOf(headers: Headers): string {
  const inbound = headers.get("x-request-id");
  if (inbound !== null && /^[A-Za-z0-9_-]{1,64}$/.test(inbound)) return inbound;
  const trace = /^..-([0-9a-f]{32})-/s.exec(headers.get("traceparent") ?? "");
  return trace?.[1] ?? crypto.getRandomValues(new Uint8Array(16)).toHex();
}
