/**
 * The hand-over from `fetch` to the node transport (`node_transport.ts`)
 * for the two refusals `fetch` cannot get past, learnt from `fetch` itself
 * on the first request that meets one, then kept for the client's life:
 *
 * - **A port `fetch` blocks.** `fetch` refuses the fetch standard's "bad
 *   ports" (6000, 6665-6669, 10080, ...) outright, before any connection;
 *   the Go helper, and `node:http(s)`, talk to any port. Which ports these
 *   are is `fetch`'s to say: its refusal is recognised by the one table of
 *   error texts (`blocked-port` in `transport.ts`), never by a copy of its
 *   list. Through a proxy too (`fetch` refuses the port there as well); the
 *   node transport then goes direct, and says so once.
 * - **A server certificate that is its own CA**: the common self-signed
 *   certificate (`openssl req -x509` marks it `CA:TRUE`). Go, and so the Go
 *   helper, trusts it when it is in the trust store; Deno's TLS (`fetch`)
 *   refuses any CA certificate as a server's own (`CaUsedAsEndEntity`),
 *   whatever the store holds. `node:https` verifies it as Go does: trusted
 *   when it is in the store, and its name checked. Only on a direct
 *   connection: through a proxy `node:https` would go round the proxy, so
 *   there the refusal stays (and names its fix).
 *
 * Either refusal sent nothing of the request, so it is sent once more, on
 * the node transport.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { discardLogger } from "../obs/log.ts";
 * import { parseApiServer } from "./wire.ts";
 * const refused = { error: "blocked-port" as const, detail: "Fetch failed: Requests to port 6000 are blocked" };
 * const answer = { status: 200, body: "{}" };
 * let fetchSends = 0;
 * const transport = withNodeFallback(
 *   { send: () => (fetchSends++, Promise.resolve(refused)) },
 *   {
 *     node: () => ({ send: () => Promise.resolve(answer) }),
 *     target: parseApiServer("http://127.0.0.1:6000"),
 *     proxy: undefined,
 *     logger: discardLogger,
 *   },
 * );
 * const request = { path: "/", headers: {}, body: "{}" };
 * const signal = new AbortController().signal;
 * assert.deepEqual(await transport.send(request, signal), answer);
 * assert.deepEqual(await transport.send(request, signal), answer);
 * assert.equal(fetchSends, 1);
 * ```
 *
 * @module
 */
import type { Logger } from "../obs/log.ts";
import { warnGoesDirect } from "./node_transport.ts";
import type { Transport, TransportErrorKind } from "./transport.ts";
import type { Target } from "./wire.ts";

/** Options for {@linkcode withNodeFallback}. */
export interface NodeFallbackOptions {
  /** Makes the node transport, once, on the first hand-over. */
  node: () => Transport;
  /** The API server. */
  target: Target;
  /**
   * The proxy variable set for the server's scheme, if any (the client's
   * `proxyVariable`): a CA certificate as the server's own is then not
   * handed over, and a blocked port is, with a WARN that the node transport
   * connects directly.
   */
  proxy: string | undefined;
  /** Gets the hand-over's line: a WARN, or a DEBUG for a blocked port without a proxy. */
  logger: Logger;
  /** Told once, at the hand-over: from then on requests go direct. */
  onHandOver?: () => void;
}

/**
 * `first` (the `fetch` transport), until it meets a refusal the node
 * transport gets past; then the node transport, made once, for that request
 * and every later one.
 *
 * @param first The transport to use while it can.
 * @param options The node transport's maker and what the hand-over says.
 * @returns A transport that sends a request once more only on the hand-over
 * (the refusal sent nothing of it).
 */
export function withNodeFallback(
  first: Transport,
  options: NodeFallbackOptions,
): Transport {
  const { target, proxy, logger } = options;
  const handsOver = (kind: TransportErrorKind) =>
    kind === "blocked-port" || (kind === "ca-as-leaf" && proxy === undefined);
  let current = first;
  const handOver = (kind: TransportErrorKind) => {
    current = options.node();
    options.onHandOver?.();
    const module = target.secure ? "node:https" : "node:http";
    if (kind === "blocked-port") {
      const why = `on port ${target.port}, which fetch refuses (${module}),`;
      if (proxy !== undefined) {
        warnGoesDirect(logger, proxy, why, target.origin);
      } else {
        logger.debug(
          `fetch refuses port ${target.port} (a bad port of the fetch standard); sending through ${module}`,
          { api_server: target.origin },
        );
      }
      return;
    }
    logger.warn(
      "the API server presents a CA certificate as its own (a self-signed certificate marked CA:TRUE), which Deno's TLS refuses; verifying it through node:https instead, which trusts it when it is in the trust store, as the Go helper does (a certificate reissued with basicConstraints=CA:FALSE needs no such switch)",
      { api_server: target.origin },
    );
  };
  return {
    async send(request, signal) {
      const via = current;
      const answer = await via.send(request, signal);
      if (via !== first || !("error" in answer) || !handsOver(answer.error)) {
        return answer;
      }
      // A request sent alongside may have handed over already.
      if (current === first) handOver(answer.error);
      return await current.send(request, signal);
    },
  };
}
