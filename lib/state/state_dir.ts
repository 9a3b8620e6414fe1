/**
 * The state volume through which the roles talk: its files, their reads and
 * writes, what goes to `check` (docs/configuration.md, the state volume).
 * Nothing is fsync-ed: after a node crash the init container rewrites every
 * file in a new sandbox before anyone reads them.
 * Its I/O is synchronous: for a few small files on a local volume that is
 * microseconds, where each asynchronous call costs a trip through the runtime
 * (docs/benchmarks.md). A volume that hangs stalls the whole process (its
 * timers too), not only the enforcement queue: the deadline in the marker is
 * the probe's backstop (docs/known-limits.md).
 *
 * @module
 */
import {
  describeNonRegular,
  formatMarker,
  MARKER_MAX_BYTES,
  type MarkerDeadlines,
  parseMarker,
  readSmallFileNoFollow,
  StateFileError,
} from "./marker.ts";

export const STATE_FILES = {
  holder: "holder",
  token: "token",
  marker: "healthy",
  check: "check",
} as const;

/** The largest size read (a positive int32 has 10 digits), and the name in messages. */
const READS = {
  holder: [1024, "holder file"],
  token: [32, "token file"],
  marker: [MARKER_MAX_BYTES, "health marker"],
} as const;

/** The probe's loader beside `check`; a library `lib<stem>.so[.N...]` is `<stem>`: `check` names them in place of longer names. */
export const LOADER_FILE = "ld.so";
const LIBRARY_FILE = "[A-Za-z0-9_+-]{1,64}";
const TEMP_RE = new RegExp(`^\\.(ld\\.so|${LIBRARY_FILE})\\.tmp-[0-9a-f]{16}$`);

/**
 * A needed library's name in the state directory, if it has one.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(libraryFileName("libc.so.6", "ld-linux-x86-64.so.2"), "c");
 * assert.equal(libraryFileName("ld-linux-x86-64.so.2", "ld-linux-x86-64.so.2"), "ld.so");
 * assert.equal(libraryFileName("libcheck.so.0", "ld.so.1"), undefined);
 * ```
 */
export function libraryFileName(
  needed: string,
  interpBase: string | undefined,
): string | undefined {
  if (needed === interpBase) return LOADER_FILE;
  const m = new RegExp(`^lib(${LIBRARY_FILE})\\.so(\\.[0-9]+)*$`).exec(needed);
  return m && !Object.values<string>(STATE_FILES).includes(m[1])
    ? m[1]
    : undefined;
}

/** What `StateDir.installCheck` installs: a copy of a file, or a script's bytes. */
export type CheckSource = { copyOf: string } | { script: Uint8Array };

/** One file for {@linkcode StateDir.installFiles}: `fill` creates the temp file with content and mode. */
export interface InstallFile {
  name: string;
  fill(tmp: string): Promise<void> | void;
}

/**
 * A fill that copies `from` with mode 0755, executable by any uid.
 *
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
 * `s` as one POSIX shell word.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(shellQuote("it's"), `'it'\\''s'`);
 * ```
 */
