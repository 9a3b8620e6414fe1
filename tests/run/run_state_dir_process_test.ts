/**
 * `run --state-dir` with a directory that does not exist yet: created (with
 * its parents, mode 0755) as `acquire` creates it, then written; and where
 * `run` says its state is, its gate's private directory among it. The real
 * CLI against a development lease server on 127.0.0.1.
 *
 * @module
 */
import assert from "node:assert/strict";
import { startDevServer } from "../../lib/devserver/server.ts";
import { runCli } from "../support/cli.ts";
import {
  HelperProcess,
  leaseEnv,
  readStateFile,
  tempDir,
} from "../support/lease_env.ts";

Deno.test("run --state-dir creates a missing state directory and writes the hand-over there", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const stateDir = `${dir.path}/new/berth`;
  const env = leaseEnv({ apiServer: server.url, stateDir: dir.path });
  delete env.BERTH_STATE_DIR;
  const r = await runCli(
    ["run", "--state-dir", stateDir, "--", "/bin/sh", "-c", "exit 0"],
    { env, signal: AbortSignal.timeout(60_000) },
  );
  assert.equal(r.code, 0, r.stderr);
  assert.equal(readStateFile(stateDir, "token"), "1");
  const info = await Deno.stat(stateDir);
  assert.ok(info.isDirectory);
  assert.equal(info.mode! & 0o777 & ~0o755, 0);
});

Deno.test("run --state-dir -- -- CMD: a flag's value may be --; the next -- starts the command", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const env = leaseEnv({ apiServer: server.url, stateDir: dir.path });
  delete env.BERTH_STATE_DIR;
  const r = await runCli(
    ["run", "--state-dir", "--", "--", "/bin/sh", "-c", "exit 0"],
    { env, cwd: dir.path, signal: AbortSignal.timeout(60_000) },
  );
  assert.equal(r.code, 0, r.stderr);
  // The directory named "--", relative to the working directory.
  assert.equal(readStateFile(`${dir.path}/--`, "token"), "1");
});

Deno.test("run says in its first line where its state is: its gate's private directory (under TMPDIR, named by its pid and the lease, mode 0700, read by status) and the state directory; the private one is gone at exit", async () => {
  await using server = await startDevServer();
  await using tmp = await tempDir();
  const state = `${tmp.path}/state`;
  const env = leaseEnv({ apiServer: server.url, stateDir: state });
  await using run = new HelperProcess(
    ["run", "--", "sleep", "30"],
    { ...env, TMPDIR: tmp.path },
  );
  await run.waitForLine(/msg="running the command"/);
  const first = run.lines[0];
  assert.match(first, /msg="acquiring lease"/);
  assert.match(first, new RegExp(` state_dir=${state}( |$)`));
  const own = new RegExp(
    ` run_dir=(${tmp.path}/berth-run-${run.child.pid}-\\w+)/prod\\.web( |$)`,
  ).exec(first)?.[1];
  assert.ok(own, first);
  for (const dir of [own, `${own}/prod.web`]) {
    assert.equal(Deno.statSync(dir).mode! & 0o777, 0o700, dir);
  }
  const status = await runCli(["status", `${own}/prod.web`], {
    signal: AbortSignal.timeout(30_000),
  });
  assert.equal(status.code, 0, status.stdout + status.stderr);
  assert.match(status.stdout, /token\s+1\b/);
  run.kill("SIGTERM");
  await run.wait();
  assert.deepEqual([...Deno.readDirSync(tmp.path)].map((e) => e.name), [
    "state",
  ]);
});
