/**
 * The failures no wait can heal, against real servers of the wrong kind:
 * `python3 -m http.server` (a process of its own) answering a lease request
 * with its 501 HTML page (not a Berth API server), and the same plain-HTTP
 * port asked for TLS (`https://` on a plain-HTTP port), and `openssl s_server`
 * asked for plain HTTP (`http://` on a TLS port that closes without a word),
 * through the CLI. Each names its fix; a refused or reset connection to a
 * port that does not speak TLS names none.
 */
import assert from "node:assert/strict";
import { createHttpLeaseClient } from "../../lib/lease/client.ts";
import {
  configFix,
  describeFailure,
  FIXES,
  type LeaseFailure,
} from "../../lib/lease/rpc.ts";
import { HOLDER, KEY } from "./client_fixture.ts";
import {
  HelperProcess,
  leaseEnv,
  tempDir,
  waitFor,
} from "../support/lease_env.ts";
import { makeTestPki, opensslMissing } from "../support/tls.ts";

const python = (() => {
  try {
    const out = new Deno.Command("python3", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    }).outputSync();
    return out.success ? undefined : "python3 --version failed";
  } catch {
    return "python3 is not installed";
  }
})();
if (python !== undefined) {
  console.log(`fix_process_test: skipped, ${python}`);
}

/** A free loopback port (closed again: the server takes it). */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Resolves once something accepts connections on `port`. */
async function accepting(port: number, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`nothing listens on ${port}`);
}

Deno.test({
  name:
    "python3 -m http.server: its 501 page is not a Berth API server, https:// on its port is use http://",
  ignore: python !== undefined,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    const port = freePort();
    const server = new Deno.Command("python3", {
      args: ["-m", "http.server", String(port), "--bind", "127.0.0.1"],
      cwd: dir,
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      await accepting(port, AbortSignal.timeout(30_000));
      const plain = await createHttpLeaseClient({
        apiServer: `http://127.0.0.1:${port}`,
        key: KEY,
      }).acquire(HOLDER, 10, AbortSignal.timeout(10_000));
      assert.equal(plain.kind, "server-error", JSON.stringify(plain));
      assert.equal(plain.kind === "server-error" && plain.status, 501);
      assert.equal(configFix(plain as LeaseFailure), FIXES.notBerth);
      assert.match(
        describeFailure(plain as LeaseFailure),
        /server answered 501: an HTML page titled "Error response"/,
      );
      const tls = await createHttpLeaseClient({
        apiServer: `https://127.0.0.1:${port}`,
        key: KEY,
      }).acquire(HOLDER, 10, AbortSignal.timeout(10_000));
      assert.equal(tls.kind, "transport-error", JSON.stringify(tls));
      assert.equal(configFix(tls as LeaseFailure), FIXES.useHttp);
    } finally {
      server.kill("SIGTERM");
      await server.status;
      await Deno.remove(dir, { recursive: true });
    }
    // Once it is gone: refused, which may heal, names no fix.
    const gone = await createHttpLeaseClient({
      apiServer: `http://127.0.0.1:${port}`,
      key: KEY,
    }).acquire(HOLDER, 10, AbortSignal.timeout(10_000));
    assert.equal(gone.kind, "transport-error", JSON.stringify(gone));
    assert.equal(configFix(gone as LeaseFailure), undefined);
  },
});

/** `run` on a plain machine against `url`, for lease `lease`. */
const runEnv = (url: string, lease: string) => ({
  NO_COLOR: "1",
  BERTH_API_SERVER: url,
  BERTH_LEASE_NAME: lease,
  BERTH_LEASE_NAMESPACE: "dev",
  BERTH_TTL_SECONDS: "3",
});

const retrying = /msg="acquire failed, retrying"/;

Deno.test({
  name:
    "http:// on an OpenSSL TLS port, which closes on a plain request without an answer: run ends with 78 naming https://, acquire retries naming it",
  ignore: opensslMissing() !== undefined,
  fn: async () => {
    await using pki = await makeTestPki({ names: ["127.0.0.1"] });
    await using dir = await tempDir();
    const port = freePort();
    const server = new Deno.Command("openssl", {
      args: ["s_server", "-quiet", "-accept", `127.0.0.1:${port}`]
        .concat(["-cert", pki.serverCert, "-key", pki.serverKey]),
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      await accepting(port, AbortSignal.timeout(30_000));
      const url = `http://127.0.0.1:${port}`;
      await using run = new HelperProcess(
        ["run", "--", "touch", `${dir.path}/ran`],
        runEnv(url, "tls-port"),
      );
      assert.equal((await run.wait(30_000)).code, 78, run.log);
      const fatal = run.lines.filter((l) => l.includes("level=ERROR"));
      assert.equal(fatal.length, 1, run.log);
      assert.match(fatal[0], /closed the connection without an answer/);
      assert.match(fatal[0], / fix="use https:\/\//);
      await using acquire = new HelperProcess(
        ["acquire"],
        leaseEnv({ apiServer: url, stateDir: dir.path }),
      );
      const line = await acquire.waitForLine(retrying);
      assert.match(line, / fix="use https:\/\//);
      await acquire.waitForLine(/level=ERROR .* fix="use https:\/\//);
      await waitFor(
        () => acquire.lines.filter((l) => retrying.test(l)).length >= 2,
        { timeoutMs: 30_000, what: `acquire to retry:\n${acquire.log}` },
      );
      assert.equal(acquire.exited, undefined, "acquire keeps retrying");
      assert.throws(() => Deno.statSync(`${dir.path}/ran`), "nothing ran");
    } finally {
      server.kill("SIGTERM");
      await server.status;
    }
  },
});

Deno.test("a plain port that closes every connection without an answer (an outage, not TLS): run retries without a fix until --acquire-timeout", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const serving = (async () => {
    for await (const conn of listener) conn.close();
  })();
  try {
    const url = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`;
    await using run = new HelperProcess(
      ["run", "--acquire-timeout=3s", "--", "true"],
      runEnv(url, "outage"),
    );
    assert.equal((await run.wait(30_000)).code, 76, run.log);
    const retries = run.lines.filter((l) => retrying.test(l));
    assert.ok(retries.length >= 2, run.log);
    assert.ok(retries.every((l) => !l.includes(" fix=")), run.log);
    assert.match(retries[0], /connection closed before message completed/);
  } finally {
    listener.close();
    await serving.catch(() => {});
  }
});
