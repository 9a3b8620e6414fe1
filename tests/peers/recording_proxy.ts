/**
 * A loopback HTTP server that records every request it gets (method, path,
 * headers, body bytes) and forwards it to a Berth server, so the peer tier
 * can compare what two helpers put on the wire byte for byte while both talk
 * to a real server.
 *
 * @module
 */

/** One request as the proxy received it. */
export interface RecordedRequest {
  /** `POST`, ... */
  method: string;
  /** Path and query as received (percent-encoding kept). */
  path: string;
  /** Header names in lower case. */
  headers: Record<string, string>;
  /** The body's bytes. */
  body: Uint8Array<ArrayBuffer>;
  /** The upstream's status, once answered (0 when forwarding failed). */
  status?: number;
  /** The upstream's body text, once answered. */
  answer?: string;
  /** When it arrived (ms since the epoch). */
  at: number;
  /** When the upstream's answer came back (ms since the epoch). */
  answeredAt?: number;
}

/** A running proxy. */
export interface RecordingProxy extends AsyncDisposable {
  /** `http://127.0.0.1:<port>`, for `BERTH_API_SERVER`. */
  url: string;
  /** Every request so far, in arrival order. */
  requests: RecordedRequest[];
}

/**
 * Starts a recording proxy in front of `upstream`.
 *
 * @param upstream The server's base URL (`https://...` or `http://...`).
 * @param caCert PEM CA certificate to trust for an HTTPS upstream.
 * @returns The proxy; dispose to stop it.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * await using proxy = await startRecordingProxy("http://127.0.0.1:9");
 * assert.match(proxy.url, /^http:\/\/127\.0\.0\.1:\d+$/);
 * ```
 */
export function startRecordingProxy(
  upstream: string,
  caCert?: string,
): Promise<RecordingProxy> {
  const client = Deno.createHttpClient(caCert ? { caCerts: [caCert] } : {});
  const requests: RecordedRequest[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      const u = new URL(req.url);
      const rec: RecordedRequest = {
        method: req.method,
        path: u.pathname + u.search,
        headers: Object.fromEntries(req.headers),
        body: new Uint8Array(await req.arrayBuffer()),
        at: Date.now(),
      };
      requests.push(rec);
      const headers = new Headers(req.headers);
      headers.delete("host");
      headers.delete("content-length");
      try {
        const res = await fetch(upstream + rec.path, {
          method: req.method,
          headers,
          body: req.method === "GET" || req.method === "HEAD"
            ? undefined
            : rec.body,
          client,
          signal: AbortSignal.timeout(10_000),
        });
        const text = await res.text();
        rec.status = res.status;
        rec.answer = text;
        rec.answeredAt = Date.now();
        return new Response(res.status === 204 ? null : text, {
          status: res.status,
          headers: res.headers,
        });
      } catch (e) {
        rec.status = 0;
        return new Response(
          JSON.stringify({ error: `proxy: ${(e as Error).message}` }),
          { status: 502 },
        );
      }
    },
  );
  return Promise.resolve({
    url: `http://127.0.0.1:${server.addr.port}`,
    requests,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
      client.close();
    },
  });
}
