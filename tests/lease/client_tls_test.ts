/**
 * TLS trust, name and skip options against a real HTTPS server with
 * certificates from a private test CA, over both transports (`fetch`, and
 * `node:https` through the server-name override) where both can do what is
 * asked.
 */
import assert from "node:assert/strict";
import {
  configFix,
  FIXES,
  type GrantOutcome,
  type LeaseFailure,
} from "../../lib/lease/rpc.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { makeTestPki, opensslMissing } from "../support/tls.ts";
import {
  both,
  client,
  header,
  HOLDER,
  never,
  NODE_NAME,
  startTlsGrantServer,
} from "./client_fixture.ts";

// ---------------------------------------------------------------------------
// TLS

const noOpenssl = opensslMissing();

/** Once per transport. */
function tlsTest(name: string, fn: () => Promise<void>) {
  both(name, fn, noOpenssl !== undefined);
}

/** Once: what only one transport can do, or construction. */
function tlsOnce(name: string, fn: () => Promise<void>) {
  Deno.test({ name, ignore: noOpenssl !== undefined, fn });
}

const tlsServer = startTlsGrantServer;

function expectTransport(out: GrantOutcome, hint: RegExp) {
  assert.equal(out.kind, "transport-error", JSON.stringify(out));
  assert.match(out.kind === "transport-error" ? out.message : "", hint);
}

tlsTest(
  "TLS: the right CA bundle is trusted; none or a wrong one is refused",
  async () => {
    await using pki = await makeTestPki({
      names: ["127.0.0.1", "localhost", NODE_NAME],
    });
    await using srv = await tlsServer(pki);
    const ok = await client(srv.url, { caBundleFile: pki.caCert }).acquire(
      HOLDER,
      1,
      never(),
    );
    assert.equal(ok.kind, "acquired", JSON.stringify(ok));
    expectTransport(
      await client(srv.url).acquire(HOLDER, 1, never()),
      /--ca-bundle-file/,
    );
    expectTransport(
      await client(srv.url, { caBundleFile: pki.otherCaCert }).acquire(
        HOLDER,
        1,
        never(),
      ),
      /--ca-bundle-file/,
    );
    // A bundle of several CAs: every one is trusted.
    const both = `${pki.dir}/both.pem`;
    await Deno.writeTextFile(
      both,
      (await Deno.readTextFile(pki.otherCaCert)) +
        (await Deno.readTextFile(pki.caCert)),
    );
    const ok2 = await client(srv.url, { caBundleFile: both }).acquire(
      HOLDER,
      1,
      never(),
    );
    assert.equal(ok2.kind, "acquired");
    assert.equal(srv.requests.length, 2);
  },
);

tlsOnce(
  "TLS: the server-name override (node:https) sets SNI and the verified name",
  async () => {
    await using pki = await makeTestPki({ names: ["berth.test"] });
    await using srv = await tlsServer(pki);
    const trust = { caBundleFile: pki.caCert };
    const ok = await client(srv.url, { ...trust, serverName: "berth.test" })
      .acquire(HOLDER, 1, never());
    assert.equal(ok.kind, "acquired", JSON.stringify(ok));
    assert.equal(srv.requests[0].sni, "berth.test");
    // The Host header still names the URL's host.
    assert.equal(header(srv.requests[0], "Host"), `127.0.0.1:${srv.port}`);
    expectTransport(
      await client(srv.url, trust).acquire(HOLDER, 1, never()),
      /--server-name/,
    );
    expectTransport(
      await client(srv.url, { ...trust, serverName: "other.test" }).acquire(
        HOLDER,
        1,
        never(),
      ),
      /other\.test/,
    );
    assert.equal(srv.requests.length, 1);
  },
);

tlsOnce(
  "TLS: insecure skip-verify (node:https) accepts an untrusted certificate and warns once",
  async () => {
    await using pki = await makeTestPki({ names: ["berth.test"] });
    await using srv = await tlsServer(pki);
    const lines: string[] = [];
    const logger = createLogger({ write: (l) => lines.push(l) });
    const c = client(srv.url, { insecureSkipTlsVerify: true, logger });
    assert.equal(lines.length, 1);
    assert.match(lines[0], /level=WARN .*INSECURE/);
    assert.equal((await c.acquire(HOLDER, 1, never())).kind, "acquired");
    assert.equal((await c.renew(HOLDER, 4, 1, never())).kind, "acquired");
    assert.equal(lines.filter((l) => l.includes("INSECURE")).length, 1);
  },
);

