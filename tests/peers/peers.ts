/**
 * What the peer tier runs against: the upstream Berth API server and the Go
 * helper, named by `BERTH_PEER_APISERVER` and `BERTH_PEER_HELPER`, next to
 * this project's development server and helper. Starts both servers with the
 * same API keys (the real one over HTTPS with a throw-away CA and a SQLite
 * store in a temporary directory), and backdates SQLite rows (real server)
 * or moves an injected clock (development server started in-process) so that
 * both servers' clean-up sweeps can be observed without waiting five minutes.
 *
 * @module
 */
import {
  startDevServer as startDevServerInProcess,
  systemClockMs,
} from "../../lib/devserver/server.ts";
import { spawnCli } from "../support/cli.ts";
import { makeTestPki, opensslMissing, type TestPki } from "../support/tls.ts";
import { waitFor } from "../support/wait.ts";
import { rawRequest, type RawTarget } from "./raw_http.ts";

/** The upstream API server binary, when the tier runs. */
export const PEER_APISERVER: string = Deno.env.get("BERTH_PEER_APISERVER") ??
  "";
/** The upstream Go helper binary, when the tier runs. */
export const PEER_HELPER: string = Deno.env.get("BERTH_PEER_HELPER") ?? "";

/** The tenant every sequence and configuration acts for, and its bearer token. */
export const TEAM = { keyId: "team", token: "team-token" } as const;
/** A second tenant, for the holder rule (403). */
export const OTHER = { keyId: "other", token: "other-token" } as const;

function executable(path: string): boolean {
  try {
    const info = Deno.statSync(path);
    return info.isFile && ((info.mode ?? 0) & 0o111) !== 0;
  } catch {
    return false;
  }
}

let skipReason: string | undefined | null = null;

/**
 * Why the peer tier cannot run here, or undefined when it can. The first call
 * that finds a reason prints it as one line; later calls stay silent.
 *
 * @returns The reason, or undefined.
 */
export function peerSkipReason(): string | undefined {
  if (skipReason !== null) return skipReason;
  if (PEER_APISERVER === "" || PEER_HELPER === "") {
    skipReason =
      "BERTH_PEER_APISERVER and BERTH_PEER_HELPER must name the upstream Berth apiserver and berth-acquire binaries (docs/peer-tests.md)";
  } else if (!executable(PEER_APISERVER)) {
    skipReason =
      `BERTH_PEER_APISERVER=${PEER_APISERVER} is not an executable file`;
  } else if (!executable(PEER_HELPER)) {
    skipReason = `BERTH_PEER_HELPER=${PEER_HELPER} is not an executable file`;
  } else {
    skipReason = opensslMissing() === undefined
      ? undefined
      : "the real API server serves HTTPS only and openssl is needed for its test certificate";
  }
  if (skipReason !== undefined) {
    console.log(`skipped: peer tier: ${skipReason}`);
  }
  return skipReason;
}

/** Whether the `sqlite3` command runs, for the clean-up sequences. */
export function sqlite3Runs(): boolean {
  try {
    return new Deno.Command("sqlite3", {
      args: ["-version"],
      stdout: "null",
      stderr: "null",
    }).outputSync().success;
  } catch {
    return false;
  }
}

/** A running server the tier talks to. */
export interface PeerServer extends AsyncDisposable {
  /** `real` or `dev`. */
  kind: "real" | "dev";
  /** How the raw client reaches it. */
  target: RawTarget;
  /** Its base URL (`https://...` for the real server). */
  url: string;
  /** The real server's SQLite file. */
  dbPath?: string;
  /** The real server's CA certificate file (for the helpers' `BERTH_CA_BUNDLE_FILE`). */
  caFile?: string;
  /** Its log so far (stderr). */
  log(): string;
  /**
   * Only for an in-process development server
   * ({@linkcode startDevServerWithClock}): moves its clock forward and runs
   * its clean-up sweep.
   *
   * @param ms How far to move the clock, in milliseconds.
   * @returns How many records the sweep turned into tombstones.
   */
  advanceAndSweep?(ms: number): number;
}

