/**
 * The default transport: HTTP/1.1 written over a `Deno.connect` socket, with
 * `Deno.startTls` verifying the URL's host or the server-name override (sent
 * as SNI too) while the socket goes to the URL's host. `fetch` cannot verify
 * a name other than the URL's, and `node:https` costs about 14 ms and 10 MiB
 * to load in every process that uses it; this needs neither, costs less CPU
 * per renewal than `fetch`, and keeps a long-running sidecar's memory flat
 * where `fetch`'s grows (see docs/benchmarks.md). Over an
 * `http:` target it speaks plain HTTP/1.1 on the socket. Through a proxy
 * (`options.proxy`) it opens a `CONNECT` tunnel for an `https:` target and
 * shakes hands inside it, and sends absolute-form requests for an `http:` one.
 *
 * One connection is kept between requests. A request on a kept connection
 * that the server had closed (nothing at all comes back) is sent once more
 * on a fresh one, as HTTP stacks do; anything else that goes wrong is a
 * transport error. The caller's signal bounds it all: an abort closes the
 * socket, which ends any read or write in flight. An idle kept connection
 * has no read pending, so it never keeps the process alive.
 *
 * @module
 */
import {
  CRLF_CRLF,
  exchange,
  ExchangeError,
  indexOf,
  MAX_HEADER_BYTES,
  Reader,
  requestText,
} from "./http1.ts";
import {
  kindOfTlsError,
  type Transport,
  type TransportError,
} from "./transport.ts";
import type { Target } from "./wire.ts";
import type { HttpProxy } from "./proxy_env.ts";

/** The TLS settings of a stream transport. */
export interface StreamTlsOptions {
  /** PEM certificates trusted in addition to the root stores (lib/lease/tls_trust.ts). */
  caCerts?: string[];
  /** The name sent as SNI and verified on the certificate; default the URL's host. */
  serverName?: string;
  /**
   * An HTTP proxy to go through (from the environment, see proxy_env.ts): a
   * `CONNECT` tunnel for an `https:` server, absolute-form requests for an
   * `http:` one.
   */
  proxy?: HttpProxy;
}

/** What a request the caller's signal ended resolves to (the caller names it). */
const ABORTED: TransportError = { error: "other", detail: "aborted" };

/** A failure on the way through the proxy, worded for it (never a server's "refused"). */
class ProxyError extends Error {}

/**
 * A {@linkcode Transport} speaking HTTP/1.1 on a socket of its own.
 *
 * @param target The API server.
 * @param options TLS settings, used only for an `https:` target.
 * @returns The transport; it opens its connection on the first request.
 */
