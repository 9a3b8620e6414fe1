/**
 * HTTP/1.1 on one connection, as the stream transport speaks it: the request
 * as written on the wire, and one whole response read back (interim answers
 * skipped, chunked or sized or until-close bodies, the size bounds). It knows
 * nothing of connections, TLS or proxies (lib/lease/stream_transport.ts).
 *
 * @module
 */
import { headerRequestId, type RawResponse } from "./answer.ts";
import {
  decodeChunks,
  MAX_RESPONSE_BYTES,
  type TooLarge,
  type TransportError,
  type WireRequest,
} from "./transport.ts";
import type { Target } from "./wire.ts";
import type { HttpProxy } from "./proxy_env.ts";

/** The most header bytes read before the body: real answers send a few hundred. */
export const MAX_HEADER_BYTES = 16 * 1024;

/** What one exchange gives back. */
export type Answer = RawResponse | TransportError | TooLarge;

/** Thrown inside the exchange; `stale` when the kept connection gave nothing back. */
export class ExchangeError extends Error {
  /** `stale`: nothing at all came back on a kept connection. */
  constructor(message: string, readonly stale = false) {
    super(message);
  }
}

/**
 * The request as written on the wire: one POST with its length; undefined
 * when a header would break the framing (`fetch` refuses those too).
 */
export function requestText(
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
export class Reader {
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

/** The end of a message head. */
export const CRLF_CRLF = [13, 10, 13, 10];

/** The first index of `seq` in `bytes` from `from`, or -1. */
export function indexOf(
  bytes: Uint8Array,
  seq: number[],
  from = 0,
): number {
  outer: for (let i = from; i + seq.length <= bytes.length; i++) {
    for (let j = 0; j < seq.length; j++) {
      if (bytes[i + j] !== seq[j]) continue outer;
    }
    return i;
  }
  return -1;
}

/** Sends `bytes` and reads one whole response. */
export async function exchange(
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
