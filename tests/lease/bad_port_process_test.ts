/**
 * An API server on a port `fetch` refuses outright (the fetch standard's
 * "bad ports": 6000, 6665-6669, 10080, ...), which the Go helper talks to
 * like any other: the lease client learns the refusal from `fetch` on its
 * first request and sends that one and every later one through
 * `node:http` / `node:https`, directly (a proxy variable set for the
 * scheme is then said to be passed by, once). Against the development
 * server on such a port on 127.0.0.1, through the client and through the
 * real CLI; a test whose every candidate port is taken skips with the
 * reason printed.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type DevServer, startDevServer } from "../../lib/devserver/server.ts";
import type { HttpLeaseClientOptions } from "../../lib/lease/client.ts";
import { configFix } from "../../lib/lease/rpc.ts";
import { classifyError } from "../../lib/lease/errors.ts";
import { ListenError } from "../../lib/net/addr.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { runCli } from "../support/cli.ts";
import {
  leaseEnv,
  readStateFile,
  runtimeHolder,
  tempDir,
} from "../support/lease_env.ts";
import { makeTestPki, opensslMissing } from "../support/tls.ts";
import { proxyClients } from "../support/proxy_vars.ts";

const noOpenssl = opensslMissing();
/** Bounds a whole CLI run, so a wedged child fails the test instead of hanging it. */
const RUN_BOUND_MS = 60_000;
const KEY = { namespace: "prod", name: "web" };
const HOLDER = "prod/pod:web-0:uid:bad-port";
const never = () => new AbortController().signal;

/** Ports on the fetch standard's bad-port list, tried in turn (another test may hold one). */
const CANDIDATES = [6000, 6665, 6666, 6667, 6668, 6669, 10080];

/**
 * The development server on the first free candidate port, after checking
 * that this Deno's `fetch` refuses that port (else the test would prove
 * nothing); undefined, with the reason printed, when every one is taken.
 */
async function devServerOnBlockedPort(
  test: string,
  tls?: { certFile: string; keyFile: string },
): Promise<DevServer | undefined> {
  for (const port of CANDIDATES) {
    const refusal = await fetch(`http://127.0.0.1:${port}/`).then(
      () => undefined,
      (e) => classifyError(e).error,
    );
    assert.equal(refusal, "blocked-port", `fetch to port ${port}`);
    try {
      return await startDevServer({ port, tls });
    } catch (e) {
      if (
        e instanceof ListenError && e.cause instanceof Deno.errors.AddrInUse
      ) continue;
      throw e;
    }
  }
  console.log(
    `skipped: ${test}: every port tried (${
      CANDIDATES.join(", ")
    }) is taken on 127.0.0.1`,
  );
  return undefined;
}

/** A client built while exactly `vars` of the proxy variables are set. */
const clientWith = proxyClients(KEY);

/** A loopback listener standing in for a proxy: it counts who connects. */
function countingListener(): { url: string; connections: () => number } & {
  [Symbol.dispose](): void;
} {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let connections = 0;
  (async () => {
    for await (const conn of listener) {
      connections++;
      conn.close();
    }
  })().catch(() => {});
  return {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    connections: () => connections,
    [Symbol.dispose]: () => listener.close(),
  };
}

/** Acquires and renews twice through `options`' client; the log lines it wrote. */
async function acquireAndRenew(
  options: Partial<HttpLeaseClientOptions> & { apiServer: string },
  vars: Record<string, string> = {},
): Promise<string[]> {
  const lines: string[] = [];
  const logger = createLogger({
    format: "json",
    level: "DEBUG",
    write: (l) => lines.push(l),
  });
  const c = clientWith(vars, { ...options, logger });
  const acquired = await c.acquire(HOLDER, 30, never());
  assert.equal(acquired.kind, "acquired", JSON.stringify(acquired));
  if (acquired.kind !== "acquired") return lines;
  assert.equal(acquired.lease.holder, HOLDER);
  for (let i = 0; i < 2; i++) {
    const renewed = await c.renew(
      HOLDER,
      acquired.lease.fencingToken,
      30,
      never(),
    );
    assert.equal(renewed.kind, "acquired", JSON.stringify(renewed));
  }
  const released = await c.release(
    HOLDER,
    acquired.lease.fencingToken,
    never(),
  );
  assert.equal(released.kind, "released", JSON.stringify(released));
  return lines;
}

/** The messages of `lines` (JSON log lines) at `level`. */
function messages(lines: string[], level: string): string[] {
  return lines.map((l) => JSON.parse(l))
    .filter((r) => r.level === level)
    .map((r) => r.msg);
}

Deno.test("over http://, acquire, renew and release reach a server on a port fetch blocks, through node:http, handed over once", async () => {
  const name = "bad port over http://";
  await using server = await devServerOnBlockedPort(name);
  if (server === undefined) return;
  const lines = await acquireAndRenew({ apiServer: server.url });
  assert.equal(server.rpcCount("acquire"), 1);
  assert.equal(server.rpcCount("renew"), 2);
  assert.equal(server.rpcCount("release"), 1);
  assert.deepEqual(messages(lines, "WARN"), []);
  assert.equal(
    messages(lines, "DEBUG").filter((m) =>
      m ===
        `fetch refuses port ${server.port} (a bad port of the fetch standard); sending through node:http`
    ).length,
    1,
    lines.join(""),
  );
});

