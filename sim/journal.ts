/**
 * Judges the helper by what the workloads wrote: the handover margin of
 * every failover, the restart windows, and the fencing tokens. Pure
 * functions over the journals, the kubelet's record of the main containers'
 * runs and the server's record of its grants, so the rules are unit-tested
 * on hand-made timelines.
 *
 * Tokens are compared as (server epoch, token). A server that loses its
 * state on restart starts again at token 1 (the API says servers before
 * v0.4 did this too), so a bare integer cannot order a token granted after a
 * restart against one granted before it. A fencing sink that is reset with
 * the server, as the brief's model has it, compares only within an epoch
 * and must reject every token of an earlier epoch; the analysis models that
 * sink. It also counts what two naive sinks would do, because that is the
 * honest cost of a state-losing server: a sink that is reset and compares
 * bare integers would accept the old holder's stale, higher token, and one
 * that is never reset would refuse the new holder.
 *
 * @module
 */
import type { JournalLine } from "./workload.ts";

/** One run of a main container, as the kubelet saw it. */
export interface MainRun {
  /** The pod. */
  pod: string;
  /** Its restart count (matches the journal lines' `restart`). */
  restart: number;
  /** Wall-clock ms of the start. */
  startedAt: number;
  /** Wall-clock ms of the exit; undefined if still running when the journals were read. */
  endedAt?: number;
  /** Whether the pod held the lease at the start (the probe would have passed). */
  leased: boolean;
  /** For a run that started without the lease: when a probe first passed (the pod had it again). */
  regainedAt?: number;
}

/** A token the server granted to a pod. */
export interface Grant {
  /** The pod it was granted to. */
  pod: string;
  /** The server incarnation. */
  epoch: number;
  /** The token. */
  token: number;
  /** Wall-clock ms of the grant. */
  at: number;
}

/** What the analysis reads. */
export interface AnalysisInput {
  /** All journal lines of all pods. */
  lines: JournalLine[];
  /** All main-container runs of all pods. */
  runs: MainRun[];
  /** All grants (a same-holder re-acquire may repeat one; that is fine). */
  grants: Grant[];
  /** Wall-clock ms at which each server restart's new epoch began, in order. */
  epochStarts: number[];
}

/** A token in a server epoch; ordered by epoch first. */
export interface TokenKey {
  /** The server incarnation that granted it. */
  epoch: number;
  /** The token number. */
  token: number;
}

/** A handover of the lease from one pod's workload to another's. */
export interface Failover {
  /** The pod that held the lease before. */
  fromPod: string;
  /** Its token. */
  from: TokenKey;
  /** The pod that holds it after. */
  toPod: string;
  /** The new token. */
  to: TokenKey;
  /** The old holder's last line written while it held the lease (wall ms). */
  oldStop: number;
  /** The new holder's first line (wall ms). */
  newStart: number;
  /** `newStart - oldStop`; must be positive. */
  marginMs: number;
}

/** A main-container run the kubelet started while its pod had no lease. */
export interface RestartWindow {
  /** The pod. */
  pod: string;
  /** The run's restart count. */
  restart: number;
  /** Wall-clock ms of the start. */
  startedAt: number;
  /** When it ended, or the pod had the lease again. */
  endedAt: number;
  /** `endedAt - startedAt`. */
  lengthMs: number;
  /**
   * How it ended: the run was stopped (`stopped`), or the pod had the lease
   * again and the run went on legitimately (`regained`; then the end is
   * when that was first seen: a passing probe or a newer token).
   */
  endedBy: "stopped" | "regained";
  /** Lines written in the window. */
  lines: number;
  /** How much of it fell while another pod's workload held the lease. */
  overlapWithHolderMs: number;
}

/** A rule a journal line broke. */
export interface Violation {
  /** The rule, e.g. `token not granted to this pod`. */
  rule: string;
  /** The offending line. */
  line: JournalLine;
  /** Context for the failure message. */
  detail: string;
}

/** The figures the chaos tests report and assert on. */
export interface Analysis {
  /** Journal lines read. */
  lines: number;
  /** Handovers between pods, in order. */
  failovers: Failover[];
  /** Token changes within one pod (it lost and regained the lease itself). */
  reacquisitions: number;
  /** Runs started without the lease. */
  restartWindows: RestartWindow[];
  /** Broken rules; the promise holds when this is empty. */
  violations: Violation[];
  /** Lines from a pod that no longer held the lease which a reset, bare-integer sink would accept. */
  resetIntegerSinkStaleAccepts: number;
  /** Lines of the holder which a never-reset, bare-integer sink would refuse (tokens restarted at 1). */
  persistentIntegerSinkRefusals: number;
}

