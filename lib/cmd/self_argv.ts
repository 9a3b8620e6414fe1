/**
 * How this program starts itself again (`run` starts its command under
 * `gate`): the compiled binary runs itself; under `deno run` the same
 * `deno`, with this checkout's `main.ts`, `deno.json` and permission set, as
 * the probe wrapper does (lib/state/state_dir.ts).
 *
 * @module
 */

/**
 * The argv that runs `berth-acquire ...args` the way this process runs.
 *
 * @param args The subcommand and its arguments.
 * @returns An executable and its arguments, for `Deno.Command`.
 */
export function selfArgv(args: string[]): string[] {
  if (Deno.build.standalone) return [Deno.execPath(), ...args];
  const root = decodeURIComponent(new URL("../..", import.meta.url).pathname)
    .replace(/\/+$/, "");
  return [
    Deno.execPath(),
    "run",
    "-q",
    "--no-prompt",
    "-P=berth-acquire",
    "--config",
    `${root}/deno.json`,
    `${root}/main.ts`,
    ...args,
  ];
}
