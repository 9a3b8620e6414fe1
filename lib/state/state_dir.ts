/**
 * The state volume (an `emptyDir`, default `/berth`) through which the init
 * container, the sidecar and the main containers' probe talk to each other:
 *
 * | File | Content | Mode |
 * |---|---|---|
 * | `holder` | holder bytes (UTF-8), no newline | 0644 |
 * | `token` | decimal fencing token, no newline | 0644 |
 * | `healthy` | health marker (`marker.ts`); its mtime is what the probe checks | 0644 |
 * | `check` | the probe executable | 0755 |
 * | `ld.so`, `c`, `m`, ... | the probe's loader and libraries (`probe_libraries.ts`), when installed | 0755 |
 *
 * Writes are atomic (a temp file renamed over the target) and not
 * fsync-ed; `atomic_write.ts` says how and why. A crash can leave a temp
 * file behind; {@linkcode StateDir.cleanStaleTemps} removes ours at start-up
 * (the init container and the sidecar never run at the same time, so every
 * temp file seen at start-up is stale).
 *
 * Reads never follow symlinks, accept regular files only and cap their size
 * (holder 1 KiB, token 32 bytes, marker 4 KiB); see `readSmallFileNoFollow`
 * in `nofollow.ts`. An absent file reads as `undefined`; anything else wrong
 * is a `StateFileError` naming the path. Reads are synchronous (tiny local
 * files, and the probe shares the code); writes are async because copying
 * the executable can take a while.
 *
 * `check`, the probe executable, is installed as `install_check.ts`
 * describes.
 *
 * @module
 */
import {
  formatMarker,
  MARKER_MAX_BYTES,
  type MarkerDeadlines,
  parseMarker,
} from "./marker.ts";
import {
  describeNonRegular,
  readSmallFileNoFollow,
  StateFileError,
} from "./nofollow.ts";
import type { CheckSource } from "./install_check.ts";
import {
  copyExecutable,
  type InstallFile,
  replaceAtomic,
  replaceFilesAtomic,
  stateDirError,
  statePath,
  writeAtomic,
} from "./atomic_write.ts";
import { LIBRARY_FILE_PATTERN, LOADER_FILE } from "./probe_libraries.ts";
import { STATE_FILES } from "./state_files.ts";

/** The largest holder read or written; the API allows 253 bytes, so this is generous. */
const HOLDER_MAX_BYTES = 1024;

/** The largest token file read; a positive int32 needs at most 10 digits. */
const TOKEN_MAX_BYTES = 32;

/** The largest fencing token: the API's tokens are positive int32 values. */
export const TOKEN_MAX = 2147483647;

/**
 * Our temp files: `.<name>.tmp-<16 hex>` for a state file or one of the
 * probe's libraries (whose names the library pattern covers, the state
 * files' among them).
 */
const TEMP_RE = new RegExp(
  `^\\.(${
    LOADER_FILE.replace(".", "\\.")
  }|${LIBRARY_FILE_PATTERN})\\.tmp-[0-9a-f]{16}$`,
);

/**
 * Parses a token file's content. Strict on purpose: berth-acquire (and the
 * Go helper before it) writes the canonical decimal form with no sign and no
 * leading zero, so anything else (`012`, `+12`, `1e3`) was not written by
 * either, and the sidecar must not adopt a lease on the strength of a file it
 * cannot vouch for. White space around it is ignored, as the Go helper
 * ignores it (`strings.TrimSpace`; `echo 12 > token` writes `12\n`): it
 * changes nothing about which number it is. Throws a `StateFileError` naming `path`
 * and the expected form.
 *
 * @param text The file's content.
 * @param path The file, for the message.
 * @returns The token.
 * @throws {StateFileError} When the content is not a canonical positive int32.
 */
