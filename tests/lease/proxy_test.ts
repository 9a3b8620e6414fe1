/**
 * The API server behind an HTTP proxy named by the environment: the stream
 * transport (server-name override) goes through the same proxy as `fetch`,
 * by the same rules, with the proxy's credentials and failures said in words
 * that name the proxy and never its password; the node transport warns that
 * it goes direct.
 */
import assert from "node:assert/strict";
import { createHttpLeaseClient } from "../../lib/lease/client.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { makeTestPki, opensslMissing } from "../support/tls.ts";
import {
  GRANT,
  HOLDER,
  KEY,
  never,
  startTlsGrantServer,
} from "./client_fixture.ts";

const noOpenssl = opensslMissing();

/** What the test proxy saw of one client connection. */
interface Seen {
  requestLine: string;
  headers: Map<string, string>;
}

interface TestProxy extends AsyncDisposable {
  port: number;
  seen: Seen[];
}

/**
 * A loopback proxy: `CONNECT` opens a tunnel (unless `refuse` names a
 * status); any other request is answered by the proxy itself with a grant,
 * as a forwarding proxy would relay the server's.
 */
function startProxy(refuse?: number): TestProxy {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const seen: Seen[] = [];
  const open = new Set<Deno.Conn>();
  const serve = async (conn: Deno.Conn) => {
    open.add(conn);
    let buf = new Uint8Array(0);
    const chunk = new Uint8Array(4096);
    let end = -1;
    while (end < 0) {
      const n = await conn.read(chunk).catch(() => null);
      if (n === null) return;
      const next = new Uint8Array(buf.length + n);
      next.set(buf);
      next.set(chunk.subarray(0, n), buf.length);
      buf = next;
      end = new TextDecoder().decode(buf).indexOf("\r\n\r\n");
    }
    const [requestLine, ...lines] = new TextDecoder().decode(
      buf.subarray(0, end),
    ).split("\r\n");
    const headers = new Map(lines.map((l) => {
      const i = l.indexOf(":");
      return [l.slice(0, i).toLowerCase(), l.slice(i + 1).trim()];
    }));
    seen.push({ requestLine, headers });
    const write = (s: string) => conn.write(new TextEncoder().encode(s));
    const [method, target] = requestLine.split(" ");
    if (refuse !== undefined) {
      await write(`HTTP/1.1 ${refuse} No\r\nContent-Length: 0\r\n\r\n`);
      conn.close();
      return;
    }
    if (method !== "CONNECT") {
      const body = JSON.stringify(GRANT);
      await write(
        `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
      conn.close();
      return;
    }
    const [hostname, port] = target.split(":");
    const up = await Deno.connect({ hostname, port: Number(port) });
    open.add(up);
    await write("HTTP/1.1 200 Connection established\r\n\r\n");
    await Promise.all([
      conn.readable.pipeTo(up.writable).catch(() => {}),
      up.readable.pipeTo(conn.writable).catch(() => {}),
    ]);
  };
  const accepting = (async () => {
    for await (const conn of listener) serve(conn).catch(() => {});
  })();
  return {
    port: (listener.addr as Deno.NetAddr).port,
    seen,
    async [Symbol.asyncDispose]() {
      listener.close();
      for (const c of open) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await accepting.catch(() => {});
    },
  };
}

/** What {@linkcode proxiedTest} gives each test. */
interface Proxied {
  pki: Awaited<ReturnType<typeof makeTestPki>>;
  srv: Awaited<ReturnType<typeof startTlsGrantServer>>;
  proxy: TestProxy;
}

/**
 * A test against an HTTPS grant server whose certificate (from a test CA)
 * names `setup.names`, with a loopback proxy (refusing CONNECT with
 * `setup.refuse` when given); skipped without openssl.
 */
function proxiedTest(
  name: string,
  setup: { names: string[]; refuse?: number },
  fn: (t: Proxied) => Promise<void>,
): void {
  const { names, refuse } = setup;
  Deno.test({
    name,
    ignore: noOpenssl !== undefined,
    fn: async () => {
      await using pki = await makeTestPki({ names });
      await using srv = await startTlsGrantServer(pki);
      await using proxy = startProxy(refuse);
      await fn({ pki, srv, proxy });
    },
  });
}

function envOf(vars: Record<string, string>) {
  return (name: string) => vars[name];
}

/** A client with the server-name override (the stream transport) for `srv`. */
function overrideClient(
  srv: { url: string },
  pki: { caCert: string },
  vars: Record<string, string>,
) {
  return createHttpLeaseClient({
    apiServer: srv.url,
    key: KEY,
    caBundleFile: pki.caCert,
    serverName: "berth.test",
    env: envOf(vars),
  });
}

proxiedTest(
  "the server-name override goes through HTTPS_PROXY with a CONNECT tunnel, credentials in Proxy-Authorization",
  { names: ["berth.test"] },
  async ({ pki, srv, proxy }) => {
    const c = overrideClient(srv, pki, {
      HTTPS_PROXY: `http://ops:s%3Acret@127.0.0.1:${proxy.port}`,
    });
    const out = await c.acquire(HOLDER, 10, never());
    assert.equal(out.kind, "acquired", JSON.stringify(out));
    assert.equal(srv.requests[0].sni, "berth.test");
    assert.equal(proxy.seen.length, 1);
    assert.equal(
      proxy.seen[0].requestLine,
      `CONNECT 127.0.0.1:${srv.port} HTTP/1.1`,
    );
    assert.equal(
      proxy.seen[0].headers.get("proxy-authorization"),
      `Basic ${btoa("ops:s:cret")}`,
    );
  },
);

