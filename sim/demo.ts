/**
 * `deno task demo`: two simulated pods compete for one lease on a local
 * development server, and the holder is cut off from the server. The demo
 * narrates what happens, then shows the evidence: the failover time, the
 * handover margin, the tokens the workloads wrote, and a timeline chart.
 * It exits 1 if the promise was broken (two workloads ran at once, or a
 * stale token could have been accepted).
 *
 * Everything is real except the node: the lease server is the project's
 * development server on 127.0.0.1, the init container, sidecar and probe
 * are the real CLI, and a small kubelet stand-in (sim/pod.ts) runs them.
 *
 * @module
 */
import { type Analysis, analyze, formatKey } from "./journal.ts";
import { LEGEND, renderChart, timelineRows } from "./chart.ts";
import { Lab } from "./lab.ts";
import type { ProbeSettings } from "./liveness_probe.ts";
import type { PodEvent } from "./pod_events.ts";

const TTL_SECONDS = 6;
/** The chart's least span: above 64 columns x 1 s / 6 columns, the axis ticks every 2 s. */
const CHART_MIN_MS = 11_000;
const HEARTBEAT_SECONDS = 1;
/** A probe every second (the webhook's is 2 s), so the demo stays short. */
const PROBE: ProbeSettings = {
  periodMs: 1000,
  timeoutMs: 1000,
  terminationGraceMs: 1000,
};
/** Probe period + timeout + termination grace: the workload is surely stopped this long after the gate closes. */
const LEAD_SECONDS = 3;

/**
 * Whether to write colour: only to a terminal, so that a redirected or piped
 * demo (a log file, `| less`, CI) holds plain text, and never when
 * `NO_COLOR` is set to anything but the empty string (no-color.org).
 *
 * @param o Whether stdout is a terminal, and `NO_COLOR`'s value.
 * @returns True when escape sequences may be written.
 */
export function useColour(
  o: { isTerminal: boolean; noColor: string | undefined },
): boolean {
  return o.isTerminal && !o.noColor;
}

const COLOUR = useColour({
  isTerminal: Deno.stdout.isTerminal(),
  noColor: Deno.env.get("NO_COLOR"),
});

/** Bold, when {@linkcode useColour} says so. */
export const bold = (s: string): string => COLOUR ? `\x1b[1m${s}\x1b[0m` : s;
/** Dim, when {@linkcode useColour} says so. */
export const dim = (s: string): string => COLOUR ? `\x1b[2m${s}\x1b[0m` : s;

