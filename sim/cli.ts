/**
 * How the simulator, the benchmarks and the tests start the real CLI:
 * `deno run -q -P=berth-acquire --config <repo>/deno.json <repo>/main.ts
 * ...`. It lives here rather than in tests/support because the demo uses it
 * and must not import test support; the tests import it from here.
 *
 * @module
 */
import {
  checkoutArgv,
  denoRunArgv as denoRunArgvOf,
} from "../lib/cmd/self_argv.ts";

/**
 * The checkout's root (the directory holding deno.json and main.ts), as a
 * path, so the simulator runs the CLI of the checkout it lives in wherever
 * it is started from.
 */
export const REPO_ROOT: string = decodeURIComponent(
  new URL("..", import.meta.url).pathname,
).replace(/\/+$/, "");

/**
 * The argv that runs a Deno program with the permissions the compiled binary
 * gets (the deno.json permission set, no prompts), so a benchmark floor is
 * started exactly the way the helper is.
 */
export function denoRunArgv(script: string, args: string[] = []): string[] {
  return denoRunArgvOf(REPO_ROOT, script, args);
}

/**
 * The argv that runs `berth-acquire ...args` exactly as the init container
 * and the sidecar run it under `deno run`.
 */
export function berthArgv(args: string[]): string[] {
  return checkoutArgv(REPO_ROOT, args);
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
