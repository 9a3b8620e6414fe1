/**
 * How this program starts itself again (`run` starts its command under
 * `gate`), and how the simulator, the benchmarks and the tests start it: the
 * compiled binary runs itself; under `deno run` the same `deno`, with a
 * checkout's `main.ts`, `deno.json`, the binary's permission set and its V8
 * flags, and so does the probe wrapper (lib/cmd/install_check.ts). One
 * builder, so every place that starts the CLI starts it the same way, and
 * the compile script takes the permission set and the flags from here.
 *
 * @module
 */

/** The checkout this module belongs to (the directory holding deno.json and main.ts). */
export const CHECKOUT_ROOT: string = decodeURIComponent(
  new URL("../..", import.meta.url).pathname,
).replace(/\/+$/, "");

/**
 * The name of the permission set in deno.json that the binary is compiled
 * with and every `deno run` of the CLI passes (`-P=berth-acquire`), so a
 * permission the program needs can never be granted in one and forgotten in
 * the other.
 */
export const PERMISSION_SET = "berth-acquire";

/**
 * The V8 flags the binary is compiled with (`deno compile --v8-flags`) and
 * every `deno run` of the CLI passes, so both run the same engine: V8's
 * interpreter alone, without its baseline and optimising compilers. The
 * helper's own JavaScript is a few calls per renewal or per probe, and the
 * compilers' work and memory were what a sidecar grew by: in the benchmark a
 * jitless sidecar used less CPU per hour and its RSS stayed close to where
 * it started (see docs/benchmarks.md). WebAssembly, which needs the
 * compilers, is not used. `--expose-gc` gives the long-lived processes V8's
 * `gc()`, which they call once a minute (`full_collection.ts`): left to
 * itself, V8 let garbage spread over more of the heap's pages for
 * thousands of renewals before it needed a full collection.
 */
export const V8_FLAGS: readonly string[] = ["--jitless", "--expose-gc"];

/** {@linkcode V8_FLAGS} as the one argument `deno run` and `deno compile` take. */
export const V8_FLAGS_ARG: string = `--v8-flags=${V8_FLAGS.join(",")}`;

/**
 * The argv that runs a Deno program with a checkout's configuration, the
 * permissions the compiled binary gets (the deno.json permission set, no
 * prompts) and its V8 flags.
 *
 * @param root The checkout whose `deno.json` to use.
 * @param script The program to run.
 * @param args Its arguments.
 * @param deno The `deno` executable; default this process's.
 * @returns An executable and its arguments, for `Deno.Command`.
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

/**
 * The argv that runs `berth-acquire ...args` from a checkout under `deno run`.
 *
 * @param root The checkout.
 * @param args The subcommand and its arguments.
 * @returns An executable and its arguments, for `Deno.Command`.
 */
export function checkoutArgv(root: string, args: string[]): string[] {
  return denoRunArgv(root, `${root}/main.ts`, args);
}

/**
 * The argv that runs `berth-acquire ...args` the way this process runs.
 *
 * @param args The subcommand and its arguments.
 * @returns An executable and its arguments, for `Deno.Command`.
 */
export function selfArgv(args: string[]): string[] {
  if (Deno.build.standalone) return [Deno.execPath(), ...args];
  return checkoutArgv(CHECKOUT_ROOT, args);
}
