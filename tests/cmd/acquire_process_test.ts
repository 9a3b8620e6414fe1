/**
 * `berth-acquire acquire` as the init container runs it: the real CLI in a
 * child process against a development lease server on 127.0.0.1. Every wait
 * is a bounded poll on something a user would see (an exit, a log line, a
 * file); nothing here measures elapsed time.
 *
 * @module
 */
import assert from "node:assert/strict";
import { startDevServer } from "../../lib/devserver/server.ts";
import { runCli, runExecutable } from "../support/cli.ts";
import {
  bootNowMs,
  HelperProcess,
  leaseEnv,
  leaseRpc,
  listDir,
  readStateFile,
  runtimeHolder,
  tempDir,
  waitFor,
} from "../support/lease_env.ts";
import { makeTestPki, opensslMissing } from "../support/tls.ts";

const KEY = { namespace: "prod", name: "web" };
const OTHER = "prod/pod:web-1:uid:0000-other";
/** Bounds a whole CLI run, so a wedged child fails the test instead of hanging it. */
const RUN_BOUND_MS = 60_000;
const MARKER_RE =
  /^berth-acquire health marker v1\ngate_closes_boottime_ms=(\d+)\nlease_deadline_boottime_ms=(\d+)\ngate_closes_wall_ms=(\d+)\nlease_deadline_wall_ms=(\d+)\n$/;

Deno.test({
  name:
    "acquire over HTTPS with a private CA and a server-name override: state files, probe and log",
  ignore: opensslMissing() !== undefined,
  async fn() {
    await using pki = await makeTestPki({ names: ["berth.test"] });
    await using server = await startDevServer({
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
    });
    await using dir = await tempDir();
    const url = `https://127.0.0.1:${server.port}`;
    const tls = ["--ca-bundle-file", pki.caCert, "--server-name", "berth.test"];

    const bootBefore = bootNowMs();
    const wallBefore = Date.now();
    const r = await runCli(["acquire", ...tls], {
      env: leaseEnv({ apiServer: url, stateDir: dir.path, ttlSeconds: 8 }),
      signal: AbortSignal.timeout(RUN_BOUND_MS),
    });
    const bootAfter = bootNowMs();
    const wallAfter = Date.now();
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /msg="lease acquired" .*fencing_token=1(\s|$)/);

    const d = dir.path;
    assert.equal(readStateFile(d, "holder"), runtimeHolder());
    assert.equal(readStateFile(d, "token"), "1");
    const m = MARKER_RE.exec(readStateFile(d, "healthy") ?? "");
    assert.ok(m, `runtime-singleton marker: ${readStateFile(d, "healthy")}`);
    const [gate, deadline] = [Number(m[1]), Number(m[2])];
    assert.equal(deadline - gate, 4_000, "gate closes the probe lead early");
    // The deadline is the send time of the successful Acquire plus the TTL,
    // and that send happened while the command ran (10 ms clock resolution).
    assert.ok(
      deadline >= bootBefore + 8_000 - 10,
      `${deadline} vs ${bootBefore}`,
    );
    assert.ok(
      deadline <= bootAfter + 8_000 + 10,
      `${deadline} vs ${bootAfter}`,
    );
    // The wall-clock copy of the same two moments.
    const [gateWall, deadlineWall] = [Number(m[3]), Number(m[4])];
    assert.equal(deadlineWall - gateWall, 4_000);
    assert.ok(
      deadlineWall >= wallBefore + 8_000 && deadlineWall <= wallAfter + 8_000,
    );
    assert.equal((await Deno.stat(`${d}/check`)).mode! & 0o777, 0o755);
    for (const f of ["holder", "token", "healthy"]) {
      assert.equal((await Deno.stat(`${d}/${f}`)).mode! & 0o777, 0o644, f);
    }
    const probe = await runExecutable(
      [`${d}/check`, "check", `${d}/healthy`, "--max-age", "30s"],
      { signal: AbortSignal.timeout(RUN_BOUND_MS) },
    );
    assert.deepEqual([probe.code, probe.stdout], [0, ""], probe.stderr);
    assert.equal(server.store.get("prod", "web")?.holder, runtimeHolder());

    // startup-gate: nobody renews, so the marker carries no deadline.
    await using gateDir = await tempDir();
    const g = await runCli(["acquire", ...tls], {
      env: leaseEnv({
        apiServer: url,
        stateDir: gateDir.path,
        leaseName: "batch",
        mode: "startup-gate",
        extra: {
          BERTH_WORKLOAD_KIND: "Deployment",
          BERTH_WORKLOAD_NAME: "batch",
        },
      }),
      signal: AbortSignal.timeout(RUN_BOUND_MS),
    });
    assert.equal(g.code, 0, g.stderr);
    assert.equal(
      readStateFile(gateDir.path, "holder"),
      "prod/Deployment:batch",
    );
    assert.equal(readStateFile(gateDir.path, "token"), "1");
    assert.equal(
      readStateFile(gateDir.path, "healthy"),
      "berth-acquire health marker v1\n",
    );
  },
});