proxiedTest(
  "NO_PROXY naming the server's host, or an address range holding it, goes direct",
  { names: ["berth.test"] },
  async ({ pki, srv, proxy }) => {
    // ("*" exempts host names only, as in fetch: see proxy_env_test.ts.)
    for (const noProxy of ["127.0.0.1", "10.0.0.0/8, 127.0.0.0/8"]) {
      const c = overrideClient(srv, pki, {
        HTTPS_PROXY: `http://127.0.0.1:${proxy.port}`,
        NO_PROXY: noProxy,
      });
      const out = await c.acquire(HOLDER, 10, never());
      assert.equal(out.kind, "acquired", `${noProxy}: ${JSON.stringify(out)}`);
    }
    assert.equal(proxy.seen.length, 0);
  },
);

proxiedTest(
  "a proxy that refuses the tunnel, or is not there, is named in the error, without its password",
  { names: ["berth.test"], refuse: 407 },
  async ({ pki, srv, proxy }) => {
    const call = (proxyUrl: string) =>
      overrideClient(srv, pki, { https_proxy: proxyUrl }).acquire(
        HOLDER,
        10,
        never(),
      );
    const refused = await call(`http://ops:hunter2@127.0.0.1:${proxy.port}`);
    assert.equal(refused.kind, "transport-error", JSON.stringify(refused));
    const message = refused.kind === "transport-error" ? refused.message : "";
    const tunnel =
      `proxy https_proxy \\(127\\.0\\.0\\.1:${proxy.port}\\) refused a tunnel to 127\\.0\\.0\\.1:${srv.port} \\(status 407\\)`;
    assert.match(
      message,
      new RegExp(`${tunnel}; it refused the credentials in the proxy URL`),
    );
    assert.doesNotMatch(message, /hunter2|ops:/);
    assert.ok(!message.includes(btoa("ops:hunter2")), message);
    const bare = await call(`http://127.0.0.1:${proxy.port}`);
    assert.match(
      bare.kind === "transport-error" ? bare.message : "",
      new RegExp(`${tunnel}; it wants credentials`),
    );
    // Nothing listens on port 1: the proxy's, not the API server's, refusal.
    const gone = await call("127.0.0.1:1");
    assert.equal(gone.kind, "transport-error", JSON.stringify(gone));
    assert.match(
      gone.kind === "transport-error" ? gone.message : "",
      /cannot connect to the proxy https_proxy \(127\.0\.0\.1:1\)/,
    );
    assert.equal(srv.requests.length, 0);
  },
);

Deno.test("a proxy the stream transport cannot use is a configuration error naming the variable", () => {
  for (
    const [value, kind] of [
      ["https://proxy.corp:3129", "https"],
      ["socks5://proxy.corp:1080", "socks5"],
    ]
  ) {
    assert.throws(
      () =>
        createHttpLeaseClient({
          apiServer: "https://berth.example:8443",
          key: KEY,
          serverName: "berth.test",
          env: envOf({ ALL_PROXY: value }),
        }),
      new RegExp(
        `ALL_PROXY names a ${kind} proxy; only http:// proxies are supported .*; use an http:// proxy URL, or list the API server's host in NO_PROXY`,
      ),
    );
  }
});

Deno.test("over http://, the default (stream) transport sends the proxy the whole URL and its credentials", async () => {
  await using proxy = startProxy();
  const c = createHttpLeaseClient({
    apiServer: "http://berth.example:8080/gw",
    key: KEY,
    env: envOf({ HTTP_PROXY: `http://ops:pw@127.0.0.1:${proxy.port}` }),
  });
  const out = await c.acquire(HOLDER, 10, never());
  assert.equal(out.kind, "acquired", JSON.stringify(out));
  assert.equal(
    proxy.seen[0].requestLine,
    `POST http://berth.example:8080/gw/v1alpha1/namespaces/${KEY.namespace}/leases/${KEY.name}/acquire HTTP/1.1`,
  );
  assert.equal(proxy.seen[0].headers.get("host"), "berth.example:8080");
  assert.equal(
    proxy.seen[0].headers.get("proxy-authorization"),
    `Basic ${btoa("ops:pw")}`,
  );
});