async function sha256Hex(text: string): Promise<string> {
  const d = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(text),
  );
  return new Uint8Array(d).toHex();
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

function collect(stream: ReadableStream<Uint8Array>): { text: string } {
  const out = { text: "" };
  (async () => {
    for await (const s of stream.pipeThrough(new TextDecoderStream())) {
      out.text += s;
    }
  })().catch(() => {});
  return out;
}

/**
 * Starts the upstream API server: HTTPS on a free loopback port, SQLite store
 * in `dir`, static keys for {@linkcode TEAM} and {@linkcode OTHER}, metrics off.
 *
 * @param dir A temporary directory for the keys, certificates and database.
 * @returns The running server; dispose to stop it.
 * @throws {Error} When it does not answer `/healthz` within 20 s.
 */
export async function startRealServer(dir: string): Promise<PeerServer> {
  const pki: TestPki = await makeTestPki({ names: ["127.0.0.1"] });
  const caCert = await Deno.readTextFile(pki.caCert);
  const caFile = `${dir}/ca.pem`;
  await Deno.writeTextFile(caFile, caCert);
  const keys = `${dir}/api-keys`;
  await Deno.writeTextFile(
    keys,
    `${TEAM.keyId}:${await sha256Hex(
      TEAM.token,
    )}\n${OTHER.keyId}:${await sha256Hex(OTHER.token)}\n`,
  );
  const dbPath = `${dir}/leases.db`;
  const port = freePort();
  const child = new Deno.Command(PEER_APISERVER, {
    args: [
      `--listen-addr=127.0.0.1:${port}`,
      "--metrics-addr=",
      `--tls-cert-file=${pki.serverCert}`,
      `--tls-key-file=${pki.serverKey}`,
      "--store-backend=sql",
      "--sql-driver=sqlite",
      `--sql-dsn=file:${dbPath}?_pragma=busy_timeout(5000)`,
      "--auth-mode=static-keys",
      `--api-keys-file=${keys}`,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  collect(child.stdout);
  const err = collect(child.stderr);
  const target = { hostname: "127.0.0.1", port, caCert };
  const server: PeerServer = {
    kind: "real",
    target,
    url: `https://127.0.0.1:${port}`,
    dbPath,
    caFile,
    log: () => err.text,
    async [Symbol.asyncDispose]() {
      try {
        child.kill("SIGTERM");
      } catch { /* exited */ }
      await child.status;
      await pki.cleanup();
    },
  };
  try {
    await waitFor(async () => {
      try {
        const r = await rawRequest(target, { method: "GET", path: "/healthz" });
        return r.status === 200;
      } catch {
        return false;
      }
    }, { timeoutMs: 20_000, what: "the upstream API server's /healthz" });
  } catch (e) {
    await server[Symbol.asyncDispose]();
    throw new Error(`${(e as Error).message}; its log:\n${err.text}`);
  }
  return server;
}

/**
 * Starts this project's development server through the CLI, with the same
 * keys as {@linkcode startRealServer}, over plain HTTP.
 *
 * @returns The running server; dispose to stop it.
 * @throws {Error} When it does not print its URL within 30 s.
 */
export async function startDevServer(): Promise<PeerServer> {
  const child = spawnCli([
    "dev-server",
    "--listen",
    "127.0.0.1:0",
    "--api-key",
    `${TEAM.keyId}:${await sha256Hex(TEAM.token)}`,
    "--api-key",
    `${OTHER.keyId}:${await sha256Hex(OTHER.token)}`,
  ], { env: { NO_COLOR: "1" } });
  const out = collect(child.stdout);
  const err = collect(child.stderr);
  const stop = async () => {
    try {
      child.kill("SIGTERM");
    } catch { /* exited */ }
    await child.status;
  };
  let url: string;
  try {
    url = await waitFor(
      () => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out.text)?.[1],
      { timeoutMs: 30_000, what: "the dev server's URL" },
    );
  } catch (e) {
    await stop();
    throw new Error(`${(e as Error).message}; its log:\n${err.text}`);
  }
  const port = Number(new URL(url).port);
  return {
    kind: "dev",
    target: { hostname: "127.0.0.1", port },
    url,
    log: () => err.text,
    [Symbol.asyncDispose]: stop,
  };
}

/**
 * Starts this project's development server in this process, with the same
 * keys as {@linkcode startRealServer}, over plain HTTP, on a clock that runs
 * with the system clock plus an offset the tier moves forward
 * ({@linkcode PeerServer.advanceAndSweep}). The cleaned-up sequences use it:
 * the 5 minutes after which the sweep cleans a record up cannot be waited
 * for, and the server process started by {@linkcode startDevServer} has no
 * way to move its clock. Each such sequence gets its own server, so moving
 * the clock touches no other sequence's leases.
 *
 * @returns The running server; dispose to stop it.
 */
export async function startDevServerWithClock(): Promise<PeerServer> {
  let offsetMs = 0;
  const server = await startDevServerInProcess({
    hostname: "127.0.0.1",
    port: 0,
    apiKeys: [
      `${TEAM.keyId}:${await sha256Hex(TEAM.token)}`,
      `${OTHER.keyId}:${await sha256Hex(OTHER.token)}`,
    ],
    now: () => systemClockMs() + offsetMs,
  });
  return {
    kind: "dev",
    target: { hostname: "127.0.0.1", port: server.port },
    url: server.url,
    log: () => "",
    advanceAndSweep: (ms) => {
      offsetMs += ms;
      return server.sweep();
    },
    [Symbol.asyncDispose]: () => server.close(),
  };
}

async function sqlite(dbPath: string, sql: string): Promise<string> {
  const out = await new Deno.Command("sqlite3", {
    args: ["-cmd", ".timeout 5000", dbPath, sql],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`sqlite3 failed: ${new TextDecoder().decode(out.stderr)}`);
  }
  return new TextDecoder().decode(out.stdout);
}

function quote(s: string): string {
  return `'${s.replaceAll("'", "''")}'`;
}

/**
 * Moves a lease's `renewed_at` (and `acquired_at`) back by `seconds`, so the
 * real server sees it expired that long ago. The server re-reads the row on
 * every request (no cache), so the next request and the next sweep see it.
 *
 * @param dbPath The SQLite file.
 * @param key The lease.
 * @param seconds How far back.
 */
export async function backdate(
  dbPath: string,
  key: { namespace: string; name: string },
  seconds: number,
): Promise<void> {
  const when = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-${
    Math.round(seconds)
  } seconds')`;
  await sqlite(
    dbPath,
    `UPDATE berth_leases SET renewed_at = ${when}, acquired_at = ${when} WHERE namespace = ${
      quote(key.namespace)
    } AND name = ${quote(key.name)};`,
  );
}

/**
 * Waits until the real server's sweep has turned every given lease into a
 * tombstone (holder cleared). The sweep runs every 30 s.
 *
 * @param dbPath The SQLite file.
 * @param keys The leases.
 * @param timeoutMs The failure bound.
 */
export async function waitSwept(
  dbPath: string,
  keys: { namespace: string; name: string }[],
  timeoutMs = 45_000,
): Promise<void> {
  const where = keys.map((k) =>
    `(namespace = ${quote(k.namespace)} AND name = ${quote(k.name)})`
  ).join(" OR ");
  await waitFor(async () =>
    (await sqlite(
      dbPath,
      `SELECT count(*) FROM berth_leases WHERE holder <> '' AND (${where});`,
    )).trim() === "0", {
    timeoutMs,
    intervalMs: 500,
    what: "the real server's clean-up sweep",
  });
}
