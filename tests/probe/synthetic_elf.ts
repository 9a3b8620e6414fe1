/**
 * Builds small ELF files in memory (any class, byte order and machine), with
 * a program interpreter and a dynamic section naming libraries, for the
 * rewrite's unit tests: this machine runs x86_64 only, and an aarch64 or a
 * big-endian header must be read all the same.
 *
 * @module
 */

/** What {@linkcode syntheticElf} builds. */
export interface SyntheticElfOptions {
  /** 32 or 64; default 64. */
  bits?: 32 | 64;
  /** Default true. */
  littleEndian?: boolean;
  /** `e_machine`; default 183 (aarch64). */
  machine?: number;
  /** `e_type`; default 3. */
  type?: number;
  /** The interpreter; none when undefined. */
  interp?: string;
  /** `DT_NEEDED` names. */
  needed?: string[];
  /** `DT_SONAME`. */
  soname?: string;
  /** Bytes appended after everything (a payload and its trailer). */
  trailer?: Uint8Array;
}

/** The virtual address the one loadable segment is mapped at (not its offset). */
export const LOAD_VADDR = 0x400000;

/**
 * An ELF file: header, program headers (PT_PHDR-less: PT_INTERP, PT_LOAD
 * covering the file, PT_DYNAMIC), the interpreter, the string table, the
 * dynamic section, then `trailer`.
 *
 * @param o See {@linkcode SyntheticElfOptions}.
 * @returns The file's bytes.
 */
export function syntheticElf(o: SyntheticElfOptions = {}): Uint8Array {
  const bits = o.bits ?? 64;
  const le = o.littleEndian ?? true;
  const w = bits === 64 ? 8 : 4;
  const ehsize = bits === 64 ? 64 : 52;
  const phentsize = bits === 64 ? 56 : 32;
  const enc = new TextEncoder();
  const needed = o.needed ?? [];
  // String table: a leading NUL, then each name.
  const strParts: number[] = [0];
  const index = (s: string) => {
    const at = strParts.length;
    strParts.push(...enc.encode(s), 0);
    return at;
  };
  const neededAt = needed.map(index);
  const sonameAt = o.soname === undefined ? undefined : index(o.soname);
  const strtab = new Uint8Array(strParts);
  const interp = o.interp === undefined
    ? new Uint8Array(0)
    : new Uint8Array([...enc.encode(o.interp), 0]);
  const phnum = 3;
  const interpOff = ehsize + phnum * phentsize;
  const strOff = interpOff + interp.length;
  const dynOff = Math.ceil((strOff + strtab.length) / 8) * 8;
  const dyn: [number, number][] = [
    ...neededAt.map((v): [number, number] => [1, v]),
    ...(sonameAt === undefined ? [] : [[14, sonameAt] as [number, number]]),
    [5, LOAD_VADDR + strOff],
    [10, strtab.length],
    [0, 0],
  ];
  const dynSize = dyn.length * 2 * w;
  const end = dynOff + dynSize;
  const trailer = o.trailer ?? new Uint8Array(0);
  const out = new Uint8Array(end + trailer.length);
  const v = new DataView(out.buffer);
  const word = (at: number, x: number) =>
    w === 8 ? v.setBigUint64(at, BigInt(x), le) : v.setUint32(at, x, le);
  out.set([0x7f, 0x45, 0x4c, 0x46, bits === 64 ? 2 : 1, le ? 1 : 2, 1]);
  v.setUint16(16, o.type ?? 3, le);
  v.setUint16(18, o.machine ?? 183, le);
  v.setUint32(20, 1, le);
  word(24, LOAD_VADDR + ehsize); // e_entry
  word(24 + w, ehsize); // e_phoff
  word(24 + 2 * w, 0); // e_shoff: no sections
  const at = 24 + 3 * w + 4;
  v.setUint16(at, ehsize, le);
  v.setUint16(at + 2, phentsize, le);
  v.setUint16(at + 4, phnum, le);
  const ph = (i: number, type: number, off: number, size: number) => {
    const p = ehsize + i * phentsize;
    const vaddr = LOAD_VADDR + off;
    v.setUint32(p, type, le);
    if (bits === 64) {
      v.setUint32(p + 4, 4, le);
      word(p + 8, off);
      word(p + 16, vaddr);
      word(p + 24, vaddr);
      word(p + 32, size);
      word(p + 40, size);
      word(p + 48, 8);
    } else {
      word(p + 4, off);
      word(p + 8, vaddr);
      word(p + 12, vaddr);
      word(p + 16, size);
      word(p + 20, size);
      word(p + 24, 4);
      word(p + 28, 8);
    }
  };
  // PT_INTERP first, as in real executables; none: a PT_NULL entry.
  ph(0, o.interp === undefined ? 0 : 3, interpOff, interp.length);
  ph(1, 1, 0, end);
  ph(2, 2, dynOff, dynSize);
  out.set(interp, interpOff);
  out.set(strtab, strOff);
  dyn.forEach(([tag, val], i) => {
    word(dynOff + i * 2 * w, tag);
    word(dynOff + i * 2 * w + w, val);
  });
  out.set(trailer, end);
  return out;
}
