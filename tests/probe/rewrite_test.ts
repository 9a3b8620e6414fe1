/**
 * The in-place rewrite, on ELF files built in memory: aarch64, x86_64,
 * 32-bit and big-endian headers are read without assuming offsets; the plan
 * keeps the file's size and every byte outside the rewritten strings; what
 * cannot be rewritten is refused with a message saying why.
 */
import { deepEqual, equal, match, ok, throws } from "node:assert/strict";
import {
  bytesSource,
  ElfError,
  machineName,
  readElf,
} from "../../lib/probe/elf.ts";
import {
  checkClosure,
  planRewrite,
  RewriteError,
  STATE_DIR_MAX_BYTES,
} from "../../lib/probe/rewrite.ts";
import { findObject, mappedPaths } from "../../lib/probe/install.ts";
import { libraryFileName } from "../../lib/state/state_dir.ts";
import { syntheticElf } from "./synthetic_elf.ts";

const AARCH64_NEEDED = [
  "libdl.so.2",
  "libgcc_s.so.1",
  "librt.so.1",
  "libpthread.so.0",
  "libm.so.6",
  "libc.so.6",
  "ld-linux-aarch64.so.1",
];

/** Applies a plan's patches to a copy of `bytes`. */
function apply(
  bytes: Uint8Array,
  patches: { offset: number; bytes: Uint8Array }[],
): Uint8Array {
  const out = bytes.slice();
  for (const p of patches) out.set(p.bytes, p.offset);
  return out;
}

Deno.test("an aarch64 executable's interpreter and needed libraries are read from its headers", () => {
  const elf = syntheticElf({
    machine: 183,
    interp: "/lib/ld-linux-aarch64.so.1",
    needed: AARCH64_NEEDED,
  });
  const info = readElf(bytesSource(elf), "check");
  equal(machineName(info.machine), "aarch64");
  equal(info.bits, 64);
  equal(info.interp?.value, "/lib/ld-linux-aarch64.so.1");
  deepEqual(info.needed.map((n) => n.value), AARCH64_NEEDED);
  // The offsets point at the strings in the file.
  const latin1 = (o: number, n: number) =>
    String.fromCharCode(...elf.subarray(o, o + n));
  for (const n of info.needed) {
    equal(latin1(n.offset, n.capacity), `${n.value}\0`);
  }
});

Deno.test("an aarch64 executable is rewritten in place: same size, same trailer, only the names differ", () => {
  const trailer = new TextEncoder().encode("payload...d3n0l4nd-trailer");
  const elf = syntheticElf({
    machine: 183,
    interp: "/lib/ld-linux-aarch64.so.1",
    needed: AARCH64_NEEDED,
    trailer,
  });
  const info = readElf(bytesSource(elf), "check");
  const plan = planRewrite(info, "/berth", "check");
  deepEqual(plan.loader, {
    wanted: "/lib/ld-linux-aarch64.so.1",
    file: "ld.so",
  });
  deepEqual(
    plan.libraries.map((l) => [l.wanted, l.file]),
    [
      ["libdl.so.2", "dl"],
      ["libgcc_s.so.1", "gcc_s"],
      ["librt.so.1", "rt"],
      ["libpthread.so.0", "pthread"],
      ["libm.so.6", "m"],
      ["libc.so.6", "c"],
    ],
  );
  const out = apply(elf, plan.patches);
  equal(out.length, elf.length);
  deepEqual(out.subarray(out.length - trailer.length), trailer);
  const again = readElf(bytesSource(out), "check");
  equal(again.interp?.value, "/berth/ld.so");
  deepEqual(again.needed.map((n) => n.value), [
    "/berth/dl",
    "/berth/gcc_s",
    "/berth/rt",
    "/berth/pthread",
    "/berth/m",
    "/berth/c",
    "/berth/ld.so",
  ]);
  // Every differing byte lies in a rewritten string.
  const inPatch = (i: number) =>
    plan.patches.some((p) => i >= p.offset && i < p.offset + p.bytes.length);
  for (let i = 0; i < elf.length; i++) {
    if (elf[i] !== out[i]) ok(inPatch(i), `byte ${i} changed outside a name`);
  }
  // Each rewritten string is NUL-padded to the old one's room.
  for (const p of plan.patches) {
    equal(p.bytes.length, new TextEncoder().encode(p.from).length + 1);
    ok(
      p.bytes.subarray(new TextEncoder().encode(p.to).length).every((b) =>
        b === 0
      ),
    );
  }
});