export function parseToken(text: string, path: string): number {
  const digits = text.trim();
  if (/^[1-9][0-9]{0,9}$/.test(digits)) {
    const n = Number(digits);
    if (n <= TOKEN_MAX) return n;
  }
  throw new StateFileError(
    path,
    `fencing token ${
      JSON.stringify(text)
    } is not a positive 32-bit decimal integer (1..${TOKEN_MAX}, digits only, ` +
      "no leading zero or sign, as berth-acquire writes it); " +
      "remove the state directory's token and holder files and restart the pod",
  );
}

/**
 * The state directory, so that every role reads and writes it the same safe
 * way (see the module doc). Construct it with the configured directory.
 */
export class StateDir {
  #umaskValue: number | undefined;
  /** Uses `dir` as the state directory; nothing is touched until a method is called. */
  constructor(readonly dir: string) {}

  /** The path of one of the `STATE_FILES`, for logs and messages. */
  path(name: string): string {
    return statePath(this.dir, name);
  }

  /** The marker path the probe checks (`<dir>/healthy`). */
  get markerPath(): string {
    return this.path(STATE_FILES.marker);
  }

  /** The probe executable's path (`<dir>/check`), a copy of this program. */
  get checkPath(): string {
    return this.path(STATE_FILES.check);
  }

  /**
   * Records the holder the lease was acquired for, so that the sidecar only
   * ever adopts a lease that was taken for its own holder. Refuses a holder
   * longer than `HOLDER_MAX_BYTES` (1 KiB), which could not be read back.
   */
  async writeHolder(holder: string): Promise<void> {
    const bytes = new TextEncoder().encode(holder);
    if (bytes.length > HOLDER_MAX_BYTES) {
      throw new Error(
        `holder identity is ${bytes.length} bytes, more than the ${HOLDER_MAX_BYTES} the state file allows; use a shorter --holder-identity`,
      );
    }
    await this.#writeAtomic(STATE_FILES.holder, bytes, 0o644);
  }

