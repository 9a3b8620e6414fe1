/**
 * The transport for an `https://` or `socks5://` proxy named by the
 * environment, which `fetch` can use and the default stream transport cannot:
 * Deno's own `fetch` with one `Deno.HttpClient` per
 * client, so the trust store is built once and the connection is kept alive
 * between renewals (a renewal then costs no handshake). A kept-alive
 * connection the server closed is retried once on a fresh one by the HTTP
 * stack; a retry that fails too is a transport error, and the caller's
 * signal bounds it all. Redirects are never followed: they are answers.
 *
 * @module
 */
import { headerRequestId, type RawResponse } from "./answer.ts";
import {
  decodeChunks,
  kindOfTlsError,
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
 */
export function createFetchTransport(
  target: Target,
  caCerts: string[] | undefined,
): Transport {
  const client = Deno.createHttpClient(caCerts ? { caCerts } : {});
  return {
    async send(request, signal) {
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
        return classify(e);
      }
      return await readBody(res);
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
  // body in one operation. Without one (chunked), count as it arrives.
  const declared = Number(res.headers.get("content-length") ?? NaN);
  if (declared >= 0 && declared <= MAX_RESPONSE_BYTES) {
    try {
      return answer(await res.text());
    } catch (e) {
      return classify(e);
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
      return classify(e);
    }
  }
  return answer(decodeChunks(chunks));
}

/**
 * The kind of a fetch error, from its cause's text.
 */
function classify(e: unknown): TransportError {
  const err = e as Error & { cause?: unknown };
  const detail = err.cause instanceof Error
    ? err.cause.message
    : String(err?.message ?? e);
  // The URL is named by the caller's message already.
  return {
    error: kindOfTlsError(detail),
    detail: detail.replace(/^error sending request for url \([^)]*\): /, ""),
  };
}
