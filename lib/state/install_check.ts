/**
 * What goes to `<state>/check`, the probe executable. The webhook runs the
 * probe as `<state>/check check <state>/healthy --max-age 30s`, so `check`
 * must be something the main container can exec. A compiled binary
 * (`Deno.build.standalone`) copies itself there. Under `deno run`
 * (development, tests, and while `deno compile` is unavailable) there is no
 * self-contained executable to copy, so a `#!/bin/sh` wrapper is installed
 * instead that execs the same `deno` with this checkout's `main.ts`, the
 * permission set and the V8 flags (`denoRunArgv`); it behaves like the
 * binary, but it needs `/bin/sh`, the `deno` executable and this checkout at
 * the same paths in the container that runs the probe, which holds on one
 * machine but not in a real pod.
 *
 * The copy is written like every state file (see `state_dir.ts`): atomic,
 * not fsync-ed, because a new pod sandbox reruns the init container that
 * installs it.
 *
 * @module
 */

import { denoRunArgv } from "../cmd/self_argv.ts";

/**
 * Quotes `s` for a POSIX shell with single quotes, so a path with spaces,
 * quotes or `$` in it reaches the wrapped command unchanged.
 *
 * @param s Any string.
 * @returns `s` as one shell word.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(shellQuote("it's"), `'it'\\''s'`);
 * ```
 */
export function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** `s` bare when the shell reads it as one literal word, else {@linkcode shellQuote}d. */
function shellWord(s: string): string {
  return /^[A-Za-z0-9_./=,-]+$/.test(s) ? s : shellQuote(s);
}

/**
 * The `check` wrapper installed under `deno run`: it makes the probe argv
 * (`<state>/check check ...`) run this checkout's CLI the way the compiled
 * binary would run itself (same permission set, no prompts, quiet).
 *
 * @param denoPath The `deno` executable to exec.
 * @param repoRoot The checkout holding `main.ts` and `deno.json`.
 * @returns The script's text.
 */
export function checkWrapperScript(denoPath: string, repoRoot: string): string {
  const root = repoRoot.replace(/\/+$/, "");
  const argv = denoRunArgv(root, `${root}/main.ts`, [], denoPath);
  return "#!/bin/sh\n" +
    "# berth-acquire probe wrapper, installed because the helper ran under `deno run`.\n" +
    `exec ${argv.map(shellWord).join(" ")} "$@"\n`;
}

/** How the probe is installed; the defaults describe this process. */
export interface InstallCheckOptions {
  /** Whether this process is a compiled binary that can copy itself; default `Deno.build.standalone`. */
  standalone?: boolean;
  /** The running executable; default `Deno.execPath()`. */
  execPath?: string;
  /** The checkout whose `main.ts` the wrapper runs; default the directory above lib/. */
  repoRoot?: string;
}

function repoRootOfThisModule(): string {
  const url = new URL("../..", import.meta.url);
  if (url.protocol !== "file:") {
    throw new Error(
      `cannot install the probe wrapper: berth-acquire was loaded from ${url.href}, not from local files; run it from a checkout or as a compiled binary`,
    );
  }
  return decodeURIComponent(url.pathname);
}

/**
 * What to install as `check`: a copy of the running binary, or the wrapper.
 *
 * @param options See {@linkcode InstallCheckOptions}.
 * @returns The file to copy, or the script's bytes.
 * @throws {Error} Under `deno run` from a non-file URL (no checkout to wrap).
 */
export function checkSource(
  options: InstallCheckOptions = {},
): { copyOf: string } | { script: Uint8Array } {
  const execPath = options.execPath ?? Deno.execPath();
  if (options.standalone ?? Deno.build.standalone) return { copyOf: execPath };
  const script = checkWrapperScript(
    execPath,
    options.repoRoot ?? repoRootOfThisModule(),
  );
  return { script: new TextEncoder().encode(script) };
}
