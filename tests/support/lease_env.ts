/**
 * What a process-level test of `acquire` and `renew` needs around the real
 * CLI: the `BERTH_*` environment the webhook would give a pod, a bounded
 * poll on a condition (tests never sleep "long enough" and never assert
 * elapsed time), a running helper whose log lines can be waited for, the
 * state files as the probe sees them, and Berth RPCs made as another holder.
 *
 * @module
 */
import {
  type MarkerDeadlines,
  parseMarker,
  readBootMillis,
} from "../../lib/state/marker.ts";
import { spawnCli } from "./cli.ts";

/** Options for {@linkcode leaseEnv}; each field has a test-friendly default. */
export interface LeaseEnvOptions {
  /** `BERTH_API_SERVER`, e.g. a dev server's `url`. Required. */
  apiServer: string;
  /** `BERTH_STATE_DIR`. Required: every test gets its own temp directory. */
  stateDir: string;
  /** `BERTH_LEASE_NAME`; default `web`. */
  leaseName?: string;
  /** `POD_NAMESPACE` (the lease namespace defaults to it); default `prod`. */
  namespace?: string;
  /** `BERTH_MODE`; default unset (runtime-singleton). */
  mode?: "startup-gate" | "runtime-singleton";
  /** `BERTH_TTL_SECONDS`; default 8. `undefined` in `omit` leaves it out. */
  ttlSeconds?: number;
  /** `BERTH_HEARTBEAT_SECONDS`; default 1. */
  heartbeatSeconds?: number;
  /** `POD_NAME`; default `web-0`. */
  podName?: string;
  /** `POD_UID`; default a fixed UID, so holders are predictable. */
  podUid?: string;
  /** Variables to leave out entirely (e.g. `BERTH_TTL_SECONDS` for a config error). */
  omit?: string[];
  /** Further variables (`BERTH_CLUSTER_ID`, `BERTH_LOG_FORMAT`, ...); they win over the above. */
  extra?: Record<string, string>;
}

/** The pod UID {@linkcode leaseEnv} uses unless told otherwise. */
export const DEFAULT_POD_UID = "8c21b044-0c5b-4d7e-9a51-2f0f3c1d7e11";

/**
 * The holder a runtime-singleton pod built by {@linkcode leaseEnv} with
 * default names has: `<namespace>/pod:<pod name>:uid:<uid>`, as the spec
 * derives it. Tests compare the `holder` file with it byte for byte.
 */
export function runtimeHolder(
  namespace = "prod",
  podName = "web-0",
  podUid = DEFAULT_POD_UID,
): string {
  return `${namespace}/pod:${podName}:uid:${podUid}`;
}

/**
 * The environment the webhook gives the helper containers of one pod, so
 * each test states only what it is about. `NO_COLOR` keeps logs plain.
 */
export function leaseEnv(o: LeaseEnvOptions): Record<string, string> {
  const env: Record<string, string> = {
    NO_COLOR: "1",
    BERTH_LEASE_NAME: o.leaseName ?? "web",
    POD_NAMESPACE: o.namespace ?? "prod",
    POD_NAME: o.podName ?? "web-0",
    POD_UID: o.podUid ?? DEFAULT_POD_UID,
    BERTH_TTL_SECONDS: String(o.ttlSeconds ?? 8),
    BERTH_HEARTBEAT_SECONDS: String(o.heartbeatSeconds ?? 1),
    BERTH_STATE_DIR: o.stateDir,
    BERTH_API_SERVER: o.apiServer,
  };
  if (o.mode) env.BERTH_MODE = o.mode;
  for (const name of o.omit ?? []) delete env[name];
  return { ...env, ...o.extra };
}

import { waitFor } from "./wait.ts";
export { waitFor, type WaitForOptions } from "./wait.ts";

/** The node's boot-time clock in ms, as the probe and the marker read it (10 ms resolution). */
export function bootNowMs(): number {
  return readBootMillis();
}