function secs(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** Prints a timeline line: `+ 3.2s  pod-a  text`. */
function say(t0: number, who: string, text: string, at = Date.now()): void {
  const t = `+${((at - t0) / 1000).toFixed(1)}s`.padStart(7);
  console.log(`${dim(t)}  ${who.padEnd(7)} ${text}`);
}

/**
 * Turns pod events into the lines a newcomer can follow; repeated events
 * (each failed renewal, each "still waiting") are told once.
 */
function narrator(
  t0: () => number,
  beforeGrant: (pod: string, at: number) => void,
) {
  const told = new Set<string>();
  const once = (key: string) => {
    if (told.has(key)) return false;
    told.add(key);
    return true;
  };
  return (e: PodEvent): void => {
    const at = e.at;
    const who = e.pod;
    if (e.kind === "log") {
      const r = e.record;
      const msg = String(r.msg ?? "");
      if (msg === "lease acquired" && e.container === "acquire") {
        beforeGrant(who, at);
        say(
          t0(),
          who,
          `init container acquired the lease: ${
            bold(`token ${r.fencing_token}`)
          }`,
          at,
        );
      } else if (
        msg === "lease held by another, waiting" &&
        once(`${who}:wait`)
      ) {
        say(
          t0(),
          who,
          `init container waits: the lease is held by ${r.current_holder} (token ${r.current_fencing_token}); it asks again every ${HEARTBEAT_SECONDS} s`,
          at,
        );
      } else if (
        msg === "renew failed; still within lease TTL, will retry" &&
        String(r.detail ?? "").includes("keeps running") &&
        once(`${who}:renewfail`)
      ) {
        say(
          t0(),
          who,
          `sidecar cannot renew (${r.error}); the workload may run ${
            secs(Number(r.gate_closes_in_ms ?? 0))
          } more, then the gate closes`,
          at,
        );
      } else if (
        msg === "gate closed: stopping the workload" &&
        !String(r.reason ?? "").includes("shutdown")
      ) {
        say(
          t0(),
          who,
          `sidecar closes the gate ${LEAD_SECONDS} s before the lease can expire: health marker removed`,
          at,
        );
      } else if (msg === "lease reacquired; main container released") {
        say(
          t0(),
          who,
          `sidecar reacquired the lease: token ${r.fencing_token}`,
          at,
        );
      }
      return;
    }
    if (e.kind === "start" && e.container === "main") {
      say(
        t0(),
        who,
        e.leased
          ? `workload starts (restart ${e.restart}); it writes its token to the journal every 25 ms`
          : `kubelet restarts the workload (restartPolicy Always), but the pod has no lease: the next probe stops it`,
        at,
      );
    } else if (e.kind === "probe-failed") {
      say(t0(), who, `liveness probe fails: "${e.output}"`, at);
    } else if (
      e.kind === "exit" && e.container === "main" && e.cause !== "pod-stop"
    ) {
      say(t0(), who, `workload stopped (${e.signal ?? `exit ${e.code}`})`, at);
    } else if (e.kind === "restart-scheduled" && e.container === "main") {
      if (e.delayMs > 0) {
        say(
          t0(),
          who,
          `kubelet backs off (crash loop): next restart in ${secs(e.delayMs)}`,
          at,
        );
      }
    }
  };
}

async function main(): Promise<number> {
  console.log(bold("berth-acquire demo: one lease, two pods, one network cut"));
  console.log(
    `Two pods, pod-a and pod-b, run the same singleton workload. Only the pod holding the
lease "sim/singleton" may run it (TTL ${TTL_SECONDS} s, renewed every ${HEARTBEAT_SECONDS} s). Each workload appends
"<pod> <token> <time>" to a journal every 25 ms: the journals are the evidence.
The init container, sidecar and liveness probe are the real berth-acquire; a small
kubelet stand-in runs them (probe every ${
      PROBE.periodMs / 1000
    } s here, 2 s in the webhook).
`,
  );
  let t0 = Date.now();
  const ref: { lab?: Lab } = {};
  const tell = narrator(() => t0, (pod, at) => {
    // The server's side of the handover, told just before the new grant.
    if (pod !== "pod-b" || !ref.lab) return;
    const expiry = ref.lab.serverExpiry("pod-a", at);
    if (expiry !== undefined && expiry <= at) {
      say(
        t0,
        "server",
        `pod-a's lease expires (its last renewal + ${TTL_SECONDS} s); the next acquire wins`,
        expiry,
      );
    }
  });
  const lab = ref.lab = await Lab.start({
    enforce: "probe",
    ttlSeconds: TTL_SECONDS,
    heartbeatSeconds: HEARTBEAT_SECONDS,
    enforceLeadSeconds: LEAD_SECONDS,
    probe: PROBE,
    onEvent: tell,
  });
  t0 = Date.now();
  const bound = () => AbortSignal.timeout(40_000);
  try {
    say(
      t0,
      "server",
      `development lease server listening on ${lab.server.url}`,
    );
    await lab.addPod("pod-a", bound());
    await lab.waitForLine(
      "pod-a's workload",
      (l) => l.pod === "pod-a",
      bound(),
    );
    await lab.addPod("pod-b", bound());
    await lab.waitFor(
      "pod-b to wait",
      () =>
        lab.pod("pod-b").events.some((e) =>
          e.kind === "log" &&
          e.record.msg === "lease held by another, waiting"
        ),
      bound(),
    );
    await lab.waitFor("a moment", () => Date.now() - t0 >= 3000, bound());
    const cutAt = Date.now();
    lab.proxies.get("pod-a")!.set({ kind: "blackhole" });
    say(
      t0,
      "cut",
      bold(
        "pod-a is cut off from the lease server (its packets vanish); pod-a itself keeps running",
      ),
      cutAt,
    );
    const bLine = await lab.waitForLine(
      "pod-b's workload",
      (l) => l.pod === "pod-b",
      bound(),
    );
    await lab.waitFor(
      "pod-b to run a while",
      () => Date.now() - bLine.at >= 2500,
      bound(),
    );
    const end = Date.now();
    say(t0, "demo", "stopping both pods");
    // Let pod-a's shutdown release fail fast instead of timing out in the black hole.
    lab.proxies.get("pod-a")!.set({ kind: "drop" });
    await Promise.all(lab.pods.map((p) => p.stop()));

    const input = await lab.analysisInput();
    const a = analyze(input);
    console.log();
    const lines = summaryLines(lab, a, cutAt, bLine.at, input);
    for (const l of lines) console.log(l);
    console.log();
    const chart = renderChart(
      timelineRows({
        pods: lab.pods.map((p) => ({
          name: p.name,
          from: p.events[0]?.at ?? t0,
          until: p.events.at(-1)?.at,
        })),
        runs: input.runs,
        grants: input.grants,
        cuts: [{ pod: "pod-a", at: cutAt }],
        leases: lab.leaseIntervals(end),
        end,
      }),
      // At least CHART_MIN_MS wide, so a run a little shorter than usual
      // gets the same axis (2 s ticks) rather than 1 s ones.
      { start: t0, end: Math.max(end, t0 + CHART_MIN_MS), width: 64 },
    );
    console.log(
      bold("Timeline") +
        dim("  (server row: who the server says holds the lease)"),
    );
    for (const l of chart) console.log("  " + l);
    console.log("  " + dim(LEGEND));
    console.log();
    const broken = a.violations.length > 0 || a.failovers.length !== 1 ||
      a.failovers.some((f) => !(f.marginMs > 0));
    if (broken) {
      console.log(bold("PROMISE BROKEN:"));
      for (const v of a.violations.slice(0, 10)) {
        console.log(`  ${v.rule}: ${v.detail}`);
      }
      if (a.failovers.length !== 1) {
        console.log(`  expected one failover, saw ${a.failovers.length}`);
      }
      return 1;
    }
    console.log(
      bold("The promise held: ") +
        "pod-a's workload stopped before pod-b's started, and no stale token could be accepted.",
    );
    return 0;
  } finally {
    await lab.close();
  }
}

/** The summary block: failover time, margins, tokens, restart windows, fencing. */
function summaryLines(
  lab: Lab,
  a: Analysis,
  cutAt: number,
  bFirst: number,
  input: Awaited<ReturnType<Lab["analysisInput"]>>,
): string[] {
  const out: string[] = [];
  const ttlMs = TTL_SECONDS * 1000;
  out.push(bold("Summary"));
  out.push(
    `  failover time     ${
      secs(bFirst - cutAt)
    } from the cut to pod-b's first journal line (${
      ((bFirst - cutAt) / ttlMs).toFixed(2)
    } x the ${TTL_SECONDS} s TTL)`,
  );
  const f = a.failovers[0];
  if (f) {
    out.push(
      `  handover margin   ${
        secs(f.marginMs)
      } from pod-a's last journal line to pod-b's first`,
    );
    const expiry = lab.serverExpiry(f.fromPod, f.newStart);
    if (expiry !== undefined) {
      out.push(
        `                    ${
          secs(expiry - f.oldStop)
        } from pod-a's last journal line to the expiry of its lease on the server`,
      );
    }
  }
  const tokens = new Map<string, Map<number, number>>();
  for (const l of input.lines) {
    const m = tokens.get(l.pod) ?? new Map<number, number>();
    m.set(l.token, (m.get(l.token) ?? 0) + 1);
    tokens.set(l.pod, m);
  }
  const seen = [...tokens].map(([pod, m]) =>
    `${pod} wrote ${
      [...m].map(([t, n]) => `token ${t} (${n} lines)`).join(", ")
    }`
  ).join("; ");
  out.push(`  tokens seen       ${seen}`);
  const w = a.restartWindows;
  out.push(
    `  restart windows   ${w.length} (kubelet restarts while the pod had no lease)${
      w.length
        ? `: ${
          secs(w.reduce((s, x) => s + x.lengthMs, 0))
        } in total, each ended by the next probe; their lines carry the old token, which a fencing sink refuses`
        : ""
    }`,
  );
  if (f) {
    out.push(
      `  fencing           pod-b's token ${formatKey(f.to)} > pod-a's ${
        formatKey(f.from)
      }: ${
        a.violations.length === 0 ? "no" : "SOME"
      } line of pod-a after pod-b started carries a token >= ${
        formatKey(f.to)
      }`,
    );
  }
  return out;
}

if (import.meta.main) {
  Deno.exit(await main());
}
