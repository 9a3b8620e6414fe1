/**
 * Creating a missing state directory, as the Go helper does before it writes
 * the hand-over (`os.MkdirAll(dir, 0755)`): in a pod the directory is the
 * mounted volume and exists already, but outside one (`run --state-dir`, a
 * test rig, a volume mounted one level up) refusing to start would help
 * nobody.
 *
 * @module
 */

import type { StateDir } from "./state_dir.ts";

/** The mode of each directory created (subject to the umask, as `MkdirAll`). */
const STATE_DIR_MODE = 0o755;

/**
 * Creates `dir` and any missing parents with mode 0755; does nothing when it
 * exists already as a directory.
 *
 * @param dir The state directory.
 * @throws {Error} Naming the directory and what to do, when it cannot be
 * created or something that is not a directory is in the way.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const root = await Deno.makeTempDir();
 * const dir = `${root}/var/lib/berth`;
 * await ensureStateDir(dir);
 * await ensureStateDir(dir); // already there: nothing to do
 * assert.equal((await Deno.stat(dir)).isDirectory, true);
 * await Deno.writeTextFile(`${dir}/file`, "");
 * await assert.rejects(ensureStateDir(`${dir}/file`), /cannot create the state directory/);
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export async function ensureStateDir(dir: string): Promise<void> {
  try {
    await Deno.mkdir(dir, { recursive: true, mode: STATE_DIR_MODE });
  } catch (e) {
    throw new Error(
      `cannot create the state directory ${dir}: ${
        (e as Error).message
      }; create it, mount the state volume there, or set --state-dir / BERTH_STATE_DIR to a writable directory`,
    );
  }
  const info = await Deno.stat(dir);
  if (!info.isDirectory) {
    throw new Error(
      `the state directory ${dir} is not a directory; set --state-dir / BERTH_STATE_DIR to a directory`,
    );
  }
}

/**
 * What every helper does with the state directory at start-up: creates it
 * when it is missing ({@linkcode ensureStateDir}), then removes the temp
 * files an interrupted write left (`StateDir.cleanStaleTemps`).
 *
 * @param state The state directory.
 * @throws {Error} When the directory cannot be created or read.
 */
export async function prepareStateDir(state: StateDir): Promise<void> {
  await ensureStateDir(state.dir);
  await state.cleanStaleTemps();
}
