/**
 * The default transport: HTTP/1.1 written over a `Deno.connect` socket, with
 * `Deno.startTls` verifying the URL's host or the server-name override (sent
 * as SNI too) while the socket goes to the URL's host. `fetch` cannot verify
 * a name other than the URL's, and `node:https` costs about 14 ms and 10 MiB
 * to load in every process that uses it; this needs neither, costs less CPU
 * per renewal than `fetch`, and keeps a long-running sidecar's memory flat
 * where `fetch`'s grows (see the README's Benchmarks). Over an
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
import { headerRequestId, type RawResponse } from "./answer.ts";
import {
  decodeChunks,
  kindOfTlsError,
  MAX_RESPONSE_BYTES,
  type TooLarge,
  type Transport,
  type TransportError,
  type WireRequest,
} from "./transport.ts";
import type { Target } from "./wire.ts";
import type { HttpProxy } from "./proxy_env.ts";

/** The TLS settings of a stream transport. */
export interface StreamTlsOptions {
  /** PEM certificates trusted in addition to the built-in roots. */
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

/** The most header bytes read before the body: real answers send a few hundred. */
export const MAX_HEADER_BYTES = 16 * 1024;

type Answer = RawResponse | TransportError | TooLarge;

/** What a request the caller's signal ended resolves to (the caller names it). */
const ABORTED: TransportError = { error: "other", detail: "aborted" };

/** A failure on the way through the proxy, worded for it (never a server's "refused"). */
class ProxyError extends Error {}

/** Thrown inside the exchange; `stale` when the kept connection gave nothing back. */
class ExchangeError extends Error {
  constructor(message: string, readonly stale = false) {
    super(message);
  }
}

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
 * The request as written on the wire: one POST with its length; undefined
 * when a header would break the framing (`fetch` refuses those too).
 */
function requestText(
  target: Target,
  request: WireRequest,
  proxy?: HttpProxy,
): string | undefined {
  // The URL's host, as fetch sends it (no port when it is the default).
  const host = new URL(target.origin).host;
  // A proxy that forwards plain HTTP is sent the whole URL (absolute form).
  const forward = proxy !== undefined && !target.secure;
  const uri = forward ? `${target.origin}${request.path}` : request.path;
  const lines = [`POST ${uri} HTTP/1.1`, `Host: ${host}`];
  if (forward && proxy.authorization !== undefined) {
    lines.push(`Proxy-Authorization: ${proxy.authorization}`);
  }
  for (const [name, value] of Object.entries(request.headers)) {
    if (/^(host|content-length|connection|transfer-encoding)$/i.test(name)) {
      continue;
    }
    if (/[\r\n]/.test(name + value)) return undefined;
    lines.push(`${name}: ${value}`);
  }
  const length = new TextEncoder().encode(request.body).length;
  lines.push(`Content-Length: ${length}`, "", request.body);
  return lines.join("\r\n");
}

/** Reads from `conn` into a growing buffer. */
class Reader {
  #buf = new Uint8Array(4096);
  #len = 0;
  #received = 0;
  constructor(readonly conn: Deno.Conn) {}

  /** Bytes received so far on this exchange. */
  get received(): number {
    return this.#received;
  }