tlsOnce(
  "TLS: a CA bundle without a PEM certificate is refused at construction",
  async () => {
    await using pki = await makeTestPki({ names: ["berth.test"] });
    const notPem = `${pki.dir}/key-only.pem`;
    await Deno.copyFile(pki.serverKey, notPem);
    assert.throws(
      () => client("https://127.0.0.1:1", { caBundleFile: notPem }),
      (e: Error) =>
        e.message.includes(notPem) && /no PEM certificate/.test(e.message),
    );
    const broken = `${pki.dir}/broken.pem`;
    await Deno.writeTextFile(
      broken,
      "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    assert.throws(
      () => client("https://127.0.0.1:1", { caBundleFile: broken }),
      /broken\.pem: certificate 1 of 1/,
    );
    assert.throws(
      () =>
        client("https://127.0.0.1:1", {
          caBundleFile: `${pki.dir}/missing.pem`,
        }),
      /missing\.pem cannot be read/,
    );
  },
);

tlsOnce(
  "TLS: a self-signed server certificate marked CA:TRUE is trusted when it is in the bundle, as the Go helper trusts it",
  async () => {
    await using pki = await makeTestPki({
      names: ["127.0.0.1", NODE_NAME],
      selfSignedCa: true,
    });
    const self = pki.selfSignedCa!;
    await using srv = await tlsServer({
      serverCert: self.cert,
      serverKey: self.key,
    });
    // fetch refuses it; the client hands over to node:https, once, and says so.
    const lines: string[] = [];
    const logger = createLogger({ write: (l) => lines.push(l) });
    const trusted = client(srv.url, { caBundleFile: self.cert, logger });
    const out = await trusted.acquire(HOLDER, 1, never());
    assert.equal(out.kind, "acquired", JSON.stringify(out));
    assert.equal((await trusted.renew(HOLDER, 4, 1, never())).kind, "acquired");
    assert.equal(
      lines.filter((l) => l.includes("presents a CA certificate")).length,
      1,
      lines.join(""),
    );
    // With the server-name override it is node:https from the start.
    const named: string[] = [];
    const byName = client(srv.url, {
      caBundleFile: self.cert,
      serverName: NODE_NAME,
      logger: createLogger({ write: (l) => named.push(l) }),
    });
    assert.equal((await byName.acquire(HOLDER, 1, never())).kind, "acquired");
    assert.equal(named.length, 0, named.join(""));
    // Not in the bundle, or for another name: refused as any certificate is.
    expectTransport(
      await client(srv.url, { caBundleFile: pki.otherCaCert }).acquire(
        HOLDER,
        1,
        never(),
      ),
      /the server certificate is not trusted/,
    );
    expectTransport(
      await client(srv.url, {
        caBundleFile: self.cert,
        serverName: "other.test",
      }).acquire(HOLDER, 1, never()),
      /not valid for other\.test/,
    );
  },
);

tlsTest(
  "TLS: an expired or not-yet-valid certificate is said to be that, not untrusted",
  async () => {
    const cases: [{ notBefore: string; notAfter: string }, RegExp][] = [
      [
        { notBefore: "20200101000000Z", notAfter: "20200201000000Z" },
        /certificate expired on 2020-02-01T00:00:00Z \(this node's clock says .*renew/,
      ],
      [
        { notBefore: "20400101000000Z", notAfter: "20400201000000Z" },
        /certificate is not valid until 2040-01-01T00:00:00Z .*clock/,
      ],
    ];
    for (const [validity, want] of cases) {
      await using pki = await makeTestPki({
        names: ["127.0.0.1", NODE_NAME],
        validity,
      });
      await using srv = await tlsServer(pki);
      const out = await client(srv.url, { caBundleFile: pki.caCert }).acquire(
        HOLDER,
        1,
        never(),
      );
      expectTransport(out, want);
      assert.doesNotMatch(
        out.kind === "transport-error" ? out.message : "",
        /not trusted/,
      );
    }
  },
);

tlsOnce(
  "TLS: http:// on a TLS port that answers plain HTTP with a TLS alert (a Deno or rustls server, the development server among them) names the fix use https://; a port answering neither HTTP nor TLS names none",
  async () => {
    await using pki = await makeTestPki({ names: ["127.0.0.1"] });
    await using srv = await tlsServer(pki);
    const plain = srv.url.replace(/^https:/, "http:");
    const out = await client(plain).acquire(HOLDER, 1, never());
    expectTransport(out, /the port speaks TLS/);
    assert.equal(configFix(out as LeaseFailure), FIXES.useHttps);
    // Not HTTP and not TLS (a banner of another protocol): said as it is,
    // without a fix, since which setting is wrong is not known.
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const serving = (async () => {
      for await (const conn of listener) {
        await conn.write(new TextEncoder().encode("SSH-2.0-OpenSSH_9.6\r\n"))
          .catch(() => {});
        conn.close();
      }
    })();
    try {
      const port = (listener.addr as Deno.NetAddr).port;
      const other = await client(`http://127.0.0.1:${port}`).acquire(
        HOLDER,
        1,
        never(),
      );
      expectTransport(other, /not HTTP/);
      assert.equal(configFix(other as LeaseFailure), undefined);
    } finally {
      listener.close();
      await serving.catch(() => {});
    }
  },
);
