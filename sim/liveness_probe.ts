/**
 * The exec liveness probe the webhook injects, as the kubelet stand-in
 * (sim/pod.ts) runs it: every period it runs `<state>/check check
 * <state>/healthy --max-age <TTL>s` from the main container's side, and on a
 * failure kills the main container (SIGTERM, then SIGKILL after the probe's
 * termination grace) for the pod to restart it. A probe still running at its
 * timeout has failed.
 *
 * @module
 */
import { aborted } from "../lib/state/clock.ts";
import { baseEnv } from "./cli.ts";
import type { ContainerRuntime } from "./container_runtime.ts";
import type { HostedProcess, ProcessExit, ProcessHost } from "./host.ts";
import type { PodEvent } from "./pod_events.ts";

/** The liveness probe's timing, as in a container spec. */
export interface ProbeSettings {
  /** `periodSeconds`, in ms. */
  periodMs: number;
  /** `timeoutSeconds`, in ms: a probe still running then has failed. */
  timeoutMs: number;
  /** The probe's `terminationGracePeriodSeconds`, in ms: SIGTERM to SIGKILL on a failure. */
  terminationGraceMs: number;
}

/** What the webhook injects: period 2 s, timeout 1 s, and 1 s of termination grace. */
export const WEBHOOK_PROBE: ProbeSettings = {
  periodMs: 2000,
  timeoutMs: 1000,
  terminationGraceMs: 1000,
};

/** Options for {@linkcode runLivenessProbe}. */
export interface LivenessProbeOptions {
  /** The pod's name, in its events. */
  pod: string;
  /** Where the probe runs. */
  host: ProcessHost;
  /** The pod's state volume: `check` and the health marker are in it. */
  stateDir: string;
  /** The lease TTL in seconds, the probe's `--max-age`. */
  ttlSeconds: number;
  /** The probe's timing. */
  probe: ProbeSettings;
  /** The pod's containers: the probe watches the main one and kills it on a failure. */
  containers: ContainerRuntime;
  /** Told about `probe-passed` and `probe-failed`. */
  emit: (e: PodEvent) => void;
}

/** The exec liveness probe on the main container, every period, until `stop` aborts. */
export async function runLivenessProbe(
  o: LivenessProbeOptions,
  stop: AbortSignal,
): Promise<void> {
  const { periodMs, timeoutMs, terminationGraceMs } = o.probe;
  const argv = [
    `${o.stateDir}/check`,
    "check",
    `${o.stateDir}/healthy`,
    "--max-age",
    `${o.ttlSeconds}s`,
  ];
  while (!stop.aborted) {
    const tick = performance.now();
    const run = o.containers.current("main");
    if (run && !run.done && run.cause === undefined) {
      const failure = await probeOnce(o.host, argv, timeoutMs);
      if (failure === undefined && run.leased === false && !run.regained) {
        run.regained = true;
        o.emit({
          at: Date.now(),
          pod: o.pod,
          kind: "probe-passed",
          restart: run.restart,
        });
      }
      if (
        failure !== undefined && !stop.aborted && !run.done &&
        run.cause === undefined
      ) {
        o.emit({
          at: Date.now(),
          pod: o.pod,
          kind: "probe-failed",
          restart: run.restart,
          output: failure,
        });
        await o.containers.terminate(run, "liveness", terminationGraceMs);
      }
    }
    const wait = tick + periodMs - performance.now();
    await aborted(
      AbortSignal.any([stop, AbortSignal.timeout(Math.max(0, wait))]),
    );
  }
}

/** Runs the probe once; returns its output line on failure, undefined on success. */
async function probeOnce(
  host: ProcessHost,
  argv: string[],
  timeoutMs: number,
): Promise<string | undefined> {
  const out: string[] = [];
  let proc: HostedProcess;
  try {
    proc = await host.spawn({
      argv,
      env: baseEnv(),
      onLine: (stream, line) => {
        if (stream === "stdout") out.push(line);
      },
    });
  } catch (e) {
    return `probe could not start: ${(e as Error).message}`;
  }
  const timeout = AbortSignal.timeout(timeoutMs);
  let exit: ProcessExit | undefined;
  proc.exited.then((x) => exit = x);
  await Promise.race([proc.exited, aborted(timeout)]);
  if (exit === undefined) {
    proc.kill("SIGKILL");
    await proc.exited;
    return `probe timed out after ${timeoutMs} ms`;
  }
  return exit.code === 0
    ? undefined
    : out.join(" ") || `probe exited ${exit.code}`;
}
