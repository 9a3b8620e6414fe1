/**
 * Creating a missing state directory, as upstream's `MkdirAll(dir, 0755)`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ensureStateDir, prepareStateDir } from "../../lib/state/ensure_dir.ts";
import { StateDir } from "../../lib/state/state_dir.ts";
import { tempDir } from "../support/lease_env.ts";

Deno.test("ensureStateDir creates the directory and its parents with mode 0755", async () => {
  await using dir = await tempDir();
  const target = `${dir.path}/x/y/berth`;
  await ensureStateDir(target);
  for (const d of [`${dir.path}/x`, `${dir.path}/x/y`, target]) {
    const info = await Deno.stat(d);
    assert.ok(info.isDirectory, d);
    assert.equal(info.mode! & 0o777 & ~0o755, 0, `${d} at most 0755`);
  }
  // An existing directory is left alone, mode included.
  await Deno.chmod(target, 0o700);
  await ensureStateDir(target);
  assert.equal((await Deno.stat(target)).mode! & 0o777, 0o700);
});

Deno.test("ensureStateDir names the directory when a file is in the way", async () => {
  await using dir = await tempDir();
  const file = `${dir.path}/file`;
  await Deno.writeTextFile(file, "");
  await assert.rejects(
    () => ensureStateDir(file),
    (e: Error) => e.message.includes(file) && /BERTH_STATE_DIR/.test(e.message),
  );
  await assert.rejects(
    () => ensureStateDir(`${file}/sub`),
    (e: Error) => e.message.includes(`${file}/sub`),
  );
});

Deno.test("prepareStateDir creates a missing directory, then removes the temp files a crash left", async () => {
  await using dir = await tempDir();
  const state = new StateDir(`${dir.path}/a/b`);
  await prepareStateDir(state);
  assert.ok((await Deno.stat(state.dir)).isDirectory);
  const left = `${state.dir}/.token.tmp-0123456789abcdef`;
  await Deno.writeTextFile(left, "1");
  await prepareStateDir(state);
  assert.deepEqual([...Deno.readDirSync(state.dir)], []);
});
