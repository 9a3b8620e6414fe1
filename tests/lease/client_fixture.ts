/**
 * The scripted loopback server and helpers the lease client tests share: a
 * raw-socket HTTP/1.1 (or TLS) server that records the exact bytes it
 * receives and answers what each test scripts, and a way to run one test
 * once per transport: `fetch` (the default, over plain HTTP) and
 * `node:https` (what the server-name override uses: over TLS, with a test
 * CA and `--server-name`).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import * as net from "node:net";
import * as tls from "node:tls";
import {
  createHttpLeaseClient,
  type HttpLeaseClientOptions,
} from "../../lib/lease/client.ts";
import type { LeaseClient } from "../../lib/lease/rpc.ts";
import { makeTestPki, opensslMissing, type TestPki } from "../support/tls.ts";

// ---------------------------------------------------------------------------
// A scripted HTTP/1.1 server on raw sockets, so the test sees exact bytes.

/** One request as the scripted server received it. */
export interface Recorded {
  /** Everything up to and including the blank line, plus the body. */
  raw: string;
  method: string;
  path: string;
  /** Header lines as sent, name case preserved, in order. */
  headers: [string, string][];
  body: string;
  /** The TLS SNI the client sent (TLS server only). */
  sni?: string | false;
}

/** What the server answers: a status with body and headers, raw bytes, or nothing ever. */
export type Reply =
  | { status: number; body?: string; headers?: Record<string, string> }
  | { raw: string }
  | "hang";

/** A running scripted server; `await using` closes it and its sockets. */
export interface TestServer extends AsyncDisposable {
  url: string;
  port: number;
  requests: Recorded[];
  /** Resolves once `n` requests have been fully received. */
  received(n: number): Promise<void>;
}

/** The value of header `name` (any case) in `r`, or undefined. */
export function header(r: Recorded, name: string): string | undefined {
  return r.headers.find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
}

/**
 * Starts a scripted server on 127.0.0.1: plain, or TLS with `tlsOptions`
 * (by default, in a `node` test, TLS with the certificate of
 * {@linkcode NODE_NAME}). Every response closes its connection unless the
 * reply is raw bytes.
 */
export async function startServer(
  reply: (r: Recorded) => Reply,
  tlsOptions?: { cert: string; key: string },
): Promise<TestServer> {
  tlsOptions ??= await nodeTls();
  const requests: Recorded[] = [];
  const sockets = new Set<net.Socket>();
  const waiters: (() => void)[] = [];
  const onSocket = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    let buf = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buf.subarray(0, end).toString("latin1");
      const [requestLine, ...lines] = head.split("\r\n");
      const headers = lines.map((l): [string, string] => {
        const i = l.indexOf(":");
        return [l.slice(0, i), l.slice(i + 1).trim()];
      });
      const length = Number(
        headers.find(([k]) => k.toLowerCase() === "content-length")?.[1] ?? 0,
      );
      if (buf.length < end + 4 + length) return;
      const body = buf.subarray(end + 4, end + 4 + length).toString("utf8");
      const [method, path] = requestLine.split(" ");
      const rec: Recorded = {
        raw: buf.subarray(0, end + 4 + length).toString("utf8"),
        method,
        path,
        headers,
        body,
        // Typed in @types/node but not in Deno's node:tls declarations.
        sni: (socket as { servername?: string | false }).servername,
      };
      buf = Buffer.alloc(0);
      requests.push(rec);
      waiters.splice(0).forEach((w) => w());
      const r = reply(rec);
      if (r === "hang") return;
      if ("raw" in r) {
        // (An empty write before the end keeps Deno's TLS server from ending.)
        if (r.raw === "") socket.end();
        else socket.end(r.raw);
        return;
      }
      const bodyBytes = Buffer.from(r.body ?? "", "utf8");
      const extra = Object.entries(r.headers ?? {})
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join("");
      socket.end(
        Buffer.concat([
          Buffer.from(
            `HTTP/1.1 ${r.status} Scripted\r\nContent-Length: ${bodyBytes.length}\r\n${extra}Connection: close\r\n\r\n`,
            "latin1",
          ),
          bodyBytes,
        ]),
      );
    });
  };
  const server = tlsOptions
    ? tls.createServer(tlsOptions, onSocket)
    : net.createServer(onSocket);
  server.on("tlsClientError", () => {});
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `${tlsOptions ? "https" : "http"}://127.0.0.1:${port}`,
    port,
    requests,
    received(n) {
      if (requests.length >= n) return Promise.resolve();
      return new Promise((resolve) => {
        const check = () => {
          if (requests.length >= n) resolve();
          else waiters.push(check);
        };
        waiters.push(check);
      });
    },
    async [Symbol.asyncDispose]() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** The lease every test client is about. */
