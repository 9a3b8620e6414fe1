/**
 * The in-place rewrite that lets the probe run in a main image without
 * glibc: the program interpreter and every needed-library name of the
 * executable become absolute paths in the state directory, where the loader
 * and the libraries are copied (names from lib/state/state_dir.ts).
 * Each new string is written over the old one, NUL-padded to its length, so
 * the file keeps its size and every other byte: a `deno compile` binary
 * finds its payload through a trailer at the end of the file, which any
 * layout-changing tool would break.
 *
 * Pure: headers in (lib/probe/elf.ts), a plan of patches out.
 *
 * @module
 */
import type { ElfInfo, ElfString } from "./elf.ts";
import { libraryFileName, LOADER_FILE } from "../state/state_dir.ts";

/**
 * The longest state directory path the rewrite fits: the shortest name
 * replaced, `libc.so.6`, is 9 bytes, and `<dir>/c` must fit in it.
 */
export const STATE_DIR_MAX_BYTES = 7;

/** Why an executable cannot be rewritten for a state directory. */
export class RewriteError extends Error {
  /** @param message What does not fit, and what to do. */
  constructor(message: string) {
    super(message);
    this.name = "RewriteError";
  }
}

/** Bytes to write at a file offset. */
export interface Patch {
  /** Where. */
  offset: number;
  /** What: the new string and NUL padding, as long as the old string's room. */
  bytes: Uint8Array;
  /** The string replaced, for messages and tests. */
  from: string;
  /** The string written. */
  to: string;
}

/** A file to copy beside `check`. */
export interface CompanionFile {
  /** The name the executable (or the kernel, for the interpreter) asks for. */
  wanted: string;
  /** Its file name in the state directory. */
  file: string;
}

/** What {@linkcode planRewrite} decided. */
export interface RewritePlan {
  /** The loader, when the executable has an interpreter. */
  loader?: CompanionFile;
  /** The libraries, one per distinct file, the loader not included. */
  libraries: CompanionFile[];
  /** The writes that turn the copy into the rewritten one; none for a static executable. */
  patches: Patch[];
}

const encoder = new TextEncoder();