/** Orders two token keys: epoch first, then token. */
export function compareKeys(a: TokenKey, b: TokenKey): number {
  return a.epoch !== b.epoch ? a.epoch - b.epoch : a.token - b.token;
}

function keyString(k: TokenKey): string {
  return `${k.epoch}:${k.token}`;
}

/** Formats a key for people: `7`, or `e1:2` after a server restart. */
export function formatKey(k: TokenKey): string {
  return k.epoch === 0 ? String(k.token) : `e${k.epoch}:${k.token}`;
}

/** See the module doc and {@linkcode Analysis}. */
export function analyze(input: AnalysisInput): Analysis {
  const lines = input.lines
    .map((line, i) => ({ line, i }))
    .sort((a, b) => a.line.at - b.line.at || a.i - b.i)
    .map((x) => x.line);
  const violations: Violation[] = [];
  const runOf = new Map<string, MainRun>();
  for (const r of input.runs) runOf.set(`${r.pod}#${r.restart}`, r);

  // 1. The key each line carries: the latest grant of that token to that pod
  //    at or before the line. A line without one carries a token its pod was
  //    never given.
  const grantsByPod = new Map<string, Grant[]>();
  for (const g of [...input.grants].sort((a, b) => a.at - b.at)) {
    const list = grantsByPod.get(g.pod) ?? [];
    list.push(g);
    grantsByPod.set(g.pod, list);
  }
  const keyed: {
    line: JournalLine;
    key: TokenKey;
    run?: MainRun;
    held: boolean;
  }[] = [];
  for (const line of lines) {
    let grant: Grant | undefined;
    for (const g of grantsByPod.get(line.pod) ?? []) {
      if (g.at > line.at) break;
      if (g.token === line.token) grant = g;
    }
    if (!grant) {
      violations.push({
        rule: "token not granted to this pod",
        line,
        detail:
          `${line.pod} wrote token ${line.token}, which the server never granted it before ${line.at}`,
      });
      continue;
    }
    keyed.push({
      line,
      key: { epoch: grant.epoch, token: grant.token },
      run: runOf.get(`${line.pod}#${line.restart}`),
      held: false,
    });
  }
  // Whether the pod held the lease when the line was written: its run
  // started with the lease, or the pod had it again since (a probe passed,
  // or the token moved on within the run).
  const firstKeyOfRun = new Map<string, TokenKey>();
  for (const k of keyed) {
    const id = `${k.line.pod}#${k.line.restart}`;
    const first = firstKeyOfRun.get(id) ?? k.key;
    firstKeyOfRun.set(id, first);
    k.held = k.run === undefined || k.run.leased ||
      (k.run.regainedAt !== undefined && k.line.at >= k.run.regainedAt) ||
      compareKeys(k.key, first) > 0;
  }

  // 2. A pod's tokens never go backwards.
  const lastKey = new Map<string, TokenKey>();
  for (const { line, key } of keyed) {
    const prev = lastKey.get(line.pod);
    if (prev && compareKeys(key, prev) < 0) {
      violations.push({
        rule: "token went backwards within a pod",
        line,
        detail: `${line.pod} wrote ${formatKey(key)} after ${formatKey(prev)}`,
      });
    }
    lastKey.set(line.pod, key);
  }

  // 3. Tenures: each key in the order its first line appeared.
  const tenures: { key: TokenKey; pod: string; start: number }[] = [];
  const seen = new Set<string>();
  for (const { line, key } of keyed) {
    const ks = keyString(key);
    if (seen.has(ks)) continue;
    seen.add(ks);
    tenures.push({ key, pod: line.pod, start: line.at });
  }
  const holderAt = (t: number) => {
    let h: (typeof tenures)[number] | undefined;
    for (const x of tenures) {
      if (x.start > t) break;
      h = x;
    }
    return h;
  };

  const failovers: Failover[] = [];
  let reacquisitions = 0;
  for (let i = 1; i < tenures.length; i++) {
    const prev = tenures[i - 1];
    const next = tenures[i];
    if (compareKeys(next.key, prev.key) <= 0) {
      violations.push({
        rule: "a later holder started with a lower token",
        line: keyed.find((k) =>
          k.line.at === next.start && k.line.pod === next.pod
        )!.line,
        detail: `${next.pod} started with ${
          formatKey(next.key)
        } after ${prev.pod} had ${formatKey(prev.key)}`,
      });
    }
    if (next.pod === prev.pod) {
      reacquisitions++;
      continue;
    }
    let oldStop = -Infinity;
    for (const k of keyed) {
      if (
        k.line.pod === prev.pod && keyString(k.key) === keyString(prev.key) &&
        k.held
      ) {
        oldStop = Math.max(oldStop, k.line.at);
      }
    }
    if (oldStop === -Infinity) {
      // Only restart-window lines carried the old token; its leased run
      // ended with the last line of any of its runs before the handover.
      for (const k of keyed) {
        if (k.line.pod === prev.pod && k.line.at < next.start) {
          oldStop = Math.max(oldStop, k.line.at);
        }
      }
    }
    failovers.push({
      fromPod: prev.pod,
      from: prev.key,
      toPod: next.pod,
      to: next.key,
      oldStop,
      newStart: next.start,
      marginMs: next.start - oldStop,
    });
  }

  // 4. Overlap and fencing, line by line against the holder of the moment.
  for (const { line, key, held } of keyed) {
    const h = holderAt(line.at);
    if (!h || h.pod === line.pod) continue;
    if (held) {
      // A run that started with the lease and is still writing after another
      // pod's workload started: the two ran at once.
      violations.push({
        rule: "overlap: a lease-holding run wrote after another pod took over",
        line,
        detail: `${line.pod} (${formatKey(key)}) wrote at ${line.at}, ${
          line.at - h.start
        } ms after ${h.pod} started with ${formatKey(h.key)}`,
      });
    }
    if (compareKeys(key, h.key) >= 0) {
      violations.push({
        rule: "unfenced: a non-holder wrote a token at least the holder's",
        line,
        detail: `${line.pod} wrote ${formatKey(key)} while ${h.pod} held ${
          formatKey(h.key)
        }`,
      });
    }
  }

  // 5. Restart windows.
  const restartWindows: RestartWindow[] = [];
  for (const r of input.runs) {
    if (r.leased) continue;
    const own = keyed.filter((k) =>
      k.line.pod === r.pod && k.line.restart === r.restart
    );
    const stop = r.endedAt ??
      (own.length ? own[own.length - 1].line.at : r.startedAt);
    let end = stop;
    if (r.regainedAt !== undefined) end = Math.min(end, r.regainedAt);
    if (own.length > 0) {
      const first = own[0].key;
      const newer = own.find((k) => compareKeys(k.key, first) > 0);
      if (newer) end = Math.min(end, newer.line.at);
    }
    const inWindow = own.filter((k) => k.line.at <= end);
    // The workload ran from its first line on: a gated container (sim/pod.ts)
    // that never started it wrote none, and ran beside nobody.
    const ranFrom = own.length > 0 ? own[0].line.at : end;
    let overlap = 0;
    for (const t of tenures) {
      if (t.pod === r.pod) continue;
      const next = tenures.find((x) => x.start > t.start);
      const from = Math.max(t.start, ranFrom);
      const to = Math.min(next?.start ?? Infinity, end);
      if (to > from) overlap += to - from;
    }
    restartWindows.push({
      pod: r.pod,
      restart: r.restart,
      startedAt: r.startedAt,
      endedAt: end,
      lengthMs: Math.max(0, end - r.startedAt),
      endedBy: end < stop ? "regained" : "stopped",
      lines: inWindow.length,
      overlapWithHolderMs: overlap,
    });
  }

  // 6. The two naive sinks.
  const epochStarts = [...input.epochStarts].sort((a, b) => a - b);
  let resetMax = 0;
  let epochIdx = 0;
  let persistentMax = 0;
  let resetIntegerSinkStaleAccepts = 0;
  let persistentIntegerSinkRefusals = 0;
  for (const { line } of keyed) {
    while (epochIdx < epochStarts.length && epochStarts[epochIdx] <= line.at) {
      resetMax = 0;
      epochIdx++;
    }
    const h = holderAt(line.at);
    const isHolder = h?.pod === line.pod;
    if (line.token >= resetMax) {
      resetMax = line.token;
      if (!isHolder) resetIntegerSinkStaleAccepts++;
    }
    if (line.token >= persistentMax) persistentMax = line.token;
    else if (isHolder) persistentIntegerSinkRefusals++;
  }

  return {
    lines: lines.length,
    failovers,
    reacquisitions,
    restartWindows,
    violations,
    resetIntegerSinkStaleAccepts,
    persistentIntegerSinkRefusals,
  };
}
