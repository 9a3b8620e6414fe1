/**
 * How a file in the state directory is written: atomically, and no more. A
 * temp file named `.<name>.tmp-<16 hex>` in the same directory is created
 * with the file's mode, written, closed and renamed over the target
 * (chmod-ed first only when the process umask would strip a bit of the
 * mode). A reader (the probe, a restarted sidecar) sees the old file or the
 * new one, never a part: rename(2) is atomic for concurrent readers on its
 * own. Nothing is fsync-ed, because nothing here must outlive a node crash:
 * the volume is the pod's `emptyDir`, and after a node crash the kubelet
 * starts the pod in a new sandbox, which runs the init container again
 * before the sidecar and the main containers; it rewrites `holder`, `token`,
 * `healthy` and `check` before anyone reads them, so a file a crash left
 * empty or torn is never read (with `medium: Memory` the files are gone
 * anyway). A container restart (not a node crash) keeps the page cache, so
 * it sees every completed write.
 *
 * `StateDir` (`state_dir.ts`) is the only caller; these functions take the
 * directory as an argument so that the state files' rules stay there.
 *
 * @module
 */
import { StateFileError } from "./nofollow.ts";

/** One file of a set written by {@linkcode replaceFilesAtomic}. */
export interface InstallFile {
  /** Its name in the state directory. */
  name: string;
  /** Creates the temp file at `tmp` with its content and mode. */
  fill(tmp: string): Promise<void>;
}

/**
 * A {@linkcode InstallFile.fill} that copies `from` to the temp file with
 * mode 0755, readable and executable by any uid (`copyFile` takes the
 * source's mode, whatever the umask, so the mode is set after).
 *
 * @param from The file to copy.
 * @returns The fill.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/a`, "x", { mode: 0o600 });
 * await copyExecutable(`${dir}/a`)(`${dir}/b`);
 * assert.equal((await Deno.stat(`${dir}/b`)).mode! & 0o777, 0o755);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function copyExecutable(from: string): (tmp: string) => Promise<void> {
  return async (tmp) => {
    await Deno.copyFile(from, tmp);
    await Deno.chmod(tmp, 0o755);
  };
}

/**
 * The path of a file in the state directory, for writes, logs and messages.
 *
 * @param dir The state directory (trailing slashes are ignored).
 * @param name The file's name in it.
 * @returns `<dir>/<name>`.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(statePath("/berth//", "token"), "/berth/token");
 * ```
 */
export function statePath(dir: string, name: string): string {
  return `${dir.replace(/\/+$/, "")}/${name}`;
}

/**
 * A fresh temp file's path for writing `name`: `.<name>.tmp-<16 hex>` in
 * the same directory (the form the stale-temp clean-up recognises).
 *
 * @param dir The state directory.
 * @param name The target's name.
 * @returns The temp file's path.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.match(tempPath("/berth", "token"), /^\/berth\/\.token\.tmp-[0-9a-f]{16}$/);
 * ```
 */
export function tempPath(dir: string, name: string): string {
  return statePath(
    dir,
    `.${name}.tmp-${crypto.getRandomValues(new Uint8Array(8)).toHex()}`,
  );
}

/**
 * Writes `bytes` to `<dir>/<name>` with `mode`, atomically (see the module
 * doc).
 *
 * @param dir The state directory.
 * @param name The file's name.
 * @param bytes Its whole content.
 * @param mode Its mode.
 * @param umask The process umask: when it keeps `mode`, the file is created
 *   with one `writeFile` and no chmod.
 * @throws {StateFileError} Naming the file, when it cannot be written.
 * @throws {Error} Naming the directory, when it does not exist.
 */
export function writeAtomic(
  dir: string,
  name: string,
  bytes: Uint8Array,
  mode: number,
  umask: number,
): Promise<void> {
  return replaceAtomic(dir, name, async (tmp) => {
    if ((0o666 & ~umask) === mode) {
      // The default creation mode is the one wanted: one operation (open,
      // write all, close) instead of one per step. (`writeFile` with a
      // mode would add a chmod.)
      await Deno.writeFile(tmp, bytes, { createNew: true });
      return;
    }
    const f = await Deno.open(tmp, { write: true, createNew: true, mode });
    try {
      let off = 0;
      while (off < bytes.length) off += await f.write(bytes.subarray(off));
    } finally {
      f.close();
    }
    if (mode & umask) await Deno.chmod(tmp, mode);
  });
}

