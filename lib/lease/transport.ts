/**
 * The transports (docs/lease-client.md, "Transports"): each sends one POST
 * and reads at most {@linkcode MAX_RESPONSE_BYTES} of its answer, so a wrong
 * endpoint cannot eat the sidecar's memory. `node:http(s)` does what `fetch`
 * cannot, loaded by the first request that needs it.
 *
 * @module
 */
import type { IncomingMessage } from "node:http";
import type { RawResponse, Target } from "./wire.ts";
import {
  classifyError,
  type TransportError,
  type TransportErrorKind,
} from "./errors.ts";
import type { LeaseFailure } from "./rpc.ts";
import type { Logger } from "../obs/log.ts";

export const MAX_RESPONSE_BYTES = 64 * 1024;

/** One request as every transport sends it: the path with the base prefix. */
export interface WireRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** An answer, no answer, or one too large to read. */
export type Answer = RawResponse | TransportError | LeaseFailure;

/** Sends one POST; resolves, never rejects (an abort resolves as an error too). */
export type Transport = (r: WireRequest, s: AbortSignal) => Promise<Answer>;

/** The body up to the cap, as UTF-8 (bad bytes become U+FFFD); a longer one is left unread. The request id is repeated only when printable. */
async function readAnswer(
  status: number,
  header: (name: string) => string | null | undefined,
  body: AsyncIterable<Uint8Array> | Promise<string>,
): Promise<Answer> {
  const id = header("x-request-id");
  const requestId = id && /^[\x21-\x7e]{1,128}$/.test(id) ? id : undefined;
  let text = "";
  try {
    if (body instanceof Promise) {
      text = await body;
    } else {
      const decoder = new TextDecoder();
      let size = 0;
      for await (const chunk of body) {
        size += chunk.length;
        if (size > MAX_RESPONSE_BYTES) {
          const message = `response body exceeds ${
            MAX_RESPONSE_BYTES / 1024
          } KiB; is --api-server pointing at the Berth API server?`;
          return { kind: "bad-response", status, message, requestId };
        }
        text += decoder.decode(chunk, { stream: true });
      }
      text += decoder.decode();
    }
  } catch (e) {
    return classifyError(e);
  }
  const location = header("location") ?? undefined;
  return { status, body: text, requestId, location };
}

/**
 * A {@linkcode Transport} over `fetch`, the connection kept alive between
 * renewals. With `caCerts` (trusted beside the root stores) or a `proxy`
 * variable set, its own `Deno.HttpClient`, built once, reading the proxy
 * variables now; else the process's client, which costs start-up less.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseApiServer } from "./wire.ts";
 * const send = fetchTransport(parseApiServer("http://127.0.0.1:1"), undefined, undefined); // a bad port of the fetch standard
 * assert.deepEqual(await send({ path: "/", headers: {}, body: "" }, AbortSignal.timeout(5_000)), {
 *   error: "blocked-port", detail: "Fetch failed: Requests to port 1 are blocked" });
 * ```
 */
export function fetchTransport(
  target: Target,
  caCerts: string[] | undefined,
  proxy: string | undefined,
): Transport {
  const client = caCerts || proxy
    ? Deno.createHttpClient(caCerts ? { caCerts } : {})
    : undefined;
  return async function send(request, signal, retried = false) {
    let res: Response;
    try {
      res = await fetch(`${target.origin}${request.path}`, {
        method: "POST",
        headers: request.headers,
        body: request.body,
        client,
        signal,
        redirect: "manual",
      });
    } catch (e) {
      return classifyError(e);
    }
    // A 408 left on a kept connection: the server never took this request.
    if (res.status === 408 && !retried) {
      await res.body?.cancel().catch(() => {});
      return await send(request, signal, true);
    }
    const header = (name: string) => res.headers.get(name);
    // A length within the cap is read whole (a stream read per chunk costs
    // every renewal more), unless compressed: fetch decodes it, to any size.
    const known = !header("content-encoding") &&
      Number(header("content-length") ?? NaN) <= MAX_RESPONSE_BYTES;
    const body = known || !res.body ? res.text() : res.body;
    return await readAnswer(res.status, header, body);
  };
}

export interface NodeTls {
  caCerts?: string[];
  serverName?: string;
  insecureSkipTlsVerify?: boolean;
}

/**
 * A {@linkcode Transport} over `node:https` (`node:http` for an `http:`
 * target), loaded by its first request: `caCerts` beside the default roots,
 * `serverName` sent as SNI and verified. It reads no proxy variable, and a
 * keep-alive agent holds the connection between renewals.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseApiServer } from "./wire.ts";
 * const answer = await nodeTransport(parseApiServer("http://127.0.0.1:1"), {})(
 *   { path: "/", headers: {}, body: "{}" }, AbortSignal.timeout(5_000));
 * assert.ok("error" in answer && answer.error === "refused");
 * ```
 */
