/**
 * The transport of the common path: Deno's own `fetch` with one
 * `Deno.HttpClient` per client, so the trust store (the root stores plus the
 * CA bundle) is built once and the connection is kept alive between renewals
 * (a renewal then costs no handshake). Deno reads the proxy variables
 * (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, lower case too)
 * itself, when the client is built: http, https and socks5 proxies, with
 * the credentials of the proxy URL. A kept-alive connection the server
 * closed is retried on a fresh one by the HTTP stack; a 408 the server left
 * on it while it sat idle (which the stack takes for the answer) is retried
 * here, once; anything else that fails is a transport error, and the
 * caller's signal bounds it all.
 * Redirects are never followed: they are answers. At most
 * {@linkcode MAX_RESPONSE_BYTES} of a body is read.
 *
 * @module
 */
import { headerRequestId, type RawResponse } from "./answer.ts";
import {
  classifyError,
  decodeChunks,
  MAX_RESPONSE_BYTES,
  type TooLarge,
  type Transport,
  type TransportError,
} from "./transport.ts";
import type { Target } from "./wire.ts";

/**
 * A {@linkcode Transport} over `fetch`.
 *
 * @param target The API server.
 * @param caCerts PEM certificates trusted in addition to the root stores (lib/lease/tls_trust.ts).
 * @returns The transport; its HTTP client (and the proxy it chose) is built now.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseApiServer } from "./wire.ts";
 * const transport = createFetchTransport(parseApiServer("http://127.0.0.1:1"), undefined);
 * assert.equal(typeof transport.send, "function");
 * ```
 */
export function createFetchTransport(
  target: Target,
  caCerts: string[] | undefined,
): Transport {
  const client = Deno.createHttpClient(caCerts ? { caCerts } : {});
  return {
    async send(request, signal) {
      for (let attempt = 1;; attempt++) {
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
        // A 408 says the server never took the request (RFC 9110, 15.5.9):
        // written on a kept connection as it timed it out, it comes back as
        // the answer to the next request. The connection is closed with it,
        // so the retry goes on a fresh one.
        if (res.status === 408 && attempt === 1) {
          await res.body?.cancel().catch(() => {});
          continue;
        }
        return await readBody(res);
      }
    },
  };
}

/** Reads at most the cap; a longer body is cancelled unread. */
async function readBody(
  res: Response,
): Promise<RawResponse | TransportError | TooLarge> {
  const requestId = headerRequestId(res.headers.get("x-request-id"));
  const answer = (body: string): RawResponse => ({
    status: res.status,
    body,
    requestId,
    location: res.headers.get("location") ?? undefined,
  });
  // A declared length within the cap is all the HTTP stack reads: take the
  // body in one operation. Without one (chunked), or compressed (fetch
  // decodes it, to any size), count as it arrives.
  const declared = Number(res.headers.get("content-length") ?? NaN);
  if (
    declared >= 0 && declared <= MAX_RESPONSE_BYTES &&
    !res.headers.has("content-encoding")
  ) {
    try {
      return answer(await res.text());
    } catch (e) {
      return classifyError(e);
    }
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (res.body !== null) {
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.length;
        if (size > MAX_RESPONSE_BYTES) {
          await reader.cancel().catch(() => {});
          return { tooLarge: res.status, requestId };
        }
        chunks.push(value);
      }
    } catch (e) {
      return classifyError(e);
    }
  }
  return answer(decodeChunks(chunks));
}