/** The health marker as the probe would find it. */
export interface MarkerSnapshot {
  /** The raw content. */
  text: string;
  /** The deadlines in it; undefined for a header-only (startup-gate) marker. */
  deadlines: MarkerDeadlines | undefined;
  /** Its mtime in ms since the epoch. */
  mtimeMs: number;
}

/**
 * Reads `<dir>/healthy`, or undefined when it is absent (also when it is
 * removed between the stat and the read, which the sidecar may do at any
 * moment).
 */
export function readMarker(dir: string): MarkerSnapshot | undefined {
  const path = `${dir}/healthy`;
  try {
    const info = Deno.statSync(path);
    const text = Deno.readTextFileSync(path);
    return {
      text,
      deadlines: parseMarker(text),
      mtimeMs: info.mtime?.getTime() ?? NaN,
    };
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/** Reads a state file as text, or undefined when it is absent. */
export function readStateFile(dir: string, name: string): string | undefined {
  try {
    return Deno.readTextFileSync(`${dir}/${name}`);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/** The names in `dir`, sorted, so "nothing was written" is one comparison. */
export function listDir(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
}

/**
 * A temporary directory removed at the end of the `await using` block. The
 * removal is retried a few times, since a process that is still being
 * stopped may write into the directory while it is being removed.
 */
export async function tempDir(
  prefix = "berth-proc-",
): Promise<{ path: string } & AsyncDisposable> {
  const path = await Deno.makeTempDir({ prefix });
  return {
    path,
    async [Symbol.asyncDispose]() {
      for (let attempt = 1; attempt <= 5; attempt++) {
        try {
          await Deno.remove(path, { recursive: true });
          return;
        } catch (e) {
          if (e instanceof Deno.errors.NotFound) return;
          if (attempt === 5) {
            console.log(`could not remove ${path}: ${(e as Error).message}`);
            return;
          }
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    },
  };
}

/**
 * How long output is still collected after the helper exited. Descendants
 * that inherited its stdout/stderr (the command of `run`, say) can keep the
 * pipes open; their output is not the helper's, so it is not waited for.
 */
const DRAIN_AFTER_EXIT_MS = 2_000;

/**
 * A long-running helper process (`acquire`, `renew`, `run`) whose stderr
 * lines are collected as they arrive, so a test can wait for a log line,
 * then signal it and check how it ended. Disposing it SIGKILLs it if it
 * still runs, so no child outlives a failing test.
 */
export class HelperProcess implements AsyncDisposable {
  /** The child; `pid` for signals from outside. */
  readonly child: Deno.ChildProcess;
  /** Everything written to stderr so far, split into lines. */
  readonly lines: string[] = [];
  /** Everything written to stdout so far. */
  stdout = "";
  /** The exit status once it has exited. */
  exited: Deno.CommandStatus | undefined;
  /** True once both pipes reached their end. */
  #drained = false;
  readonly #readers: ReadableStreamDefaultReader<string>[];
  readonly #pipes: Promise<void>;
  readonly #status: Promise<Deno.CommandStatus>;

  /** Starts `berth-acquire ...args` with exactly `env` (plus PATH). */
  constructor(args: string[], env: Record<string, string>) {
    const child = spawnCli(args, { env });
    this.child = child;
    const errReader = child.stderr.pipeThrough(new TextDecoderStream())
      .getReader();
    const outReader = child.stdout.pipeThrough(new TextDecoderStream())
      .getReader();
    this.#readers = [errReader, outReader];
    const errors = (async () => {
      let partial = "";
      for (;;) {
        const { done, value } = await errReader.read();
        if (done) break;
        const parts = (partial + value).split("\n");
        partial = parts.pop() ?? "";
        this.lines.push(...parts);
      }
      if (partial !== "") this.lines.push(partial);
    })();
    const out = (async () => {
      for (;;) {
        const { done, value } = await outReader.read();
        if (done) break;
        this.stdout += value;
      }
    })();
    this.#pipes = Promise.all([errors, out]).then(() => {
      this.#drained = true;
    }, () => {
      this.#drained = true; // cancelled
    });
    this.#status = child.status.then((status) => {
      this.exited = status;
      return status;
    });
  }

  /** All stderr so far, for assertion messages. */
  get log(): string {
    return this.lines.join("\n");
  }

  /** Waits (bounded) for a stderr line matching `pattern` and returns it. */
  async waitForLine(pattern: RegExp, timeoutMs = 20_000): Promise<string> {
    try {
      return await waitFor(
        () =>
          this.lines.find((l) => pattern.test(l)) ??
            (this.exited && this.#drained ? fail(this, pattern) : undefined),
        { timeoutMs, what: `a log line matching ${pattern}` },
      );
    } catch (e) {
      throw new Error(`${(e as Error).message}; log so far:\n${this.log}`);
    }
  }

  /**
   * One Ctrl-C as `deno task` passes it on: SIGINT twice, a few ms apart.
   * Another press counts as one once `PRESS_MS` has passed since the process
   * was seen to act on this one.
   */
  async ctrlC(): Promise<void> {
    this.kill("SIGINT");
    await new Promise((r) => setTimeout(r, 10));
    this.kill("SIGINT");
  }

  /** Sends `signal` to the process (no-op once it has exited). */
  kill(signal: Deno.Signal): void {
    if (this.exited) return;
    try {
      this.child.kill(signal);
    } catch (e) {
      if (!(e instanceof TypeError)) throw e; // already exited
    }
  }

  /**
   * Waits (bounded) for the process to exit, then for the rest of its
   * output (see {@linkcode DRAIN_AFTER_EXIT_MS}); returns the status.
   */
  async wait(timeoutMs = 20_000): Promise<Deno.CommandStatus> {
    try {
      await waitFor(() => this.exited !== undefined, {
        timeoutMs,
        what: "the helper to exit",
      });
    } catch (e) {
      throw new Error(`${(e as Error).message}; log so far:\n${this.log}`);
    }
    await this.#drain();
    return this.exited!;
  }

  async #drain(): Promise<void> {
    await waitFor(() => this.#drained, {
      timeoutMs: DRAIN_AFTER_EXIT_MS,
      what: "the output pipes to close",
    }).catch(() => {});
  }

  /** SIGKILLs the process if it still runs, waits for it and stops reading its pipes. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.kill("SIGKILL");
    await this.#status;
    await this.#drain();
    if (!this.#drained) {
      await Promise.all(this.#readers.map((r) => r.cancel().catch(() => {})));
    }
    await this.#pipes;
  }
}

function fail(p: HelperProcess, pattern: RegExp): never {
  throw new Error(
    `the helper exited (code ${p.exited?.code}) without a log line matching ${pattern}; log:\n${p.log}`,
  );
}

/** The answer of a Berth RPC made with {@linkcode leaseRpc}. */
export interface RpcAnswer {
  /** HTTP status. */
  status: number;
  /** The parsed JSON body; undefined for an empty body (204). */
  body: Record<string, unknown> | undefined;
}

/**
 * Makes one Berth RPC over plain HTTP, as another pod would, so a test can
 * take, hold or release the lease the helper under test competes for.
 */
export async function leaseRpc(
  baseUrl: string,
  rpc: "acquire" | "renew" | "release",
  key: { namespace: string; name: string },
  body: { holder: string; ttlSeconds?: number; fencingToken?: number },
): Promise<RpcAnswer> {
  const res = await fetch(
    `${baseUrl}/v1alpha1/namespaces/${key.namespace}/leases/${key.name}/${rpc}`,
    {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    },
  );
  const text = await res.text();
  return {
    status: res.status,
    body: text === "" ? undefined : JSON.parse(text),
  };
}
