/**
 * Where the probe's loader and libraries are copied from: the files this
 * process has mapped (`/proc/self/maps`). They are the ones it runs with, so
 * they match the executable it installs (the same build) and the machine;
 * no search path, cache or distribution layout is guessed.
 *
 * @module
 */

/**
 * The distinct files mapped, from the text of `/proc/<pid>/maps`, in order of
 * first appearance; anonymous and pseudo mappings (`[heap]`, `[vdso]`) and
 * deleted files are left out.
 *
 * @param maps The file's text.
 * @returns Absolute paths.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.deepEqual(
 *   mappedPaths("7f0-7f1 r--p 00000000 08:01 12 /usr/lib/libc.so.6\n7f1-7f2 rw-p 00000000 00:00 0 [heap]\n"),
 *   ["/usr/lib/libc.so.6"],
 * );
 * ```
 */
export function mappedPaths(maps: string): string[] {
  const out = new Set<string>();
  for (const line of maps.split("\n")) {
    // address perms offset dev inode, then the path (which may hold spaces).
    const m = /^\S+\s+\S+\s+\S+\s+\S+\s+\d+\s+(\/.*)$/.exec(line);
    if (!m || m[1].endsWith(" (deleted)")) continue;
    out.add(m[1]);
  }
  return [...out];
}

/** A mapped shared object, as {@linkcode findObject} matches it. */
export interface MappedObject {
  /** The path it was mapped from. */
  path: string;
  /** Its `DT_SONAME`, when it has one. */
  soname?: string;
}

/**
 * The mapped object a needed name refers to: the one whose `DT_SONAME` is
 * the name, else the one whose file name is (a library mapped from
 * `libfoo.so.1.2.3` is found by its soname `libfoo.so.1`).
 *
 * @param objects The mapped objects.
 * @param wanted A `DT_NEEDED` name or the interpreter's path (matched by its
 *   file name).
 * @returns The object, or `undefined`.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const objs = [{ path: "/lib/libc-2.31.so", soname: "libc.so.6" }];
 * assert.equal(findObject(objs, "libc.so.6")?.path, "/lib/libc-2.31.so");
 * ```
 */
export function findObject(
  objects: readonly MappedObject[],
  wanted: string,
): MappedObject | undefined {
  const base = wanted.slice(wanted.lastIndexOf("/") + 1);
  return objects.find((o) => o.soname === base) ??
    objects.find((o) => o.path.slice(o.path.lastIndexOf("/") + 1) === base);
}
