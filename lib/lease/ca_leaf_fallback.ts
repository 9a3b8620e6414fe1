/**
 * A server certificate that is its own CA: the common self-signed
 * certificate (`openssl req -x509` marks it `CA:TRUE`). Go, and so the Go
 * helper, trusts it when it is in the trust store; Deno's TLS
 * (`fetch`) refuses any CA certificate as a server's own
 * (`CaUsedAsEndEntity`), whatever the store holds. `node:https` verifies it
 * as Go does: trusted when it is in the store, and its name checked. So a
 * direct connection that meets this error is made again, from then on,
 * through the node transport, loaded only then.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { discardLogger } from "../obs/log.ts";
 * const refused = { error: "ca-as-leaf" as const, detail: "CaUsedAsEndEntity" };
 * const answer = { status: 200, body: "{}" };
 * const transport = withCaLeafFallback(
 *   { send: () => Promise.resolve(refused) },
 *   () => ({ send: () => Promise.resolve(answer) }),
 *   discardLogger,
 *   "https://berth.example",
 * );
 * const request = { path: "/", headers: {}, body: "{}" };
 * assert.deepEqual(await transport.send(request, new AbortController().signal), answer);
 * ```
 *
 * @module
 */
import type { Logger } from "../obs/log.ts";
import type { Transport } from "./transport.ts";

/**
 * `first`, until it meets a server certificate that is a CA certificate;
 * then `fallback()` (made once) for that request and every later one.
 *
 * @param first The transport to use while it can.
 * @param fallback Makes the transport that verifies such a certificate.
 * @param logger Gets one WARN when the switch is made.
 * @param apiServer The server's origin, for that line.
 * @returns A transport that sends each request once more only on the switch
 * (the refused handshake sent nothing of it).
 */
export function withCaLeafFallback(
  first: Transport,
  fallback: () => Transport,
  logger: Logger,
  apiServer: string,
): Transport {
  let current = first;
  let switched = false;
  return {
    async send(request, signal) {
      const answer = await current.send(request, signal);
      if (switched || !("error" in answer) || answer.error !== "ca-as-leaf") {
        return answer;
      }
      switched = true;
      current = fallback();
      logger.warn(
        "the API server presents a CA certificate as its own (a self-signed certificate marked CA:TRUE), which Deno's TLS refuses; verifying it through node:https instead, which trusts it when it is in the trust store, as the Go helper does (a certificate reissued with basicConstraints=CA:FALSE needs no such switch)",
        { api_server: apiServer },
      );
      return await current.send(request, signal);
    },
  };
}