function latin1Bytes(s: string): Uint8Array {
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

/**
 * The state directory as the prefix of the rewritten paths.
 *
 * @throws {RewriteError} When it is not absolute or too long.
 */
function prefixOf(stateDir: string): string {
  if (!stateDir.startsWith("/")) {
    throw new RewriteError(
      `the state directory ${
        JSON.stringify(stateDir)
      } is not an absolute path, so the probe could not name its loader by it; use an absolute path such as /berth`,
    );
  }
  const prefix = stateDir.replace(/\/+$/, "");
  const n = encoder.encode(prefix).length;
  if (n > STATE_DIR_MAX_BYTES) {
    throw new RewriteError(
      `the state directory path ${
        JSON.stringify(prefix)
      } is ${n} bytes; the probe's library names are rewritten in place and fit only a path of at most ${STATE_DIR_MAX_BYTES} bytes (libc.so.6 becomes <dir>/c); mount the state volume at a shorter path such as /berth`,
    );
  }
  return prefix;
}

/**
 * Plans the rewrite of an executable for a state directory.
 *
 * @param info The executable's headers.
 * @param stateDir The state directory as the main container sees it (the
 *   probe runs there), e.g. `/berth`.
 * @param name The executable's name, for messages.
 * @returns The plan: no patches and no files for a static executable.
 * @throws {RewriteError} When the file is not an executable, the state
 *   directory's path is not absolute or longer than
 *   {@linkcode STATE_DIR_MAX_BYTES}, a needed name has no file name rule,
 *   a new name does not fit the old one, or a name to rewrite is the tail
 *   of a longer string.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const plan = planRewrite({
 *   bits: 64, littleEndian: true, type: 3, machine: 62,
 *   interp: { value: "/lib64/ld-linux-x86-64.so.2", offset: 0x2a8, capacity: 28 },
 *   needed: [{ value: "libc.so.6", offset: 0x900, capacity: 10 }],
 * }, "/berth", "deno");
 * assert.deepEqual(plan.patches.map((p) => p.to), ["/berth/ld.so", "/berth/c"]);
 * ```
 */
export function planRewrite(
  info: ElfInfo,
  stateDir: string,
  name: string,
): RewritePlan {
  if (info.type !== 2 && info.type !== 3) {
    throw new RewriteError(
      `${name} is not an executable (ELF type ${info.type}); give a berth-acquire binary`,
    );
  }
  if (!info.interp) {
    if (info.needed.length === 0) return { libraries: [], patches: [] };
    throw new RewriteError(
      `${name} names libraries but no program interpreter, so it is a shared library, not an executable; give a berth-acquire binary`,
    );
  }
  const prefix = prefixOf(stateDir);
  const patches: Patch[] = [];
  const patch = (at: ElfString, to: string, what: string) => {
    const bytes = encoder.encode(to);
    if (bytes.length + 1 > at.capacity) {
      throw new RewriteError(
        `${name}: the ${what} ${JSON.stringify(at.value)} (${
          at.capacity - 1
        } bytes) has no room for ${
          JSON.stringify(to)
        } (${bytes.length} bytes); mount the state volume at a shorter path such as /berth`,
      );
    }
    const out = new Uint8Array(at.capacity);
    out.set(bytes);
    const old = latin1Bytes(at.value);
    if (old.length + 1 === out.length && old.every((b, i) => b === out[i])) {
      return;
    }
    if (at.tailOfLonger) {
      throw new RewriteError(
        `${name}: the ${what} ${
          JSON.stringify(at.value)
        } shares its bytes with a longer string in the dynamic string table, so it cannot be rewritten without changing that string; the probe of this build needs glibc in the main image`,
      );
    }
    patches.push({ offset: at.offset, bytes: out, from: at.value, to });
  };
  const interpBase = info.interp.value.slice(
    info.interp.value.lastIndexOf("/") + 1,
  );
  const loader = { wanted: info.interp.value, file: LOADER_FILE };
  patch(info.interp, `${prefix}/${LOADER_FILE}`, "program interpreter");
  const libraries: CompanionFile[] = [];
  const byFile = new Map<string, string>();
  for (const n of info.needed) {
    const file = libraryFileName(n.value, interpBase);
    if (file === undefined && n.value.startsWith("/")) {
      throw new RewriteError(
        `${name} names its library ${
          JSON.stringify(n.value)
        } by an absolute path, so it is an installed probe already; install from the berth-acquire executable itself`,
      );
    }
    if (file === undefined) {
      throw new RewriteError(
        `${name}: the needed library ${
          JSON.stringify(n.value)
        } has no short name in the state directory (only lib<name>.so.N and the program interpreter's own name are known)`,
      );
    }
    const other = byFile.get(file);
    if (other !== undefined && other !== n.value) {
      throw new RewriteError(
        `${name}: the needed libraries ${JSON.stringify(other)} and ${
          JSON.stringify(n.value)
        } would share the file name ${JSON.stringify(file)}`,
      );
    }
    if (other === undefined) {
      byFile.set(file, n.value);
      if (file !== LOADER_FILE) libraries.push({ wanted: n.value, file });
    }
    patch(n, `${prefix}/${file}`, "needed library");
  }
  const sorted = [...patches].sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1];
    if (prev.offset + prev.bytes.length > sorted[i].offset) {
      throw new RewriteError(
        `${name}: the names ${JSON.stringify(prev.from)} and ${
          JSON.stringify(sorted[i].from)
        } share bytes in the string table, so they cannot be rewritten apart`,
      );
    }
  }
  return { loader, libraries, patches };
}

/**
 * Checks that the copied libraries need nothing outside the copied set, so
 * the loader never searches the main image for a library: every `DT_NEEDED`
 * of each must be the `DT_SONAME` (or the name) of one in the set, or the
 * loader's.
 *
 * @param set Each copied file's wanted name, `DT_SONAME` and needed names.
 * @throws {RewriteError} Naming the library and the name it needs.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.throws(() => checkClosure([{ wanted: "libm.so.6", needed: ["libz.so.1"] }]), RewriteError);
 * ```
 */
export function checkClosure(
  set: readonly { wanted: string; soname?: string; needed: string[] }[],
): void {
  const names = new Set<string>();
  for (const f of set) {
    names.add(f.wanted.slice(f.wanted.lastIndexOf("/") + 1));
    if (f.soname) names.add(f.soname);
  }
  for (const f of set) {
    for (const n of f.needed) {
      if (!names.has(n)) {
        throw new RewriteError(
          `the library ${
            JSON.stringify(f.wanted)
          } needs ${n}, which the executable does not name, so the probe would look for it in the main image`,
        );
      }
    }
  }
}
