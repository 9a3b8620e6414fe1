/**
 * A kubelet stand-in for one pod, the closest honest substitute for a
 * Kubernetes node on one machine. For its pod it creates the `emptyDir`
 * state volume (a directory), runs the init container `acquire` to
 * completion, starts the native sidecar `renew` and then the main container
 * (the journaling workload of sim/workload.ts), runs the exec liveness probe
 * exactly as the webhook injects it (`<state>/check check <state>/healthy
 * --max-age <TTL>s`) from the main container's side, kills and restarts the
 * main container when the probe fails, with the kubelet's crash-loop
 * back-off, and stops the pod the way the kubelet does (SIGTERM the main
 * container, then the sidecar once the main container exited).
 *
 * It is test support: the demo, the chaos tests and the benchmarks use it.
 * Everything it does is recorded as {@linkcode PodEvent}s
 * (sim/pod_events.ts). This module is the pod's lifecycle and restart
 * policy; the container processes are started and terminated by
 * sim/container_runtime.ts, and the probe is sim/liveness_probe.ts.
 *
 * @module
 */
import { aborted } from "../lib/state/clock.ts";
import type { EnforceMode } from "../lib/config/config.ts";
import { holderIdentity } from "../lib/config/identity.ts";
import { examineMarker } from "../lib/state/marker.ts";
import { baseEnv, berthArgv } from "./cli.ts";
import { type ContainerRun, ContainerRuntime } from "./container_runtime.ts";
import type { ProcessHost } from "./host.ts";
import {
  type ProbeSettings,
  runLivenessProbe,
  WEBHOOK_PROBE,
} from "./liveness_probe.ts";
import type { ContainerName, PodEvent } from "./pod_events.ts";
import { installWorkload, WORKLOAD_NAME } from "./workload.ts";

/** The kubelet's crash-loop back-off: the first delay after the immediate restart. */
export const BACKOFF_INITIAL_MS = 10_000;
/** The kubelet's crash-loop back-off cap. */
export const BACKOFF_MAX_MS = 300_000;
/** A container that ran this long before it exited starts its back-off afresh (the kubelet's 10 min). */
export const BACKOFF_RESET_MS = 600_000;

/**
 * The delay before restarting a container that has already been restarted
 * `restartsSoFar` times in this crash loop: at once the first time, then
 * 10 s, 20 s, 40 s, ... capped at 300 s, as the kubelet does. Pure, so the
 * schedule is tested without waiting for it.
 */
export function crashLoopDelayMs(restartsSoFar: number): number {
  if (!(restartsSoFar >= 1)) return 0;
  const exp = Math.min(restartsSoFar - 1, 30);
  return Math.min(BACKOFF_INITIAL_MS * 2 ** exp, BACKOFF_MAX_MS);
}

/** Options for {@linkcode Pod}. */
export interface PodOptions {
  /** Pod name (`POD_NAME`), also the name in journal lines. */
  name: string;
  /** Pod namespace (`POD_NAMESPACE`), also the lease's namespace. */
  namespace: string;
  /** Pod UID (`POD_UID`); default a random UUID, as every pod incarnation gets. */
  uid?: string;
  /** `BERTH_LEASE_NAME`. */
  leaseName: string;
  /** `BERTH_API_SERVER`: the server, or a fault proxy in front of it. */
  apiServer: string;
  /** `BERTH_ENFORCE`; signal mode needs a {@linkcode NamespaceHost}. */
  enforce: EnforceMode;
  /** `BERTH_TTL_SECONDS`. */
  ttlSeconds: number;
  /** `BERTH_HEARTBEAT_SECONDS`; default unset (TTL/3). */
  heartbeatSeconds?: number;
  /** `BERTH_ENFORCE_LEAD_SECONDS`; default unset (the helper's default). */
  enforceLeadSeconds?: number;
  /** The liveness probe; default {@linkcode WEBHOOK_PROBE}. */
  probe?: ProbeSettings;
  /** The journal the main container appends to. */
  journalPath: string;
  /** A directory of the pod's own: the state volume and the workload go in it. */
  dir: string;
  /** Where the containers run. */
  host: ProcessHost;
  /** Told about every event as it happens. */
  onEvent?: (e: PodEvent) => void;
  /** The pod's `terminationGracePeriodSeconds` in ms for a pod stop; default 10000. */
  stopGraceMs?: number;
  /** The workload's write interval in ms; default 25. */
  writeIntervalMs?: number;
  /** Extra env for the helper containers (e.g. `BERTH_ACQUIRE_TIMEOUT`). */
  helperEnv?: Record<string, string>;
  /**
   * Run the main container as `<state>/check gate --state-dir <state> --
   * <workload>`, as examples/pod-gate.yaml does: the workload only runs
   * while the marker passes. Default false (the workload is the command).
   */
  gated?: boolean;
}

