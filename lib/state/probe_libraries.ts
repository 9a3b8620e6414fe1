/**
 * The names under which the probe's loader and libraries lie in the state
 * directory, beside `check` (see docs/probe-in-any-image.md): the program
 * interpreter is `ld.so`, and a library `lib<stem>.so[.N...]` is `<stem>`
 * (`libc.so.6` is `c`, `libgcc_s.so.1` is `gcc_s`). Short on purpose: the
 * installed `check` names them by absolute path in place of the original
 * names, and a new name may not be longer than the one it replaces.
 *
 * One source of truth for the install (lib/probe/) and for the state
 * directory's stale-temp-file clean-up, which must recognise these names.
 *
 * @module
 */
import { STATE_FILES } from "./state_files.ts";

/** The interpreter's file name in the state directory. */
export const LOADER_FILE = "ld.so";

/** A library file name: the stem of `lib<stem>.so...`, letters, digits, `_`, `+`, `-`. */
export const LIBRARY_FILE_PATTERN = "[A-Za-z0-9_+-]{1,64}";

/** The state files whose names a library may not take. */
const RESERVED: ReadonlySet<string> = new Set(Object.values(STATE_FILES));

/**
 * The file name in the state directory for a needed library.
 *
 * @param needed A `DT_NEEDED` name, e.g. `libc.so.6`.
 * @param interpBase The file name of the executable's interpreter (e.g.
 *   `ld-linux-x86-64.so.2`): a needed entry naming it is the loader itself.
 * @returns The name (`c`; {@linkcode LOADER_FILE} for the loader), or
 *   `undefined` when `needed` has no such form or would take a state file's
 *   name.
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
  const m = new RegExp(`^lib(${LIBRARY_FILE_PATTERN})\\.so(\\.[0-9]+)*$`)
    .exec(needed);
  if (!m || RESERVED.has(m[1])) return undefined;
  return m[1];
}
