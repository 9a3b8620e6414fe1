/**
 * The API key, given or in a key file (a mounted Secret rotated in place),
 * and its removal from all a server sent back (which may echo the
 * `Authorization` header). A bad or missing file never takes away a key that
 * worked; a read can block (a FIFO, a hung mount) and cannot be cancelled,
 * so every read is bounded (docs/configuration.md, "TLS and the API key").
 *
 * @module
 */
import { aborted, bounded, type Clock, systemClock } from "../state/clock.ts";
import { discardLogger, type Logger, Secret } from "../obs/log.ts";
import type { GrantOutcome, ReleaseOutcome } from "./rpc.ts";
import { goJsonString, type Redact } from "./wire.ts";

/** A small share of the shortest heartbeat (1 s), so a hung read never costs a renewal its bound. */
const REREAD_WAIT_MS = 100;
const READ_INTERVAL_MS = 1000;
/** Longer is an error at start-up; later the last good key is used meanwhile. */
const READ_TIMEOUT_MS = 2000;

/** Larger than any real key; a bigger file is a mistake (wrong path), not a key. */
const MAX_KEY_FILE_BYTES = 16 * 1024;

const FIX_PATH =
  "point --api-key-file / BERTH_API_KEY_FILE at the file holding the API key";
const FIX_MODE =
  "make it readable by that uid (in a pod: the Secret volume's defaultMode, or the pod's fsGroup)";

/** Options for {@linkcode ApiKeySource.fromFile}; `readFile` is the seam for a read that blocks. */
export interface ApiKeyFileOptions {
  clock?: Clock;
  logger?: Logger;
  readFile?: (path: string) => Promise<Uint8Array>;
}

/** The key to send on each request, and the keys to redact: the one in use and, after a rotation, the one before. */
export class ApiKeySource {
  private constructor(
    /** `signal` (the request's own bound) ends the wait for a due re-read early. */
    readonly current: (signal?: AbortSignal) => Promise<Secret>,
    readonly secrets: () => string[],
  ) {}