/**
 * Creates the temp file with `fill` (which sets its mode), then renames it
 * over `<dir>/<name>`; on failure the temp file is removed.
 *
 * @param dir The state directory.
 * @param name The file's name.
 * @param fill Creates the temp file at the path it is given.
 * @throws {StateFileError} Naming the file, when it cannot be written.
 * @throws {Error} Naming the directory, when it does not exist.
 */
export async function replaceAtomic(
  dir: string,
  name: string,
  fill: (tmp: string) => Promise<void>,
): Promise<void> {
  const target = statePath(dir, name);
  const tmp = tempPath(dir, name);
  try {
    await fill(tmp);
    await Deno.rename(tmp, target);
  } catch (e) {
    await Deno.remove(tmp).catch(() => {});
    throw writeError(dir, target, e, tmp);
  }
}

/**
 * Writes a set of files so that none is seen half-written: every temp file
 * is created and filled first, then each is renamed over its target in the
 * order given. When creating or filling one fails, every temp file is
 * removed and no target has changed.
 *
 * @param dir The state directory.
 * @param files The files, in the order they are renamed into place.
 * @throws {StateFileError} Naming the file that could not be written.
 * @throws {Error} Naming the directory, when it does not exist.
 */
export async function replaceFilesAtomic(
  dir: string,
  files: readonly InstallFile[],
): Promise<void> {
  const tmps: string[] = [];
  let renamed = 0;
  let current = files[0]?.name ?? "";
  try {
    for (const f of files) {
      current = f.name;
      const tmp = tempPath(dir, f.name);
      tmps.push(tmp);
      await f.fill(tmp);
    }
    for (; renamed < files.length; renamed++) {
      current = files[renamed].name;
      await Deno.rename(tmps[renamed], statePath(dir, current));
    }
  } catch (e) {
    for (const tmp of tmps.slice(renamed)) {
      await Deno.remove(tmp).catch(() => {});
    }
    throw writeError(dir, statePath(dir, current), e);
  }
}

/**
 * The error for a failed write: the directory's when it does not exist,
 * else the file's, with what to check (a directory in the file's place, or
 * the volume's mount and space).
 *
 * @param dir The state directory.
 * @param target The file that was being written.
 * @param e What the write threw.
 * @param tmp The temp file it went through, when there was one.
 * @returns The error to throw.
 */
export function writeError(
  dir: string,
  target: string,
  e: unknown,
  tmp?: string,
): Error {
  if (e instanceof Deno.errors.NotFound) {
    return stateDirError(dir, "write into", e);
  }
  if (e instanceof Deno.errors.IsADirectory) {
    return new StateFileError(
      target,
      `cannot write it: a directory is in its place; remove that directory`,
    );
  }
  return new StateFileError(
    target,
    `cannot write it${tmp ? ` (via ${tmp})` : ""}: ${
      (e as Error).message
    }; check that the state volume is mounted read-write and has space`,
  );
}

/**
 * The error for a failed operation on the state directory itself; a
 * missing directory says how to provide it.
 *
 * @param dir The state directory.
 * @param doing What failed, completing "cannot ... the state directory".
 * @param e What the operation threw.
 * @returns The error to throw.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const e = stateDirError("/b", "read", new Deno.errors.NotFound("x"));
 * assert.match(e.message, /^cannot read the state directory \/b: it does not exist/);
 * ```
 */
export function stateDirError(dir: string, doing: string, e: unknown): Error {
  const msg = (e as Error).message;
  if (e instanceof Deno.errors.NotFound) {
    return new Error(
      `cannot ${doing} the state directory ${dir}: it does not exist; mount the state volume there or set --state-dir / BERTH_STATE_DIR`,
    );
  }
  return new Error(
    `cannot ${doing} the state directory ${dir}: ${msg}`,
  );
}