Deno.test({
  name:
    "acquire that does not trust the server's CA retries, then gives up at --acquire-timeout naming the certificate problem",
  ignore: opensslMissing() !== undefined,
  async fn() {
    await using pki = await makeTestPki({ names: ["berth.test"] });
    await using server = await startDevServer({
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
    });
    await using dir = await tempDir();
    const r = await runCli([
      "acquire",
      "--ca-bundle-file",
      pki.otherCaCert,
      "--server-name",
      "berth.test",
      "--acquire-timeout",
      "2s",
    ], {
      env: leaseEnv({
        apiServer: `https://127.0.0.1:${server.port}`,
        stateDir: dir.path,
      }),
      signal: AbortSignal.timeout(RUN_BOUND_MS),
    });
    assert.equal(r.code, 1, r.stderr);
    const failures = r.stderr.split("\n").filter((l) =>
      /acquire failed, retrying/.test(l)
    );
    assert.ok(failures.length >= 2, `retried:\n${r.stderr}`);
    assert.match(failures[0], /certificate is not trusted/);
    assert.match(r.stderr, /--acquire-timeout reached/);
    assert.deepEqual(listDir(dir.path), [], "nothing written");
    assert.equal(server.store.get("prod", "web"), undefined);
  },
});

Deno.test("acquire waits while another holder has the lease, naming it, and acquires once it is released", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const taken = await leaseRpc(server.url, "acquire", KEY, {
    holder: OTHER,
    ttlSeconds: 300,
  });
  assert.equal(taken.body?.acquired, true);

  await using p = new HelperProcess(
    ["acquire"],
    leaseEnv({ apiServer: server.url, stateDir: dir.path }),
  );
  const waiting = await p.waitForLine(/lease held by another, waiting/);
  assert.match(waiting, new RegExp(`current_holder=${OTHER}(\\s|$)`));
  assert.deepEqual(listDir(dir.path), [], "nothing written while waiting");
  assert.equal(p.exited, undefined, "still waiting");

  const released = await leaseRpc(server.url, "release", KEY, {
    holder: OTHER,
    fencingToken: 1,
  });
  assert.equal(released.status, 204);
  const status = await p.wait();
  assert.equal(status.code, 0, p.log);
  assert.match(p.log, /msg="lease acquired" .*fencing_token=2(\s|$)/);
  assert.equal(readStateFile(dir.path, "token"), "2");
  assert.equal(readStateFile(dir.path, "holder"), runtimeHolder());
});

