/**
 * The in-place rewrite that lets the probe run in a main image without glibc:
 * the interpreter and needed-library names become absolute paths in the state
 * directory, each written over the old one and NUL-padded, so the file keeps
 * its size and every other byte (a `deno compile` binary finds its payload by
 * a trailer at its end). Pure: headers in, a plan of patches out.
 * @module
 */
import type { ElfInfo, ElfString } from "./elf.ts";
import { libraryFileName, LOADER_FILE } from "../state/state_dir.ts";

/** The longest state directory path that fits: `<dir>/c` must fit in `libc.so.6`, the shortest name replaced. */
export const STATE_DIR_MAX_BYTES = 7;

/** Why an executable cannot be rewritten for a state directory: what does not fit, and what to do. */
export class RewriteError extends Error {
  override name = "RewriteError";
}

/** Bytes to write at a file offset: the string `to`, NUL-padded to the room of the string `from`. */
export interface Patch {
  offset: number;
  bytes: Uint8Array;
  from: string;
  to: string;
}

/** A file to copy beside `check`: the name the executable (or the kernel) asks for, and its name in the state directory. */
export interface CompanionFile {
  wanted: string;
  file: string;
}

/** What {@linkcode planRewrite} decided: the loader and the other libraries to copy, and the patches to the copy of the executable. */
export interface RewritePlan {
  loader?: CompanionFile;
  libraries: CompanionFile[];
  patches: Patch[];
}

const encoder = new TextEncoder();
const quote = JSON.stringify;

function prefixOf(stateDir: string): string {
  if (!stateDir.startsWith("/")) {
    const dir = quote(stateDir);
    throw new RewriteError(
      `the state directory ${dir} is not an absolute path, so the probe could not name its loader by it; use an absolute path such as /berth`,
    );
  }
  const prefix = stateDir.replace(/\/+$/, "");
  const n = encoder.encode(prefix).length;
  if (n > STATE_DIR_MAX_BYTES) {
    const dir = quote(prefix);
    throw new RewriteError(
      `the state directory path ${dir} is ${n} bytes; the probe's library names are rewritten in place and fit only a path of at most ${STATE_DIR_MAX_BYTES} bytes (libc.so.6 becomes <dir>/c); mount the state volume at a shorter path such as /berth`,
    );
  }
  return prefix;
}

/**
 * Plans the rewrite of the executable `name` for the state directory as the
 * main container sees it, e.g. `/berth`; a static executable needs none.
 * @throws {RewriteError} When the file is not an executable, the state
 *   directory's path is relative or too long, or a name has no short form,
 *   does not fit or cannot be written apart.
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
  const fail = (what: string) => new RewriteError(`${name}${what}`);
  if (info.type !== 2 && info.type !== 3) {
    throw fail(
      ` is not an executable (ELF type ${info.type}); give a berth-acquire binary`,
    );
  }
  if (!info.interp) {
    if (info.needed.length === 0) return { libraries: [], patches: [] };
    throw fail(
      ` names libraries but no program interpreter, so it is a shared library, not an executable; give a berth-acquire binary`,
    );
  }
  const prefix = prefixOf(stateDir);
  const patches: Patch[] = [];
  const patch = (at: ElfString, file: string, what: string) => {
    const to = `${prefix}/${file}`;
    const bytes = encoder.encode(to);
    const [old, room, q] = [quote(at.value), at.capacity - 1, quote(to)];
    if (bytes.length > room) {
      throw fail(
        `: the ${what} ${old} (${room} bytes) has no room for ${q} (${bytes.length} bytes); mount the state volume at a shorter path such as /berth`,
      );
    }
    if (bytes.length === room && String.fromCharCode(...bytes) === at.value) {
      return;
    }
    if (at.tailOfLonger) {
      throw fail(
        `: the ${what} ${old} shares its bytes with a longer string in the dynamic string table, so it cannot be rewritten without changing that string; the probe of this build needs glibc in the main image`,
      );
    }
    const out = new Uint8Array(at.capacity);
    out.set(bytes);
    patches.push({ offset: at.offset, bytes: out, from: at.value, to });
  };
  const interp = info.interp.value;
  const interpBase = interp.slice(interp.lastIndexOf("/") + 1);
  patch(info.interp, LOADER_FILE, "program interpreter");
  const libraries: CompanionFile[] = [];
  const byFile = new Map<string, string>();
  for (const n of info.needed) {
    const file = libraryFileName(n.value, interpBase);
    const q = quote(n.value);
    if (file === undefined) {
      throw fail(
        n.value.startsWith("/")
          ? ` names its library ${q} by an absolute path, so it is an installed probe already; install from the berth-acquire executable itself`
          : `: the needed library ${q} has no short name in the state directory (only lib<name>.so.N and the program interpreter's own name are known)`,
      );
    }
    const other = byFile.get(file);
    if (other !== undefined && other !== n.value) {
      const [o, f] = [quote(other), quote(file)];
      throw fail(
        `: the needed libraries ${o} and ${q} would share the file name ${f}`,
      );
    }
    if (other === undefined) {
      byFile.set(file, n.value);
      if (file !== LOADER_FILE) libraries.push({ wanted: n.value, file });
    }
    patch(n, file, "needed library");
  }
  const sorted = patches.toSorted((a, b) => a.offset - b.offset);
  for (let i = 1; i < sorted.length; i++) {
    const [a, b] = [sorted[i - 1], sorted[i]];
    if (a.offset + a.bytes.length > b.offset) {
      const [qa, qb] = [quote(a.from), quote(b.from)];
      throw fail(
        `: the names ${qa} and ${qb} share bytes in the string table, so they cannot be rewritten apart`,
      );
    }
  }
  return { loader: { wanted: interp, file: LOADER_FILE }, libraries, patches };
}

/**
 * Checks that the copied libraries need nothing outside the copied set (by
 * `DT_SONAME` or file name), so the loader never searches the main image.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.throws(() => checkClosure([{ wanted: "libm.so.6", needed: ["libz.so.1"] }]), RewriteError);
 * ```
 */
export function checkClosure(
  set: readonly { wanted: string; soname?: string; needed: string[] }[],
): void {
  const names = new Set(set.flatMap((f) => [
    f.wanted.slice(f.wanted.lastIndexOf("/") + 1),
    ...f.soname ? [f.soname] : [],
  ]));
  for (const f of set) {
    const n = f.needed.find((n) => !names.has(n));
    if (n !== undefined) {
      const lib = quote(f.wanted);
      throw new RewriteError(
        `the library ${lib} needs ${n}, which the executable does not name, so the probe would look for it in the main image`,
      );
    }
  }
}
