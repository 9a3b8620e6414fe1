/**
 * How this program starts itself again (`run` starts its command under
 * `gate`), and how the simulator, the benchmarks and the tests start it: the
 * compiled binary runs itself; under `deno run` the same `deno`, with a
 * checkout's `main.ts`, `deno.json` and the binary's permission set, as the
 * probe wrapper does (lib/state/install_check.ts). One builder, so every
 * place that starts the CLI starts it the same way.
 *
 * @module
 */

/** The checkout this module belongs to (the directory holding deno.json and main.ts). */
const CHECKOUT_ROOT: string = decodeURIComponent(
  new URL("../..", import.meta.url).pathname,
).replace(/\/+$/, "");

/**
 * The argv that runs a Deno program with a checkout's configuration and the
 * permissions the compiled binary gets (the deno.json permission set, no
 * prompts).
 *
 * @param root The checkout whose `deno.json` to use.
 * @param script The program to run.
 * @param args Its arguments.
 * @returns An executable and its arguments, for `Deno.Command`.
 */
export function denoRunArgv(
  root: string,
  script: string,
  args: string[] = [],
): string[] {
  return [
    Deno.execPath(),
    "run",
    "-q",
    "--no-prompt",
    "-P=berth-acquire",
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
