/**
 * `berth-acquire run` as a user on a plain machine meets it: the real CLI
 * against servers on 127.0.0.1 (the development server, one that is not a
 * Berth API server, a closed port). What is asserted is what the user sees:
 * the exit status and the log lines, each event said once.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type DevServer, startDevServer } from "../../lib/devserver/server.ts";
import { HelperProcess, tempDir, waitFor } from "../support/lease_env.ts";
import { runCli } from "../support/cli.ts";
import { parseApiKeys } from "../../lib/devserver/api_keys.ts";
import { parseGateArgs } from "../../lib/gate/gate.ts";

/** A failure bound for conditions that take a few heartbeats. */
const BOUND_MS = 30_000;

/** The environment of a `run` on a plain machine: no holder, no POD_*. */
function hostEnv(url: string, lease: string): Record<string, string> {
  return {
    NO_COLOR: "1",
    BERTH_API_SERVER: url,
    BERTH_LEASE_NAME: lease,
    BERTH_LEASE_NAMESPACE: "dev",
    BERTH_TTL_SECONDS: "3",
  };
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Lets another holder have `lease` for a minute. */
function giveToOther(server: DevServer, lease: string): void {
  const now = Date.now();
  server.store.put("dev", lease, {
    holder: "other",
    fencingToken: 1,
    ttlSeconds: 60,
    acquiredAt: now,
    renewedAt: now,
  });
}

/** The log lines (not the command's output) with message `msg`. */
function said(lines: string[], msg: string): string[] {
  return lines.filter((l) => l.includes(`msg=${JSON.stringify(msg)}`));
}

Deno.test("run against a server that is not a Berth API server (501 HTML): ends at once with 78 and one line that names the fix", async () => {
  await using dir = await tempDir();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      new Response(
        "<html><body><h1>Error response</h1><p>Error code: 501</p></body></html>",
        { status: 501, headers: { "content-type": "text/html" } },
      ),
  );
  try {
    await using run = new HelperProcess(
      ["run", "--", "touch", `${dir.path}/ran`],
      hostEnv(`http://127.0.0.1:${server.addr.port}`, "not-berth"),
    );
    // Without the fix run would retry for ever: the bound fails the test.
    const status = await run.wait(BOUND_MS);
    assert.equal(status.code, 78, run.log);
    const fatal = run.lines.filter((l) => l.includes("level=ERROR"));
    assert.equal(fatal.length, 1, run.log);
    assert.match(fatal[0], / fix=/);
    assert.ok(!exists(`${dir.path}/ran`), "the command never ran");
  } finally {
    await server.shutdown();
  }
});

Deno.test("run against a closed port: retried with the time waited in each line, until --acquire-timeout", async () => {
  // A port that was just free: connections are refused.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  await using run = new HelperProcess(
    ["run", "--acquire-timeout=3s", "--", "true"],
    hostEnv(`http://127.0.0.1:${port}`, "refused"),
  );
  const status = await run.wait(BOUND_MS);
  assert.equal(status.code, 76, run.log);
  const retries = said(run.lines, "acquire failed, retrying");
  assert.ok(retries.length >= 2, run.log);
  assert.ok(retries.every((l) => / failing_for=\S+/.test(l)), run.log);
  // The line that ends the wait says what it waited on.
  const gaveUp = said(
    run.lines,
    "gave up waiting for the lease: --acquire-timeout reached",
  );
  assert.equal(gaveUp.length, 1, run.log);
  assert.match(gaveUp[0], /last_attempt="cannot reach the API server/);
});

Deno.test("run with a wrong API key, or none, or a wrong path: ends at once with 78, the server's words and the fix", async () => {
  await using server = await startDevServer({
    apiKeys: ["dev:" + "0".repeat(64)],
  });
  await using dir = await tempDir();
  const cases: [string, Record<string, string>, RegExp, RegExp][] = [
    [
      "wrong key",
      { BERTH_API_KEY: "not-the-key" },
      /server answered 401/,
      /BERTH_API_KEY/,
    ],
    ["no key", {}, /server answered 401/, /BERTH_API_KEY/],
    [
      "wrong path",
      { BERTH_API_SERVER: `${server.url}/nope` },
      /server answered 404/,
      /BERTH_API_SERVER/,
    ],
  ];
  for (const [name, extra, words, fix] of cases) {
    await using run = new HelperProcess(
      ["run", "--", "touch", `${dir.path}/ran`],
      { ...hostEnv(server.url, "keyed"), BERTH_CLUSTER_ID: "dev", ...extra },
    );
    const status = await run.wait(BOUND_MS);
    assert.equal(status.code, 78, `${name}: ${run.log}`);
    const fatal = run.lines.filter((l) => l.includes("level=ERROR"));
    assert.equal(fatal.length, 1, run.log);
    assert.match(fatal[0], words, name);
    assert.match(fatal[0], / fix=.*/, name);
    assert.match(fatal[0], fix, name);
    assert.ok(!run.log.includes("not-the-key"), "the key is never logged");
    assert.ok(!exists(`${dir.path}/ran`), "the command never ran");
  }
});

