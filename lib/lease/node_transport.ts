/**
 * The transport for what `fetch` cannot do: over an `https:` target the
 * server-name override (SNI and the verified name other than the URL's
 * host), skip-verify and a server certificate that is its own CA; over
 * either scheme a port `fetch` refuses outright (the fetch standard's bad
 * ports, such as 6000; see `node_fallback.ts`). It goes through `node:https`
 * (`node:http` for an `http:` target), imported on the first request only,
 * so a process that never needs it never pays its load. The trust store (the
 * default roots plus the bundle) is built once; a keep-alive agent holds the
 * connection between renewals; an idle pooled socket never keeps the process
 * alive. It connects to the server directly: `node:http(s)` reads no proxy
 * variable ({@linkcode warnGoesDirect}).
 *
 * @module
 */
import type { RawResponse } from "./answer.ts";
import { headerRequestId } from "./answer.ts";
import type { Logger } from "../obs/log.ts";
import {
  classifyError,
  decodeChunks,
  MAX_RESPONSE_BYTES,
  type TooLarge,
  type Transport,
  type TransportError,
  type WireRequest,
} from "./transport.ts";
import type { Target } from "./wire.ts";

/** The TLS settings of a node transport; none apply to an `http:` target. */
export interface NodeTlsOptions {
  /** PEM certificates trusted in addition to the default roots (the system's and Deno's bundled ones). */
  caCerts?: string[];
  /** The name sent as SNI and verified on the certificate. */
  serverName?: string;
  /** Accept any certificate (development only). */
  insecureSkipTlsVerify?: boolean;
}

type Answer = RawResponse | TransportError | TooLarge;

/**
 * A {@linkcode Transport} over `node:https` (`node:http` for an `http:`
 * target) with one keep-alive agent.
 *
 * @param target The API server.
 * @param options TLS settings (for an `https:` target).
 * @returns The transport; its `node:` module is loaded by its first request.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseApiServer } from "./wire.ts";
 * const target = parseApiServer("https://127.0.0.1:8443");
 * const transport = createNodeTransport(target, { serverName: "berth.test" });
 * assert.equal(typeof transport.send, "function");
 * ```
 */
export function createNodeTransport(
  target: Target,
  options: NodeTlsOptions,
): Transport {
  let loaded: Promise<Loaded> | undefined;
  let sent = 0;
  return {
    async send(request, signal) {
      loaded ??= target.secure ? loadHttps(options) : loadHttp();
      const node = await loaded;
      // Measured with Deno 2.9: the first request on a fresh keep-alive
      // connection waits ~40 ms for its answer (a one-shot connection does
      // not), so the first request of the process, often its only one
      // (`acquire`), goes on a one-shot connection.
      const agent = sent++ === 0 ? node.oneShot : node.keepAlive;
      return exchange(node.request, agent, target, request, signal);
    },
  };
}

type Agent = import("node:http").Agent;

interface Loaded {
  request: typeof import("node:http").request;
  /** Keeps the connection between requests. */
  keepAlive: Agent;
  /** The same settings, one connection per request. */
  oneShot: Agent;
}

async function loadHttp(): Promise<Loaded> {
  const http = await import("node:http");
  return {
    request: http.request,
    keepAlive: new http.Agent({ keepAlive: true }),
    oneShot: new http.Agent({ keepAlive: false }),
  };
}

async function loadHttps(o: NodeTlsOptions): Promise<Loaded> {
  const [https, tls] = await Promise.all([
    import("node:https"),
    import("node:tls"),
  ]);
  const serverName = o.serverName;
  // Built once: the trust store (the default roots plus the bundle) is
  // shared. A `ca` list replaces the default roots in node:tls, so they are
  // named first: the system's and the bundled ones (lib/lease/tls_trust.ts).
  const defaults = tls.getCACertificates?.("default") ?? tls.rootCertificates;
  const settings = {
    rejectUnauthorized: !o.insecureSkipTlsVerify,
    ...(o.caCerts ? { ca: [...defaults, ...o.caCerts] } : {}),
    ...(serverName === undefined ? {} : {
      servername: serverName,
      checkServerIdentity: (
        _host: string,
        cert: import("node:tls").PeerCertificate,
      ) => tls.checkServerIdentity(serverName, cert),
    }),
  };
  return {
    request: https.request,
    keepAlive: new https.Agent({ keepAlive: true, ...settings }),
    oneShot: new https.Agent({ keepAlive: false, ...settings }),
  };
}

/** One POST on the agent's connection. Resolves, never rejects. */
function exchange(
  send: Loaded["request"],
  agent: Agent,
  target: Target,
  request: WireRequest,
  signal: AbortSignal,
): Promise<Answer> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (v: Answer) => {
      if (done) return;
      done = true;
      signal.removeEventListener("abort", onAbort);
      resolve(v);
    };
    const req = send({
      method: "POST",
      hostname: target.hostname,
      port: target.port,
      path: request.path,
      headers: request.headers,
      agent,
    }, (res) => {
      const status = res.statusCode ?? 0;
      const header = (name: string) => {
        const v = res.headers[name];
        return (Array.isArray(v) ? v[0] : v) ?? null;
      };
      const requestId = headerRequestId(header("x-request-id"));
      const chunks: Uint8Array[] = [];
      let size = 0;
      res.on("data", (chunk: Uint8Array) => {
        if (done) return;
        size += chunk.length;
        if (size > MAX_RESPONSE_BYTES) {
          finish({ tooLarge: status, requestId });
          req.destroy();
          return;
        }
        chunks.push(chunk);
      });
      res.on("end", () => {
        finish({
          status,
          body: decodeChunks(chunks),
          requestId,
          location: header("location") ?? undefined,
        });
      });
      res.on("error", (e: Error) => finish(classifyError(e)));
      res.on("close", () => {
        // Dropped mid-body without an `error` event.
        if (!res.complete) {
          finish(classifyError(
            new Error("connection closed before the response was complete"),
          ));
        }
      });
    });
    req.on("error", (e: Error) => finish(classifyError(e)));
    const onAbort = () => {
      finish({ error: "other", detail: "aborted" });
      req.destroy();
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    req.end(request.body);
  });
}

/**
 * Says that the node transport connects to the API server directly although
 * a proxy variable is set for the server's scheme (`node:http(s)` reads
 * none): one WARN line per call, so call it once, when the transport is
 * chosen. Nothing is said without a proxy variable.
 *
 * @param logger Gets the line.
 * @param proxy The name of the proxy variable set for the server's scheme
 * (`HTTPS_PROXY`, ...), or undefined.
 * @param why Why the node transport serves this server, as it follows
 * "but": `with --server-name (node:https)`.
 * @param apiServer The server's origin, a field of the line.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { createLogger } from "../obs/log.ts";
 * const lines: string[] = [];
 * const logger = createLogger({ write: (l) => lines.push(l) });
 * warnGoesDirect(logger, undefined, "with --server-name (node:https)", "https://gw:8443");
 * assert.equal(lines.length, 0);
 * warnGoesDirect(logger, "HTTPS_PROXY", "with --server-name (node:https)", "https://gw:8443");
 * assert.match(
 *   lines[0],
 *   /HTTPS_PROXY names a proxy, but with --server-name \(node:https\) the helper connects to the API server directly/,
 * );
 * ```
 */
export function warnGoesDirect(
  logger: Logger,
  proxy: string | undefined,
  why: string,
  apiServer: string,
): void {
  if (proxy === undefined) return;
  logger.warn(
    `${proxy} names a proxy, but ${why} the helper connects to the API server directly`,
    { api_server: apiServer },
  );
}
