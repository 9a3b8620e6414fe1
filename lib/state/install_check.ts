/**
 * What goes to `<state>/check`, the probe executable. The webhook runs the
 * probe as `<state>/check check <state>/healthy --max-age 30s`, so `check`
 * must be something the main container can exec. A compiled binary
 * (`Deno.build.standalone`) installs a copy of itself, rewritten to load its
 * loader and libraries from the state directory (lib/probe/install.ts), so
 * it runs in any main image. Under `deno run` (development, tests, and while
 * `deno compile` is unavailable) there is no self-contained executable to
 * copy, so a `#!/bin/sh` wrapper is installed instead that execs the same
 * `deno` with this checkout's `main.ts`, the permission set and the V8 flags
 * (the argv comes from lib/cmd/self_argv.ts); it behaves like the binary,
 * but it needs `/bin/sh`, the `deno` executable and this checkout at the
 * same paths in the container that runs the probe, which holds on one
 * machine but not in a real pod.
 *
 * The files are written like every state file (see `atomic_write.ts`): atomic,
 * not fsync-ed, because a new pod sandbox reruns the init container that
 * installs them.
 *
 * @module
 */

/** What `StateDir.installCheck` installs: a copy of a file, or a script's bytes. */
export type CheckSource = { copyOf: string } | { script: Uint8Array };

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
 * (`<state>/check check ...`) run `argv` followed by the probe's arguments.
 *
 * @param argv The command that runs the CLI (e.g. `deno run ... main.ts`).
 * @returns The script's text.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.match(checkWrapperScript(["/opt/deno", "run", "/s p/main.ts"]), /exec \/opt\/deno run '\/s p\/main.ts' "\$@"/);
 * ```
 */
export function checkWrapperScript(argv: readonly string[]): string {
  return "#!/bin/sh\n" +
    "# berth-acquire probe wrapper, installed because the helper ran under `deno run`.\n" +
    `exec ${argv.map(shellWord).join(" ")} "$@"\n`;
}
