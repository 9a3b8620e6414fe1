/**
 * Reading a small state file without following symlinks or blocking on a
 * FIFO, shared by the probe (through the marker module) and the state
 * directory, so both refuse the same things with the same words. The probe
 * loads this module, so it imports nothing.
 *
 * @module
 */

/** Why a state file was refused or could not be read; `detail` omits the path. */
export class StateFileError extends Error {
  /**
   * Carries the path and the bare reason separately so that the probe's
   * one-line verdict can name the path once while logs get the whole story.
   */
  constructor(readonly path: string, readonly detail: string) {
    super(`${path}: ${detail}`);
    this.name = "StateFileError";
  }
}

/** The file-type bits of an lstat result that {@linkcode describeNonRegular} looks at. */
export interface FileKind {
  /** A regular file. */
  isFile: boolean;
  /** A directory. */
  isDirectory: boolean;
  /** A symbolic link (lstat result: never followed). */
  isSymlink: boolean;
  /** A named pipe; `null` where the platform does not say. */
  isFifo?: boolean | null;
  /** A Unix socket; `null` where the platform does not say. */
  isSocket?: boolean | null;
  /** A character device; `null` where the platform does not say. */
  isCharDevice?: boolean | null;
  /** A block device; `null` where the platform does not say. */
  isBlockDevice?: boolean | null;
}

/**
 * Says what a state file is instead of a regular file and what to do about
 * it, because every refusal (by the probe or by the sidecar) must tell the
 * operator why a file they can see was not accepted.
 *
 * @param info The lstat result.
 * @returns What the file is instead, and what to do.
 */
export function describeNonRegular(info: FileKind): string {
  const fix =
    "only berth-acquire writes the state volume; remove it and let the helper rewrite it";
  if (info.isSymlink) {
    return `is a symbolic link, which is never followed (${fix})`;
  }
  if (info.isDirectory) return `is a directory, not a regular file (${fix})`;
  if (info.isFifo) return `is a named pipe, not a regular file (${fix})`;
  if (info.isSocket) return `is a socket, not a regular file (${fix})`;
  if (info.isCharDevice || info.isBlockDevice) {
    return `is a device, not a regular file (${fix})`;
  }
  return `is not a regular file (${fix})`;
}

/** What {@linkcode readSmallFileNoFollow} found at a path. */
export type NoFollowRead =
  | { kind: "absent" }
  | { kind: "not-regular"; info: Deno.FileInfo }
  | { kind: "file"; info: Deno.FileInfo; bytes: Uint8Array };

/** How often a path that is replaced between lstat and open is looked at again. */
const OPEN_ATTEMPTS = 3;

/**
 * The text of a small state file's bytes: ASCII, which is all this tool
 * writes, becomes a string directly; anything else goes through
 * `TextDecoder` (invalid UTF-8 becomes U+FFFD). The probe decodes the marker
 * on every start, and the direct path keeps the decoder out of it.
 *
 * @param bytes The file's content, a few KiB at most.
 * @returns Its text.
 */
export function decodeSmallText(bytes: Uint8Array): string {
  for (const b of bytes) {
    if (b >= 0x80) return new TextDecoder().decode(bytes);
  }
  return String.fromCharCode(...bytes);
}

/**
 * Reads a small regular file without ever following a symlink or blocking on
 * a FIFO: the path is lstat-ed first (only a regular file is opened), then
 * the opened file's device and inode are compared with the lstat result, so a
 * path swapped in between is detected rather than trusted. The state files
 * are replaced by atomic renames while they are read, so a mismatch is looked
 * at again ({@linkcode OPEN_ATTEMPTS} times) before it is reported.
 *
 * A missing file (also one removed during the read) is `absent`, not an
 * error. Throws a {@linkcode StateFileError} for anything else that is wrong:
 * a file larger than `maxBytes`, an open or read error, a path that keeps
 * changing. Deno offers no `O_NOFOLLOW`, hence the compare; the remaining
 * window (a regular file replaced by a FIFO between lstat and open) can only
 * make `open` block, which the probe's timeout turns into a failure.
 *
 * Synchronous on purpose: the files are a few KiB on a local volume, and the
 * probe, which shares this code, pays less without promises.
 *
 * @param path The file.
 * @param maxBytes The largest accepted size.
 * @param what The file's name in messages (`health marker`).
 * @returns Absent, not a regular file, or its bytes.
 * @throws {StateFileError} For anything else that is wrong.
 */
export function readSmallFileNoFollow(
  path: string,
  maxBytes: number,
  what: string,
): NoFollowRead {
  for (let attempt = 1;; attempt++) {
    let linfo: Deno.FileInfo;
    try {
      linfo = Deno.lstatSync(path);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return { kind: "absent" };
      throw new StateFileError(
        path,
        `cannot examine the ${what}: ${(e as Error).message}`,
      );
    }
    if (!linfo.isFile) return { kind: "not-regular", info: linfo };
    let file: Deno.FsFile;
    try {
      file = Deno.openSync(path, { read: true });
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return { kind: "absent" };
      throw new StateFileError(
        path,
        `cannot open the ${what}: ${(e as Error).message}`,
      );
    }
    try {
      const info = file.statSync();
      if (info.dev !== linfo.dev || info.ino !== linfo.ino) {
        if (attempt < OPEN_ATTEMPTS) continue;
        throw new StateFileError(
          path,
          `kept changing while it was opened (${OPEN_ATTEMPTS} attempts); another process is replacing the ${what}`,
        );
      }
      if (info.size > maxBytes) {
        throw new StateFileError(path, tooLarge(info.size, maxBytes, what));
      }
      // Read one byte more than allowed, so a file that grew since fstat is caught too.
      const buf = new Uint8Array(maxBytes + 1);
      let n = 0;
      while (n < buf.length) {
        const got = file.readSync(buf.subarray(n));
        if (got === null || got === 0) break;
        n += got;
      }
      if (n > maxBytes) {
        throw new StateFileError(path, tooLarge(n, maxBytes, what));
      }
      return { kind: "file", info, bytes: buf.slice(0, n) };
    } catch (e) {
      if (e instanceof StateFileError) throw e;
      throw new StateFileError(
        path,
        `cannot read the ${what}: ${(e as Error).message}`,
      );
    } finally {
      file.close();
    }
  }
}

function tooLarge(size: number, max: number, what: string): string {
  return `is ${size} bytes or more, larger than any ${what} berth-acquire writes (limit ${max} bytes); remove it and let the helper rewrite it`;
}
