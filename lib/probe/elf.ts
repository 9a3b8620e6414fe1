/**
 * Reads what the probe install needs from an ELF file's headers: the
 * machine, the program interpreter (`PT_INTERP`), and the needed-library
 * names (`DT_NEEDED`) and `DT_SONAME` of its dynamic section, each with the
 * file offset and length of the string, so that it can be rewritten in
 * place. Nothing is assumed about offsets or the architecture: the ELF
 * header gives the class (32/64-bit), byte order and program-header table;
 * `PT_DYNAMIC` gives the dynamic section; `DT_STRTAB` (a virtual address) is
 * mapped to a file offset through the `PT_LOAD` segment that holds it.
 *
 * Pure: it reads through a {@linkcode ByteSource}, which a test builds over
 * bytes in memory and the install over an open file (so a 90 MiB executable
 * is never read whole).
 *
 * @module
 */

/** Random access to a file's bytes. */
export interface ByteSource {
  /** The file's size in bytes. */
  readonly size: number;
  /**
   * `length` bytes from `offset`; only called with ranges inside `size`.
   *
   * @param offset Where to start.
   * @param length How many bytes.
   * @returns Exactly `length` bytes.
   */
  read(offset: number, length: number): Uint8Array;
}

/**
 * A {@linkcode ByteSource} over bytes in memory.
 *
 * @param bytes The whole file.
 * @returns A source reading from `bytes`.
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
  /** @param message What is wrong with the file, for a user. */
  constructor(message: string) {
    super(message);
    this.name = "ElfError";
  }
}

/** A NUL-terminated string in the file. */
export interface ElfString {
  /** The string (decoded as Latin-1, so every byte maps to one char). */
  value: string;
  /** Its first byte's file offset. */
  offset: number;
  /** The bytes it may occupy, its terminating NUL included. */
  capacity: number;
  /**
   * True when the string is the tail of a longer one (a linker may let
   * `foo_libc.so.6` and `libc.so.6` share their bytes), so that writing over
   * it would change the longer string too.
   */
  tailOfLonger?: boolean;
}

/** What {@linkcode readElf} found. */
export interface ElfInfo {
  /** 32 or 64. */
  bits: 32 | 64;
  /** Byte order. */
  littleEndian: boolean;
  /** `e_type`: 2 executable, 3 shared object / position-independent executable. */
  type: number;
  /** `e_machine`: 62 x86_64, 183 aarch64, ... (see {@linkcode machineName}). */
  machine: number;
  /** The program interpreter, when the file has `PT_INTERP`. */
  interp?: ElfString;
  /** The `DT_NEEDED` names, in order. */
  needed: ElfString[];
  /** `DT_SONAME`, when present. */
  soname?: string;
}

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const DT_NULL = 0;
const DT_NEEDED = 1;
const DT_STRTAB = 5;
const DT_STRSZ = 10;
const DT_SONAME = 14;

/** The machines the release may build for, by `e_machine`. */
const MACHINES: Readonly<Record<number, string>> = {
  3: "x86",
  40: "arm",
  62: "x86_64",
  183: "aarch64",
  243: "riscv64",
};

/**
 * `e_machine` as Deno names architectures (`Deno.build.arch`).
 *
 * @param machine `e_machine`.
 * @returns The name, or `e_machine N` for one not listed.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(machineName(183), "aarch64");
 * ```
 */
export function machineName(machine: number): string {
  return MACHINES[machine] ?? `e_machine ${machine}`;
}

/** A program header's fields this module uses. */
interface Segment {
  type: number;
  offset: number;
  vaddr: number;
  filesz: number;
}

function latin1(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return s;
}

