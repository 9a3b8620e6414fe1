/**
 * The API server behind an HTTP proxy named by the environment: `fetch`
 * reads `HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY` (and their lower-case
 * spellings) when the client is built, goes through the proxy with its
 * credentials, and a failure on the way is said in words that never carry
 * the password; `node:https` (the server-name override, skip-verify) goes
 * direct and warns that it does. A proxy URL `fetch` ignores (a user without
 * a password) is warned about; under CGI it ignores `HTTP_PROXY`.
 */
import assert from "node:assert/strict";
import { configFix } from "../../lib/lease/rpc.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { makeTestPki, opensslMissing } from "../support/tls.ts";
import {
  GRANT,
  HOLDER,
  KEY,
  never,
  startTlsGrantServer,
} from "./client_fixture.ts";
import { proxyClients } from "../support/proxy_vars.ts";

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

/** A client built while exactly `vars` of the proxy variables are set. */
const clientWith = proxyClients(KEY);

proxiedTest(
  "HTTPS_PROXY: a CONNECT tunnel through the proxy, its credentials in Proxy-Authorization",
  { names: ["127.0.0.1"] },
  async ({ pki, srv, proxy }) => {
    const c = clientWith({
      HTTPS_PROXY: `http://ops:s%3Acret@127.0.0.1:${proxy.port}`,
    }, { apiServer: srv.url, caBundleFile: pki.caCert });
    const out = await c.acquire(HOLDER, 10, never());
    assert.equal(out.kind, "acquired", JSON.stringify(out));
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
  "the lower-case spelling is read too, and HTTP_PROXY is not used for an https:// server",
  { names: ["127.0.0.1"] },
  async ({ pki, srv, proxy }) => {
    const via = clientWith(
      { https_proxy: `http://127.0.0.1:${proxy.port}` },
      { apiServer: srv.url, caBundleFile: pki.caCert },
    );
    assert.equal((await via.acquire(HOLDER, 10, never())).kind, "acquired");
    assert.equal(proxy.seen.length, 1);
    const direct = clientWith(
      { HTTP_PROXY: `http://127.0.0.1:${proxy.port}` },
      { apiServer: srv.url, caBundleFile: pki.caCert },
    );
    assert.equal((await direct.acquire(HOLDER, 10, never())).kind, "acquired");
    assert.equal(proxy.seen.length, 1);
  },
);

proxiedTest(
  "NO_PROXY naming the server's host, or an address range holding it, goes direct",
  { names: ["127.0.0.1"] },
  async ({ pki, srv, proxy }) => {
    for (const noProxy of ["127.0.0.1", "10.0.0.0/8, 127.0.0.0/8"]) {
      const c = clientWith({
        HTTPS_PROXY: `http://127.0.0.1:${proxy.port}`,
        NO_PROXY: noProxy,
      }, { apiServer: srv.url, caBundleFile: pki.caCert });
      const out = await c.acquire(HOLDER, 10, never());
      assert.equal(out.kind, "acquired", `${noProxy}: ${JSON.stringify(out)}`);
    }
    assert.equal(proxy.seen.length, 0);
  },
);

proxiedTest(
  "a proxy that refuses the tunnel, or is not there, fails the request without its password, and with no fix (it may heal)",
  { names: ["127.0.0.1"], refuse: 407 },
  async ({ pki, srv, proxy }) => {
    const call = (proxyUrl: string) =>
      clientWith({ https_proxy: proxyUrl }, {
        apiServer: srv.url,
        caBundleFile: pki.caCert,
      }).acquire(HOLDER, 10, never());
    const refused = await call(`http://ops:hunter2@127.0.0.1:${proxy.port}`);
    assert.equal(refused.kind, "transport-error", JSON.stringify(refused));
    const message = refused.kind === "transport-error" ? refused.message : "";
    assert.match(message, /proxy authentication required/);
    assert.doesNotMatch(message, /hunter2|ops:/);
    assert.ok(!message.includes(btoa("ops:hunter2")), message);
    assert.equal(configFix(refused as never), undefined);
    // Nothing listens there: the proxy's refusal is worded as possibly its.
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const closed = (l.addr as Deno.NetAddr).port;
    l.close();
    const gone = await call(`http://127.0.0.1:${closed}`);
    assert.equal(gone.kind, "transport-error", JSON.stringify(gone));
    assert.match(
      gone.kind === "transport-error" ? gone.message : "",
      /connection refused, by the proxy https_proxy names or by the API server behind it/,
    );
    assert.equal(configFix(gone as never), undefined);
    assert.equal(srv.requests.length, 0);
  },
);

Deno.test("over http://, HTTP_PROXY is sent the whole URL and its credentials", async () => {
  await using proxy = startProxy();
  const c = clientWith(
    { HTTP_PROXY: `http://ops:pw@127.0.0.1:${proxy.port}` },
    { apiServer: "http://berth.example:8080/gw" },
  );
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

Deno.test("a proxy URL with a user but no password, which fetch ignores, is warned about without its value; requests then bypass it", async () => {
  await using proxy = startProxy();
  // The stand-in answers any plain request with a grant: here, the server.
  await using server = startProxy();
  const lines: string[] = [];
  const c = clientWith(
    { HTTP_PROXY: `http://ops@127.0.0.1:${proxy.port}` },
    {
      apiServer: `http://127.0.0.1:${server.port}`,
      logger: createLogger({ format: "json", write: (l) => lines.push(l) }),
    },
  );
  assert.equal((await c.acquire(HOLDER, 10, never())).kind, "acquired");
  assert.equal(proxy.seen.length, 0, "fetch went round the proxy");
  assert.equal(server.seen.length, 1);
  const warning = lines.filter((l) => l.includes("without a password"));
  assert.equal(warning.length, 1, lines.join("\n"));
  assert.match(
    warning[0],
    /HTTP_PROXY names a proxy user without a password, and fetch ignores such a proxy URL: requests do not go through that proxy/,
  );
  assert.doesNotMatch(warning[0], /ops/);
  // With a password (or without a user) nothing is said.
  for (const value of ["http://ops:pw@proxy.corp:3128", "proxy.corp:3128"]) {
    const quiet: string[] = [];
    clientWith({ HTTPS_PROXY: value }, {
      apiServer: "https://berth.example:8443",
      logger: createLogger({ format: "json", write: (l) => quiet.push(l) }),
    });
    assert.ok(!quiet.some((l) => l.includes("without a password")), value);
  }
});

Deno.test("under CGI (REQUEST_METHOD set) HTTP_PROXY may be a client's header: fetch ignores it", async () => {
  await using proxy = startProxy();
  await using server = startProxy();
  const saved = Deno.env.get("REQUEST_METHOD");
  Deno.env.set("REQUEST_METHOD", "GET");
  try {
    const c = clientWith(
      { HTTP_PROXY: `http://127.0.0.1:${proxy.port}` },
      { apiServer: `http://127.0.0.1:${server.port}` },
    );
    assert.equal((await c.acquire(HOLDER, 10, never())).kind, "acquired");
  } finally {
    if (saved === undefined) Deno.env.delete("REQUEST_METHOD");
    else Deno.env.set("REQUEST_METHOD", saved);
  }
  assert.equal(proxy.seen.length, 0);
  assert.equal(server.seen.length, 1);
});

Deno.test("skip-verify and the server-name override (node:https) go direct and say so when a proxy is set", () => {
  for (
    const [options, flag] of [
      [{ insecureSkipTlsVerify: true }, "--insecure-skip-tls-verify"],
      [{ serverName: "berth.test" }, "--server-name"],
    ] as const
  ) {
    const lines: string[] = [];
    clientWith({ HTTPS_PROXY: "http://proxy.corp:3128" }, {
      apiServer: "https://berth.example:8443",
      ...options,
      logger: createLogger({ format: "json", write: (l) => lines.push(l) }),
    });
    assert.ok(
      lines.some((l) =>
        l.includes(
          `HTTPS_PROXY names a proxy, but with ${flag} (node:https) the helper connects to the API server directly`,
        )
      ),
      lines.join("\n"),
    );
  }
});

Deno.test({
  name:
    "through a proxy, a refused certificate is not looked at again behind its back",
  ignore: noOpenssl !== undefined,
  fn: async () => {
    await using pki = await makeTestPki({ names: ["127.0.0.1"] });
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
      const out = await clientWith(
        { HTTPS_PROXY: `http://127.0.0.1:${proxy.port}` },
        {
          apiServer: `https://127.0.0.1:${port}`,
          caBundleFile: pki.otherCaCert,
        },
      ).acquire(HOLDER, 10, never());
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

Deno.test({
  name:
    "through a proxy, a self-signed CA:TRUE server certificate stays refused, with the fix named",
  ignore: noOpenssl !== undefined,
  fn: async () => {
    await using pki = await makeTestPki({
      names: ["127.0.0.1"],
      selfSignedCa: true,
    });
    const self = pki.selfSignedCa!;
    await using srv = await startTlsGrantServer({
      serverCert: self.cert,
      serverKey: self.key,
    });
    await using proxy = startProxy();
    const out = await clientWith(
      { HTTPS_PROXY: `http://127.0.0.1:${proxy.port}` },
      { apiServer: srv.url, caBundleFile: self.cert },
    ).acquire(HOLDER, 10, never());
    assert.equal(out.kind, "transport-error", JSON.stringify(out));
    assert.match(
      out.kind === "transport-error" ? out.message : "",
      /is a CA certificate \(basicConstraints CA:TRUE.*CA:FALSE/,
    );
    assert.match(configFix(out as never) ?? "", /CA:FALSE/);
    assert.equal(proxy.seen.length, 1);
  },
});