Deno.test("skip-verify (node:https) goes direct and says so when a proxy is set for the server", () => {
  const lines: string[] = [];
  createHttpLeaseClient({
    apiServer: "https://berth.example:8443",
    key: KEY,
    insecureSkipTlsVerify: true,
    env: envOf({ HTTPS_PROXY: "http://proxy.corp:3128" }),
    logger: createLogger({ format: "json", write: (l) => lines.push(l) }),
  });
  assert.ok(
    lines.some((l) =>
      l.includes(
        "with --insecure-skip-tls-verify (node:https) the helper connects to it directly",
      )
    ),
    lines.join("\n"),
  );
});

proxiedTest(
  "fetch (for the proxies only it can use) reads the same variables and goes through the same proxy",
  { names: ["127.0.0.1"] },
  async ({ pki, srv, proxy }) => {
    // fetch reads the process environment itself: a child with its own, so
    // no other test's client sees this proxy.
    const client = new URL("../../lib/lease/client.ts", import.meta.url).href;
    const program = `
      import { createHttpLeaseClient } from ${JSON.stringify(client)};
      const c = createHttpLeaseClient({
        apiServer: ${JSON.stringify(srv.url)},
        key: ${JSON.stringify(KEY)},
        caBundleFile: ${JSON.stringify(pki.caCert)},
        transport: "fetch",
      });
      const out = await c.acquire(
        ${JSON.stringify(HOLDER)},
        10,
        new AbortController().signal,
      );
      console.log(out.kind);
    `;
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-check", program],
      clearEnv: true,
      env: {
        HTTPS_PROXY: `http://127.0.0.1:${proxy.port}`,
        PATH: Deno.env.get("PATH") ?? "",
        HOME: Deno.env.get("HOME") ?? "/",
      },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(
      new TextDecoder().decode(out.stdout).trim(),
      "acquired",
      new TextDecoder().decode(out.stderr),
    );
    assert.equal(
      proxy.seen[0]?.requestLine,
      `CONNECT 127.0.0.1:${srv.port} HTTP/1.1`,
    );
  },
);

Deno.test({
  name:
    "through a proxy, a refused certificate is not looked at again behind its back",
  ignore: noOpenssl !== undefined,
  fn: async () => {
    await using pki = await makeTestPki({ names: ["berth.test"] });
    await using srv = await startTlsGrantServer(pki);
    // A relay in front of the server counts who connects to it.
    const relay = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    let accepted = 0;
    const conns: Deno.Conn[] = [];
    const relaying = (async () => {
      for await (const conn of relay) {
        accepted++;
        conns.push(conn);
        const up = await Deno.connect({
          hostname: "127.0.0.1",
          port: srv.port,
        });
        conns.push(up);
        conn.readable.pipeTo(up.writable).catch(() => {});
        up.readable.pipeTo(conn.writable).catch(() => {});
      }
    })();
    try {
      await using proxy = startProxy();
      const port = (relay.addr as Deno.NetAddr).port;
      const out = await createHttpLeaseClient({
        apiServer: `https://127.0.0.1:${port}`,
        key: KEY,
        caBundleFile: pki.otherCaCert,
        serverName: "berth.test",
        env: envOf({ HTTPS_PROXY: `http://127.0.0.1:${proxy.port}` }),
      }).acquire(HOLDER, 10, never());
      assert.equal(out.kind, "transport-error", JSON.stringify(out));
      assert.match(
        out.kind === "transport-error" ? out.message : "",
        /--ca-bundle-file/,
      );
      assert.equal(proxy.seen.length, 1);
      assert.equal(accepted, 1, "only the proxy connected to the server");
    } finally {
      relay.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await relaying.catch(() => {});
    }
  },
});

proxiedTest(
  "with only a CA bundle, the default (stream) transport goes through HTTPS_PROXY too",
  { names: ["127.0.0.1"] },
  async ({ pki, srv, proxy }) => {
    const out = await createHttpLeaseClient({
      apiServer: srv.url,
      key: KEY,
      caBundleFile: pki.caCert,
      env: envOf({ HTTPS_PROXY: `http://127.0.0.1:${proxy.port}` }),
    }).acquire(HOLDER, 10, never());
    assert.equal(out.kind, "acquired", JSON.stringify(out));
    assert.equal(
      proxy.seen[0]?.requestLine,
      `CONNECT 127.0.0.1:${srv.port} HTTP/1.1`,
    );
  },
);

Deno.test("a proxy only fetch can use selects fetch, except with the server-name override", () => {
  const env = envOf({ ALL_PROXY: "socks5://proxy.corp:1080" });
  // fetch takes it (no error); the override cannot go through fetch.
  createHttpLeaseClient({ apiServer: "https://berth.example", key: KEY, env });
  assert.throws(
    () =>
      createHttpLeaseClient({
        apiServer: "https://berth.example",
        key: KEY,
        serverName: "berth.test",
        env,
      }),
    /ALL_PROXY names a socks5 proxy/,
  );
});