export function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * `check` under `deno run`, where there is no executable to copy: `argv`
 * (this checkout's `main.ts`) behind `/bin/sh`, so for one machine only.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.match(checkWrapperScript(["/opt/deno", "run", "/s p/main.ts"]), /exec \/opt\/deno run '\/s p\/main.ts' "\$@"/);
 * ```
 */
export function checkWrapperScript(argv: readonly string[]): string {
  const word = (s: string) =>
    /^[A-Za-z0-9_./=,-]+$/.test(s) ? s : shellQuote(s);
  return "#!/bin/sh\n" +
    "# berth-acquire probe wrapper, installed because the helper ran under `deno run`.\n" +
    `exec ${argv.map(word).join(" ")} "$@"\n`;
}

function stateDirError(dir: string, doing: string, e: unknown): Error {
  return new Error(
    `cannot ${doing} the state directory ${dir}: ${
      e instanceof Deno.errors.NotFound
        ? "it does not exist; mount the state volume there or set --state-dir / BERTH_STATE_DIR"
        : (e as Error).message
    }`,
  );
}

/** The largest fencing token: the API's are positive int32 values. */
export const TOKEN_MAX = 2147483647;

/**
 * A token file's content. Strict: we and the Go helper write the canonical
 * decimal, and the sidecar must adopt a lease on nothing else (`012`, `+12`).
 * White space around it is ignored, as the Go helper ignores it.
 */
export function parseToken(text: string, path: string): number {
  const digits = text.trim();
  if (/^[1-9][0-9]{0,9}$/.test(digits) && Number(digits) <= TOKEN_MAX) {
    return Number(digits);
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

/** The state directory, read and written the same safe way by every role. */
export class StateDir {
  #umask: number | undefined;
  constructor(readonly dir: string) {}

  path(name: string): string {
    return `${this.dir.replace(/\/+$/, "")}/${name}`;
  }

  get markerPath(): string {
    return this.path(STATE_FILES.marker);
  }

  get checkPath(): string {
    return this.path(STATE_FILES.check);
  }

  /** Records the holder the lease was acquired for, which alone the sidecar adopts; refuses one it could not read back. */
  async writeHolder(holder: string): Promise<void> {
    const bytes = new TextEncoder().encode(holder);
    if (bytes.length > READS.holder[0]) {
      throw new Error(
        `holder identity is ${bytes.length} bytes, more than the ${
          READS.holder[0]
        } the state file allows; use a shorter --holder-identity`,
      );
    }
    await this.#write(STATE_FILES.holder, bytes, 0o644);
  }

  /** The recorded holder byte for byte (it is compared exactly, so invalid UTF-8 is an error), or `undefined`. */
  readHolder(): string | undefined {
    const bytes = this.#read("holder");
    try {
      return bytes &&
        new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(
          bytes,
        );
    } catch {
      throw new StateFileError(
        this.path(STATE_FILES.holder),
        "holder file is not valid UTF-8, so berth-acquire did not write it; remove it and restart the pod",
      );
    }
  }

  /** Records the fencing token `acquire` got, for the sidecar to renew with. */
  async writeToken(token: number): Promise<void> {
    if (!Number.isInteger(token) || token < 1 || token > TOKEN_MAX) {
      throw new RangeError(
        `fencing token ${token} is not a positive 32-bit integer; the server's answer is invalid`,
      );
    }
    await this.#write(STATE_FILES.token, String(token), 0o644);
  }

  /** The recorded token ({@linkcode parseToken}), or `undefined`. */
  readToken(): number | undefined {
    const bytes = this.#read("token");
    return bytes &&
      parseToken(new TextDecoder().decode(bytes), this.path(STATE_FILES.token));
  }

  /** Writes (or refreshes) the health marker; without deadlines (startup-gate mode) only its presence and mtime count. */
  async writeMarker(deadlines: MarkerDeadlines | undefined): Promise<void> {
    await this.#write(STATE_FILES.marker, formatMarker(deadlines), 0o644);
  }

  /** The marker's deadlines, for a restarted sidecar; `undefined` when absent or not ours; throws when malformed. */
  readMarkerDeadlines(): MarkerDeadlines | undefined {
    const bytes = this.#read("marker");
    try {
      return bytes && parseMarker(new TextDecoder().decode(bytes));
    } catch (e) {
      throw new StateFileError(this.markerPath, (e as Error).message);
    }
  }

  /** Removes the marker (the probe: "absent"); not a directory in its place, which may be someone's. */
  async removeMarker(): Promise<void> {
    const path = this.markerPath;
    try {
      if ((await Deno.lstat(path)).isDirectory) return;
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

  /** Installs `<dir>/check`, mode 0755. */
  installCheck(source: CheckSource): Promise<void> {
    return "copyOf" in source
      ? this.installFiles({
        name: STATE_FILES.check,
        fill: copyExecutable(source.copyOf),
      })
      : this.#write(STATE_FILES.check, source.script, 0o755);
  }

  /**
   * Writes a file, or a set so that none is seen half-written: every temp
   * file (`.<name>.tmp-<16 hex>`) is filled, then each renamed over its
   * target in order (`check` after its libraries). A failed fill changes no
   * target; no temp file is left. A single file's error names its temp file.
   */
  async installFiles(set: InstallFile | readonly InstallFile[]): Promise<void> {
    const files = Array.isArray(set) ? set : [set];
    const tmps = files.map((f) =>
      this.path(
        `.${f.name}.tmp-${crypto.getRandomValues(new Uint8Array(8)).toHex()}`,
      )
    );
    let i = 0;
    let filled = false;
    try {
      for (; i < files.length; i++) await files[i].fill(tmps[i]);
      // A directory in a target's place would fail its rename after the
      // ones before it: found first, so a failed set renames nothing.
      for (i = 0; i < files.length; i++) {
        let target: Deno.FileInfo | undefined;
        try {
          target = Deno.lstatSync(this.path(files[i].name));
        } catch { /* absent, or the rename says why */ }
        if (target?.isDirectory) throw new Deno.errors.IsADirectory();
      }
      filled = true;
      for (i = 0; i < files.length; i++) {
        Deno.renameSync(tmps[i], this.path(files[i].name));
      }
    } catch (e) {
      for (const tmp of tmps.slice(filled ? i : 0)) {
        try {
          Deno.removeSync(tmp);
        } catch { /* never made, or gone */ }
      }
      if (e instanceof Deno.errors.NotFound) {
        throw stateDirError(this.dir, "write into", e);
      }
      throw new StateFileError(
        this.path(files[i].name),
        e instanceof Deno.errors.IsADirectory
          ? "cannot write it: a directory is in its place; remove that directory"
          : `cannot write it${Array.isArray(set) ? "" : ` (via ${tmps[0]})`}: ${
            (e as Error).message
          }; check that the state volume is mounted read-write and has space`,
      );
    }
  }

  /** Removes our temp files an interrupted write left, returning their paths: roles never run at once, so any at start is stale. */
  cleanStaleTemps(): string[] {
    const removed: string[] = [];
    try {
      for (const entry of Deno.readDirSync(this.dir)) {
        if (entry.isDirectory || !TEMP_RE.test(entry.name)) continue;
        const p = this.path(entry.name);
        try {
          Deno.removeSync(p);
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

  #read(file: keyof typeof READS): Uint8Array | undefined {
    const [max, what] = READS[file];
    const path = this.path(STATE_FILES[file]);
    const r = readSmallFileNoFollow(path, max, what);
    if (r && !r.bytes) {
      throw new StateFileError(path, `${what} ${describeNonRegular(r.info)}`);
    }
    return r?.bytes;
  }

  #write(name: string, data: Uint8Array | string, mode: number) {
    const bytes = typeof data === "string"
      ? new TextEncoder().encode(data)
      : data;
    const umask = this.#umask ??= Deno.umask();
    return this.installFiles({
      name,
      fill(tmp) {
        using f = Deno.openSync(tmp, { write: true, createNew: true, mode });
        let off = 0;
        while (off < bytes.length) off += f.writeSync(bytes.subarray(off));
        if (mode & umask) Deno.chmodSync(tmp, mode);
      },
    });
  }
}

/**
 * Creates `dir` and missing parents with mode 0755, as the Go helper does:
 * outside a pod, refusing would help nobody.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const root = await Deno.makeTempDir();
 * ensureStateDir(`${root}/var/lib`);
 * assert.ok((await Deno.stat(`${root}/var/lib`)).isDirectory);
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export function ensureStateDir(dir: string): void {
  const fix = "set --state-dir / BERTH_STATE_DIR to a directory";
  try {
    // Made, or a directory (a link to one) already: no error.
    return Deno.mkdirSync(dir, { recursive: true, mode: 0o755 });
  } catch (e) {
    if (!(e instanceof Deno.errors.AlreadyExists)) {
      throw new Error(
        `cannot create the state directory ${dir}: ${
          (e as Error).message
        }; create it, mount the state volume there, or ${fix} that is writable`,
      );
    }
  }
  const info = Deno.statSync(dir);
  if (!info.isDirectory) {
    throw new Error(
      `the state directory ${dir} is ${
        info.isFile ? "a file, not a directory" : "not a directory"
      }; remove it, or ${fix}`,
    );
  }
}

/** A role's start with the state directory: {@linkcode ensureStateDir}, then `cleanStaleTemps`. */
export function prepareStateDir(state: StateDir): void {
  ensureStateDir(state.dir);
  state.cleanStaleTemps();
}
