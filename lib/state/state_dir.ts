/**
 * The state volume (an `emptyDir`, default `/berth`) through which the init
 * container, the sidecar and the main containers' probe talk to each other:
 *
 * | File | Content | Mode |
 * |---|---|---|
 * | `holder` | holder bytes (UTF-8), no newline | 0644 |
 * | `token` | decimal fencing token, no newline | 0644 |
 * | `healthy` | health marker (lib/marker.ts); its mtime is what the probe checks | 0644 |
 * | `check` | the probe executable | 0755 |
 *
 * Writes are atomic and durable: a temp file named `.<name>.tmp-<16 hex>` in
 * the same directory is written, chmod-ed (the mode given to `open` is subject
 * to the umask), fsync-ed, renamed over the target, and then the directory is
 * fsync-ed (best effort: some file systems refuse) so the rename itself
 * survives a node crash. A crash can leave a
 * temp file behind; {@linkcode StateDir.cleanStaleTemps} removes ours at
 * start-up (the init container and the sidecar never run at the same time,
 * so every temp file seen at start-up is stale).
 *
 * Reads never follow symlinks, accept regular files only and cap their size
 * (holder 1 KiB, token 32 bytes, marker 4 KiB); see `readSmallFileNoFollow`
 * in lib/marker.ts. An absent file reads as `undefined`; anything else wrong
 * is a `StateFileError` naming the path. Reads are synchronous (tiny local
 * files, and the probe shares the code); writes are async because fsync and
 * copying the executable can take a while.
 *
 * `check`: the webhook runs the probe as `<state>/check check <state>/healthy
 * --max-age 30s`, so `check` must be something the main container can exec.
 * A compiled binary (`Deno.build.standalone`) copies itself there. Under
 * `deno run` (development, tests, and while `deno compile` is unavailable)
 * there is no self-contained executable to copy, so a `#!/bin/sh` wrapper is
 * installed instead that execs the same `deno` with this checkout's
 * `main.ts` and permission set; it behaves like the binary, but it needs
 * `/bin/sh`, the `deno` executable and this checkout at the same paths in
 * the container that runs the probe, which holds on one machine but not in a
 * real pod.
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

/** The file names in the state directory; fixed by the webhook and the probe argv. */
export const STATE_FILES = {
  holder: "holder",
  token: "token",
  marker: "healthy",
  check: "check",
} as const;

/** The largest holder read or written; the API allows 253 bytes, so this is generous. */
export const HOLDER_MAX_BYTES = 1024;

/** The largest token file read; a positive int32 needs at most 10 digits. */
export const TOKEN_MAX_BYTES = 32;

/** The largest fencing token: the API's tokens are positive int32 values. */
export const TOKEN_MAX = 2147483647;

const TEMP_RE = /^\.(holder|token|healthy|check)\.tmp-[0-9a-f]{16}$/;

/**
 * Parses a token file's content. Strict on purpose: berth-acquire (and the
 * Go helper before it) writes the canonical decimal form with no sign, no
 * leading zero and no newline, so anything else (`12\n`, `012`, ` 12`) was
 * not written by either, and the sidecar must not adopt a lease on the
 * strength of a file it cannot vouch for. Throws a `StateFileError` naming
 * `path` and the expected form.
 */
export function parseToken(text: string, path: string): number {
  if (/^[1-9][0-9]{0,9}$/.test(text)) {
    const n = Number(text);
    if (n <= TOKEN_MAX) return n;
  }
  throw new StateFileError(
    path,
    `fencing token ${
      JSON.stringify(text)
    } is not a positive 32-bit decimal integer (1..${TOKEN_MAX}, digits only, ` +
      "no leading zero, sign, space or newline, as berth-acquire writes it); " +
      "remove the state directory's token and holder files and restart the pod",
  );
}

/**
 * Quotes `s` for a POSIX shell with single quotes, so a path with spaces,
 * quotes or `$` in it reaches the wrapped command unchanged.
 */
export function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * The `check` wrapper installed under `deno run`: it makes the probe argv
 * (`<state>/check check ...`) run this checkout's CLI the way the compiled
 * binary would run itself (same permission set, no prompts, quiet).
 */
export function checkWrapperScript(denoPath: string, repoRoot: string): string {
  const root = repoRoot.replace(/\/+$/, "");
  return "#!/bin/sh\n" +
    "# berth-acquire probe wrapper, installed because the helper ran under `deno run`.\n" +
    `exec ${
      shellQuote(denoPath)
    } run -q --no-prompt -P=berth-acquire --config ${
      shellQuote(`${root}/deno.json`)
    } ${shellQuote(`${root}/main.ts`)} "$@"\n`;
}