Deno.test("32-bit and big-endian headers are read the same way", () => {
  for (
    const [bits, littleEndian] of [[32, true], [32, false], [
      64,
      false,
    ]] as const
  ) {
    const elf = syntheticElf({
      bits,
      littleEndian,
      machine: 40,
      interp: "/lib/ld-linux-armhf.so.3",
      needed: ["libc.so.6", "ld-linux-armhf.so.3"],
    });
    const info = readElf(bytesSource(elf), "x");
    equal(info.bits, bits);
    equal(info.littleEndian, littleEndian);
    equal(machineName(info.machine), "arm");
    deepEqual(info.needed.map((n) => n.value), [
      "libc.so.6",
      "ld-linux-armhf.so.3",
    ]);
    const plan = planRewrite(info, "/berth", "x");
    const again = readElf(bytesSource(apply(elf, plan.patches)), "x");
    equal(again.interp?.value, "/berth/ld.so");
    deepEqual(again.needed.map((n) => n.value), ["/berth/c", "/berth/ld.so"]);
  }
});

Deno.test("the state directory's path fits up to 7 bytes, and no more", () => {
  equal(STATE_DIR_MAX_BYTES, 7);
  const info = readElf(
    bytesSource(syntheticElf({
      machine: 62,
      interp: "/lib64/ld-linux-x86-64.so.2",
      needed: ["libm.so.6", "libc.so.6"],
    })),
    "check",
  );
  const plan = planRewrite(info, "/b23456/", "check");
  deepEqual(plan.patches.map((p) => p.to), [
    "/b23456/ld.so",
    "/b23456/m",
    "/b23456/c",
  ]);
  throws(() => planRewrite(info, "/b234567", "check"), (e) => {
    ok(e instanceof RewriteError);
    match(e.message, /"\/b234567" is 8 bytes/);
    match(e.message, /at most 7 bytes/);
    return true;
  });
  throws(() => planRewrite(info, "berth", "check"), /not an absolute path/);
});

Deno.test("a static executable needs no rewrite; a shared library or a relocatable object is refused", () => {
  const plain = readElf(bytesSource(syntheticElf({ type: 2 })), "static");
  deepEqual(planRewrite(plain, "/a/very/long/state/dir", "static"), {
    libraries: [],
    patches: [],
  });
  const lib = readElf(
    bytesSource(syntheticElf({ needed: ["libc.so.6"], soname: "libz.so.1" })),
    "libz",
  );
  equal(lib.soname, "libz.so.1");
  throws(() => planRewrite(lib, "/berth", "libz"), /shared library/);
  const obj = readElf(bytesSource(syntheticElf({ type: 1 })), "x.o");
  throws(() => planRewrite(obj, "/berth", "x.o"), /not an executable/);
});

Deno.test("a needed name with no short form, or one that would take a state file's name, is refused", () => {
  for (const needed of ["libfoo.bar.so.1", "weird", "libcheck.so.0"]) {
    const info = readElf(
      bytesSource(syntheticElf({ interp: "/lib/ld.so.1", needed: [needed] })),
      "x",
    );
    throws(() => planRewrite(info, "/berth", "x"), RewriteError, needed);
  }
  equal(libraryFileName("libstdc++.so.6", "ld.so.1"), "stdc++");
  equal(libraryFileName("libpcre2-8.so.0", "ld.so.1"), "pcre2-8");
});

