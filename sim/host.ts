/**
 * Where a simulated pod's containers run: directly as children of the
 * simulator, or inside a PID namespace of their own, which is what a pod
 * with `shareProcessNamespace: true` gives its containers and what the
 * signal enforcer needs to find the workload in `/proc`. The pod simulator
 * talks to both through {@linkcode ProcessHost}, so its kubelet logic is the
 * same in either case.
 *
 * @module
 */
import { liveDescendants, readProcTable } from "../lib/gate/process_group.ts";
import { aborted } from "../lib/state/clock.ts";

/** How one container process ended. */
export interface ProcessExit {
  /** Exit code; 128 + n when killed by signal n. */
  code: number;
  /** The terminating signal's name, or null for a normal exit. */
  signal: string | null;
  /** Wall-clock ms at which the exit was observed. */
  at: number;
}

/** What to start and what to collect from it. */
export interface SpawnSpec {
  /** Executable and arguments. */
  argv: string[];
  /** The whole environment (nothing is inherited). */
  env: Record<string, string>;
  /**
   * Give the process a stdin pipe that is never written and stays open
   * until it exits, so a shell can sleep on `read -t` without forking;
   * otherwise stdin is /dev/null.
   */
  keepStdinOpen?: boolean;
  /** Called for every line the process writes, per stream; omitted streams are discarded. */
  onLine?: (stream: "stdout" | "stderr", line: string) => void;
}

/** A started process. */
export interface HostedProcess {
  /** PID as seen inside the host (inside the namespace for a namespaced host). */
  readonly pid: number;
  /** Sends a signal; a process that already exited is ignored. */
  kill(signal: Deno.Signal): void;
  /** Resolves once the process exited and its output was delivered. */
  readonly exited: Promise<ProcessExit>;
}

/** Starts processes for one pod; closing it ends whatever still runs. */
export interface ProcessHost extends AsyncDisposable {
  /** Starts `spec`; rejects when it cannot be started. */
  spawn(spec: SpawnSpec): Promise<HostedProcess>;
  /** Kills what is left and releases the host. */
  close(): Promise<void>;
}

const SIGNAL_NUMBERS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGKILL: 9,
  SIGTERM: 15,
};

/** Splits a byte stream into lines and hands each to `onLine`. */
async function forwardLines(
  stream: ReadableStream<Uint8Array>,
  onLine: ((line: string) => void) | undefined,
): Promise<void> {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let rest = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += value;
      let nl: number;
      while ((nl = rest.indexOf("\n")) >= 0) {
        onLine?.(rest.slice(0, nl));
        rest = rest.slice(nl + 1);
      }
    }
  } finally {
    reader.releaseLock();
  }
  if (rest !== "") onLine?.(rest);
}

/**
 * Starts `spec` as a child of this process. Used by {@linkcode DirectHost}
 * and, inside the namespace, by the namespace runner, so both report exits
 * and lines the same way.
 */