export function createStreamTransport(
  target: Target,
  options: StreamTlsOptions,
): Transport {
  let kept: Deno.Conn | undefined;
  /** Connects (and shakes hands); `using` hears of each socket as it is made, so an abort can close it. */
  const proxy = options.proxy;
  const open = async (
    using: (c: Deno.Conn) => void,
    signal: AbortSignal,
  ): Promise<Deno.Conn> => {
    let tcp: Deno.TcpConn;
    try {
      // The signal cancels a connect still in progress (a server behind a
      // firewall that drops packets), so no half-open socket is left behind.
      tcp = await Deno.connect({
        hostname: proxy?.hostname ?? target.hostname,
        port: proxy?.port ?? target.port,
        signal,
      });
    } catch (e) {
      if (proxy === undefined) throw e;
      throw new ProxyError(
        `cannot connect to the proxy ${proxy.label}: ${(e as Error).message}`,
      );
    }
    using(tcp);
    // One write per request: no reason to wait for an ACK before sending.
    tcp.setNoDelay(true);
    if (!target.secure) return tcp;
    if (proxy !== undefined) await tunnel(tcp, target, proxy);
    // startTls takes the socket over: from here on the TLS side closes it.
    const tls = await Deno.startTls(tcp, {
      hostname: options.serverName ?? target.hostname,
      caCerts: options.caCerts,
    });
    using(tls);
    await tls.handshake();
    return tls;
  };
  return {
    async send(request, signal) {
      const text = requestText(target, request, proxy);
      if (text === undefined) {
        return {
          error: "other",
          detail: "a request header has a line break in its name or value",
        };
      }
      const bytes = new TextEncoder().encode(text);
      for (let attempt = 1;; attempt++) {
        if (signal.aborted) return ABORTED;
        const reused = kept !== undefined;
        let conn = kept;
        kept = undefined;
        // An abort closes the socket of the moment, which ends what waits on it.
        let rejectAbort: (e: Error) => void = () => {};
        const abortion = new Promise<never>((_, reject) => {
          rejectAbort = reject;
        });
        abortion.catch(() => {});
        const onAbort = () => {
          if (conn) closeQuietly(conn);
          rejectAbort(new Error("aborted"));
        };
        signal.addEventListener("abort", onAbort, { once: true });
        try {
          if (conn === undefined) {
            const opening = open((c) => {
              conn = c;
              if (signal.aborted) closeQuietly(c);
            }, signal);
            try {
              conn = await Promise.race([opening, abortion]);
            } catch (e) {
              // A connect still pending at the abort: close it when it lands.
              opening.then(closeQuietly, () => {});
              if (conn) closeQuietly(conn);
              return signal.aborted ? ABORTED : classify(e);
            }
          }
          const c = conn;
          const { answer, keepAlive } = await Promise.race([
            exchange(c, bytes),
            abortion,
          ]);
          // A 408 on a kept connection was written while it sat idle, before
          // this request: the server dropped the connection, not the request.
          if (
            reused && attempt === 1 && "status" in answer &&
            answer.status === 408
          ) {
            closeQuietly(c);
            continue;
          }
          // One kept connection: a second call that ran alongside closes its own.
          if (keepAlive && !signal.aborted && kept === undefined) kept = c;
          else closeQuietly(c);
          return answer;
        } catch (e) {
          if (conn) closeQuietly(conn);
          if (signal.aborted) return ABORTED;
          if (
            reused && attempt === 1 && e instanceof ExchangeError && e.stale
          ) {
            continue;
          }
          return classify(e);
        } finally {
          signal.removeEventListener("abort", onAbort);
        }
      }
    },
  };
}

/**
 * Asks the proxy for a tunnel to the server (`CONNECT host:port`) and reads
 * its answer; throws a {@linkcode ProxyError} unless it is a 2xx. Only the
 * status code of a refusal is quoted: the rest is the proxy's to say.
 */
async function tunnel(
  conn: Deno.Conn,
  target: Target,
  proxy: HttpProxy,
): Promise<void> {
  const authority = target.hostname.includes(":")
    ? `[${target.hostname}]:${target.port}`
    : `${target.hostname}:${target.port}`;
  const lines = [`CONNECT ${authority} HTTP/1.1`, `Host: ${authority}`];
  if (proxy.authorization !== undefined) {
    lines.push(`Proxy-Authorization: ${proxy.authorization}`);
  }
  const bytes = new TextEncoder().encode(`${lines.join("\r\n")}\r\n\r\n`);
  const r = new Reader(conn);
  let end: number;
  try {
    for (let off = 0; off < bytes.length;) {
      off += await conn.write(bytes.subarray(off));
    }
    for (;;) {
      end = indexOf(r.bytes, CRLF_CRLF);
      if (end >= 0) break;
      if (r.bytes.length > MAX_HEADER_BYTES || !await r.more()) {
        throw new Error("it closed the connection or sent no answer");
      }
    }
  } catch (e) {
    throw new ProxyError(
      `the proxy ${proxy.label} did not open a tunnel to ${authority}: ${
        (e as Error).message
      }`,
    );
  }
  const statusLine = new TextDecoder().decode(
    r.bytes.subarray(0, r.bytes.indexOf(13)),
  );
  const status = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(statusLine)?.[1];
  if (status === undefined || !status.startsWith("2")) {
    const hint = status !== "407"
      ? ""
      : proxy.authorization === undefined
      ? "; it wants credentials: put them in the proxy URL (http://user:password@host:port)"
      : "; it refused the credentials in the proxy URL";
    throw new ProxyError(
      `the proxy ${proxy.label} refused a tunnel to ${authority} (${
        status === undefined ? "no HTTP status" : `status ${status}`
      })${hint}`,
    );
  }
  if (r.bytes.length > end + 4) {
    throw new ProxyError(
      `the proxy ${proxy.label} sent data after opening the tunnel to ${authority}`,
    );
  }
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch { /* closed already */ }
}

function classify(e: unknown): TransportError {
  const detail = e instanceof Error ? e.message : String(e);
  if (e instanceof ProxyError) return { error: "other", detail };
  return { error: kindOfTlsError(detail), detail };
}
