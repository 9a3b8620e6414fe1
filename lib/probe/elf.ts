/**
 * Reads what the probe install needs from an ELF file's headers: the machine,
 * the program interpreter and the dynamic section's `DT_NEEDED` names and
 * `DT_SONAME`, each string with its file offset and room, to be rewritten in
 * place. Nothing is assumed about offsets or the architecture (see
 * docs/probe-in-any-image.md); a 90 MiB executable is never read whole.
 * @module
 */

/** Random access to a file's bytes: `read` is only called with ranges inside `size`. */
export interface ByteSource {
  readonly size: number;
  read(offset: number, length: number): Uint8Array;
}

/**
 * A {@linkcode ByteSource} over bytes in memory.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(bytesSource(new Uint8Array(3)).size, 3);
 * ```
 */
export function bytesSource(bytes: Uint8Array): ByteSource {
  return {
    size: bytes.length,
    read: (offset, length) => bytes.subarray(offset, offset + length),
  };
}

/** A file that is not an ELF file this module can read, with what is wrong. */
export class ElfError extends Error {
  override name = "ElfError";
}

/**
 * A NUL-terminated string (a char a byte) and the `capacity` bytes from `offset` it may occupy, its NUL included;
 * `tailOfLonger` when it ends a longer string (`foo_libc.so.6` holding `libc.so.6`), which writing over it would change.
 */
export interface ElfString {
  value: string;
  offset: number;
  capacity: number;
  tailOfLonger?: boolean;
}

/** What {@linkcode readElf} found; `type` is `e_type` (2 executable, 3 shared object or PIE). */
export interface ElfInfo {
  bits: 32 | 64;
  littleEndian: boolean;
  type: number;
  machine: number;
  interp?: ElfString;
  needed: ElfString[];
  soname?: string;
}

const [PT_LOAD, PT_DYNAMIC, PT_INTERP] = [1, 2, 3];
const [DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME] = [1, 5, 10, 14];

const MACHINES: Readonly<Record<number, string>> = {
  3: "x86",
  40: "arm",
  62: "x86_64",
  183: "aarch64",
  243: "riscv64",
};

/**
 * `e_machine` as Deno names architectures (`Deno.build.arch`), or `e_machine N`.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(machineName(183), "aarch64");
 * ```
 */
export function machineName(machine: number): string {
  return MACHINES[machine] ?? `e_machine ${machine}`;
}

function latin1(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return s;
}

/**
 * Reads the headers of an ELF file (see the module doc), named `name` in the messages.
 * @throws {ElfError} When the file is not ELF, is truncated, or its headers are inconsistent.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.throws(
 *   () => readElf(bytesSource(new TextEncoder().encode("#!/bin/sh\n")), "x"),
 *   ElfError,
 * );
 * ```
 */
