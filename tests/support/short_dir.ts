/**
 * A fresh directory whose path is at most 7 bytes (`/tmp/` and two
 * characters): the probe's in-place rewrite fits only a state directory that
 * short, and a test's temp directory is longer.
 *
 * @module
 */

/**
 * Creates `/tmp/XX` with a free `XX`.
 *
 * @returns The directory (remove it when done), or `undefined` when no name
 *   was free.
 */
export function shortTempDir(): string | undefined {
  const chars = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (let i = 0; i < 500; i++) {
    const pick = () => chars[Math.floor(Math.random() * chars.length)];
    const dir = `/tmp/${pick()}${pick()}`;
    try {
      Deno.mkdirSync(dir);
      return dir;
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
    }
  }
  return undefined;
}
