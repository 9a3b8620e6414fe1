/**
 * The container runtime under the kubelet stand-in (sim/pod.ts): it starts a
 * container's process on the pod's host, turns the helper containers' output
 * lines into `log` events, runs a container until it exits or the pod stops,
 * and terminates it the kubelet's way (SIGTERM, then SIGKILL once the grace
 * has passed), recording why each process ended. It keeps the current run of
 * each container; when to start and restart them is the pod's business.
 *
 * @module
 */
import { aborted } from "../lib/state/clock.ts";
import type { HostedProcess, ProcessExit, ProcessHost } from "./host.ts";
import type { ContainerName, ExitCause, PodEvent } from "./pod_events.ts";

/** A running container process and what the kubelet did to it. */
export interface ContainerRun {
  /** Which container. */
  container: ContainerName;
  /** Its restart count. */
  restart: number;
  /** The process. */
  proc: HostedProcess;
  /** Wall-clock ms of the start. */
  startedAt: number;
  /** Why the kubelet (or the test) ended it; unset while nobody did. */
  cause?: ExitCause;
  /** Main container: whether it started with the lease. */
  leased?: boolean;
  /** Main container started without the lease: a probe passed since. */
  regained?: boolean;
  /** Whether the process has exited. */
  done: boolean;
  /** Resolves when the process has exited. */
  exited: Promise<ProcessExit>;
}

/** Options for {@linkcode ContainerRuntime}. */
export interface ContainerRuntimeOptions {
  /** The pod's name, in every event. */
  pod: string;
  /** Where the containers run. */
  host: ProcessHost;
  /** The pod's `terminationGracePeriodSeconds` in ms, for a pod stop. */
  stopGraceMs: number;
  /** Told about every start, exit and helper log line. */
  emit: (e: PodEvent) => void;
}

/** One start of a container, for {@linkcode ContainerRuntime.start}. */
export interface ContainerStart {
  /** Which container. */
  container: ContainerName;
  /** Its restart count. */
  restart: number;
  /** The command. */
  argv: string[];
  /** The whole environment. */
  env: Record<string, string>;
  /** Main container only: whether the pod holds the lease at the start. */
  leased?: boolean;
}

/** Runs one pod's container processes; see the module doc. */
export class ContainerRuntime {
  #o: ContainerRuntimeOptions;
  #runs: Partial<Record<ContainerName, ContainerRun>> = {};

  /** Starts nothing yet; see {@linkcode ContainerRuntimeOptions}. */
  constructor(options: ContainerRuntimeOptions) {
    this.#o = options;
  }

  /** The latest run of `container`, running or ended; undefined before its first start. */
  current(container: ContainerName): ContainerRun | undefined {
    return this.#runs[container];
  }

  /**
   * Starts a container's process and makes it the container's current run,
   * then says `start`. The main container keeps its stdin open (the
   * workload's); the helper containers' lines become `log` events (JSON
   * records, or `{ msg: line }`).
   */
  async start(s: ContainerStart): Promise<ContainerRun> {
    const { container, restart, leased } = s;
    const proc = await this.#o.host.spawn({
      argv: s.argv,
      env: s.env,
      keepStdinOpen: container === "main",
      onLine: container === "main" ? undefined : (_stream, line) => {
        let record: Record<string, unknown>;
        try {
          record = JSON.parse(line);
        } catch {
          record = { msg: line };
        }
        this.#o.emit({
          at: Date.now(),
          pod: this.#o.pod,
          kind: "log",
          container,
          record,
        });
      },
    });
    const run: ContainerRun = {
      container,
      restart,
      proc,
      startedAt: Date.now(),
      leased,
      done: false,
      exited: proc.exited,
    };
    proc.exited.then(() => run.done = true);
    this.#runs[container] = run;
    this.#o.emit({
      at: run.startedAt,
      pod: this.#o.pod,
      kind: "start",
      container,
      restart,
      pid: proc.pid,
      ...(leased === undefined ? {} : { leased }),
    });
    return run;
  }

  /** SIGKILLs the container's running process, as the test's fault (`injected`); nothing when none runs. */
  kill(container: ContainerName): void {
    const r = this.#runs[container];
    if (r && !r.done) {
      r.cause ??= "injected";
      r.proc.kill("SIGKILL");
    }
  }

  /** SIGTERM, then SIGKILL once `graceMs` passed; resolves when it exited. */
  async terminate(
    run: ContainerRun,
    cause: ExitCause,
    graceMs: number,
  ): Promise<void> {
    run.cause ??= cause;
    run.proc.kill("SIGTERM");
    const grace = AbortSignal.timeout(graceMs);
    await Promise.race([run.exited, aborted(grace)]);
    if (!run.done) run.proc.kill("SIGKILL");
    await run.exited;
  }

  /** Runs one container until it exits, or until `stop` aborts (then stops it); says `exit`. */
  async runOnce(run: ContainerRun, stop: AbortSignal): Promise<ProcessExit> {
    await Promise.race([run.exited, aborted(stop)]);
    if (!run.done) {
      await this.terminate(run, "pod-stop", this.#o.stopGraceMs);
    }
    const exit = await run.exited;
    this.#o.emit({
      at: exit.at,
      pod: this.#o.pod,
      kind: "exit",
      container: run.container,
      restart: run.restart,
      code: exit.code,
      signal: exit.signal,
      cause: run.cause ?? "own",
    });
    return exit;
  }
}