export const KEY = { namespace: "prod", name: "checkout" };
/** A holder identity shaped as in production. */
export const HOLDER = "east/prod:ReplicaSet:checkout-7f6c:pod:p1:uid:8c21b044";
/** The server's zero time. */
export const ZERO = "0001-01-01T00:00:00Z";
/** A signal that never aborts. */
export const never = () => new AbortController().signal;

/** The transports every socket-level test runs against. */
export const TRANSPORTS = ["fetch", "node"] as const;
/** One of {@linkcode TRANSPORTS}. */
export type TransportName = typeof TRANSPORTS[number];
let transport: TransportName = "fetch";

/** The transport the running test uses. */
export function currentTransport(): TransportName {
  return transport;
}

/** The name the `node` tests' server certificate carries and `--server-name` gives. */
export const NODE_NAME = "berth.test";

let pki: TestPki | undefined;
globalThis.addEventListener("unload", () => {
  if (pki) Deno.removeSync(pki.dir, { recursive: true });
});

/** The test CA and server certificate of the `node` tests, made once per process. */
export async function nodePki(): Promise<TestPki> {
  pki ??= await makeTestPki({ names: [NODE_NAME] });
  return pki;
}

/** In a `node` test, the TLS settings of its server; undefined in a `fetch` test. */
async function nodeTls(): Promise<{ cert: string; key: string } | undefined> {
  if (transport !== "node") return undefined;
  const p = await nodePki();
  return {
    cert: await Deno.readTextFile(p.serverCert),
    key: await Deno.readTextFile(p.serverKey),
  };
}

/**
 * A client for `url` on the running test's transport: in a `node` test,
 * with `--server-name` {@linkcode NODE_NAME} and the test CA (unless
 * `extra` names its own server name or skips verification).
 */
export function client(
  url: string,
  extra: Partial<HttpLeaseClientOptions> = {},
): LeaseClient {
  return createHttpLeaseClient({ apiServer: url, key: KEY, ...node(extra) });
}

/** `extra`, with the `node` test's server name and CA added when it names neither. */
export function node(
  extra: Partial<HttpLeaseClientOptions> = {},
): Partial<HttpLeaseClientOptions> {
  const viaNode = transport === "node" && extra.serverName === undefined &&
    !extra.insecureSkipTlsVerify;
  return viaNode
    ? { serverName: NODE_NAME, caBundleFile: pki!.caCert, ...extra }
    : extra;
}

/** `Deno.test` once per transport; the `node` one skipped without openssl. */
export function both(name: string, fn: () => Promise<void>, ignore = false) {
  for (const t of TRANSPORTS) {
    Deno.test({
      name: `[${t}] ${name}`,
      ignore: ignore || (t === "node" && opensslMissing() !== undefined),
      fn: async () => {
        transport = t;
        if (t === "node") await nodePki();
        try {
          await fn();
        } finally {
          transport = "fetch";
        }
      },
    });
  }
}

/**
 * A raw loopback server whose `answer` writes on each connection's socket
 * (TLS in a `node` test).
 */
export async function rawServer(
  answer: (socket: net.Socket, request: number) => void,
): Promise<{ url: string; connections: () => number } & AsyncDisposable> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const onSocket = (socket: net.Socket) => {
    connections++;
    sockets.add(socket);
    socket.on("error", () => {});
    let n = 0;
    socket.on("data", () => answer(socket, ++n));
  };
  const tlsOptions = await nodeTls();
  const server = tlsOptions
    ? tls.createServer(tlsOptions, onSocket)
    : net.createServer(onSocket);
  server.on("tlsClientError", () => {});
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `${tlsOptions ? "https" : "http"}://127.0.0.1:${port}`,
    connections: () => connections,
    async [Symbol.asyncDispose]() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A JSON reply with a trailing newline, as the real server writes it. */
export function json(status: number, value: unknown, headers = {}): Reply {
  return {
    status,
    body: JSON.stringify(value) + "\n",
    headers: { "Content-Type": "application/json", ...headers },
  };
}

/** An `acquired:true` body for {@linkcode HOLDER}. */
export const GRANT = {
  acquired: true,
  holder: HOLDER,
  fencingToken: 4,
  expiresAt: "2026-05-07T00:00:30.123456789Z",
  acquiredAt: "2026-05-07T00:00:00Z",
};

/** A server over TLS with `pki`'s certificate that grants every request. */
export async function startTlsGrantServer(
  pki: { serverCert: string; serverKey: string },
): Promise<TestServer> {
  return await startServer(() => json(200, GRANT), {
    cert: await Deno.readTextFile(pki.serverCert),
    key: await Deno.readTextFile(pki.serverKey),
  });
}
