/**
 * `berth-acquire install-check`: the probe `<state>/check` installed to run
 * in any main image (docs/probe-in-any-image.md), for image builders and
 * custom init containers; `acquire` installs it through
 * {@linkcode installProbe}, which falls back to a plain copy.
 *
 * @module
 */
import {
  DEFAULT_STATE_DIR,
  EXIT_USAGE,
  isSet,
  lastValue,
  parseArgv,
  UsageError,
} from "../config/argv.ts";
import type { Logger } from "../obs/log.ts";
import { ElfError } from "../probe/elf.ts";
import { type InstalledFile, installPortableCheck } from "../probe/install.ts";
import { RewriteError, STATE_DIR_MAX_BYTES } from "../probe/rewrite.ts";
import { ensureStateDir, StateDir } from "../state/state_dir.ts";
import { installCheckWrapper } from "./self_argv.ts";

const USAGE = `Usage: berth-acquire install-check [--from FILE] [STATE_DIR]

Installs the liveness probe STATE_DIR/check so that it runs in any main image,
with or without glibc: a copy of the executable whose program interpreter and
library names are rewritten in place to STATE_DIR, and the loader and the
libraries copied there (ld.so, c, m, ...). STATE_DIR must be an absolute path
of at most ${STATE_DIR_MAX_BYTES} bytes (the webhook's /berth fits); it is created (mode 0755)
when missing.

  STATE_DIR      the state directory; default $BERTH_STATE_DIR or ${DEFAULT_STATE_DIR}
  --from FILE    the berth-acquire executable to install; default this one
                 (required under "deno run", which is no single executable)
  --help         show this help

Exit status 0 when installed; 78 on a usage error; 1 with one line on stderr
when it cannot install (nothing half-written is left in STATE_DIR).`;

/**
 * The line `install-check` prints when it has installed the probe `check`
 * from `from` with `companions` beside it (the loader first).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(
 *   installedLine("/b/check", "/x", [
 *     { name: "ld.so", from: "/l", size: 1048576 },
 *     { name: "c", from: "/c", size: 1048576 },
 *   ]),
 *   "installed /b/check from /x with its loader and 1 library (2.0 MiB) beside it",
 * );
 * ```
 */
export function installedLine(
  check: string,
  from: string,
  companions: readonly InstalledFile[],
): string {
  if (companions.length === 0) {
    return `installed ${check} from ${from} (a static executable: nothing beside it)`;
  }
  const libraries = companions.length - 1;
  const added = companions.reduce((n, c) => n + c.size, 0);
  return `installed ${check} from ${from} with its loader and ${libraries} ${
    libraries === 1 ? "library" : "libraries"
  } (${(added / 1048576).toFixed(1)} MiB) beside it`;
}

/** `berth-acquire install-check`: see the usage text. Returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const fail = (msg: string, code = 1) => {
    console.error(`berth-acquire install-check: ${msg}`);
    return code;
  };
  let given: string | undefined;
  let dir: string | undefined;
  try {
    const argv = parseArgv(args, {
      flags: {
        from: { kind: "value", wants: "the executable to install" },
        help: { kind: "boolean", short: "h" },
      },
      positionals: 1,
      positionalHint: "install-check takes one state directory",
      dashDash: "positionals",
    });
    given = lastValue(argv, "from");
    if (given === "") throw new UsageError("flag --from is empty");
    dir = argv.positionals[0];
    if (dir === "") throw new UsageError("the state directory is empty");
    if (isSet(argv, "help")) {
      console.log(USAGE);
      return 0;
    }
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    return fail(e.message, EXIT_USAGE);
  }
  if (given === undefined && !Deno.build.standalone) {
    return fail(
      `under "deno run" there is no single executable to install; pass --from with a compiled berth-acquire`,
    );
  }
  const from = given ?? Deno.execPath();
  const state = new StateDir(
    dir ?? (Deno.env.get("BERTH_STATE_DIR") || DEFAULT_STATE_DIR),
  );
  const existed = await Deno.lstat(state.dir).then(() => true, () => false);
  try {
    ensureStateDir(state.dir);
    // The probe runs as any uid: a directory made here must let it in,
    // whatever the umask.
    if (!existed) await Deno.chmod(state.dir, 0o755);
    const { companions } = await installPortableCheck(state, from);
    console.log(installedLine(state.checkPath, from, companions));
    return 0;
  } catch (e) {
    // A directory created for nothing goes too (when empty, as it then is).
    if (!existed) await Deno.remove(state.dir).catch(() => {});
    return fail((e as Error).message);
  }
}

/**
 * The probe install `acquire` does: under `deno run` the shell wrapper;
 * compiled, the rewritten copy of itself with its loader and libraries, or,
 * where that cannot be (the state directory's path is too long, its own
 * executable cannot be rewritten), the plain copy and one WARN line: the
 * probe then needs glibc in the main image. `options` are seams for tests,
 * by default this process: whether it is a compiled binary, its executable.
 *
 * @throws {StateFileError} When the state directory cannot be written.
 */
export async function installProbe(
  state: StateDir,
  logger: Logger,
  options: { standalone?: boolean; execPath?: string } = {},
): Promise<void> {
  if (!(options.standalone ?? Deno.build.standalone)) {
    return await installCheckWrapper(state);
  }
  const execPath = options.execPath ?? Deno.execPath();
  try {
    await installPortableCheck(state, execPath);
  } catch (e) {
    if (!(e instanceof RewriteError || e instanceof ElfError)) throw e;
    await state.installCheck({ copyOf: execPath });
    // Logged once the plain copy is in place, so the line is true.
    logger.warn(
      "installed the probe as a plain copy: it then needs glibc in the main image (the probe fails in static, scratch, distroless/static and musl images)",
      { reason: e.message, check: state.checkPath },
    );
  }
}
