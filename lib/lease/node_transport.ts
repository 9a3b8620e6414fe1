/**
 * The transport for what `fetch` cannot do, over an `https:` target: the
 * server-name override (SNI and the verified name other than the URL's
 * host), skip-verify, and a server certificate that is its own CA (see
 * `ca_leaf_fallback.ts`). It goes through `node:https`, imported on the
 * first request only, so a process that never needs it never pays its
 * load. The trust store (the default roots plus the bundle) is built once; a
 * keep-alive agent holds the connection between renewals; an idle pooled
 * socket never keeps the process alive. It connects to the server directly:
 * `node:https` reads no proxy variable.
 *
 * @module
 */
import type { RawResponse } from "./answer.ts";
import { headerRequestId } from "./answer.ts";
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

/** The TLS settings of a node transport. */
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
 * A {@linkcode Transport} over `node:https` with one keep-alive agent.
 *
 * @param target The API server, an `https:` one.
 * @param options TLS settings.
 * @returns The transport; `node:https` is loaded by its first request.
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
      loaded ??= load(options);
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

type Agent = import("node:https").Agent;

interface Loaded {
  request: typeof import("node:https").request;
  /** Keeps the connection between requests. */
  keepAlive: Agent;
  /** The same settings, one connection per request. */
  oneShot: Agent;
}

async function load(o: NodeTlsOptions): Promise<Loaded> {
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