/**
 * Reads the headers of an ELF file (see the module doc).
 *
 * @param src The file.
 * @param name The file's name, for messages.
 * @returns What was found.
 * @throws {ElfError} When the file is not ELF, is truncated, or its headers
 *   are inconsistent (each message names `name` and the problem).
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
  const get = (offset: number, length: number, what: string): DataView => {
    if (offset < 0 || length < 0 || offset + length > src.size) {
      throw truncated(what);
    }
    const b = src.read(offset, length);
    return new DataView(b.buffer, b.byteOffset, b.byteLength);
  };
  if (src.size < 16) throw fail("not an ELF file (shorter than its magic)");
  const ident = new Uint8Array(src.read(0, 16));
  if (
    ident[0] !== 0x7f || ident[1] !== 0x45 || ident[2] !== 0x4c ||
    ident[3] !== 0x46
  ) {
    throw fail("not an ELF file (no \\x7fELF magic)");
  }
  const bits = ident[4] === 1 ? 32 : ident[4] === 2 ? 64 : undefined;
  if (bits === undefined) throw fail(`unknown ELF class ${ident[4]}`);
  const le = ident[5] === 1 ? true : ident[5] === 2 ? false : undefined;
  if (le === undefined) throw fail(`unknown ELF byte order ${ident[5]}`);
  const w = bits === 64 ? 8 : 4;
  const eh = get(0, bits === 64 ? 64 : 52, "the ELF header");
  const word = (v: DataView, at: number) =>
    w === 8 ? Number(v.getBigUint64(at, le)) : v.getUint32(at, le);
  const type = eh.getUint16(16, le);
  const machine = eh.getUint16(18, le);
  const phoff = word(eh, 24 + w);
  const shoff = word(eh, 24 + 2 * w);
  const at = 24 + 3 * w + 4; // e_flags, then e_ehsize
  const phentsize = eh.getUint16(at + 2, le);
  const phnum = eh.getUint16(at + 4, le);
  const shentsize = eh.getUint16(at + 6, le);
  const shnum = eh.getUint16(at + 8, le);
  if (shoff !== 0 && shoff + shentsize * shnum > src.size) {
    throw truncated("the section header table");
  }
  const phMin = bits === 64 ? 56 : 32;
  if (phnum > 0 && phentsize < phMin) {
    throw fail(`program header entries of ${phentsize} bytes (< ${phMin})`);
  }
  const table = get(phoff, phentsize * phnum, "the program header table");
  const segments: Segment[] = [];
  for (let i = 0; i < phnum; i++) {
    const o = i * phentsize;
    segments.push(
      bits === 64
        ? {
          type: table.getUint32(o, le),
          offset: word(table, o + 8),
          vaddr: word(table, o + 16),
          filesz: word(table, o + 32),
        }
        : {
          type: table.getUint32(o, le),
          offset: table.getUint32(o + 4, le),
          vaddr: table.getUint32(o + 8, le),
          filesz: table.getUint32(o + 16, le),
        },
    );
  }
  for (const s of segments) {
    if (s.type === PT_LOAD && s.offset + s.filesz > src.size) {
      throw truncated("a loadable segment");
    }
  }
  const out: ElfInfo = { bits, littleEndian: le, type, machine, needed: [] };
  const interp = segments.find((s) => s.type === PT_INTERP);
  if (interp) {
    const v = get(interp.offset, interp.filesz, "the program interpreter");
    const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    const nul = bytes.indexOf(0);
    if (nul < 1) throw fail("the program interpreter is not a C string");
    out.interp = {
      value: latin1(bytes.subarray(0, nul)),
      offset: interp.offset,
      capacity: interp.filesz,
    };
  }
  const dyn = segments.find((s) => s.type === PT_DYNAMIC);
  if (!dyn) return out;
  const entSize = 2 * w;
  const dv = get(dyn.offset, dyn.filesz, "the dynamic section");
  let strtab: number | undefined;
  let strsz: number | undefined;
  const neededAt: number[] = [];
  let sonameAt: number | undefined;
  for (let o = 0; o + entSize <= dyn.filesz; o += entSize) {
    const tag = w === 8 ? Number(dv.getBigInt64(o, le)) : dv.getInt32(o, le);
    const val = word(dv, o + w);
    if (tag === DT_NULL) break;
    if (tag === DT_NEEDED) neededAt.push(val);
    else if (tag === DT_STRTAB) strtab = val;
    else if (tag === DT_STRSZ) strsz = val;
    else if (tag === DT_SONAME) sonameAt = val;
  }
  if (neededAt.length === 0 && sonameAt === undefined) return out;
  if (strtab === undefined || strsz === undefined) {
    throw fail("the dynamic section has names but no DT_STRTAB/DT_STRSZ");
  }
  const load = segments.find((s) =>
    s.type === PT_LOAD && s.vaddr <= strtab && strtab + strsz <= s.vaddr +
        s.filesz
  );
  if (!load) {
    throw fail(
      `the dynamic string table (address 0x${
        strtab.toString(16)
      }) is in no loadable segment`,
    );
  }
  const strOff = load.offset + (strtab - load.vaddr);
  const sv = get(strOff, strsz, "the dynamic string table");
  const strs = new Uint8Array(sv.buffer, sv.byteOffset, sv.byteLength);
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