  /** Reads more; false at EOF. */
  async more(): Promise<boolean> {
    if (this.#len === this.#buf.length) {
      const bigger = new Uint8Array(this.#buf.length * 2);
      bigger.set(this.#buf.subarray(0, this.#len));
      this.#buf = bigger;
    }
    const n = await this.conn.read(this.#buf.subarray(this.#len));
    if (n === null) return false;
    this.#len += n;
    this.#received += n;
    return true;
  }

  /** The buffered bytes. */
  get bytes(): Uint8Array {
    return this.#buf.subarray(0, this.#len);
  }

  /** Drops the first `n` buffered bytes. */
  consume(n: number): void {
    this.#buf.copyWithin(0, n, this.#len);
    this.#len -= n;
  }
}

const CRLF_CRLF = [13, 10, 13, 10];

function indexOf(bytes: Uint8Array, seq: number[], from = 0): number {
  outer: for (let i = from; i + seq.length <= bytes.length; i++) {
    for (let j = 0; j < seq.length; j++) {
      if (bytes[i + j] !== seq[j]) continue outer;
    }
    return i;
  }
  return -1;
}

/** Sends `bytes` and reads one whole response. */
async function exchange(
  conn: Deno.Conn,
  bytes: Uint8Array,
): Promise<{ answer: Answer; keepAlive: boolean }> {
  const r = new Reader(conn);
  try {
    for (let off = 0; off < bytes.length;) {
      off += await conn.write(bytes.subarray(off));
    }
  } catch (e) {
    throw new ExchangeError((e as Error).message, true);
  }
  let end: number;
  for (;;) {
    end = indexOf(r.bytes, CRLF_CRLF);
    // An interim answer (100 Continue, 103 Early Hints) precedes the real
    // one, as fetch also reads past it; 101 is no interim answer.
    if (
      end >= 0 &&
      /^HTTP\/1\.[01] 1(?:0[02-9]|[1-9]\d)(?: |\r)/.test(
        new TextDecoder().decode(r.bytes.subarray(0, 16)),
      )
    ) {
      r.consume(end + 4);
      continue;
    }
    if (end >= 0) break;
    if (r.bytes.length > MAX_HEADER_BYTES) {
      throw new ExchangeError(
        `the response headers exceed ${MAX_HEADER_BYTES / 1024} KiB`,
      );
    }
    let got: boolean;
    try {
      got = await r.more();
    } catch (e) {
      throw new ExchangeError((e as Error).message, r.received === 0);
    }
    if (!got) {
      throw new ExchangeError(
        "connection closed before the response was complete",
        r.received === 0,
      );
    }
  }
  const head = new TextDecoder().decode(r.bytes.subarray(0, end));
  r.consume(end + 4);
  const [statusLine, ...headerLines] = head.split("\r\n");
  const m = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(statusLine);
  if (!m) {
    throw new ExchangeError(
      `the server did not answer in HTTP/1.x (status line ${
        JSON.stringify(statusLine.slice(0, 40))
      })`,
    );
  }
  const status = Number(m[2]);
  const headers = new Map<string, string>();
  for (const line of headerLines) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers.set(
      name,
      headers.has(name) ? `${headers.get(name)}, ${value}` : value,
    );
  }
  const requestId = headerRequestId(headers.get("x-request-id") ?? null);
  // Nothing was asked for compressed; a body that is would read as junk.
  const encoding = (headers.get("content-encoding") ?? "identity").trim();
  if (!/^identity$/i.test(encoding) && encoding !== "") {
    throw new ExchangeError(
      `the answer is compressed (Content-Encoding ${
        JSON.stringify(encoding.slice(0, 40))
      }), which this client does not ask for; a server or a proxy on the way compressed it unasked`,
    );
  }
  let keepAlive = m[1] === "1" &&
    !/(^|,)\s*close\s*(,|$)/i.test(headers.get("connection") ?? "");
  const body = await readBody(r, status, headers);
  if (body === "too-large") {
    return { answer: { tooLarge: status, requestId }, keepAlive: false };
  }
  if (body.untilClose || r.bytes.length > 0) keepAlive = false;
  return {
    answer: {
      status,
      body: decodeChunks(body.chunks),
      requestId,
      location: headers.get("location"),
    },
    keepAlive,
  };
}

/** The body by its framing: chunked, a declared length, none, or until close. */
async function readBody(
  r: Reader,
  status: number,
  headers: Map<string, string>,
): Promise<{ chunks: Uint8Array[]; untilClose: boolean } | "too-large"> {
  const fill = async (n: number) => {
    while (r.bytes.length < n) {
      if (!await r.more()) {
        throw new ExchangeError(
          "connection closed before the response was complete",
        );
      }
    }
  };
  if (status === 204 || status === 304 || (status >= 100 && status < 200)) {
    return { chunks: [], untilClose: false };
  }
  if (/chunked/i.test(headers.get("transfer-encoding") ?? "")) {
    const parts: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      let eol: number;
      while ((eol = indexOf(r.bytes, [13, 10])) < 0) {
        if (r.bytes.length > 1024) {
          throw new ExchangeError("bad chunk size line");
        }
        await fill(r.bytes.length + 1);
      }
      const sizeText = new TextDecoder().decode(r.bytes.subarray(0, eol));
      const n = parseInt(sizeText.split(";")[0].trim(), 16);
      if (!Number.isFinite(n) || n < 0) {
        throw new ExchangeError(`bad chunk size ${JSON.stringify(sizeText)}`);
      }
      r.consume(eol + 2);
      if (n === 0) {
        // Trailers, if any, up to the empty line.
        for (;;) {
          while ((eol = indexOf(r.bytes, [13, 10])) < 0) {
            if (r.bytes.length > MAX_HEADER_BYTES) {
              throw new ExchangeError("the response trailers are too large");
            }
            await fill(r.bytes.length + 1);
          }
          r.consume(eol + 2);
          if (eol === 0) break;
        }
        return { chunks: parts, untilClose: false };
      }
      size += n;
      if (size > MAX_RESPONSE_BYTES) return "too-large";
      await fill(n + 2);
      parts.push(r.bytes.slice(0, n));
      r.consume(n + 2);
    }
  }
  // Repeated identical values ("2, 2") are one length (RFC 9110, 8.6).
  const lengths = headers.get("content-length")?.split(",").map((v) =>
    v.trim()
  );
  const declared = lengths?.every((v) => v === lengths[0])
    ? lengths[0]
    : headers.get("content-length");
  if (declared !== undefined) {
    if (!/^\d+$/.test(declared)) {
      throw new ExchangeError(`bad Content-Length ${JSON.stringify(declared)}`);
    }
    const n = Number(declared);
    if (n > MAX_RESPONSE_BYTES) return "too-large";
    await fill(n);
    const bytes = r.bytes.slice(0, n);
    r.consume(n);
    return { chunks: [bytes], untilClose: false };
  }
  while (await r.more()) {
    if (r.bytes.length > MAX_RESPONSE_BYTES) return "too-large";
  }
  return { chunks: [r.bytes.slice()], untilClose: true };
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
