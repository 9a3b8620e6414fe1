/**
 * Where the API key comes from. A key given directly never changes; a key
 * file is a mounted Kubernetes Secret that is rotated in place, so it is
 * re-read (at most once a second) and a half-written or briefly missing file
 * never takes away a key that worked a moment ago.
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import { systemClock } from "../state/clock.ts";
import type { Logger } from "../obs/log.ts";
import { discardLogger, Secret } from "../obs/log.ts";

/** Options for {@linkcode ApiKeySource.fromFile}. */
export interface ApiKeyFileOptions {
  /** Decides when the file is due for another read; default the system clock. */
  clock?: Clock;
  /** Receives the warnings about failed re-reads (never the key); default none. */
  logger?: Logger;
  /** Minimum milliseconds between two reads of the file; default 1000. */
  minReadIntervalMs?: number;
}

/** Larger than any real key; a bigger file is a mistake (wrong path), not a key. */
const MAX_KEY_FILE_BYTES = 16 * 1024;

/**
 * Gives the client the key to send on each request. It is a class with two
 * factories so callers treat a fixed key and a rotating key file alike, and
 * `current()` is async because a due re-read happens on the request path.
 */
export class ApiKeySource {
  readonly #current: () => Promise<Secret | undefined>;

  private constructor(current: () => Promise<Secret | undefined>) {
    this.#current = current;
  }

  /**
   * A key that never changes (`--api-key` / `BERTH_API_KEY`). Throws when it
   * is empty or cannot be sent in an HTTP header, so a bad value is a
   * start-up error rather than a 401 on every request.
   */
  static fromSecret(secret: Secret): ApiKeySource {
    const problem = keyProblem(secret.reveal());
    if (problem) {
      throw new Error(
        `the API key ${problem}; set --api-key / BERTH_API_KEY to the token the Berth API server issued`,
      );
    }
    return new ApiKeySource(() => Promise.resolve(secret));
  }

  /**
   * A key read from `path` (`--api-key-file` / `BERTH_API_KEY_FILE`), trimmed
   * of surrounding whitespace. The file is read now, and a missing, unreadable
   * or empty file throws a configuration error naming it. Afterwards
   * `current()` re-reads it when at least `minReadIntervalMs` passed since the
   * last read; when a re-read fails or finds no usable key, the last good key
   * is kept and one warning is logged per streak of failures.
   */
  static async fromFile(
    path: string,
    options: ApiKeyFileOptions = {},
  ): Promise<ApiKeySource> {
    const clock = options.clock ?? systemClock;
    const logger = options.logger ?? discardLogger;
    const interval = options.minReadIntervalMs ?? 1000;
    const first = await readKeyFile(path);
    if (typeof first !== "string") {
      throw new Error(
        `API key file ${path}: ${first.problem}; point --api-key-file / BERTH_API_KEY_FILE at the file holding the token`,
      );
    }
    let key = new Secret(first);
    let lastRead = clock.now();
    let failing = false;
    let inFlight: Promise<Secret> | undefined;
    const refresh = async (): Promise<Secret> => {
      lastRead = clock.now();
      const got = await readKeyFile(path);
      if (typeof got === "string") {
        if (failing) {
          logger.info("API key file is usable again", { file: path });
        } else if (got !== key.reveal()) {
          logger.info("API key file changed; using the new key", {
            file: path,
          });
        }
        failing = false;
        key = new Secret(got);
      } else if (!failing) {
        failing = true;
        logger.warn(
          "cannot re-read the API key file; keeping the last good key",
          {
            file: path,
            error: got.problem,
          },
        );
      }
      return key;
    };
    return new ApiKeySource(() => {
      if (inFlight) return inFlight;
      if (clock.now() - lastRead < interval) return Promise.resolve(key);
      inFlight = refresh().finally(() => (inFlight = undefined));
      return inFlight;
    });
  }

  /** The key to send now; undefined only for a source that has none. */
  current(): Promise<Secret | undefined> {
    return this.#current();
  }
}

/**
 * The key source the configuration asks for, or undefined when it names no
 * key (no Authorization header is sent then). Exists so `acquire` and
 * `renew` do not each repeat the either-or of `apiKey` and `apiKeyFile`.
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

/** The trimmed key in `path`, or why there is none. Never throws. */
async function readKeyFile(
  path: string,
): Promise<string | { problem: string }> {
  let bytes: Uint8Array;
  try {
    using file = await Deno.open(path, { read: true });
    const info = await file.stat();
    if (!info.isFile) return { problem: "is not a regular file" };
    const buf = new Uint8Array(MAX_KEY_FILE_BYTES + 1);
    let n = 0;
    while (n < buf.length) {
      const got = await file.read(buf.subarray(n));
      if (got === null) break;
      n += got;
    }
    if (n > MAX_KEY_FILE_BYTES) {
      return { problem: `is larger than ${MAX_KEY_FILE_BYTES} bytes` };
    }
    bytes = buf.subarray(0, n);
  } catch (e) {
    return { problem: `cannot be read (${(e as Error).message})` };
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return { problem: "is not UTF-8 text" };
  }
  const key = text.trim();
  const problem = keyProblem(key);
  return problem ? { problem } : key;
}