Deno.test({
  name:
    "over https:// with a private CA, acquire, renew and release reach a server on a port fetch blocks, through node:https",
  ignore: noOpenssl !== undefined,
  async fn() {
    await using pki = await makeTestPki({ names: ["127.0.0.1"] });
    await using server = await devServerOnBlockedPort("bad port over https", {
      certFile: pki.serverCert,
      keyFile: pki.serverKey,
    });
    if (server === undefined) return;
    const lines = await acquireAndRenew({
      apiServer: server.url,
      caBundleFile: pki.caCert,
    });
    assert.equal(server.rpcCount("renew"), 2);
    assert.deepEqual(messages(lines, "WARN"), []);
    assert.ok(
      messages(lines, "DEBUG").includes(
        `fetch refuses port ${server.port} (a bad port of the fetch standard); sending through node:https`,
      ),
      lines.join(""),
    );
    // The certificate is still verified: a CA that did not issue it is refused.
    const other = clientWith({}, {
      apiServer: server.url,
      caBundleFile: pki.otherCaCert,
    });
    const refused = await other.acquire(HOLDER, 30, never());
    assert.equal(refused.kind, "transport-error", JSON.stringify(refused));
    assert.match(
      refused.kind === "transport-error" ? refused.message : "",
      /the server certificate is not trusted/,
    );
  },
});

Deno.test({
  name:
    "with a proxy variable set, a port fetch blocks is reached directly, and a WARN says so once",
  async fn() {
    using proxy = countingListener();
    await using server = await devServerOnBlockedPort("bad port, proxy set");
    if (server === undefined) return;
    const lines = await acquireAndRenew({ apiServer: server.url }, {
      HTTP_PROXY: proxy.url,
    });
    assert.equal(server.rpcCount("renew"), 2);
    assert.equal(proxy.connections(), 0);
    assert.deepEqual(messages(lines, "WARN"), [
      `HTTP_PROXY names a proxy, but on port ${server.port}, which fetch refuses (node:http), the helper connects to the API server directly`,
    ]);

    if (noOpenssl !== undefined) return;
    await using pki = await makeTestPki({ names: ["127.0.0.1"] });
    await using tlsServer = await devServerOnBlockedPort(
      "bad port over https, proxy set",
      { certFile: pki.serverCert, keyFile: pki.serverKey },
    );
    if (tlsServer === undefined) return;
    const tlsLines = await acquireAndRenew({
      apiServer: tlsServer.url,
      caBundleFile: pki.caCert,
    }, { HTTPS_PROXY: proxy.url });
    assert.equal(proxy.connections(), 0);
    assert.deepEqual(messages(tlsLines, "WARN"), [
      `HTTPS_PROXY names a proxy, but on port ${tlsServer.port}, which fetch refuses (node:https), the helper connects to the API server directly`,
    ]);
  },
});

Deno.test("nothing listening on a port fetch blocks is a refused connection, worded as direct even with a proxy set, that may heal", async () => {
  // Port 1 (tcpmux) is on the list, and nothing listens on it here.
  const cases: Record<string, string>[] = [
    {},
    { HTTP_PROXY: "http://127.0.0.1:9" },
  ];
  for (const vars of cases) {
    const c = clientWith(vars, { apiServer: "http://127.0.0.1:1" });
    const out = await c.acquire(HOLDER, 30, never());
    assert.deepEqual(out, {
      kind: "transport-error",
      message:
        "http://127.0.0.1:1: connection refused; is the API server running and is --api-server / BERTH_API_SERVER right?",
    });
    assert.equal(configFix(out), undefined);
  }
});

Deno.test({
  name:
    "the CLI's acquire gets the lease from a server on a port fetch blocks, over http:// and over https:// with a CA bundle",
  async fn() {
    const cases: [string, string[], { certFile: string; keyFile: string }?][] =
      [["http", []]];
    await using pki = noOpenssl === undefined
      ? await makeTestPki({ names: ["127.0.0.1"] })
      : undefined;
    if (pki !== undefined) {
      cases.push([
        "https",
        ["--ca-bundle-file", pki.caCert],
        { certFile: pki.serverCert, keyFile: pki.serverKey },
      ]);
    }
    for (const [scheme, flags, tls] of cases) {
      await using server = await devServerOnBlockedPort(
        `the CLI over ${scheme}`,
        tls,
      );
      if (server === undefined) continue;
      await using dir = await tempDir();
      const r = await runCli(["acquire", ...flags], {
        env: leaseEnv({ apiServer: server.url, stateDir: dir.path }),
        signal: AbortSignal.timeout(RUN_BOUND_MS),
      });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /msg="lease acquired" .*fencing_token=1(\s|$)/);
      assert.doesNotMatch(r.stderr, /level=(WARN|ERROR)/);
      assert.equal(readStateFile(dir.path, "holder"), runtimeHolder());
      assert.equal(readStateFile(dir.path, "token"), "1");
      assert.equal(server.store.get("prod", "web")?.holder, runtimeHolder());
    }
  },
});
