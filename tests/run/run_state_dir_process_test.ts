/**
 * `run --state-dir` with a directory that does not exist yet: created (with
 * its parents, mode 0755) as `acquire` creates it, then written. The real CLI
 * against a development lease server on 127.0.0.1.
 *
 * @module
 */
import assert from "node:assert/strict";
import { startDevServer } from "../../lib/devserver/server.ts";
import { runCli } from "../support/cli.ts";
import { leaseEnv, readStateFile, tempDir } from "../support/lease_env.ts";

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