Deno.test("a needed name that is the tail of a longer string is refused, not rewritten with it", () => {
  const elf = syntheticElf({
    machine: 62,
    interp: "/lib64/ld-linux-x86-64.so.2",
    needed: ["libc.so.6", "libm.so.6"],
  });
  const plain = readElf(bytesSource(elf), "x");
  equal(plain.needed[0].tailOfLonger, undefined);
  // Turn the table's leading NUL, just before libc.so.6, into a letter: the
  // table now starts with "xlibc.so.6", whose tail libc.so.6 is.
  elf[plain.needed[0].offset - 1] = 0x78;
  const info = readElf(bytesSource(elf), "x");
  equal(info.needed[0].value, "libc.so.6");
  equal(info.needed[0].tailOfLonger, true);
  throws(
    () => planRewrite(info, "/berth", "x"),
    (e) =>
      e instanceof RewriteError &&
      /x: the needed library "libc.so.6" shares its bytes with a longer string/
        .test(e.message),
  );
});

Deno.test("non-ELF and truncated files are refused with what is wrong", () => {
  throws(
    () =>
      readElf(
        bytesSource(new TextEncoder().encode("#!/bin/sh\nexec x\n")),
        "w",
      ),
    (e) => e instanceof ElfError && /w: not an ELF file/.test(e.message),
  );
  const elf = syntheticElf({
    machine: 62,
    interp: "/lib64/ld-linux-x86-64.so.2",
    needed: ["libc.so.6"],
  });
  for (const n of [10, 40, 100, elf.length - 1]) {
    throws(
      () => readElf(bytesSource(elf.subarray(0, n)), "cut"),
      (e) =>
        e instanceof ElfError && /cut: (truncated|not an ELF)/.test(e.message),
      `cut at ${n}`,
    );
  }
});

Deno.test("the copied libraries must need nothing outside the copied set", () => {
  checkClosure([
    {
      wanted: "/lib64/ld-linux-x86-64.so.2",
      soname: "ld-linux-x86-64.so.2",
      needed: [],
    },
    {
      wanted: "libc.so.6",
      soname: "libc.so.6",
      needed: ["ld-linux-x86-64.so.2"],
    },
    { wanted: "libm.so.6", soname: "libm.so.6", needed: ["libc.so.6"] },
  ]);
  throws(
    () =>
      checkClosure([
        { wanted: "libc.so.6", soname: "libc.so.6", needed: [] },
        {
          wanted: "libssl.so.3",
          soname: "libssl.so.3",
          needed: ["libcrypto.so.3"],
        },
      ]),
    /libssl.so.3" needs libcrypto.so.3/,
  );
});

Deno.test("the loader and libraries are found among the mapped files by soname, then by file name", () => {
  const maps = [
    "55d0-55d1 r--p 00000000 08:01 100 /usr/bin/deno",
    "7f00-7f01 r-xp 00000000 08:01 200 /lib/x86_64-linux-gnu/libc-2.31.so",
    "7f01-7f02 r--p 00001000 08:01 200 /lib/x86_64-linux-gnu/libc-2.31.so",
    "7f02-7f03 rw-p 00000000 00:00 0 ",
    "7f03-7f04 r--p 00000000 08:01 300 /tmp/gone (deleted)",
    "7f04-7f05 r--p 00000000 08:01 301 /opt/with space/ld-linux-x86-64.so.2",
    "7ffd-7ffe rw-p 00000000 00:00 0 [stack]",
  ].join("\n");
  deepEqual(mappedPaths(maps), [
    "/usr/bin/deno",
    "/lib/x86_64-linux-gnu/libc-2.31.so",
    "/opt/with space/ld-linux-x86-64.so.2",
  ]);
  const objects = [
    { path: "/usr/bin/deno" },
    { path: "/lib/x86_64-linux-gnu/libc-2.31.so", soname: "libc.so.6" },
    { path: "/opt/with space/ld-linux-x86-64.so.2" },
  ];
  equal(findObject(objects, "libc.so.6")?.path, objects[1].path);
  equal(
    findObject(objects, "/lib64/ld-linux-x86-64.so.2")?.path,
    objects[2].path,
  );
  equal(findObject(objects, "libm.so.6"), undefined);
});
