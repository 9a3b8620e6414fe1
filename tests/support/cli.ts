/**
 * Runs the real CLI in a child process exactly as the compiled binary would
 * run: `deno run -q -P=berth-acquire --config <repo>/deno.json <repo>/main.ts
 * ...args`, with the permission set of deno.json and no prompts. Tests that
 * check exit codes, output lines or signal handling use it so they exercise
 * `main.ts`'s dispatch and the real permissions, not just a module.
 *
 * @module
 */

import { berthArgv, REPO_ROOT } from "../../sim/cli.ts";

export { REPO_ROOT };

/** Options for {@linkcode runCli} and {@linkcode spawnCli}. */
export interface CliOptions {
  /**
   * The child's environment. When `clearEnv` is true (the default) this is
   * ALL it gets, so a test never inherits a `BERTH_*` variable by accident;
   * `PATH` is added from the test process unless given here.
   */
  env?: Record<string, string>;
  /** Start from an empty environment (plus `PATH`); default true. */
  clearEnv?: boolean;
  /** Working directory; default the test process's. */
  cwd?: string;
  /** Bytes for stdin; default none (stdin is closed). Only for {@linkcode runCli}. */
  stdin?: Uint8Array | string;
  /** Aborting kills the child (SIGKILL); bound every run with e.g. `AbortSignal.timeout`. */
  signal?: AbortSignal;
}

/** What a finished CLI run produced. */
export interface CliResult {
  /** Exit code (a signal-killed child reports 128 + signal number). */
  code: number;
  /** Everything written to stdout, decoded as UTF-8. */
  stdout: string;
  /** Everything written to stderr, decoded as UTF-8. */
  stderr: string;
}

/** The argv that runs the CLI with `args`: `[deno, "run", ...]`, shared with the simulator. */
export const cliArgv: (args: string[]) => string[] = berthArgv;

function command(
  argv: string[],
  opts: CliOptions,
  stdin: "piped" | "null",
): Deno.Command {
  const clearEnv = opts.clearEnv ?? true;
  const env: Record<string, string> = { ...opts.env };
  if (clearEnv && env.PATH === undefined) {
    env.PATH = Deno.env.get("PATH") ?? "/usr/bin:/bin";
  }
  return new Deno.Command(argv[0], {
    args: argv.slice(1),
    env,
    clearEnv,
    cwd: opts.cwd,
    stdin,
    stdout: "piped",
    stderr: "piped",
    signal: opts.signal,
  });
}

/**
 * Runs `argv` (an executable and its arguments, e.g. an installed
 * `<state>/check` wrapper) to completion with the same environment handling
 * as {@linkcode runCli}.
 */
export async function runExecutable(
  argv: string[],
  opts: CliOptions = {},
): Promise<CliResult> {
  const cmd = command(argv, opts, opts.stdin === undefined ? "null" : "piped");
  const child = cmd.spawn();
  if (opts.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(
      typeof opts.stdin === "string"
        ? new TextEncoder().encode(opts.stdin)
        : opts.stdin,
    );
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return {
    code: out.code,
    stdout: dec.decode(out.stdout),
    stderr: dec.decode(out.stderr),
  };
}

/** Runs `berth-acquire ...args` to completion and collects its exit code and output. */
export function runCli(
  args: string[],
  opts: CliOptions = {},
): Promise<CliResult> {
  return runExecutable(cliArgv(args), opts);
}

/**
 * Starts `berth-acquire ...args` for a long-running command (renew,
 * dev-server) and returns the child: stdin is closed,
 * stdout and stderr are piped and must be consumed or cancelled by the test,
 * and the test must end it (`kill` then `await status`) or pass a `signal`.
 */
export function spawnCli(
  args: string[],
  opts: Omit<CliOptions, "stdin"> = {},
): Deno.ChildProcess {
  return command(cliArgv(args), opts, "null").spawn();
}