  /**
   * The holder recorded by `acquire`, byte for byte (invalid UTF-8 is an
   * error rather than silently replaced, because it is compared exactly), or
   * `undefined` when there is none.
   */
  readHolder(): string | undefined {
    const bytes = this.#read(
      STATE_FILES.holder,
      HOLDER_MAX_BYTES,
      "holder file",
    );
    if (bytes === undefined) return undefined;
    try {
      return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(
        bytes,
      );
    } catch {
      throw new StateFileError(
        this.path(STATE_FILES.holder),
        "holder file is not valid UTF-8, so berth-acquire did not write it; remove it and restart the pod",
      );
    }
  }

  /** Records the fencing token, so the sidecar renews with the one `acquire` got. */
  async writeToken(token: number): Promise<void> {
    if (!Number.isInteger(token) || token < 1 || token > TOKEN_MAX) {
      throw new RangeError(
        `fencing token ${token} is not a positive 32-bit integer; the server's answer is invalid`,
      );
    }
    await this.#writeAtomic(
      STATE_FILES.token,
      new TextEncoder().encode(String(token)),
      0o644,
    );
  }

  /** The recorded fencing token, validated by {@linkcode parseToken}, or `undefined` when there is none. */
  readToken(): number | undefined {
    const bytes = this.#read(STATE_FILES.token, TOKEN_MAX_BYTES, "token file");
    if (bytes === undefined) return undefined;
    return parseToken(
      new TextDecoder().decode(bytes),
      this.path(STATE_FILES.token),
    );
  }

  /**
   * Writes (or refreshes) the health marker with its deadlines, so the probe
   * passes until the marker's mtime is older than `--max-age` or the
   * boot-time clock passes the permission's closing time. Without deadlines
   * (startup-gate mode) only presence and mtime count.
   */
  async writeMarker(deadlines: MarkerDeadlines | undefined): Promise<void> {
    await this.#writeAtomic(
      STATE_FILES.marker,
      new TextEncoder().encode(formatMarker(deadlines)),
      0o644,
    );
  }

  /**
   * The deadlines in the current marker, so a restarted sidecar knows how
   * long the workload may still run. `undefined` when there is no marker or
   * its content is not ours (a Go helper's); throws when it is malformed.
   */
  readMarkerDeadlines(): MarkerDeadlines | undefined {
    const bytes = this.#read(
      STATE_FILES.marker,
      MARKER_MAX_BYTES,
      "health marker",
    );
    if (bytes === undefined) return undefined;
    try {
      return parseMarker(new TextDecoder().decode(bytes));
    } catch (e) {
      throw new StateFileError(this.markerPath, (e as Error).message);
    }
  }

  /**
   * Removes the marker so the probe fails with "absent" (the lease was
   * lost). A missing marker is fine. A directory in its place is left alone:
   * the probe already judges it indeterminate, and removing it could delete
   * someone else's data.
   */
  async removeMarker(): Promise<void> {
    const path = this.markerPath;
    try {
      const info = await Deno.lstat(path);
      if (info.isDirectory) return;
      await Deno.remove(path);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return;
      throw new Error(
        `cannot remove the health marker ${path}: ${
          (e as Error).message
        }; the probe keeps passing until its mtime is older than --max-age`,
      );
    }
  }

  /**
   * Installs the probe executable `<dir>/check` (mode 0755) that the
   * webhook's probe argv runs: a copy of an executable, or a script (the
   * wrapper `deno run` installs; see `install_check.ts`).
   *
   * @param source What to install.
   */
  async installCheck(source: CheckSource): Promise<void> {
    if ("copyOf" in source) {
      await replaceAtomic(
        this.dir,
        STATE_FILES.check,
        copyExecutable(source.copyOf),
      );
      return;
    }
    await this.#writeAtomic(STATE_FILES.check, source.script, 0o755);
  }

  /**
   * Writes a set of files so that none is seen half-written: every temp
   * file is created and filled first, then each is renamed over its target
   * in the order given (so `check` goes last, after the libraries it
   * names). When creating or filling one fails, every temp file is removed
   * and no target has changed.
   *
   * @param files The files, in the order they are renamed into place.
   * @throws {StateFileError} Naming the file that could not be written.
   */
  installFiles(files: readonly InstallFile[]): Promise<void> {
    return replaceFilesAtomic(this.dir, files);
  }

  /**
   * Removes temp files that an interrupted write of ours left behind (only
   * names of the form `.<name>.tmp-<16 hex>` where `<name>` is a state file
   * or one of the probe's loader and libraries, `probe_libraries.ts`;
   * nothing else is touched). Returns the removed paths, for the log.
   */
  async cleanStaleTemps(): Promise<string[]> {
    const removed: string[] = [];
    try {
      for await (const entry of Deno.readDir(this.dir)) {
        if (entry.isDirectory || !TEMP_RE.test(entry.name)) continue;
        const p = this.path(entry.name);
        try {
          await Deno.remove(p);
          removed.push(p);
        } catch (e) {
          if (!(e instanceof Deno.errors.NotFound)) throw e;
        }
      }
    } catch (e) {
      throw stateDirError(this.dir, "clean up stale temp files in", e);
    }
    return removed;
  }

  #read(name: string, max: number, what: string): Uint8Array | undefined {
    const path = this.path(name);
    const r = readSmallFileNoFollow(path, max, what);
    if (r.kind === "absent") return undefined;
    if (r.kind === "not-regular") {
      throw new StateFileError(path, `${what} ${describeNonRegular(r.info)}`);
    }
    return r.bytes;
  }

  #writeAtomic(name: string, bytes: Uint8Array, mode: number): Promise<void> {
    return writeAtomic(this.dir, name, bytes, mode, this.#umask());
  }

  /**
   * The process umask, read at the first write (reading it costs two
   * syscalls; a chmod on every write would cost one each time). Nothing in
   * this project changes it while running.
   */
  #umask(): number {
    return this.#umaskValue ??= Deno.umask();
  }
}
