/**
 * A minimal HTTP/1.1 client that sends exactly the bytes it is given, so the
 * peer tier can put the same request on the wire to two servers: paths with
 * `//` or `/./` (which `fetch` would clean up), two `Authorization` headers,
 * odd spacing, bodies that are not JSON. Every request carries
 * `Connection: close` and the answer is read until the server closes.
 *
 * @module
 */

/** Where a server listens and how to reach it. */
export interface RawTarget {
  /** `127.0.0.1`. */
  hostname: string;
  /** The TCP port. */
  port: number;
  /** PEM CA certificate to trust for HTTPS; absent for plain HTTP. */
  caCert?: string;
}

/** One request, as it goes on the wire. */
export interface RawRequest {
  /** `POST`, `GET`, ... */
  method: string;
  /** The request target exactly as sent (not normalised). */
  path: string;
  /** Header lines in order; a name may repeat. `Host` is added unless `noHost`. */
  headers?: [string, string][];
  /** The body; `Content-Length` is added for it unless a header sets it. */
  body?: string;
  /** Send no `Host` header. */
  noHost?: boolean;
}

/** A parsed answer. */
export interface RawResponse {
  /** HTTP status. */
  status: number;
  /** Header names in lower case; repeated headers joined with `, `. */
  headers: Record<string, string>;
  /** The body, de-chunked, as text. */
  body: string;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * Sends one request and reads the answer.
 *
 * @param target The server.
 * @param req The request.
 * @param signal Bounds the whole exchange.
 * @returns The answer.
 * @throws {Error} When the connection fails or the answer is not HTTP/1.1.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const wire = requestBytes({ method: "GET", path: "/healthz" }, "127.0.0.1:1");
 * assert.match(new TextDecoder().decode(wire), /^GET \/healthz HTTP\/1\.1\r\n/);
 * ```
 */
export async function rawRequest(
  target: RawTarget,
  req: RawRequest,
  signal: AbortSignal = AbortSignal.timeout(10_000),
): Promise<RawResponse> {
  const conn = target.caCert
    ? await Deno.connectTls({
      hostname: target.hostname,
      port: target.port,
      caCerts: [target.caCert],
      alpnProtocols: ["http/1.1"],
    })
    : await Deno.connect({ hostname: target.hostname, port: target.port });
  const onAbort = () => {
    try {
      conn.close();
    } catch { /* already closed */ }
  };
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    const wire = requestBytes(req, `${target.hostname}:${target.port}`);
    let off = 0;
    while (off < wire.length) off += await conn.write(wire.subarray(off));
    const chunks: Uint8Array[] = [];
    const buf = new Uint8Array(16 * 1024);
    for (;;) {
      let n: number | null;
      try {
        n = await conn.read(buf);
      } catch (e) {
        if (signal.aborted) throw new Error("the answer did not come in time");
        // A TLS peer may close without close_notify; what arrived counts.
        if (chunks.length > 0) break;
        throw e;
      }
      if (n === null) break;
      chunks.push(buf.slice(0, n));
    }
    return parseResponse(concat(chunks));
  } finally {
    signal.removeEventListener("abort", onAbort);
    try {
      conn.close();
    } catch { /* already closed */ }
  }
}

/**
 * The bytes of `req` as sent to `host`.
 *
 * @param req The request.
 * @param host The `Host` header's value.
 * @returns The request head and body.
 */
export function requestBytes(req: RawRequest, host: string): Uint8Array {
  const body = enc.encode(req.body ?? "");
  const lines = [`${req.method} ${req.path} HTTP/1.1`];
  const headers = req.headers ?? [];
  if (!req.noHost) lines.push(`Host: ${host}`);
  for (const [k, v] of headers) lines.push(`${k}: ${v}`);
  const has = (name: string) => headers.some(([k]) => k.toLowerCase() === name);
  if (!has("content-length") && !has("transfer-encoding")) {
    if (req.body !== undefined || req.method === "POST") {
      lines.push(`Content-Length: ${body.length}`);
    }
  }
  lines.push("Connection: close");
  return concat([enc.encode(lines.join("\r\n") + "\r\n\r\n"), body]);
}

function parseResponse(bytes: Uint8Array): RawResponse {
  let end = -1;
  for (let i = 0; i + 3 < bytes.length; i++) {
    if (
      bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 &&
      bytes[i + 3] === 10
    ) {
      end = i;
      break;
    }
  }
  if (end < 0) {
    throw new Error(`not an HTTP answer: ${JSON.stringify(dec.decode(bytes))}`);
  }
  const [statusLine, ...headerLines] = dec.decode(bytes.subarray(0, end))
    .split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
  if (!m) throw new Error(`not an HTTP status line: ${statusLine}`);
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const at = line.indexOf(":");
    const name = line.slice(0, at).trim().toLowerCase();
    const value = line.slice(at + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  let body = bytes.subarray(end + 4);
  if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
    body = dechunk(body);
  }
  return { status: Number(m[1]), headers, body: dec.decode(body) };
}

function dechunk(b: Uint8Array): Uint8Array {
  const parts: Uint8Array[] = [];
  let off = 0;
  for (;;) {
    let eol = off;
    while (eol + 1 < b.length && !(b[eol] === 13 && b[eol + 1] === 10)) eol++;
    if (eol + 1 >= b.length) break;
    const size = parseInt(dec.decode(b.subarray(off, eol)), 16);
    if (!(size > 0)) break;
    parts.push(b.subarray(eol + 2, eol + 2 + size));
    off = eol + 2 + size + 2;
  }
  return concat(parts);
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
