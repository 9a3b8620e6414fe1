/**
 * How this program starts itself and is started: `run` starts its command
 * under `gate`; the probe wrapper, the simulator, the benchmarks and the
 * tests start the CLI. The compiled binary runs itself; under `deno run` the
 * same `deno` runs a checkout's `main.ts` with its `deno.json`, the binary's
 * permission set and V8 flags. One builder, so every start is the same, and
 * the compile script takes the permission set and the flags from here.
 *
 * @module
 */
import { checkWrapperScript, type StateDir } from "../state/state_dir.ts";

/** The checkout this module belongs to (the directory of deno.json and main.ts): `import.meta` is built only when it is asked. */
const checkoutRoot = () =>
  decodeURIComponent(new URL("../..", import.meta.url).pathname)
    .replace(/\/+$/, "");

/**
 * The permission set in deno.json that the binary is compiled with and
 * every `deno run` of the CLI passes, so a permission can never be granted
 * in one and forgotten in the other.
 */
export const PERMISSION_SET = "berth-acquire";

/**
 * The V8 flags of the binary and of every `deno run` of the CLI: V8's
 * interpreter alone (the compilers' work and memory were what a sidecar grew
 * by; WebAssembly, which needs them, is not used), and `gc()` for the
 * long-lived processes' full collections (`full_collection.ts`). See
 * docs/development.md.
 */
export const V8_FLAGS: readonly string[] = ["--jitless", "--expose-gc"];

/** {@linkcode V8_FLAGS} as the one argument `deno run` and `deno compile` take. */
export const V8_FLAGS_ARG: string = `--v8-flags=${V8_FLAGS.join(",")}`;

/**
 * The argv (for `Deno.Command`) that runs `script` with the `deno.json` of
 * checkout `root`, the binary's permissions (no prompts) and its V8 flags.
 */
export function denoRunArgv(
  root: string,
  script: string,
  args: string[] = [],
  deno: string = Deno.execPath(),
): string[] {
  return [
    deno,
    "run",
    "-q",
    "--no-prompt",
    `-P=${PERMISSION_SET}`,
    V8_FLAGS_ARG,
    "--config",
    `${root}/deno.json`,
    script,
    ...args,
  ];
}

/** The argv that runs `berth-acquire ...args` from checkout `root` under `deno run`. */
export function checkoutArgv(root: string, args: string[]): string[] {
  return denoRunArgv(root, `${root}/main.ts`, args);
}

/**
 * Installs `<state>/check` under `deno run`, where there is no executable to
 * copy: a wrapper that runs this checkout's `main.ts` with this `deno`.
 */
export function installCheckWrapper(state: StateDir): Promise<void> {
  const script = checkWrapperScript(checkoutArgv(checkoutRoot(), []));
  return state.installCheck({ script: new TextEncoder().encode(script) });
}

/** The argv that runs `berth-acquire ...args` the way this process runs. */
export function selfArgv(args: string[]): string[] {
  if (Deno.build.standalone) return [Deno.execPath(), ...args];
  return checkoutArgv(checkoutRoot(), args);
}
