/**
 * `berth-acquire install-check [--from FILE] [STATE_DIR]`: installs the
 * probe `<state>/check` so that it runs in any main image (static, scratch,
 * distroless, musl): the executable with its loader and library names
 * rewritten to the state directory, and the loader and libraries copied
 * beside it (lib/probe/install.ts, docs/probe-in-any-image.md). For image
 * builders and custom init containers; `acquire` does the same through
 * {@linkcode installProbe}, which falls back to a plain copy where this
 * subcommand fails.
 *
 * @module
 */
import { DEFAULT_STATE_DIR } from "../config/defaults.ts";
import { withTwoDashes } from "../config/flag_name.ts";
import { flagSuggestion } from "../config/nearest.ts";
import type { Logger } from "../obs/log.ts";
import { ElfError } from "../probe/elf.ts";
import {
  installPortableCheck,
  type PortableCheckOptions,
} from "../probe/install.ts";
import { RewriteError, STATE_DIR_MAX_BYTES } from "../probe/rewrite.ts";
import { ensureStateDir } from "../state/ensure_dir.ts";
import { checkWrapperScript } from "../state/install_check.ts";
import { StateDir } from "../state/state_dir.ts";
import { CHECKOUT_ROOT, denoRunArgv } from "./self_argv.ts";

/** Exit status on a usage error or a failed install. */
const EXIT_FAILURE = 1;

const USAGE = `Usage: berth-acquire install-check [--from FILE] [STATE_DIR]

Installs the liveness probe STATE_DIR/check so that it runs in any main image,
with or without glibc: a copy of the executable whose program interpreter and
library names are rewritten in place to STATE_DIR, and the loader and the
libraries copied there (ld.so, c, m, ...). STATE_DIR must be an absolute path
of at most ${STATE_DIR_MAX_BYTES} bytes (the webhook's /berth fits); it is created when missing.

  STATE_DIR      the state directory; default $BERTH_STATE_DIR or ${DEFAULT_STATE_DIR}
  --from FILE    the berth-acquire executable to install; default this one
                 (required under "deno run", which is no single executable)
  --help         show this help

Exit status 0 when installed; 1 with one line on stderr otherwise (nothing
half-written is left in STATE_DIR).`;

interface InstallArgs {
  help: boolean;
  from?: string;
  dir?: string;
}

function parseInstallArgs(args: string[]): InstallArgs {
  const out: InstallArgs = { help: false };
  let positionalOnly = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (!positionalOnly && a.startsWith("-") && a !== "-") {
      const flag = withTwoDashes(a);
      const eq = flag.indexOf("=");
      const name = eq < 0 ? flag : flag.slice(0, eq);
      if (a === "--") positionalOnly = true;
      else if (flag === "--help" || a === "-h") out.help = true;
      else if (name === "--from") {
        if (eq >= 0) out.from = flag.slice(eq + 1);
        else if (i + 1 < args.length) out.from = args[++i];
        else throw new Error("flag --from needs a value");
        if (out.from === "") throw new Error("flag --from is empty");
      } else {
        const written = a.split("=")[0];
        throw new Error(
          `unknown flag ${JSON.stringify(written)}${
            flagSuggestion(written, ["from", "help"])
          }`,
        );
      }
      continue;
    }
    if (out.dir !== undefined) {
      throw new Error(
        `unexpected extra argument ${
          JSON.stringify(a)
        } (only one state directory is accepted)`,
      );
    }
    if (a === "") throw new Error("the state directory is empty");
    out.dir = a;
  }
  return out;
}

/** `berth-acquire install-check`: see the usage text. Returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const fail = (msg: string) => {
    console.error(`berth-acquire install-check: ${msg}`);
    return EXIT_FAILURE;
  };
  let parsed: InstallArgs;
  try {
    parsed = parseInstallArgs(args);
  } catch (e) {
    return fail(
      `${(e as Error).message} (run "berth-acquire install-check --help")`,
    );
  }
  if (parsed.help) {
    console.log(USAGE);
    return 0;
  }
  if (parsed.from === undefined && !Deno.build.standalone) {
    return fail(
      `under "deno run" there is no single executable to install; pass --from with a compiled berth-acquire`,
    );
  }
  const from = parsed.from ?? Deno.execPath();
  const state = new StateDir(
    parsed.dir ?? (Deno.env.get("BERTH_STATE_DIR") || DEFAULT_STATE_DIR),
  );
  try {
    await ensureStateDir(state.dir);
    const { companions } = await installPortableCheck(state, from);
    const added = companions.reduce((n, c) => n + c.size, 0);
    console.log(
      `installed ${state.checkPath} from ${from}` +
        (companions.length
          ? ` with its loader and ${companions.length - 1} libraries (${
            (added / 1048576).toFixed(1)
          } MiB) beside it`
          : " (a static executable: nothing beside it)"),
    );
    return 0;
  } catch (e) {
    return fail((e as Error).message);
  }
}

/** Seams of {@linkcode installProbe}; the defaults describe this process. */
export interface InstallProbeOptions extends PortableCheckOptions {
  /** Whether this process is a compiled binary that can copy itself; default `Deno.build.standalone`. */
  standalone?: boolean;
  /** The running executable; default `Deno.execPath()`. */
  execPath?: string;
  /** The checkout whose `main.ts` the `deno run` wrapper runs; default this one. */
  repoRoot?: string;
}

/**
 * The probe install `acquire` does: under `deno run` the shell wrapper
 * (lib/state/install_check.ts); compiled, the rewritten copy of itself with
 * its loader and libraries, or, when that cannot be (the state directory's
 * path is too long, its own executable cannot be rewritten), the plain copy
 * and one WARN line: the probe then needs glibc in the main image.
 *
 * @param state The state directory.
 * @param logger For the WARN line.
 * @param options Seams; see {@linkcode InstallProbeOptions}.
 * @throws {StateFileError} When the state directory cannot be written.
 */
export async function installProbe(
  state: StateDir,
  logger: Logger,
  options: InstallProbeOptions = {},
): Promise<void> {
  const execPath = options.execPath ?? Deno.execPath();
  if (!(options.standalone ?? Deno.build.standalone)) {
    const root = (options.repoRoot ?? CHECKOUT_ROOT).replace(/\/+$/, "");
    const argv = denoRunArgv(root, `${root}/main.ts`, [], execPath);
    await state.installCheck({
      script: new TextEncoder().encode(checkWrapperScript(argv)),
    });
    return;
  }
  try {
    await installPortableCheck(state, execPath, options);
    return;
  } catch (e) {
    if (!(e instanceof RewriteError || e instanceof ElfError)) throw e;
    logger.warn(
      "installed the probe as a plain copy: it then needs glibc in the main image (the probe fails in static, scratch, distroless/static and musl images)",
      { reason: e.message, check: state.checkPath },
    );
  }
  await state.installCheck({ copyOf: execPath });
}