Deno.test({
  name:
    "the CA bundle is added to the system's trust store: a CA in SSL_CERT_FILE is trusted without one, and a bundle does not replace it",
  ignore: opensslMissing() !== undefined,
  async fn() {
    await using pki = await makeTestPki({ names: ["127.0.0.1"] });
    await using server = await startDevServer({
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
    });
    const url = `https://127.0.0.1:${server.port}`;
    const attempt = async (
      leaseName: string,
      extra: Record<string, string>,
      args: string[] = [],
    ) => {
      await using dir = await tempDir();
      return await runCli(["acquire", "--acquire-timeout", "3s", ...args], {
        env: leaseEnv({ apiServer: url, stateDir: dir.path, leaseName, extra }),
        signal: AbortSignal.timeout(RUN_BOUND_MS),
      });
    };
    // The system's store names the server's CA.
    const system = await attempt("sys", { SSL_CERT_FILE: pki.caCert });
    assert.equal(system.code, 0, system.stderr);
    // A bundle of another CA is added, not put in the system store's place.
    const added = await attempt("added", { SSL_CERT_FILE: pki.caCert }, [
      "--ca-bundle-file",
      pki.otherCaCert,
    ]);
    assert.equal(added.code, 0, added.stderr);
    // Without either, the private CA is not trusted.
    const none = await attempt("none", {});
    assert.equal(none.code, 1, none.stderr);
    assert.match(none.stderr, /--ca-bundle-file/);
    // An SSL_CERT_FILE that cannot be read is said, and the bundle still works.
    const bad = await attempt("bad", { SSL_CERT_FILE: `${pki.dir}/nope.pem` }, [
      "--ca-bundle-file",
      pki.caCert,
    ]);
    assert.equal(bad.code, 0, bad.stderr);
    assert.match(
      bad.stderr,
      /SSL_CERT_FILE names .*nope\.pem, which cannot be read/,
    );
    // A store the user named that cannot be loaded is said as such, not
    // blamed on the (good) bundle.
    const theirs = await attempt("theirs", {
      DENO_TLS_CA_STORE: "system",
      SSL_CERT_FILE: `${pki.dir}/nope.pem`,
    }, ["--ca-bundle-file", pki.caCert]);
    assert.equal(theirs.code, 1, theirs.stderr);
    assert.match(
      theirs.stderr,
      /the trust store cannot be loaded .*check the stores DENO_TLS_CA_STORE=system names/,
    );
    assert.doesNotMatch(theirs.stderr, /not a valid certificate/);
    // Without a bundle too, at start-up rather than at the first request.
    const unknown = await attempt("unknown", { DENO_TLS_CA_STORE: "nosuch" });
    assert.equal(unknown.code, 1, unknown.stderr);
    assert.match(
      unknown.stderr,
      /the trust store cannot be loaded .*DENO_TLS_CA_STORE=nosuch/,
    );
  },
});

Deno.test("acquire gives up at --acquire-timeout while the lease is held: exit 1, a clear line, no state", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  await leaseRpc(server.url, "acquire", KEY, {
    holder: OTHER,
    ttlSeconds: 300,
  });
  const r = await runCli(["acquire", "--acquire-timeout", "1500ms"], {
    env: leaseEnv({ apiServer: server.url, stateDir: dir.path }),
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(r.code, 1, r.stderr);
  assert.match(
    r.stderr,
    /level=ERROR msg="berth-acquire failed" .*error="acquire: gave up waiting for the lease: --acquire-timeout reached; the last attempt: the lease is held by /,
  );
  assert.ok(
    r.stderr.includes(`the lease is held by ${OTHER} (fencing token 1)`),
    r.stderr,
  );
  assert.match(r.stderr, /lease held by another, waiting/);
  assert.deepEqual(listDir(dir.path), []);
  assert.equal(server.store.get("prod", "web")?.holder, OTHER);
});

Deno.test("SIGTERM while acquire waits: exits 1 promptly with a log line, no state", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  await leaseRpc(server.url, "acquire", KEY, {
    holder: OTHER,
    ttlSeconds: 300,
  });
  await using p = new HelperProcess(
    ["acquire"],
    // A long heartbeat: only the signal can end the wait promptly.
    leaseEnv({
      apiServer: server.url,
      stateDir: dir.path,
      ttlSeconds: 600,
      heartbeatSeconds: 300,
    }),
  );
  await p.waitForLine(/lease held by another, waiting/);
  p.kill("SIGTERM");
  const status = await p.wait(10_000);
  assert.equal(status.code, 1, p.log);
  assert.match(p.log, /signal received; shutting down".*signal=SIGTERM/);
  assert.match(
    p.log,
    /level=ERROR msg="berth-acquire failed" .*error="acquire: stopped before the lease was acquired"/,
  );
  assert.deepEqual(listDir(dir.path), []);
});

Deno.test("a hung Acquire is abandoned at its bound and retried: acquire does not stick on one request", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  server.faults.hangNext(1);
  await using p = new HelperProcess(
    ["acquire"],
    leaseEnv({ apiServer: server.url, stateDir: dir.path }),
  );
  await waitFor(() => server.faults.hanging === 1, {
    timeoutMs: 20_000,
    what: "the first Acquire to hang",
  });
  const status = await p.wait(40_000);
  assert.equal(status.code, 0, p.log);
  assert.equal(server.rpcCount("acquire"), 2, "one hung request, one retry");
  assert.match(
    p.log,
    /acquire failed, retrying".*error="request timed out/,
  );
  assert.equal(readStateFile(dir.path, "token"), "1");
});