/**
 * One simulated pod; see the module doc. Call {@linkcode Pod.start} once and
 * {@linkcode Pod.stop} once; the fault controls may be used in between.
 */
export class Pod {
  /** The pod's name. */
  readonly name: string;
  /** The holder identity its helpers derive (namespace/pod:name:uid:uid). */
  readonly holder: string;
  /** The state volume (`BERTH_STATE_DIR`). */
  readonly stateDir: string;
  /** Everything that happened, in order. */
  readonly events: PodEvent[] = [];
  #o: PodOptions & { probe: ProbeSettings; uid: string };
  #stopMain = new AbortController();
  #stopSidecar = new AbortController();
  #containers: ContainerRuntime;
  #sidecarHold: PromiseWithResolvers<void> | undefined;
  #lifecycle: Promise<void> | undefined;
  #stopped: Promise<void> | undefined;

  /** Prepares nothing on disk yet; see {@linkcode PodOptions}. */
  constructor(options: PodOptions) {
    this.#o = {
      ...options,
      probe: options.probe ?? WEBHOOK_PROBE,
      uid: options.uid ?? crypto.randomUUID(),
    };
    this.name = options.name;
    this.stateDir = `${options.dir.replace(/\/+$/, "")}/state`;
    this.holder = holderIdentity({
      mode: "runtime-singleton",
      explicit: "",
      clusterId: "",
      podNamespace: options.namespace,
      workloadKind: "",
      workloadName: "",
      podName: options.name,
      podUid: this.#o.uid,
    });
    this.#containers = new ContainerRuntime({
      pod: options.name,
      host: options.host,
      stopGraceMs: options.stopGraceMs ?? 10_000,
      emit: (e) => this.#emit(e),
    });
  }

  /** The PID (inside the pod's host) of the running sidecar, if any. */
  get sidecarPid(): number | undefined {
    const r = this.#containers.current("renew");
    return r && !r.done ? r.proc.pid : undefined;
  }

  /** Creates the volume and starts the pod's lifecycle in the background. */
  async start(): Promise<void> {
    if (this.#lifecycle) throw new Error(`pod ${this.name} already started`);
    await Deno.mkdir(this.stateDir, { recursive: true });
    const workload = await installWorkload(this.#o.dir);
    this.#lifecycle = this.#run(workload);
  }

  /**
   * Stops the pod as the kubelet does: the init container or the main
   * container first (SIGTERM, SIGKILL after the grace), the sidecar after
   * the main container exited; then closes the host. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      this.#stopMain.abort();
      this.#sidecarHold?.resolve();
      await this.#lifecycle;
      await this.#o.host.close();
    })();
    return this.#stopped;
  }

  /**
   * SIGKILLs the sidecar. With `holdRestart` the kubelet does not restart it
   * until {@linkcode Pod.releaseSidecar} (a sidecar that stays down, as in a
   * crash loop); otherwise it restarts it under the usual back-off.
   */
  killSidecar(options: { holdRestart: boolean }): void {
    if (options.holdRestart) this.#sidecarHold ??= Promise.withResolvers();
    this.#containers.kill("renew");
  }

  /** Lets a sidecar held down by {@linkcode Pod.killSidecar} be restarted. */
  releaseSidecar(): void {
    this.#sidecarHold?.resolve();
    this.#sidecarHold = undefined;
  }

  /** SIGKILLs the main container, as if it crashed; the kubelet restarts it. */
  crashMain(): void {
    this.#containers.kill("main");
  }

  #emit(e: PodEvent): void {
    this.events.push(e);
    this.#o.onEvent?.(e);
  }

  #helperEnv(): Record<string, string> {
    const o = this.#o;
    const env: Record<string, string> = {
      ...baseEnv(),
      BERTH_LEASE_NAME: o.leaseName,
      BERTH_MODE: "runtime-singleton",
      BERTH_ENFORCE: o.enforce,
      BERTH_TTL_SECONDS: String(o.ttlSeconds),
      BERTH_STATE_DIR: this.stateDir,
      BERTH_API_SERVER: o.apiServer,
      BERTH_LOG_FORMAT: "json",
      POD_NAMESPACE: o.namespace,
      POD_NAME: o.name,
      POD_UID: o.uid,
      ...o.helperEnv,
    };
    if (o.enforce === "signal") env.BERTH_SIGNAL_TARGET = WORKLOAD_NAME;
    if (o.heartbeatSeconds !== undefined) {
      env.BERTH_HEARTBEAT_SECONDS = String(o.heartbeatSeconds);
    }
    if (o.enforceLeadSeconds !== undefined) {
      env.BERTH_ENFORCE_LEAD_SECONDS = String(o.enforceLeadSeconds);
    }
    return env;
  }

  /** Starts a container; the main container's start notes whether the pod holds the lease. */
  #spawn(
    container: ContainerName,
    restart: number,
    argv: string[],
    env: Record<string, string>,
  ): Promise<ContainerRun> {
    const leased = container === "main"
      ? examineMarker(`${this.stateDir}/healthy`, {
        maxAgeMs: this.#o.ttlSeconds * 1000,
      }).kind === "OK"
      : undefined;
    return this.#containers.start({ container, restart, argv, env, leased });
  }

  async #run(workloadPath: string): Promise<void> {
    const stop = this.#stopMain.signal;
    const env = this.#helperEnv();
    // The init container, restarted with back-off until it succeeds.
    for (let restart = 0;; restart++) {
      if (stop.aborted) return;
      const run = await this.#spawn(
        "acquire",
        restart,
        berthArgv(["acquire"]),
        env,
      );
      const exit = await this.#containers.runOnce(run, stop);
      if (exit.code === 0) break;
      if (!(await this.#backoff("acquire", restart, stop))) return;
    }
    if (stop.aborted) return;
    // Native sidecar first, then the main container; the probe runs with it.
    const sidecar = this.#supervise(
      "renew",
      () => berthArgv(["renew"]),
      () => env,
      this.#stopSidecar.signal,
    );
    const main = this.#supervise(
      "main",
      () =>
        this.#o.gated
          ? [
            `${this.stateDir}/check`,
            "gate",
            "--state-dir",
            this.stateDir,
            "--",
            workloadPath,
          ]
          : [workloadPath],
      (restart) => ({
        // The gate runs the helper's own binary (deno under `deno run`).
        ...(this.#o.gated ? baseEnv() : { PATH: baseEnv().PATH }),
        SIM_POD: this.name,
        SIM_JOURNAL: this.#o.journalPath,
        SIM_STATE_DIR: this.stateDir,
        SIM_RESTART: String(restart),
        SIM_INTERVAL: String((this.#o.writeIntervalMs ?? 25) / 1000),
      }),
      stop,
    );
    const probe = runLivenessProbe({
      pod: this.name,
      host: this.#o.host,
      stateDir: this.stateDir,
      ttlSeconds: this.#o.ttlSeconds,
      probe: this.#o.probe,
      containers: this.#containers,
      emit: (e) => this.#emit(e),
    }, stop);
    await main;
    await probe;
    this.#stopSidecar.abort();
    await sidecar;
  }

  /** Waits out the crash-loop delay; false when the pod stopped meanwhile. */
  async #backoff(
    container: ContainerName,
    restartsSoFar: number,
    stop: AbortSignal,
  ): Promise<boolean> {
    const delayMs = crashLoopDelayMs(restartsSoFar);
    this.#emit({
      at: Date.now(),
      pod: this.name,
      kind: "restart-scheduled",
      container,
      delayMs,
    });
    await aborted(AbortSignal.any([stop, AbortSignal.timeout(delayMs)]));
    return !stop.aborted;
  }

  /** Keeps a container running (restartPolicy Always) until `stop` aborts. */
  async #supervise(
    container: "renew" | "main",
    argv: () => string[],
    env: (restart: number) => Record<string, string>,
    stop: AbortSignal,
  ): Promise<void> {
    let loop = 0; // restarts in the current crash loop
    for (let restart = 0;; restart++) {
      if (container === "renew" && this.#sidecarHold) {
        await Promise.race([this.#sidecarHold.promise, aborted(stop)]);
      }
      if (stop.aborted) return;
      const run = await this.#spawn(container, restart, argv(), env(restart));
      await this.#containers.runOnce(run, stop);
      if (stop.aborted) return;
      if (Date.now() - run.startedAt >= BACKOFF_RESET_MS) loop = 0;
      if (!(await this.#backoff(container, loop++, stop))) return;
    }
  }
}