export function spawnLocal(spec: SpawnSpec): HostedProcess {
  const child = new Deno.Command(spec.argv[0], {
    args: spec.argv.slice(1),
    env: spec.env,
    clearEnv: true,
    stdin: spec.keepStdinOpen ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stdinWriter = spec.keepStdinOpen ? child.stdin.getWriter() : undefined;
  const out = forwardLines(
    child.stdout,
    spec.onLine && ((l) => spec.onLine!("stdout", l)),
  );
  const err = forwardLines(
    child.stderr,
    spec.onLine && ((l) => spec.onLine!("stderr", l)),
  );
  const exited = (async () => {
    const status = await child.status;
    const at = Date.now();
    await stdinWriter?.close().catch(() => {});
    await Promise.allSettled([out, err]);
    return {
      code: status.signal
        ? 128 + (SIGNAL_NUMBERS[status.signal] ?? 0)
        : status.code,
      signal: status.signal,
      at,
    };
  })();
  let done = false;
  exited.then(() => done = true);
  return {
    pid: child.pid,
    kill(signal) {
      if (done) return;
      // SIGKILL ends a container whole, as the runtime kills its cgroup:
      // the workload a gated container started in a session of its own too.
      let rest: number[] = [];
      if (signal === "SIGKILL") {
        try {
          rest = liveDescendants(child.pid, readProcTable());
        } catch {
          // no procfs: the process alone
        }
      }
      for (const pid of [child.pid, ...rest]) {
        try {
          Deno.kill(pid, signal);
        } catch {
          // exited between the check and the kill
        }
      }
    },
    exited,
  };
}

/** Runs a pod's processes as plain children: enough for `enforce=probe`. */
export class DirectHost implements ProcessHost {
  #live = new Set<HostedProcess>();

  spawn(spec: SpawnSpec): Promise<HostedProcess> {
    const p = spawnLocal(spec);
    this.#live.add(p);
    p.exited.then(() => this.#live.delete(p));
    return Promise.resolve(p);
  }

  async close(): Promise<void> {
    const left = [...this.#live];
    for (const p of left) p.kill("SIGKILL");
    await Promise.all(left.map((p) => p.exited));
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** Messages from the namespace runner (sim/ns_runner.ts), one JSON object per line. */
type RunnerEvent =
  | { ev: "ready" }
  | { ev: "spawned"; id: number; pid: number }
  | { ev: "spawn-failed"; id: number; message: string }
  | { ev: "line"; id: number; stream: "stdout" | "stderr"; line: string }
  | { ev: "exit"; id: number; code: number; signal: string | null; at: number };

/**
 * Why namespaced pods cannot run here, or undefined when they can: they need
 * Linux, root and a working `unshare --pid --fork --mount-proc`. Callers
 * print the reason and skip signal-mode cases.
 */
export async function namespaceUnavailable(): Promise<string | undefined> {
  if (Deno.build.os !== "linux") return "needs Linux";
  if (Deno.uid() !== 0) return "needs root (unshare --pid --mount-proc)";
  try {
    const probe = await new Deno.Command("unshare", {
      args: ["--pid", "--fork", "--kill-child", "--mount-proc", "true"],
      stdout: "null",
      stderr: "piped",
      signal: AbortSignal.timeout(10_000),
    }).output();
    if (!probe.success) {
      return `unshare --pid --mount-proc fails here: ${
        new TextDecoder().decode(probe.stderr).trim()
      }`;
    }
  } catch (e) {
    return `cannot run unshare: ${e instanceof Error ? e.message : e}`;
  }
  return undefined;
}

/**
 * Runs a pod's processes in a private PID namespace with its own `/proc`,
 * as `shareProcessNamespace: true` does: a bash is PID 1 there (it reaps
 * orphans, and PID 1 is never a signal target), and a small runner under it
 * starts, signals and reports the processes on this host's behalf. When the
 * host closes, the namespace and everything in it dies.
 */
export class NamespaceHost implements ProcessHost {
  #proc: Deno.ChildProcess;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #nextId = 1;
  #pending = new Map<
    number,
    { resolve: (p: HostedProcess) => void; reject: (e: Error) => void }
  >();
  #procs = new Map<
    number,
    { spec: SpawnSpec; resolveExit: (e: ProcessExit) => void }
  >();
  #ready: Promise<void>;
  #reading: Promise<void>;
  #closed: Promise<void> | undefined;

  /** Use {@linkcode NamespaceHost.start}, which waits until the runner is ready. */
  private constructor() {
    const runner = new URL("./ns_runner.ts", import.meta.url).pathname;
    this.#proc = new Deno.Command("unshare", {
      args: [
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "/bin/bash",
        "-c",
        // bash stays PID 1 (reaping orphans); the runner keeps the pipes.
        '"$0" run -A --no-config -q "$1" <&0 & wait $!',
        Deno.execPath(),
        runner,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#writer = this.#proc.stdin.getWriter();
    let readyResolve!: () => void;
    let readyReject!: (e: Error) => void;
    this.#ready = new Promise((res, rej) => {
      readyResolve = res;
      readyReject = rej;
    });
    this.#reading = forwardLines(this.#proc.stdout, (line) => {
      const ev = JSON.parse(line) as RunnerEvent;
      if (ev.ev === "ready") readyResolve();
      else this.#dispatch(ev);
    }).finally(() => {
      readyReject(new Error("the namespace runner exited before it was ready"));
      const at = Date.now();
      for (const p of this.#procs.values()) {
        p.resolveExit({ code: 137, signal: "SIGKILL", at });
      }
      this.#procs.clear();
      for (const p of this.#pending.values()) {
        p.reject(new Error("the namespace runner exited"));
      }
      this.#pending.clear();
    });
  }

  /** Starts a namespace and its runner; `signal` bounds the wait for it. */
  static async start(signal: AbortSignal): Promise<NamespaceHost> {
    const host = new NamespaceHost();
    await Promise.race([
      host.#ready,
      aborted(signal).then(() => {
        throw new Error("timed out starting the PID namespace runner");
      }),
    ]).catch(async (e) => {
      await host.close();
      throw e;
    });
    return host;
  }

  #dispatch(ev: Exclude<RunnerEvent, { ev: "ready" }>): void {
    switch (ev.ev) {
      case "spawned":
      case "spawn-failed": {
        const waiter = this.#pending.get(ev.id);
        this.#pending.delete(ev.id);
        if (ev.ev === "spawn-failed") {
          this.#procs.delete(ev.id);
          waiter?.reject(new Error(ev.message));
          return;
        }
        const id = ev.id;
        const entry = this.#procs.get(id);
        if (!entry) return;
        let done = false;
        const exited = new Promise<ProcessExit>((resolve) => {
          entry.resolveExit = (e) => {
            done = true;
            resolve(e);
          };
        });
        waiter?.resolve({
          pid: ev.pid,
          kill: (sig) => {
            if (!done) this.#send({ op: "kill", id, signal: sig });
          },
          exited,
        });
        return;
      }
      case "line":
        this.#procs.get(ev.id)?.spec.onLine?.(ev.stream, ev.line);
        return;
      case "exit": {
        const entry = this.#procs.get(ev.id);
        this.#procs.delete(ev.id);
        entry?.resolveExit({ code: ev.code, signal: ev.signal, at: ev.at });
        return;
      }
    }
  }

  #send(msg: Record<string, unknown>): void {
    this.#writer.write(new TextEncoder().encode(JSON.stringify(msg) + "\n"))
      .catch(() => {});
  }

  spawn(spec: SpawnSpec): Promise<HostedProcess> {
    const id = this.#nextId++;
    this.#procs.set(id, { spec, resolveExit: () => {} });
    const started = new Promise<HostedProcess>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
    });
    this.#send({
      op: "spawn",
      id,
      argv: spec.argv,
      env: spec.env,
      keepStdinOpen: spec.keepStdinOpen ?? false,
    });
    return started;
  }

  close(): Promise<void> {
    this.#closed ??= (async () => {
      // Closing the runner's stdin makes it kill its children and exit;
      // bash (PID 1) then exits and the kernel kills the rest.
      await this.#writer.close().catch(() => {});
      const gone = AbortSignal.timeout(10_000);
      await Promise.race([this.#proc.status, aborted(gone)]);
      if (gone.aborted) {
        try {
          this.#proc.kill("SIGKILL");
        } catch { /* already gone */ }
      }
      await this.#proc.status;
      await this.#reading.catch(() => {});
    })();
    return this.#closed;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
