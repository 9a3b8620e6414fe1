/**
 * One read of the API key file and what it holds, with the reason worded
 * for the operator: a permission problem names the uid it runs as and the
 * file's mode and owner (the usual cause in a pod: a Secret mounted
 * root-owned with a mode the helper's uid cannot read), a FIFO or directory
 * is refused before it is opened so the read cannot block on it.
 *
 * @module
 */
/** Larger than any real key; a bigger file is a mistake (wrong path), not a key. */
const MAX_KEY_FILE_BYTES = 16 * 1024;

/** A key read, or why there is none and what to do. */
export type KeyFileRead = { key: string } | { problem: string; fix: string };

const FIX_PATH =
  "point --api-key-file / BERTH_API_KEY_FILE at the file holding the API key";
const FIX_MODE =
  "make it readable by that uid (in a pod: the Secret volume's defaultMode, or the pod's fsGroup)";

/**
 * Reads the trimmed key in `path`. Never throws.
 *
 * @param path The key file.
 * @param readFile Reads the bytes, throwing an `Error` that says why not;
 * default {@linkcode readRegularFile}.
 */
export async function readKeyFile(
  path: string,
  readFile: (path: string) => Promise<Uint8Array> = readRegularFile,
): Promise<KeyFileRead> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.PermissionDenied) {
      return { problem: await notReadable(path), fix: FIX_MODE };
    }
    if (e instanceof NotRegularFile) {
      return { problem: e.message, fix: FIX_PATH };
    }
    if (e instanceof Deno.errors.NotFound) {
      return { problem: "cannot be read (no such file)", fix: FIX_PATH };
    }
    return {
      problem: `cannot be read (${(e as Error).message})`,
      fix: FIX_PATH,
    };
  }
  if (bytes.length > MAX_KEY_FILE_BYTES) {
    return {
      problem: `is larger than ${MAX_KEY_FILE_BYTES} bytes`,
      fix: FIX_PATH,
    };
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return { problem: "is not UTF-8 text", fix: FIX_PATH };
  }
  const key = text.trim();
  const problem = keyProblem(key);
  return problem ? { problem, fix: FIX_PATH } : { key };
}

/**
 * The bytes of `path` (at most one more than the size cap), refusing
 * anything but a regular file before opening it: opening a FIFO blocks until
 * a writer comes.
 *
 * @throws {Error} Deno's errors for a missing or unreadable file; an error
 * naming the file type for anything but a regular file.
 */
async function readRegularFile(path: string): Promise<Uint8Array> {
  const before = await Deno.stat(path);
  if (!before.isFile) {
    throw new NotRegularFile(`is a ${fileType(before)}, not a regular file`);
  }
  using file = await Deno.open(path, { read: true });
  const info = await file.stat();
  if (!info.isFile) {
    throw new NotRegularFile(`is a ${fileType(info)}, not a regular file`);
  }
  const buf = new Uint8Array(MAX_KEY_FILE_BYTES + 1);
  let n = 0;
  while (n < buf.length) {
    const got = await file.read(buf.subarray(n));
    if (got === null) break;
    n += got;
  }
  return buf.subarray(0, n);
}

/** The path names something a key cannot be read from without blocking or failing. */
class NotRegularFile extends Error {}

function fileType(info: Deno.FileInfo): string {
  if (info.isDirectory) return "directory";
  if (info.isFifo) return "FIFO";
  if (info.isSocket) return "socket";
  if (info.isCharDevice || info.isBlockDevice) return "device";
  return "special file";
}

/** "not readable by uid N (mode M, owner U:G)", as far as stat can tell. */
async function notReadable(path: string): Promise<string> {
  const uid = Deno.uid();
  try {
    const info = await Deno.stat(path);
    const mode = info.mode === null
      ? "unknown"
      : `0${(info.mode & 0o7777).toString(8).padStart(3, "0")}`;
    return `is not readable by uid ${uid ?? "unknown"} (mode ${mode}, owner ${
      info.uid ?? "?"
    }:${info.gid ?? "?"})`;
  } catch {
    return `is not readable by uid ${
      uid ?? "unknown"
    } (its directory cannot be searched either)`;
  }
}

/**
 * Why `key` cannot be sent as a bearer token, or undefined when it can.
 *
 * @param key The trimmed key.
 */
export function keyProblem(key: string): string | undefined {
  if (key === "") return "is empty";
  // Printable ASCII without spaces: anything else either breaks the header
  // (a newline would even inject one) or is not a token the server issued.
  if (!/^[\x21-\x7e]+$/.test(key)) {
    return "contains spaces, control or non-ASCII characters";
  }
  return undefined;
}
