/**
 * Where the API key comes from. A key given directly never changes; a key
 * file is a mounted Kubernetes Secret that is rotated in place, so it is
 * re-read (at most once a second) and a half-written or briefly missing file
 * never takes away a key that worked a moment ago.
 *
 * A read can block (a FIFO put in the file's place, a hung network or FUSE
 * mount), and a blocked read cannot be cancelled: so every read is bounded,
 * a request waits for a due re-read only {@linkcode REREAD_WAIT_MS} (a
 * healthy read of a Secret volume takes well under a millisecond), the last
 * good key is used meanwhile, a read that passes its own bound is reported
 * whoever waited for it, and no second read starts while one is still
 * pending. A slow read so costs a renewal nothing but the new key, which
 * the next request sends.
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import { bounded, systemClock } from "../state/clock.ts";
import type { Logger } from "../obs/log.ts";
import { discardLogger, Secret } from "../obs/log.ts";
import { keyProblem, readKeyFile } from "./key_file.ts";

/**
 * How long a request waits for a due re-read of the key file before it goes
 * with the last good key (ms): a small share of the shortest heartbeat (1 s),
 * so a hung read never costs a renewal its bound.
 */
export const REREAD_WAIT_MS = 100;

/** Options for {@linkcode ApiKeySource.fromFile}. */
export interface ApiKeyFileOptions {
  /** Decides when the file is due and bounds each read; default the system clock. */
  clock?: Clock;
  /** Receives the warnings about failed re-reads (never the key); default none. */
  logger?: Logger;
  /** Minimum milliseconds between two reads of the file; default 1000. */
  minReadIntervalMs?: number;
  /**
   * The longest a read may take (ms; default 2000). At start-up a read that
   * takes longer is an error; later the last good key is used meanwhile.
   */
  readTimeoutMs?: number;
  /**
   * Reads the file's bytes, or throws an `Error` whose message says why it
   * cannot; default a read that refuses non-regular files and explains a
   * permission problem. A seam for tests (a read that blocks).
   */
  readFile?: (path: string) => Promise<Uint8Array>;
}

/**
 * Gives the client the key to send on each request, and the keys to remove
 * from anything a server sends back. A class with two factories so callers
 * treat a fixed key and a rotating key file alike; `current()` is async
 * because a due re-read happens on the request path.
 */
export class ApiKeySource {
  readonly #current: (signal?: AbortSignal) => Promise<Secret | undefined>;
  readonly #secrets: () => string[];

  private constructor(
    current: (signal?: AbortSignal) => Promise<Secret | undefined>,
    secrets: () => string[],
  ) {
    this.#current = current;
    this.#secrets = secrets;
  }

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
   * A key read from `path` (`--api-key-file` / `BERTH_API_KEY_FILE`), trimmed
   * of surrounding whitespace. The file is read now; afterwards `current()`
   * re-reads it when at least `minReadIntervalMs` passed since the last read.
   * When a re-read fails, finds no usable key or does not finish within
   * `readTimeoutMs`, the last good key is kept and one warning is logged per
   * streak of failures; a late read that succeeds still counts.
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
    const read = () => readKeyFile(path, options.readFile);
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
        const slow = clock.timeout(readTimeoutMs);
        const tooSlow = () =>
          fail(
            `the read did not finish within ${readTimeoutMs} ms (a FIFO, or a hung network mount?); it is left pending and no other read starts until it ends`,
          );
        slow.addEventListener("abort", tooSlow, { once: true });
        const quiet = () => slow.removeEventListener("abort", tooSlow);
        started.then(quiet, quiet);
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

  /**
   * The key to send now; undefined only for a source that has none.
   *
   * @param signal Ends the wait for a due re-read early (the request's own
   * bound); the last good key is given then.
   */
  current(signal?: AbortSignal): Promise<Secret | undefined> {
    return this.#current(signal);
  }

  /**
   * The keys no server-derived text may show: the one in use and, after a
   * rotation, the one before it.
   */
  secrets(): string[] {
    return this.#secrets();
  }
}

/**
 * The key source the configuration asks for, or undefined when it names no
 * key (no Authorization header is sent then). Exists so `acquire` and
 * `renew` do not each repeat the either-or of `apiKey` and `apiKeyFile`.
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
  if (config.apiKeyFile !== undefined) {
    return await ApiKeySource.fromFile(config.apiKeyFile, options);
  }
  return undefined;
}

/**
 * `work`'s value, or undefined when `signal` aborts first. `work` is left
 * running (a blocked read cannot be cancelled); the listener is removed.
 */
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