export function nodeTransport(target: Target, o: NodeTls): Transport {
  const load = async () => {
    const http = target.secure
      ? await import("node:https")
      : await import("node:http");
    let settings: import("node:https").AgentOptions = {};
    if (target.secure) {
      const tls = await import("node:tls");
      const serverName = o.serverName;
      // A `ca` list replaces the default roots in node:tls: they are named
      // first (the system's and the bundled ones, as for fetch).
      const roots = tls.getCACertificates?.("default") ?? tls.rootCertificates;
      settings = {
        rejectUnauthorized: !o.insecureSkipTlsVerify,
        ...(o.caCerts ? { ca: [...roots, ...o.caCerts] } : {}),
        ...(serverName === undefined ? {} : {
          servername: serverName,
          checkServerIdentity: (_host, cert) =>
            tls.checkServerIdentity(serverName, cert),
        }),
      };
    }
    const [oneShot, kept] = [false, true].map((keepAlive) =>
      new http.Agent({ keepAlive, ...settings })
    );
    return { send: http.request, oneShot, kept };
  };
  let loaded: ReturnType<typeof load> | undefined;
  let sent = 0;
  return async (request, signal) => {
    const { send, oneShot, kept } = await (loaded ??= load());
    const options = {
      method: "POST",
      hostname: target.hostname,
      port: target.port,
      path: request.path,
      headers: request.headers,
      // The first request (`acquire`'s only one) on a one-shot connection.
      agent: sent++ === 0 ? oneShot : kept,
      signal,
    };
    try {
      const res = await new Promise<IncomingMessage>((resolve, reject) =>
        send(options, resolve).on("error", reject).end(request.body)
      );
      const header = (n: string) => res.headers[n] as string | undefined;
      return await readAnswer(res.statusCode ?? 0, header, res);
    } catch (e) {
      return classifyError(e);
    }
  };
}

/** A transport, and the proxy variable requests may go through now (none once they go direct). */
export type Route = { send: Transport; proxy: () => string | undefined };

/**
 * `first` (`fetch`) until it refuses what the node transport gets past (a
 * blocked port; directly, a server certificate that is its own CA); then the
 * node transport, for that request (the refusal sent nothing) and the rest.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { discardLogger } from "../obs/log.ts";
 * import { parseApiServer } from "./wire.ts";
 * const refused = { error: "blocked-port" as const, detail: "port 6000" };
 * const answer = { status: 200, body: "{}" };
 * const route = withNodeFallback(() => Promise.resolve(refused), () => () => Promise.resolve(answer),
 *   parseApiServer("http://127.0.0.1:6000"), "HTTP_PROXY", discardLogger);
 * assert.deepEqual(await route.send({ path: "/", headers: {}, body: "{}" }, AbortSignal.timeout(1000)), answer);
 * assert.equal(route.proxy(), undefined);
 * ```
 */
export function withNodeFallback(
  first: Transport,
  node: () => Transport,
  target: Target,
  proxy: string | undefined,
  logger: Logger,
): Route {
  let handedOver: Transport | undefined;
  const handsOver = (kind: TransportErrorKind) =>
    kind === "blocked-port" || (kind === "ca-as-leaf" && proxy === undefined);
  const handOver = (kind: TransportErrorKind) => {
    handedOver = node();
    const module = target.secure ? "node:https" : "node:http";
    const log = logger.with({ api_server: target.origin });
    if (kind === "ca-as-leaf") {
      log.warn(
        "the API server presents a CA certificate as its own (a self-signed certificate marked CA:TRUE), which Deno's TLS refuses; verifying it through node:https instead, which trusts it when it is in the trust store, as the Go helper does (a certificate reissued with basicConstraints=CA:FALSE needs no such switch)",
      );
    } else if (proxy !== undefined) {
      log.warn(
        `${proxy} names a proxy, but on port ${target.port}, which fetch refuses (${module}), the helper connects to the API server directly`,
      );
    } else {
      log.debug(
        `fetch refuses port ${target.port} (a bad port of the fetch standard); sending through ${module}`,
      );
    }
    return handedOver;
  };
  return {
    proxy: () => handedOver === undefined ? proxy : undefined,
    async send(request, signal) {
      if (handedOver) return await handedOver(request, signal);
      const answer = await first(request, signal);
      if (!("error" in answer) || !handsOver(answer.error)) return answer;
      // A request sent alongside may have handed over already.
      return await (handedOver ?? handOver(answer.error))(request, signal);
    },
  };
}
