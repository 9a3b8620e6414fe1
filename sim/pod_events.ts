/**
 * What happens in a simulated pod (sim/pod.ts), as {@linkcode PodEvent}s:
 * container starts and exits with their causes, the liveness probe's
 * verdicts, scheduled restarts and the helpers' log lines; and the main
 * container's runs read back from them ({@linkcode mainRunsOf}) for the
 * journal analysis (sim/journal.ts).
 *
 * @module
 */
import type { MainRun } from "./journal.ts";

/** The pod's containers: init container, native sidecar, main container. */
export type ContainerName = "acquire" | "renew" | "main";

/**
 * Why a container process ended: killed by the kubelet after a failed
 * liveness probe, stopped with the pod, killed by the test, or on its own
 * account (it exited, or something else, such as the signal enforcer,
 * killed it).
 */
export type ExitCause = "liveness" | "pod-stop" | "injected" | "own";

/** One thing that happened in a pod, with the wall-clock ms it happened at. */
export type PodEvent =
  & { at: number; pod: string }
  & (
    | {
      kind: "start";
      container: ContainerName;
      restart: number;
      pid: number;
      /** Main container only: whether the probe would have passed at its start (the pod held the lease). */
      leased?: boolean;
    }
    | {
      kind: "exit";
      container: ContainerName;
      restart: number;
      code: number;
      signal: string | null;
      cause: ExitCause;
    }
    | { kind: "probe-failed"; restart: number; output: string }
    | {
      /** The first probe that passed in a run that started without the lease. */
      kind: "probe-passed";
      restart: number;
    }
    | { kind: "restart-scheduled"; container: ContainerName; delayMs: number }
    | { kind: "log"; container: ContainerName; record: Record<string, unknown> }
  );

/**
 * The main container's runs as the analysis needs them, from a pod's
 * events: start, end, and whether the pod held the lease at the start.
 */
export function mainRunsOf(events: PodEvent[]): MainRun[] {
  const runs = new Map<string, MainRun>();
  for (const e of events) {
    const id = `${e.pod}#${"restart" in e ? e.restart : ""}`;
    if (e.kind === "start" && e.container === "main") {
      runs.set(id, {
        pod: e.pod,
        restart: e.restart,
        startedAt: e.at,
        leased: e.leased ?? false,
      });
    } else if (e.kind === "exit" && e.container === "main") {
      const r = runs.get(id);
      if (r) r.endedAt = e.at;
    } else if (e.kind === "probe-passed") {
      const r = runs.get(id);
      if (r && r.regainedAt === undefined) r.regainedAt = e.at;
    }
  }
  return [...runs.values()];
}