export function readElf(src: ByteSource, name: string): ElfInfo {
  const fail = (what: string) => new ElfError(`${name}: ${what}`);
  const truncated = (what: string) =>
    fail(
      `truncated: ${what} lies beyond the end of the file (${src.size} bytes); copy the executable again`,
    );
  const bytes = (offset: number, length: number, what: string) => {
    if (offset < 0 || length < 0 || offset + length > src.size) {
      throw truncated(what);
    }
    return src.read(offset, length);
  };
  const view = (offset: number, length: number, what: string) => {
    const b = bytes(offset, length, what);
    return new DataView(b.buffer, b.byteOffset, b.byteLength);
  };
  if (src.size < 16) throw fail("not an ELF file (shorter than its magic)");
  const ident = src.read(0, 16);
  if (latin1(ident.subarray(0, 4)) !== "\x7fELF") {
    throw fail("not an ELF file (no \\x7fELF magic)");
  }
  const bits = ({ 1: 32, 2: 64 } as const)[ident[4] as 1 | 2];
  if (bits === undefined) throw fail(`unknown ELF class ${ident[4]}`);
  const le = ({ 1: true, 2: false } as const)[ident[5] as 1 | 2];
  if (le === undefined) throw fail(`unknown ELF byte order ${ident[5]}`);
  const w = bits / 8;
  const word = (v: DataView, at: number) =>
    w === 8 ? Number(v.getBigUint64(at, le)) : v.getUint32(at, le);
  const eh = view(0, bits === 64 ? 64 : 52, "the ELF header");
  const at = 24 + 3 * w + 4; // e_flags, then e_ehsize
  const [phentsize, phnum, shentsize, shnum] = [2, 4, 6, 8].map((o) =>
    eh.getUint16(at + o, le)
  );
  const shoff = word(eh, 24 + 2 * w);
  if (shoff !== 0 && shoff + shentsize * shnum > src.size) {
    throw truncated("the section header table");
  }
  const phMin = bits === 64 ? 56 : 32;
  if (phnum > 0 && phentsize < phMin) {
    throw fail(`program header entries of ${phentsize} bytes (< ${phMin})`);
  }
  const table = view(
    word(eh, 24 + w),
    phentsize * phnum,
    "the program header table",
  );
  // p_offset, p_vaddr and p_filesz lie at w, 2w and 4w in either class.
  const segments = Array.from({ length: phnum }, (_, i) => {
    const o = i * phentsize;
    return {
      type: table.getUint32(o, le),
      offset: word(table, o + w),
      vaddr: word(table, o + 2 * w),
      filesz: word(table, o + 4 * w),
    };
  });
  if (
    segments.some((s) => s.type === PT_LOAD && s.offset + s.filesz > src.size)
  ) {
    throw truncated("a loadable segment");
  }
  const out: ElfInfo = {
    bits,
    littleEndian: le,
    type: eh.getUint16(16, le),
    machine: eh.getUint16(18, le),
    needed: [],
  };
  const interp = segments.find((s) => s.type === PT_INTERP);
  if (interp) {
    const b = bytes(interp.offset, interp.filesz, "the program interpreter");
    const nul = b.indexOf(0);
    if (nul < 1) throw fail("the program interpreter is not a C string");
    out.interp = {
      value: latin1(b.subarray(0, nul)),
      offset: interp.offset,
      capacity: interp.filesz,
    };
  }
  const dyn = segments.find((s) => s.type === PT_DYNAMIC);
  if (!dyn) return out;
  const dv = view(dyn.offset, dyn.filesz, "the dynamic section");
  const tags = new Map<number, number>();
  const neededAt: number[] = [];
  for (let o = 0; o + 2 * w <= dyn.filesz; o += 2 * w) {
    const tag = w === 8 ? Number(dv.getBigInt64(o, le)) : dv.getInt32(o, le);
    if (tag === 0) break; // DT_NULL
    if (tag === DT_NEEDED) neededAt.push(word(dv, o + w));
    else tags.set(tag, word(dv, o + w));
  }
  const sonameAt = tags.get(DT_SONAME);
  if (neededAt.length === 0 && sonameAt === undefined) return out;
  const strtab = tags.get(DT_STRTAB);
  const strsz = tags.get(DT_STRSZ);
  if (strtab === undefined || strsz === undefined) {
    throw fail("the dynamic section has names but no DT_STRTAB/DT_STRSZ");
  }
  const load = segments.find((s) =>
    s.type === PT_LOAD && s.vaddr <= strtab &&
    strtab + strsz <= s.vaddr + s.filesz
  );
  if (!load) {
    throw fail(
      `the dynamic string table (address 0x${
        strtab.toString(16)
      }) is in no loadable segment`,
    );
  }
  const strOff = load.offset + (strtab - load.vaddr);
  const strs = bytes(strOff, strsz, "the dynamic string table");
  const str = (index: number): ElfString => {
    const end = index < strsz ? strs.indexOf(0, index) : -1;
    if (end < 0) {
      throw fail(`a name at string index ${index} is not NUL-terminated`);
    }
    const s: ElfString = {
      value: latin1(strs.subarray(index, end)),
      offset: strOff + index,
      capacity: end - index + 1,
    };
    if (index > 0 && strs[index - 1] !== 0) s.tailOfLonger = true;
    return s;
  };
  out.needed = neededAt.map(str);
  if (sonameAt !== undefined) out.soname = str(sonameAt).value;
  return out;
}