Deno.test("run standby: says the wait once, not at every poll; a SIGTERM before the lease is INFO with the reason, exit 77", async () => {
  await using server = await startDevServer();
  giveToOther(server, "standby");
  await using run = new HelperProcess(
    ["run", "--log-level=debug", "--", "true"],
    hostEnv(server.url, "standby"),
  );
  // Every poll is said at DEBUG: wait for several.
  await waitFor(
    () =>
      run.lines.filter((l) =>
        l.includes("level=DEBUG") &&
        l.includes('msg="lease held by another, waiting"')
      ).length >= 3,
    { timeoutMs: BOUND_MS, what: "three polls of the held lease" },
  );
  const infos = run.lines.filter((l) =>
    l.includes("level=INFO") &&
    l.includes('msg="lease held by another, waiting"')
  );
  assert.equal(infos.length, 1, run.log);
  assert.match(infos[0], /current_holder=other/);
  run.kill("SIGTERM");
  const status = await run.wait(BOUND_MS);
  assert.equal(status.code, 77, run.log);
  const stopped = said(run.lines, "stopped before the lease was acquired");
  assert.equal(stopped.length, 1, run.log);
  assert.match(stopped[0], /level=INFO .* reason="received SIGTERM"/);
  assert.equal(
    run.lines.filter((l) => l.includes("level=ERROR")).length,
    0,
    run.log,
  );
});

Deno.test("run: one SIGTERM is said once, the command's exit once; every line, the gate's too, carries lease, namespace and holder", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const d = dir.path;
  await using run = new HelperProcess(
    [
      "run",
      "--",
      "sh",
      "-c",
      `trap 'exit 0' TERM; touch "${d}/ready"; sleep 1000 & wait`,
    ],
    hostEnv(server.url, "once"),
  );
  await waitFor(() => exists(`${d}/ready`), {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  run.kill("SIGTERM");
  const status = await run.wait(BOUND_MS);
  assert.equal(status.code, 0, run.log);
  const log = run.lines.filter((l) => l.startsWith("time="));
  assert.equal(
    said(log, "signal received; forwarding it to the command").length,
    1,
    run.log,
  );
  assert.equal(said(log, "the command exited").length, 1, run.log);
  for (const line of log) {
    assert.match(line, / lease=once namespace=dev holder=\S+/, line);
  }
  // The gate's own lines (at DEBUG) carry them too.
  await using debug = new HelperProcess(
    ["run", "--log-level=debug", "--", "true"],
    hostEnv(server.url, "once-debug"),
  );
  assert.equal((await debug.wait(BOUND_MS)).code, 0, debug.log);
  const gate = said(debug.lines, "lease confirmed; running the command");
  assert.equal(gate.length, 1, debug.log);
  assert.match(gate[0], / lease=once-debug namespace=dev holder=\S+/);
});

Deno.test("the API key is called the API key, never a token, in what a user reads", async () => {
  const help = await runCli(["dev-server", "--help"], {
    signal: AbortSignal.timeout(BOUND_MS),
  });
  assert.equal(help.code, 0);
  assert.match(help.stdout, /Bearer <API key>/);
  // The fencing token keeps its name.
  assert.doesNotMatch(help.stdout, /(?<!fencing )token/i);
  assert.throws(
    () => parseApiKeys(["nocolon"], "--api-key"),
    (e: Error) => !/token/i.test(e.message) && /API key/.test(e.message),
  );
  await using dir = await tempDir();
  const missing = await runCli(["acquire"], {
    env: {
      ...hostEnv("http://127.0.0.1:9", "k"),
      BERTH_HOLDER_IDENTITY: "me",
      BERTH_TTL_SECONDS: "30",
      BERTH_STATE_DIR: dir.path,
      BERTH_API_KEY_FILE: `${dir.path}/no-such-key`,
    },
    signal: AbortSignal.timeout(BOUND_MS),
  });
  assert.match(missing.stderr, /the file holding the API key/);
  assert.doesNotMatch(missing.stderr, /holding the token/);
});

Deno.test("--log-level and BERTH_LOG_LEVEL: gate and dev-server take it too; a wrong value is a clear error", async () => {
  const signal = () => AbortSignal.timeout(BOUND_MS);
  const gate = await runCli(["gate", "--log-level=loud", "--", "true"], {
    signal: signal(),
  });
  assert.equal(gate.code, 78);
  assert.match(
    gate.stderr,
    /--log-level="loud": want "debug", "info", "warn" or "error"/,
  );
  const server = await runCli(["dev-server"], {
    env: { BERTH_LOG_LEVEL: "verbose" },
    signal: signal(),
  });
  assert.equal(server.code, 78, "a usage error of dev-server");
  assert.match(server.stderr, /BERTH_LOG_LEVEL="verbose": want "debug"/);
  assert.equal(
    parseGateArgs(["--", "true"], { BERTH_LOG_LEVEL: "debug" }).logLevel,
    "DEBUG",
  );
  assert.equal(
    parseGateArgs(["--log-level", "error", "--", "true"], {
      BERTH_LOG_LEVEL: "debug",
    }).logLevel,
    "ERROR",
  );
});