/** How {@linkcode StateDir.installCheck} installs the probe; the defaults describe this process. */
export interface InstallCheckOptions {
  /** Whether this process is a compiled binary that can copy itself; default `Deno.build.standalone`. */
  standalone?: boolean;
  /** The running executable; default `Deno.execPath()`. */
  execPath?: string;
  /** The checkout whose `main.ts` the wrapper runs; default the directory above lib/. */
  repoRoot?: string;
}

function repoRootOfThisModule(): string {
  const url = new URL("../..", import.meta.url);
  if (url.protocol !== "file:") {
    throw new Error(
      `cannot install the probe wrapper: berth-acquire was loaded from ${url.href}, not from local files; run it from a checkout or as a compiled binary`,
    );
  }
  return decodeURIComponent(url.pathname);
}

function randomSuffix(): string {
  const b = crypto.getRandomValues(new Uint8Array(8));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * The state directory, so that every role reads and writes it the same safe
 * way (see the module doc). Construct it with the configured directory.
 */
export class StateDir {
  /** Uses `dir` as the state directory; nothing is touched until a method is called. */
  constructor(readonly dir: string) {}

  /** The path of one of the {@linkcode STATE_FILES}, for logs and messages. */
  path(name: string): string {
    return `${this.dir.replace(/\/+$/, "")}/${name}`;
  }

  /** The marker path the probe checks (`<dir>/healthy`). */
  get markerPath(): string {
    return this.path(STATE_FILES.marker);
  }

  /**
   * Records the holder the lease was acquired for, so that the sidecar only
   * ever adopts a lease that was taken for its own holder. Refuses a holder
   * longer than {@linkcode HOLDER_MAX_BYTES}, which could not be read back.
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
   * Writes (or refreshes) the health marker with the gate deadlines, so the
   * probe passes until the marker's mtime is older than `--max-age` or the
   * boot-time clock passes the gate deadline. Without deadlines (startup-gate
   * mode) only presence and mtime count.
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
   * webhook's probe argv runs: a copy of this binary when compiled, a shell
   * wrapper under `deno run` (see the module doc for the difference).
   */
  async installCheck(options: InstallCheckOptions = {}): Promise<void> {
    const standalone = options.standalone ?? Deno.build.standalone;
    const execPath = options.execPath ?? Deno.execPath();
    if (standalone) {
      await this.#replaceAtomic(STATE_FILES.check, 0o755, async (tmp) => {
        await Deno.copyFile(execPath, tmp);
      });
      return;
    }
    const script = checkWrapperScript(
      execPath,
      options.repoRoot ?? repoRootOfThisModule(),
    );
    await this.#writeAtomic(
      STATE_FILES.check,
      new TextEncoder().encode(script),
      0o755,
    );
  }

  /**
   * Removes temp files that an interrupted write of ours left behind (only
   * names of the form `.<state file>.tmp-<16 hex>`; nothing else is
   * touched). Call at start-up. Returns the removed paths, for the log.
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
      throw this.#dirError("clean up stale temp files in", e);
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
    return this.#replaceAtomic(name, mode, async (tmp) => {
      const f = await Deno.open(tmp, { write: true, createNew: true, mode });
      try {
        let off = 0;
        while (off < bytes.length) off += await f.write(bytes.subarray(off));
      } finally {
        f.close();
      }
    });
  }

  /** Creates the temp file with `fill`, then chmod, fsync, rename, fsync the directory. */
  async #replaceAtomic(
    name: string,
    mode: number,
    fill: (tmp: string) => Promise<void>,
  ): Promise<void> {
    const target = this.path(name);
    const tmp = this.path(`.${name}.tmp-${randomSuffix()}`);
    try {
      await fill(tmp);
      await Deno.chmod(tmp, mode);
      const f = await Deno.open(tmp, { read: true });
      try {
        await f.sync();
      } finally {
        f.close();
      }
      await Deno.rename(tmp, target);
    } catch (e) {
      await Deno.remove(tmp).catch(() => {});
      if (e instanceof Deno.errors.NotFound) {
        throw this.#dirError("write into", e);
      }
      throw new StateFileError(
        target,
        `cannot write it (via ${tmp}): ${
          (e as Error).message
        }; check that the state volume is mounted read-write and has space`,
      );
    }
    // Best effort: the rename has happened, so a file system that cannot
    // fsync a directory must not turn a successful write into a failure.
    try {
      const d = await Deno.open(this.dir, { read: true });
      try {
        await d.sync();
      } finally {
        d.close();
      }
    } catch {
      // The write is visible; only its durability across a node crash is weaker.
    }
  }

  #dirError(doing: string, e: unknown): Error {
    const msg = (e as Error).message;
    if (e instanceof Deno.errors.NotFound) {
      return new Error(
        `cannot ${doing} the state directory ${this.dir}: it does not exist; mount the state volume there or set --state-dir / BERTH_STATE_DIR`,
      );
    }
    return new Error(
      `cannot ${doing} the state directory ${this.dir}: ${msg}`,
    );
  }
}
