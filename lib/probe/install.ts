/**
 * Installs `<state>/check` so that it runs in any main image: the executable
 * rewritten (`rewrite.ts`), beside it the loader and libraries this process
 * runs with, copied from the files it has mapped (`/proc/self/maps`), so they
 * match the build and the machine. The libraries are renamed into place
 * first, `check` last (see docs/probe-in-any-image.md).
 * @module
 */
import { ElfError, type ElfInfo, machineName, readElf } from "./elf.ts";
import {
  checkClosure,
  planRewrite,
  RewriteError,
  type RewritePlan,
} from "./rewrite.ts";
import {
  copyExecutable,
  type InstallFile,
  STATE_FILES,
  type StateDir,
} from "../state/state_dir.ts";

/** A file installed beside `check`: its name there, where it was copied from, its size in bytes. */
export interface InstalledFile {
  name: string;
  from: string;
  size: number;
}

/** What {@linkcode installPortableCheck} did: the rewrite applied to `check`, and the loader and libraries in the order written. */
export interface PortableCheckResult {
  plan: RewritePlan;
  companions: InstalledFile[];
}

/**
 * The distinct files mapped, from the text of `/proc/<pid>/maps`, in order;
 * anonymous and pseudo mappings and deleted files left out.
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
    if (m && !m[1].endsWith(" (deleted)")) out.add(m[1]);
  }
  return [...out];
}

/** A mapped shared object: its path, and its `DT_SONAME` when it has one. */
export interface MappedObject {
  path: string;
  soname?: string;
}

/**
 * The mapped object a needed name (or the interpreter's path) refers to: the
 * one whose `DT_SONAME` is its file name, else the one whose file name is.
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
  const base = (p: string) => p.slice(p.lastIndexOf("/") + 1);
  return objects.find((o) => o.soname === base(wanted)) ??
    objects.find((o) => base(o.path) === base(wanted));
}

/**
 * Reads the headers of the file at `path` through the open file, never whole.
 * An executable must open (else an {@linkcode ElfError}), be a regular file
 * and have an executable mode; a library need not.
 */
function readElfFile(path: string, executable = false): ElfInfo {
  let file: Deno.FsFile;
  try {
    file = Deno.openSync(path, { read: true });
  } catch (e) {
    if (!executable) throw e;
    throw new ElfError(`cannot open ${path}: ${(e as Error).message}`);
  }
  try {
    const stat = file.statSync();
    const kind = stat.isDirectory ? "a directory" : "not a regular file";
    if (executable && !stat.isFile) {
      throw new ElfError(
        `${path} is ${kind}, not an executable; name the berth-acquire executable`,
      );
    }
    const mode = (stat.mode ?? 0o755) & 0o7777;
    if (executable && (mode & 0o111) === 0) {
      throw new ElfError(
        `${path} is not executable (mode ${
          mode.toString(8)
        }); name the berth-acquire executable, or make it executable (chmod +x)`,
      );
    }
    return readElf({
      size: stat.size,
      read(offset, length) {
        const buf = new Uint8Array(length);
        file.seekSync(offset, Deno.SeekMode.Start);
        for (let got = 0, n; got < length; got += n) {
          n = file.readSync(buf.subarray(got));
          if (n === null) {
            throw new ElfError("the file shrank while it was read");
          }
        }
        return buf;
      },
    }, path);
  } finally {
    file.close();
  }
}

/** The objects this process has mapped, with their sonames; a mapped file that is not ELF (a locale archive) is left out. */
function mappedObjects(): MappedObject[] {
  return mappedPaths(Deno.readTextFileSync("/proc/self/maps")).flatMap(
    (path) => {
      try {
        return [{ path, soname: readElfFile(path).soname }];
      } catch {
        return [];
      }
    },
  );
}

/**
 * Installs the rewritten `check` from the executable `from` into `state`,
 * whose path is the one the probe runs under in the main container.
 * @throws {ElfError} When `from` is not an executable ELF file.
 * @throws {RewriteError} When it cannot be rewritten for this state directory
 *   (its path, another architecture, a library this process has not mapped).
 * @throws {StateFileError} When the state directory cannot be written; then
 *   no temp file is left and no file in it has changed.
 */
export async function installPortableCheck(
  state: StateDir,
  from: string,
): Promise<PortableCheckResult> {
  const info = readElfFile(from, true);
  const plan = planRewrite(info, state.dir, from);
  const companions: InstalledFile[] = [];
  if (plan.loader) {
    const machine = machineName(info.machine);
    if (machine !== Deno.build.arch) {
      throw new RewriteError(
        `${from} is built for ${machine}, but berth-acquire runs on ${Deno.build.arch} here, so the loader and libraries it needs cannot be copied from this process; install it with a berth-acquire of its own architecture`,
      );
    }
    const objects = mappedObjects();
    let loaderReal: string | undefined;
    try {
      loaderReal = Deno.realPathSync(plan.loader.wanted);
    } catch {
      // Not on this machine's path: found by its name below.
    }
    const closure: { wanted: string; soname?: string; needed: string[] }[] = [];
    for (const c of [plan.loader, ...plan.libraries]) {
      const obj = objects.find((o) =>
        c === plan.loader && o.path === loaderReal
      ) ??
        findObject(objects, c.wanted);
      if (!obj) {
        throw new RewriteError(
          `${from} needs ${c.wanted}, which this berth-acquire process has not loaded, so there is no copy of it to install; install with the berth-acquire binary itself (the default --from)`,
        );
      }
      const lib = readElfFile(obj.path);
      if (lib.machine !== info.machine || lib.bits !== info.bits) {
        throw new RewriteError(
          `${from} is a ${info.bits}-bit ${machine} executable, but ${obj.path}, which this process runs with, is ${lib.bits}-bit ${
            machineName(lib.machine)
          }, so the probe could not load it; install it with a berth-acquire of its own architecture`,
        );
      }
      closure.push({
        wanted: c.wanted,
        soname: lib.soname,
        needed: lib.needed.map((n) => n.value),
      });
      companions.push({
        name: c.file,
        from: obj.path,
        size: Deno.statSync(obj.path).size,
      });
    }
    checkClosure(closure);
  }
  const files: InstallFile[] = companions.map((c) => ({
    name: c.name,
    fill: copyExecutable(c.from),
  }));
  files.push({
    name: STATE_FILES.check,
    async fill(tmp) {
      await copyExecutable(from)(tmp);
      if (plan.patches.length === 0) return;
      using f = await Deno.open(tmp, { write: true });
      for (const p of plan.patches) {
        await f.seek(p.offset, Deno.SeekMode.Start);
        for (let off = 0; off < p.bytes.length;) {
          off += await f.write(p.bytes.subarray(off));
        }
      }
    },
  });
  await state.installFiles(files);
  return { plan, companions };
}