  /**
   * A key that never changes (`--api-key` / `BERTH_API_KEY`).
   *
   * @throws {Error} When it cannot go in an HTTP header (a start-up error, not a 401 on every request).
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
   * A key read now from `path`, re-read by `current()` once a second at most;
   * a failed re-read keeps the last good key, with one warning per streak.
   *
   * @throws {Error} A configuration error naming the file and what to do.
   */
  static async fromFile(
    path: string,
    options: ApiKeyFileOptions = {},
  ): Promise<ApiKeySource> {
    const clock = options.clock ?? systemClock;
    const log = (options.logger ?? discardLogger).with({ file: path });
    const read = () => readKeyFile(path, options.readFile ?? readRegularFile);
    const first = await within(read(), clock.timeout(READ_TIMEOUT_MS));
    if (first === undefined) {
      throw new Error(
        `API key file ${path} could not be read within ${READ_TIMEOUT_MS} ms (is it a FIFO, or on a hung network mount?); point --api-key-file / BERTH_API_KEY_FILE at the mounted Secret's file`,
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
      log.warn("cannot re-read the API key file; keeping the last good key", {
        error: problem,
      });
    };
    const refresh = async (): Promise<void> => {
      const got = await read();
      if ("problem" in got) return fail(got.problem);
      if (failing) {
        log.info("API key file is usable again");
      } else if (got.key !== key.reveal()) {
        log.info("API key file changed; using the new key");
      }
      failing = false;
      if (got.key !== key.reveal()) previous = key;
      key = new Secret(got.key);
    };
    const current = async (signal = new AbortController().signal) => {
      if (pending === undefined && clock.now() - lastRead >= READ_INTERVAL_MS) {
        lastRead = clock.now();
        const started = refresh().finally(() => (pending = undefined));
        pending = started;
        // Said once the read passes its own bound, whoever still waits.
        aborted(clock.timeout(READ_TIMEOUT_MS)).then(() =>
          pending === started && fail(
            `the read did not finish within ${READ_TIMEOUT_MS} ms (a FIFO, or a hung network mount?); it is left pending and no other read starts until it ends`,
          )
        );
        using wait = bounded(clock, REREAD_WAIT_MS, signal);
        await within(started, wait.signal);
      }
      // A read still pending (this call's, or one that hangs): the last good key.
      return key;
    };
    return new ApiKeySource(
      current,
      () => [key.reveal(), ...(previous ? [previous.reveal()] : [])],
    );
  }
}

/** The key source the configuration names, or undefined for none. */
export async function apiKeySourceFromConfig(
  config: { apiKey?: Secret; apiKeyFile?: string },
  options: ApiKeyFileOptions = {},
): Promise<ApiKeySource | undefined> {
  const { apiKey, apiKeyFile: file } = config;
  if (apiKey !== undefined) return ApiKeySource.fromSecret(apiKey);
  if (file !== undefined) return await ApiKeySource.fromFile(file, options);
}

/** `work`'s value, or undefined when `signal` aborts first; `work` is left running. */
const within = <T>(work: Promise<T>, signal: AbortSignal) =>
  Promise.race([work, aborted(signal).then(() => undefined)]);

/** Why `key` cannot be sent as a bearer token, or undefined when it can. */
function keyProblem(key: string): string | undefined {
  if (key === "") return "is empty";
  // Printable ASCII without spaces: anything else either breaks the header
  // (a newline would even inject one) or is not a token the server issued.
  const ok = /^[\x21-\x7e]+$/.test(key);
  return ok ? undefined : "contains spaces, control or non-ASCII characters";
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

class NotRegularFile extends Error {}

/** The bytes of `path`, refusing anything but a regular file before opening it: opening a FIFO blocks. */
async function readRegularFile(path: string): Promise<Uint8Array> {
  const check = (info: Deno.FileInfo) => {
    if (info.isFile) return;
    const { isDirectory, isFifo, isSocket, isCharDevice, isBlockDevice } = info;
    const types = { directory: isDirectory, FIFO: isFifo, socket: isSocket };
    const type = Object.entries(types).find(([, is]) => is)?.[0] ??
      (isCharDevice || isBlockDevice ? "device" : "special file");
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
    const owner = `${info.uid ?? "?"}:${info.gid ?? "?"}`;
    return `is not readable by uid ${uid} (mode ${mode}, owner ${owner})`;
  } catch {
    return `is not readable by uid ${uid} (its directory cannot be searched either)`;
  }
}

/**
 * Replaces each secret in a text, in the spellings a server may echo it in:
 * as is, JSON-escaped (by JavaScript's and by Go's encoder) and
 * percent-encoded (a redirect's `Location`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(redactor(["k3y"])("Bearer k3y"), "Bearer [redacted API key]");
 * ```
 */
export function redactor(secrets: string[]): Redact {
  const forms = new Set<string>();
  for (const s of secrets.filter((s) => s !== "")) {
    forms.add(s).add(JSON.stringify(s).slice(1, -1))
      .add(goJsonString(s).slice(1, -1)).add(encodeURIComponent(s));
  }
  // Longest first, so a form that contains another is replaced whole.
  const list = [...forms].sort((a, b) => b.length - a.length);
  return (text) =>
    list.reduce((out, f) => out.split(f).join("[redacted API key]"), text);
}

/** `outcome` with every string from the server redacted. */
export function redactOutcome<T extends GrantOutcome | ReleaseOutcome>(
  outcome: T,
  redact: Redact,
): T {
  const redacted = (o: object, fields: string[]) => {
    const out: Record<string, unknown> = { ...o };
    for (const field of fields) {
      if (typeof out[field] === "string") out[field] = redact(out[field]);
    }
    return out;
  };
  const out = redacted(outcome, ["message", "requestId"]);
  if ("lease" in outcome) {
    out.lease = redacted(outcome.lease, ["holder", "expiresAt", "acquiredAt"]);
  }
  return out as T;
}
