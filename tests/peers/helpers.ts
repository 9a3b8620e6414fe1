/**
 * Both helpers as child processes with the same arguments and environment:
 * the Go helper (`BERTH_PEER_HELPER`) and this project's CLI run from source.
 * Output is collected as it arrives so a test can wait on it, freeze the
 * process (SIGSTOP) or kill it.
 *
 * @module
 */
import { cliArgv } from "../support/cli.ts";
import { waitFor } from "../support/wait.ts";
import { PEER_HELPER } from "./peers.ts";

/** Which helper: the upstream Go one or this project's. */
export type HelperKind = "go" | "ours";

/** The argv that runs `kind` with `args`. */
export function helperArgv(kind: HelperKind, args: string[]): string[] {
  return kind === "go" ? [PEER_HELPER, ...args] : cliArgv(args);
}

/** A running helper. Disposing it SIGKILLs it (and resumes it first if frozen). */
export class PeerProcess implements AsyncDisposable {
  /** Which helper it is. */
  readonly kind: HelperKind;
  /** The child. */
  readonly child: Deno.ChildProcess;
  /** stdout so far. */
  stdout = "";
  /** stderr so far. */
  stderr = "";
  /** The exit status once it exited. */
  exited: Deno.CommandStatus | undefined;
  readonly #status: Promise<Deno.CommandStatus>;
  readonly #pipes: Promise<unknown>;

  /**
   * Starts `kind` with `args` and exactly `env` (plus `PATH` and, for ours,
   * `NO_COLOR`).
   *
   * @param kind The helper.
   * @param args Its arguments.
   * @param env Its environment.
   */
  constructor(kind: HelperKind, args: string[], env: Record<string, string>) {
    this.kind = kind;
    const argv = helperArgv(kind, args);
    this.child = new Deno.Command(argv[0], {
      args: argv.slice(1),
      env: {
        PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
        ...(kind === "ours" ? { NO_COLOR: "1" } : {}),
        ...env,
      },
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const read = async (
      s: ReadableStream<Uint8Array>,
      into: "stdout" | "stderr",
    ) => {
      for await (const t of s.pipeThrough(new TextDecoderStream())) {
        this[into] += t;
      }
    };
    this.#pipes = Promise.all([
      read(this.child.stdout, "stdout"),
      read(this.child.stderr, "stderr"),
    ]).catch(() => {});
    this.#status = this.child.status.then((s) => this.exited = s);
  }

  /** The process id. */
  get pid(): number {
    return this.child.pid;
  }

  /** Sends `signal` unless it has exited. */
  kill(signal: Deno.Signal): void {
    if (this.exited) return;
    try {
      this.child.kill(signal);
    } catch { /* exited meanwhile */ }
  }

  /**
   * Waits (bounded) for the exit and the end of its output.
   *
   * @param timeoutMs The failure bound.
   * @returns The exit status.
   */
  async wait(timeoutMs = 30_000): Promise<Deno.CommandStatus> {
    await waitFor(() => this.exited !== undefined, {
      timeoutMs,
      what: `the ${this.kind} helper to exit; stderr:\n${this.stderr}`,
    });
    await Promise.race([
      this.#pipes,
      new Promise((r) => setTimeout(r, 2_000)),
    ]);
    return this.exited!;
  }

  /** SIGCONT then SIGKILL, and wait. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.kill("SIGCONT");
    this.kill("SIGKILL");
    await this.#status;
    await Promise.race([
      this.#pipes,
      new Promise((r) => setTimeout(r, 2_000)),
    ]);
  }
}

/**
 * Runs `kind` with `args` to completion.
 *
 * @param kind The helper.
 * @param args Its arguments.
 * @param env Its environment.
 * @returns Exit code and output.
 */
export async function runHelper(
  kind: HelperKind,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  await using p = new PeerProcess(kind, args, env);
  const s = await p.wait();
  return { code: s.code, stdout: p.stdout, stderr: p.stderr };
}
