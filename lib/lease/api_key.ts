/**
 * Where the API key comes from. A key given directly never changes; a key
 * file is a mounted Secret rotated in place, so it is re-read (at most once
 * a second) and a half-written or briefly missing file never takes away a
 * key that worked a moment ago. A read can block (a FIFO in the file's
 * place, a hung mount) and cannot be cancelled: every read is bounded, a
 * request waits for a due re-read only {@linkcode REREAD_WAIT_MS} and then
 * goes with the last good key, and no second read starts while one is
 * pending (docs/configuration.md, "TLS and the API key").
 *
 * @module
 */
import { bounded, type Clock, systemClock } from "../state/clock.ts";
import { discardLogger, type Logger, Secret } from "../obs/log.ts";

/** A small share of the shortest heartbeat (1 s), so a hung read never costs a renewal its bound. */
export const REREAD_WAIT_MS = 100;

/** Larger than any real key; a bigger file is a mistake (wrong path), not a key. */
const MAX_KEY_FILE_BYTES = 16 * 1024;

const FIX_PATH =
  "point --api-key-file / BERTH_API_KEY_FILE at the file holding the API key";
const FIX_MODE =
  "make it readable by that uid (in a pod: the Secret volume's defaultMode, or the pod's fsGroup)";

/** Options for {@linkcode ApiKeySource.fromFile}. */
export interface ApiKeyFileOptions {
  /** Decides when the file is due and bounds each read; default the system clock. */
  clock?: Clock;
  /** Gets the warnings about failed re-reads (never the key). */
  logger?: Logger;
  /** Minimum milliseconds between two reads of the file; default 1000. */
  minReadIntervalMs?: number;
  /**
   * The longest a read may take (ms; default 2000). At start-up a read that
   * takes longer is an error; later the last good key is used meanwhile.
   */
  readTimeoutMs?: number;
  /** Reads the bytes, throwing an `Error` that says why not (a seam for a read that blocks). */
  readFile?: (path: string) => Promise<Uint8Array>;
}

/**
 * Gives the client the key to send on each request, and the keys to remove
 * from anything a server sends back: the one in use and, after a rotation,
 * the one before it.
 */
export class ApiKeySource {
  private constructor(
    /** `signal` (the request's own bound) ends the wait for a due re-read early. */
    readonly current: (signal?: AbortSignal) => Promise<Secret>,
    readonly secrets: () => string[],
  ) {}

  /**
   * A key that never changes (`--api-key` / `BERTH_API_KEY`).
   *
   * @throws {Error} When it is empty or cannot be sent in an HTTP header, so
   * a bad value is a start-up error rather than a 401 on every request.
   */
  static fromSecret(secret: Secret): ApiKeySource {
    const problem = keyProblem(secret.reveal());
    if (problem) {
      throw new Error(
        `the API key ${problem}; set --api-key / BERTH_API_KEY to the API key the Berth API server issued`,
      );
    }
    return new ApiKeySource(
      () => Promise.resolve(secret),
      () => [secret.reveal()],
    );
  }

  /**
   * A key read from `path` (`--api-key-file` / `BERTH_API_KEY_FILE`),
   * trimmed. The file is read now, and re-read by `current()` once
   * `minReadIntervalMs` passed since the last read. When a re-read fails,
   * finds no usable key or does not finish within `readTimeoutMs`, the last
   * good key is kept and one warning is logged per streak of failures; a
   * late read that succeeds still counts.
   *
   * @throws {Error} A configuration error naming the file and what to do,
   * when it is missing, unreadable (with uid, mode and owner), not a regular
   * file, empty, unusable, or not read within `readTimeoutMs`.
   */
  static async fromFile(
    path: string,
    options: ApiKeyFileOptions = {},
  ): Promise<ApiKeySource> {
    const clock = options.clock ?? systemClock;
    const logger = options.logger ?? discardLogger;
    const interval = options.minReadIntervalMs ?? 1000;
    const readTimeoutMs = options.readTimeoutMs ?? 2000;
    const read = () => readKeyFile(path, options.readFile ?? readRegularFile);
    const first = await within(read(), clock.timeout(readTimeoutMs));
    if (first === undefined) {
      throw new Error(
        `API key file ${path} could not be read within ${readTimeoutMs} ms (is it a FIFO, or on a hung network mount?); point --api-key-file / BERTH_API_KEY_FILE at the mounted Secret's file`,
      );
    }
    if ("problem" in first) {
      throw new Error(`API key file ${path}: ${first.problem}; ${first.fix}`);
    }
    let key = new Secret(first.key);
    let previous: Secret | undefined;
    let lastRead = clock.now();
    let failing = false;
    let pending: Promise<void> | undefined;
    const fail = (problem: string) => {
      if (failing) return;
      failing = true;
      logger.warn(
        "cannot re-read the API key file; keeping the last good key",
        { file: path, error: problem },
      );
    };
    const refresh = async (): Promise<void> => {
      const got = await read();
      if ("problem" in got) return fail(got.problem);
      if (failing) {
        logger.info("API key file is usable again", { file: path });
      } else if (got.key !== key.reveal()) {
        logger.info("API key file changed; using the new key", { file: path });
      }
      failing = false;
      if (got.key !== key.reveal()) previous = key;
      key = new Secret(got.key);
    };
    const current = async (signal?: AbortSignal): Promise<Secret> => {
      if (pending === undefined && clock.now() - lastRead >= interval) {
        lastRead = clock.now();
        const started = refresh().finally(() => (pending = undefined));
        pending = started;
        // Said once the read passes its own bound, whoever still waits.
        const ended = started.then(() => true);
        within(ended, clock.timeout(readTimeoutMs)).then((done) =>
          done || fail(
            `the read did not finish within ${readTimeoutMs} ms (a FIFO, or a hung network mount?); it is left pending and no other read starts until it ends`,
          )
        );
        using wait = bounded(
          clock,
          Math.min(REREAD_WAIT_MS, readTimeoutMs),
          ...(signal ? [signal] : []),
        );
        await within(started, wait.signal);
      }
      // A read still pending (this call's, or an earlier one that hangs):
      // the last good key, at once.
      return key;
    };
    return new ApiKeySource(
      current,
      () => [key.reveal(), ...(previous ? [previous.reveal()] : [])],
    );
  }
}

