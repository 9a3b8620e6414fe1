/**
 * The failures no wait can heal, against real servers of the wrong kind:
 * `python3 -m http.server` (a process of its own) answering a lease request
 * with its 501 HTML page (not a Berth API server), and the same plain-HTTP
 * port asked for TLS (`https://` on a plain-HTTP port). Each names its fix;
 * a refused connection names none.
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