async function sha256Hex(text: string): Promise<string> {
  const d = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(text),
  );
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, "0"))
    .join("");
}

Deno.test("JSON logs carry level, msg, lease, namespace and holder, and never the API key", async () => {
  const apiKey = "s3cret-token-0f9a7c2e";
  await using server = await startDevServer({
    apiKeys: [`tenant:${await sha256Hex(apiKey)}`],
  });
  await using dir = await tempDir();
  const base = {
    apiServer: server.url,
    stateDir: dir.path,
    extra: { BERTH_CLUSTER_ID: "tenant", BERTH_LOG_FORMAT: "json" },
  };
  const holder = `tenant/${runtimeHolder().replace("/", ":")}`;

  // A rejected key first: the 401 is logged, the key is not.
  const wrongKey = "wrong-token-77d1e0";
  const denied = await runCli(["acquire", "--acquire-timeout", "1500ms"], {
    env: leaseEnv({
      ...base,
      extra: { ...base.extra, BERTH_API_KEY: wrongKey },
    }),
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(denied.code, 1, denied.stderr);
  assert.match(denied.stderr, /401/);

  const ok = await runCli(["acquire"], {
    env: leaseEnv({ ...base, extra: { ...base.extra, BERTH_API_KEY: apiKey } }),
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(ok.code, 0, ok.stderr);

  for (const [r, key] of [[denied, wrongKey], [ok, apiKey]] as const) {
    assert.ok(!r.stdout.includes(key) && !r.stderr.includes(key), "key leaked");
    const lines = r.stderr.split("\n").filter((l) => l !== "");
    assert.ok(lines.length >= 2, r.stderr);
    for (const line of lines) {
      const rec = JSON.parse(line);
      assert.ok(["DEBUG", "INFO", "WARN", "ERROR"].includes(rec.level), line);
      assert.equal(typeof rec.msg, "string", line);
      assert.equal(rec.lease, "web", line);
      assert.equal(rec.namespace, "prod", line);
      assert.equal(rec.holder, holder, line);
    }
  }
  const acquired = ok.stderr.split("\n").filter((l) => l !== "")
    .map((l) => JSON.parse(l)).find((rec) => rec.msg === "lease acquired");
  assert.equal(acquired?.fencing_token, 1);
  assert.equal(readStateFile(dir.path, "holder"), holder);
});

Deno.test("a configuration error (no TTL) exits 1 with the spec's message and touches nothing", async () => {
  await using dir = await tempDir();
  const r = await runCli(["acquire"], {
    env: leaseEnv({
      apiServer: "http://127.0.0.1:9",
      stateDir: dir.path,
      omit: ["BERTH_TTL_SECONDS", "BERTH_HEARTBEAT_SECONDS"],
    }),
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(r.code, 1);
  assert.match(
    r.stderr,
    /ttl must be positive and at most 2147483647 seconds \(the API limit\)/,
  );
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.deepEqual(listDir(dir.path), []);
});

Deno.test("a second acquire under the same holder identity does not get a lease that is already held", async () => {
  await using server = await startDevServer();
  await using one = await tempDir();
  await using two = await tempDir();
  const env = (stateDir: string) =>
    leaseEnv({
      apiServer: server.url,
      stateDir,
      ttlSeconds: 30,
      heartbeatSeconds: 1,
    });
  const first = await runCli(["acquire"], {
    env: env(one.path),
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(first.code, 0, first.stderr);
  // The server answers a live holder's Acquire like a renew; the second
  // process must notice that the grant is older than its request.
  const second = await runCli(["acquire", "--acquire-timeout", "2s"], {
    env: env(two.path),
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(second.code, 1, second.stderr);
  assert.match(second.stderr, /already held under this holder identity/);
  assert.deepEqual(listDir(two.path), [], "nothing handed over");
});

Deno.test("acquire run again on its own state volume (a recreated pod sandbox) takes its derived holder's live lease at once, token kept", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const env = leaseEnv({
    apiServer: server.url,
    stateDir: dir.path,
    ttlSeconds: 30,
    heartbeatSeconds: 1,
  });
  const run = () =>
    runCli(["acquire", "--acquire-timeout", "20s"], {
      env,
      signal: AbortSignal.timeout(RUN_BOUND_MS),
    });
  assert.equal((await run()).code, 0);
  const token = readStateFile(dir.path, "token");
  const again = await run();
  assert.equal(again.code, 0, again.stderr);
  assert.doesNotMatch(again.stderr, /holder identity/);
  assert.equal(readStateFile(dir.path, "token"), token);
  // Another token in the volume proves nothing: the guard stays.
  await Deno.writeTextFile(`${dir.path}/token`, "7");
  const stale = await runCli(["acquire", "--acquire-timeout", "2s"], {
    env,
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(stale.code, 1, stale.stderr);
  assert.match(stale.stderr, /already held under this holder identity/);
  // A holder given explicitly may be another pod's too (a server that
  // reissued tokens would make its token look like ours): the guard stays.
  await using explicit = await tempDir();
  const shared = leaseEnv({
    apiServer: server.url,
    stateDir: explicit.path,
    leaseName: "shared",
    ttlSeconds: 30,
    heartbeatSeconds: 1,
    extra: { BERTH_HOLDER_IDENTITY: "prod/shared" },
  });
  const runShared = (timeout: string) =>
    runCli(["acquire", "--acquire-timeout", timeout], {
      env: shared,
      signal: AbortSignal.timeout(RUN_BOUND_MS),
    });
  assert.equal((await runShared("20s")).code, 0);
  const rerun = await runShared("2s");
  assert.equal(rerun.code, 1, rerun.stderr);
  assert.match(rerun.stderr, /already held under this holder identity/);
});

Deno.test("startup-gate: every pod of the workload shares its holder identity and is admitted while the lease is live", async () => {
  await using server = await startDevServer();
  const env = (stateDir: string, podName: string) =>
    leaseEnv({
      apiServer: server.url,
      stateDir,
      leaseName: "web-admission",
      mode: "startup-gate",
      podName,
      ttlSeconds: 30,
      extra: { BERTH_WORKLOAD_KIND: "ReplicaSet", BERTH_WORKLOAD_NAME: "web" },
    });
  for (const pod of ["web-a", "web-b", "web-c"]) {
    await using dir = await tempDir();
    const r = await runCli(["acquire", "--acquire-timeout", "20s"], {
      env: env(dir.path, pod),
      signal: AbortSignal.timeout(RUN_BOUND_MS),
    });
    assert.equal(r.code, 0, `${pod}: ${r.stderr}`);
    assert.equal(readStateFile(dir.path, "holder"), "prod/ReplicaSet:web");
    // Admitted on the live lease (same token), not after letting it expire.
    assert.equal(readStateFile(dir.path, "token"), "1", `${pod}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /holder identity/);
  }
});

Deno.test("acquire creates a missing state directory (and its parents, mode 0755) before the hand-over", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const stateDir = `${dir.path}/a/b/berth`;
  const r = await runCli(["acquire"], {
    env: leaseEnv({ apiServer: server.url, stateDir }),
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(readStateFile(stateDir, "token"), "1");
  for (const d of [`${dir.path}/a`, `${dir.path}/a/b`, stateDir]) {
    const info = await Deno.stat(d);
    assert.ok(info.isDirectory, d);
    // 0755 as requested, less whatever the umask takes away.
    assert.equal(info.mode! & 0o777 & ~0o755, 0, d);
  }
});

Deno.test("acquire names an unexpected argument, and the nearest flag for a misspelled one", async () => {
  await using dir = await tempDir();
  const env = leaseEnv({ apiServer: "http://127.0.0.1:9", stateDir: dir.path });
  const foo = await runCli(["acquire", "foo"], {
    env,
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(foo.code, 1);
  assert.match(
    foo.stderr,
    /^time=\S+ level=ERROR msg="berth-acquire failed" error="invalid configuration: unexpected argument \\"foo\\"/,
  );
  const typo = await runCli(["acquire", "--acquire-timout=1s"], {
    env,
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(typo.code, 1);
  assert.match(typo.stderr, /did you mean --acquire-timeout\?/);
  assert.doesNotMatch(typo.stderr, /--lease-namespace/, "no whole flag list");
  assert.deepEqual(listDir(dir.path), []);
});

Deno.test("an API server URL with a password is refused without printing the password", async () => {
  await using dir = await tempDir();
  const r = await runCli(["acquire"], {
    env: leaseEnv({
      apiServer: "https://user:S3CRET@127.0.0.1:9",
      stateDir: dir.path,
    }),
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /must not carry credentials/);
  assert.match(r.stderr, /https:\/\/\*\*\*@127\.0\.0\.1:9/);
  assert.doesNotMatch(r.stderr + r.stdout, /S3CRET/);
});

Deno.test("an invalid lease name is refused at start-up with the server's rule, not retried against 400", async () => {
  await using dir = await tempDir();
  const r = await runCli(["acquire"], {
    env: leaseEnv({
      apiServer: "http://127.0.0.1:9",
      stateDir: dir.path,
      leaseName: "Web_1",
    }),
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(r.code, 1);
  assert.match(
    r.stderr,
    /invalid configuration: invalid name \\"Web_1\\": must be an RFC 1123 DNS subdomain .*set BERTH_LEASE_NAME or --lease-name/,
  );
});

Deno.test("with BERTH_LOG_FORMAT=json a configuration error and an unknown-variable warning are JSON lines", async () => {
  await using dir = await tempDir();
  const r = await runCli(["acquire"], {
    env: {
      ...leaseEnv({
        apiServer: "http://127.0.0.1:9",
        stateDir: dir.path,
        omit: ["BERTH_TTL_SECONDS", "BERTH_HEARTBEAT_SECONDS"],
      }),
      BERTH_LOG_FORMAT: "json",
      BERTH_TTL_SECOND: "30",
    },
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(r.code, 1);
  const lines = r.stderr.trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(lines.length, 2, r.stderr);
  assert.equal(lines[0].level, "WARN");
  assert.equal(lines[0].variable, "BERTH_TTL_SECOND");
  assert.match(lines[0].msg, /did you mean BERTH_TTL_SECONDS\?/);
  assert.equal(lines[1].level, "ERROR");
  assert.equal(lines[1].subcommand, "acquire");
  assert.equal(lines[1].msg, "berth-acquire failed", "the Go helper's message");
  assert.match(lines[1].error, /^invalid configuration: ttl must be positive/);
  // The log format is settled first: a bad flag is reported as JSON too.
  const bad = await runCli(["acquire", "--nope"], {
    env: { BERTH_LOG_FORMAT: "json" },
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(bad.code, 1);
  assert.equal(JSON.parse(bad.stderr.trim()).level, "ERROR", bad.stderr);
});

Deno.test("under deno run acquire reads no module of the probe's rewrite: it installs the wrapper", async () => {
  // Deno's debug log names every module file it fetches; a configuration
  // error ends acquire after its modules are loaded.
  const root = new URL("../..", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--log-level=debug", "-A", `${root}main.ts`, "acquire"],
    clearEnv: true,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", NO_COLOR: "1" },
    stdout: "null",
    stderr: "piped",
  }).output();
  const fetched = [
    ...new TextDecoder().decode(out.stderr).matchAll(/specifier: (file:\S+)/g),
  ].map((m) => m[1]);
  assert.ok(fetched.some((m) => m.endsWith("/lib/cmd/startup.ts")));
  assert.deepEqual(
    fetched.filter((m) => /\/probe\/|install_check/.test(m)),
    [],
  );
});
