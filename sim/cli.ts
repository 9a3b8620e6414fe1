/**
 * How the simulator starts the real CLI: the same argv the tests use
 * (`deno run -q -P=berth-acquire --config <repo>/deno.json <repo>/main.ts
 * ...`), repeated here because simulator code is shipped with the demo and
 * must not import test support.
 *
 * @module
 */

/**
 * The checkout's root (the directory holding deno.json and main.ts), as a
 * path, so the simulator runs the CLI of the checkout it lives in wherever
 * it is started from.
 */
export const REPO_ROOT: string = decodeURIComponent(
  new URL("..", import.meta.url).pathname,
).replace(/\/+$/, "");

/**
 * The argv that runs `berth-acquire ...args` exactly as the init container
 * and the sidecar run it under `deno run`: the deno.json permission set and
 * no prompts.
 */
export function berthArgv(args: string[]): string[] {
  return [
    Deno.execPath(),
    "run",
    "-q",
    "--no-prompt",
    "-P=berth-acquire",
    "--config",
    `${REPO_ROOT}/deno.json`,
    `${REPO_ROOT}/main.ts`,
    ...args,
  ];
}

/**
 * The few variables a child needs to find its tools and the Deno cache when
 * it starts from an otherwise empty environment, so no `BERTH_*` setting of
 * the caller leaks into a simulated container.
 */
export function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {
    PATH: Deno.env.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin",
    NO_COLOR: "1",
  };
  for (const name of ["HOME", "DENO_DIR"]) {
    const v = Deno.env.get(name);
    if (v) env[name] = v;
  }
  return env;
}
