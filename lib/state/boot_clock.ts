/**
 * The kernel's boot-time clock, read from `/proc/uptime`: monotonic, and the
 * same in every container of a node, so a deadline the sidecar writes on it
 * can be checked by the probe in the main container and by a restarted
 * sidecar. A module of its own because the probe (which starts every 2 s in
 * every guarded container) needs this one function of the clocks and should
 * load nothing else; `systemClock.bootNow()` (lib/state/clock.ts) calls it.
 *
 * @module
 */

import { decodeSmallText } from "./nofollow.ts";

/**
 * Reads the boot-time clock from `/proc/uptime` (10 ms resolution).
 *
 * @param path The uptime file; default `/proc/uptime`.
 * @returns Milliseconds since boot.
 * @throws {Error} When the file cannot be read or parsed.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/uptime`, "350735.47 1389120.56\n");
 * assert.equal(readBootMillis(`${dir}/uptime`), 350_735_470);
 * await Deno.remove(dir, { recursive: true });
 * const deadlineBootMs = readBootMillis() + 30_000; // from /proc/uptime
 * assert.ok(deadlineBootMs > 30_000);
 * ```
 */
export function readBootMillis(path = "/proc/uptime"): number {
  // Open, read and decode as the probe has done already for the marker:
  // fewer of the runtime's code paths on its start.
  const buf = new Uint8Array(128);
  const file = Deno.openSync(path, { read: true });
  let n: number;
  try {
    n = file.readSync(buf) ?? 0;
  } finally {
    file.close();
  }
  const text = decodeSmallText(buf.subarray(0, n));
  const field = text.split(/[ \n]/, 1)[0];
  // Number("") is 0: an empty or blank file must not read as "just booted".
  const seconds = /^\d+(?:\.\d+)?$/.test(field) ? Number(field) : NaN;
  if (!Number.isFinite(seconds)) {
    throw new Error(
      `cannot read the boot-time clock from ${path}: ${JSON.stringify(text)}`,
    );
  }
  return Math.round(seconds * 1000);
}
