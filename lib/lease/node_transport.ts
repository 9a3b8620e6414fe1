/**
 * The transport for skip-verify, which neither `fetch` nor `Deno.startTls`
 * can express (it can do the server-name override too, when asked for by
 * name). It goes through `node:https`, loaded on the first request only. The
 * trust store (the default roots plus the bundle) is built once; a keep-alive
 * agent holds the connection between renewals; an idle pooled socket never
 * keeps the process alive.
 *
 * @module
 */
import type { RawResponse } from "./answer.ts";
import { headerRequestId } from "./answer.ts";
import {
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
 * A {@linkcode Transport} over `node:http(s)` with one keep-alive agent.
 *
 * @param target The API server.
 * @param options TLS settings, used only for an `https:` target.
 */
export function createNodeTransport(
  target: Target,
  options: NodeTlsOptions,
): Transport {
  let loaded: Promise<Loaded> | undefined;
  let sent = 0;
  return {
    async send(request, signal) {
      loaded ??= load(target, options);
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

async function load(target: Target, o: NodeTlsOptions): Promise<Loaded> {
  if (!target.secure) {
    const http = await import("node:http");
    return {
      request: http.request,
      keepAlive: new http.Agent({ keepAlive: true }),
      oneShot: new http.Agent({ keepAlive: false }),
    };
  }
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
    request: https.request as unknown as Loaded["request"],
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
      res.on("error", (e: Error) => finish(classify(e)));
      res.on("close", () => {
        // Dropped mid-body without an `error` event.
        if (!res.complete) {
          finish(classify(
            new Error("connection closed before the response was complete"),
          ));
        }
      });
    });
    req.on("error", (e: Error) => finish(classify(e)));
    const onAbort = () => {
      finish({ error: "other", detail: "aborted" });
      req.destroy();
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    req.end(request.body);
  });
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

/** The kind of a node error, from its code. */
function classify(e: Error): TransportError {
  const code = (e as { code?: unknown }).code;
  const detail = `${typeof code === "string" ? `${code}: ` : ""}${e.message}`;
  if (typeof code === "string" && UNTRUSTED.has(code)) {
    return { error: "untrusted", detail };
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return { error: "wrong-name", detail };
  }
  if (code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID") {
    return { error: "dates", detail };
  }
  if (code === "ECONNREFUSED") return { error: "refused", detail };
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") {
    return { error: "dns", detail };
  }
  if (
    code === "ERR_SSL_WRONG_VERSION_NUMBER" ||
    /wrong version number|InvalidContentType/.test(e.message)
  ) {
    return { error: "not-tls", detail };
  }
  return { error: "other", detail };
}
