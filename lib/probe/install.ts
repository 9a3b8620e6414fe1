/**
 * Installs `<state>/check` so that it runs in any main image: a copy of the
 * executable with its program interpreter and needed-library names
 * rewritten in place to paths in the state directory (`rewrite.ts`), and
 * the loader and those libraries copied there from the files this process
 * has mapped (`mapped.ts`). The libraries are written first and `check` is
 * renamed into place last, all through `StateDir.installFiles` (atomic, not
 * fsync-ed, mode 0755: readable and executable by any uid). A static
 * executable is copied as it is, with nothing beside it.
 *
 * See docs/probe-in-any-image.md.
 *
 * @module
 */
import {
  type ByteSource,
  ElfError,
  type ElfInfo,
  machineName,
  readElf,
} from "./elf.ts";
import {
  checkClosure,
  planRewrite,
  RewriteError,
  type RewritePlan,
} from "./rewrite.ts";
import { findObject, type MappedObject, mappedPaths } from "./mapped.ts";
import {
  copyExecutable,
  type InstallFile,
  STATE_FILES,
  type StateDir,
} from "../state/state_dir.ts";

/** Options of {@linkcode installPortableCheck}; the defaults describe this process. */
export interface PortableCheckOptions {
  /** The text of this process's memory map; default `/proc/self/maps` read. */
  maps?: () => string;
  /** The architecture the libraries are copied for; default `Deno.build.arch`. */
  arch?: string;
}

/** A file installed beside `check`. */
export interface InstalledFile {
  /** Its name in the state directory. */
  name: string;
  /** Where it was copied from. */
  from: string;
  /** Its size in bytes. */
  size: number;
}

/** What {@linkcode installPortableCheck} did. */
export interface PortableCheckResult {
  /** The rewrite applied to `check`. */
  plan: RewritePlan;
  /** The loader and libraries, in the order written. */
  companions: InstalledFile[];
}

/**
 * A {@linkcode ByteSource} over an open file of `size` bytes; the caller
 * closes the file.
 */
function fileSource(file: Deno.FsFile, size: number): ByteSource {
  return {
    size,
    read(offset, length) {
      const buf = new Uint8Array(length);
      file.seekSync(offset, Deno.SeekMode.Start);
      let got = 0;
      while (got < length) {
        const n = file.readSync(buf.subarray(got));
        if (n === null) break;
        got += n;
      }
      if (got < length) {
        throw new ElfError(`the file shrank while it was read`);
      }
      return buf;
    },
  };
}

/**
 * The headers of the executable at `path`.
 *
 * @throws {ElfError} When it cannot be opened, is not a regular executable
 *   file, or is not an ELF file this module can read.
 */
function readExecutable(path: string): ElfInfo {
  let file: Deno.FsFile;
  try {
    file = Deno.openSync(path, { read: true });
  } catch (e) {
    throw new ElfError(`cannot open ${path}: ${(e as Error).message}`);
  }
  try {
    const stat = file.statSync();
    if (!stat.isFile) {
      throw new ElfError(
        `${path} is ${
          stat.isDirectory ? "a directory" : "not a regular file"
        }, not an executable; name the berth-acquire executable`,
      );
    }
    if (((stat.mode ?? 0o755) & 0o111) === 0) {
      throw new ElfError(
        `${path} is not executable (mode ${
          (stat.mode! & 0o7777).toString(8)
        }); name the berth-acquire executable, or make it executable (chmod +x)`,
      );
    }
    return readElf(fileSource(file, stat.size), path);
  } finally {
    file.close();
  }
}

/** The headers of a mapped library; a library need not have an executable mode. */
function readLibrary(path: string): ElfInfo {
  const file = Deno.openSync(path, { read: true });
  try {
    return readElf(fileSource(file, file.statSync().size), path);
  } finally {
    file.close();
  }
}

function defaultMaps(): string {
  return Deno.readTextFileSync("/proc/self/maps");
}

/**
 * The objects this process has mapped, with their sonames; a mapped file
 * that cannot be read as ELF (a locale archive, a data file) is left out.
 */
function mappedObjects(maps: string): MappedObject[] {
  const out: MappedObject[] = [];
  for (const path of mappedPaths(maps)) {
    try {
      out.push({ path, soname: readLibrary(path).soname });
    } catch {
      // Not an ELF object we can read: not a library to copy.
    }
  }
  return out;
}

/** `realpath`, or `undefined` when the path does not resolve here. */
function realPath(path: string): string | undefined {
  try {
    return Deno.realPathSync(path);
  } catch {
    return undefined;
  }
}

/**
 * Installs the rewritten `check` from `from` into `state` (see the module
 * doc).
 *
 * @param state The state directory; its path is the one the probe runs
 *   under in the main container.
 * @param from The executable to install.
 * @param options Seams; see {@linkcode PortableCheckOptions}.
 * @returns The plan applied and the files copied beside `check`.
 * @throws {ElfError} When `from` is not an executable ELF file or is
 *   truncated.
 * @throws {RewriteError} When it cannot be rewritten for this state
 *   directory (path too long or relative, another architecture, a library
 *   this process has not mapped).
 * @throws {StateFileError} When the state directory cannot be written;
 *   then no temp file is left and no file in it has changed.
 */
export async function installPortableCheck(
  state: StateDir,
  from: string,
  options: PortableCheckOptions = {},
): Promise<PortableCheckResult> {
  const info = readExecutable(from);
  const plan = planRewrite(info, state.dir, from);
  const companions: InstalledFile[] = [];
  if (plan.loader) {
    const arch = options.arch ?? Deno.build.arch;
    if (machineName(info.machine) !== arch) {
      throw new RewriteError(
        `${from} is built for ${
          machineName(info.machine)
        }, but berth-acquire runs on ${arch} here, so the loader and libraries it needs cannot be copied from this process; install it with a berth-acquire of its own architecture`,
      );
    }
    const objects = mappedObjects((options.maps ?? defaultMaps)());
    const loaderReal = realPath(plan.loader.wanted);
    const closure: { wanted: string; soname?: string; needed: string[] }[] = [];
    for (const c of [plan.loader, ...plan.libraries]) {
      const obj = (c === plan.loader && loaderReal !== undefined
        ? objects.find((o) =>
          o.path === loaderReal
        )
        : undefined) ?? findObject(objects, c.wanted);
      if (!obj) {
        throw new RewriteError(
          `${from} needs ${c.wanted}, which this berth-acquire process has not loaded, so there is no copy of it to install; install with the berth-acquire binary itself (the default --from)`,
        );
      }
      const lib = readLibrary(obj.path);
      if (lib.machine !== info.machine || lib.bits !== info.bits) {
        throw new RewriteError(
          `${from} is a ${info.bits}-bit ${
            machineName(info.machine)
          } executable, but ${obj.path}, which this process runs with, is ${lib.bits}-bit ${
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
      const f = await Deno.open(tmp, { write: true });
      try {
        for (const p of plan.patches) {
          await f.seek(p.offset, Deno.SeekMode.Start);
          let off = 0;
          while (off < p.bytes.length) {
            off += await f.write(p.bytes.subarray(off));
          }
        }
      } finally {
        f.close();
      }
    },
  });
  await state.installFiles(files);
  return { plan, companions };
}