/**
 * The key source the configuration names, or undefined for none (no
 * Authorization header is sent then).
 *
 * @throws {Error} As {@linkcode ApiKeySource.fromSecret} and
 * {@linkcode ApiKeySource.fromFile} do.
 */
export async function apiKeySourceFromConfig(
  config: { apiKey?: Secret; apiKeyFile?: string },
  options: ApiKeyFileOptions = {},
): Promise<ApiKeySource | undefined> {
  if (config.apiKey !== undefined) {
    return ApiKeySource.fromSecret(config.apiKey);
  }
  if (config.apiKeyFile === undefined) return undefined;
  return await ApiKeySource.fromFile(config.apiKeyFile, options);
}

/** `work`'s value, or undefined when `signal` aborts first; `work` is left running. */
function within<T>(
  work: Promise<T>,
  signal: AbortSignal,
): Promise<T | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve(undefined);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() =>
      signal.removeEventListener("abort", onAbort)
    );
  });
}

/** Why `key` cannot be sent as a bearer token, or undefined when it can. */
function keyProblem(key: string): string | undefined {
  if (key === "") return "is empty";
  // Printable ASCII without spaces: anything else either breaks the header
  // (a newline would even inject one) or is not a token the server issued.
  if (!/^[\x21-\x7e]+$/.test(key)) {
    return "contains spaces, control or non-ASCII characters";
  }
  return undefined;
}

/** The trimmed key in `path`, or why there is none and what to do. Never throws. */
async function readKeyFile(
  path: string,
  readFile: (path: string) => Promise<Uint8Array>,
): Promise<{ key: string } | { problem: string; fix: string }> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.PermissionDenied) {
      return { problem: await notReadable(path), fix: FIX_MODE };
    }
    const problem = e instanceof NotRegularFile
      ? e.message
      : e instanceof Deno.errors.NotFound
      ? "cannot be read (no such file)"
      : `cannot be read (${(e as Error).message})`;
    return { problem, fix: FIX_PATH };
  }
  let problem: string | undefined;
  let key = "";
  if (bytes.length > MAX_KEY_FILE_BYTES) {
    problem = `is larger than ${MAX_KEY_FILE_BYTES} bytes`;
  } else {
    try {
      key = new TextDecoder("utf-8", { fatal: true }).decode(bytes).trim();
      problem = keyProblem(key);
    } catch {
      problem = "is not UTF-8 text";
    }
  }
  return problem ? { problem, fix: FIX_PATH } : { key };
}

/** The path names something a key cannot be read from without blocking or failing. */
class NotRegularFile extends Error {}

/**
 * The bytes of `path` (at most one more than the cap), refusing anything but
 * a regular file before opening it: opening a FIFO blocks until a writer
 * comes.
 */
async function readRegularFile(path: string): Promise<Uint8Array> {
  const check = (info: Deno.FileInfo) => {
    if (info.isFile) return;
    const type = info.isDirectory
      ? "directory"
      : info.isFifo
      ? "FIFO"
      : info.isSocket
      ? "socket"
      : info.isCharDevice || info.isBlockDevice
      ? "device"
      : "special file";
    throw new NotRegularFile(`is a ${type}, not a regular file`);
  };
  check(await Deno.stat(path));
  using file = await Deno.open(path, { read: true });
  check(await file.stat());
  const buf = new Uint8Array(MAX_KEY_FILE_BYTES + 1);
  let n = 0;
  while (n < buf.length) {
    const got = await file.read(buf.subarray(n));
    if (got === null) break;
    n += got;
  }
  return buf.subarray(0, n);
}

/** "is not readable by uid N (mode M, owner U:G)", as far as stat can tell. */
async function notReadable(path: string): Promise<string> {
  const uid = Deno.uid() ?? "unknown";
  try {
    const info = await Deno.stat(path);
    const mode = info.mode === null
      ? "unknown"
      : `0${(info.mode & 0o7777).toString(8).padStart(3, "0")}`;
    return `is not readable by uid ${uid} (mode ${mode}, owner ${
      info.uid ?? "?"
    }:${info.gid ?? "?"})`;
  } catch {
    return `is not readable by uid ${uid} (its directory cannot be searched either)`;
  }
}
