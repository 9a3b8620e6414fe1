/**
 * A bench on which simulated pods compete for one lease: the lease server,
 * a fault proxy per pod, the pods, their journals, and the analysis over all
 * of it. The demo, the chaos tests and the benchmarks build their scenarios
 * from it, so they all exercise the same simulated cluster.
 *
 * @module
 */
import { aborted } from "../lib/state/clock.ts";
import type { EnforceMode } from "../lib/config/config.ts";
import { DirectHost, NamespaceHost, type ProcessHost } from "./host.ts";
import { type Analysis, type AnalysisInput, analyze } from "./journal.ts";
import type { ProbeSettings } from "./liveness_probe.ts";
import { Pod } from "./pod.ts";
import { mainRunsOf, type PodEvent } from "./pod_events.ts";
import { FaultProxy } from "./proxy.ts";
import { SimServer } from "./server.ts";
import { type JournalLine, parseJournal } from "./workload.ts";

/** Options for {@linkcode Lab.start}. */
export interface LabOptions {
  /** How the pods enforce; `signal` runs each pod in a PID namespace (root only). */
  enforce: EnforceMode;
  /** Lease TTL in seconds. */
  ttlSeconds: number;
  /** Heartbeat in seconds; default the helper's (TTL/3). */
  heartbeatSeconds?: number;
  /** Enforce lead in seconds; default the helper's. */
  enforceLeadSeconds?: number;
  /** The probe every pod gets; default the webhook's. */
  probe?: ProbeSettings;
  /** Lease name; default `singleton`. */
  leaseName?: string;
  /** Namespace of pods and lease; default `sim`. */
  namespace?: string;
  /** Told about every pod event. */
  onEvent?: (e: PodEvent) => void;
  /** Extra env for every pod's helpers. */
  helperEnv?: Record<string, string>;
  /** Which pods run their main container under `gate` (sim/pod.ts); default none. */
  gated?: (podName: string) => boolean;
}

/** See the module doc. */
export class Lab implements AsyncDisposable {
  /** The lease server. */
  readonly server: SimServer;
  /** Scratch directory (pods' volumes, journals); removed on close. */
  readonly dir: string;
  /** Every pod added, in order. */
  readonly pods: Pod[] = [];
  /** Each pod's fault proxy, by pod name. */
  readonly proxies: Map<string, FaultProxy> = new Map();
  /** Wall-clock ms at which the lab started. */
  readonly startedAt: number = Date.now();
  #o: LabOptions;
  #reader: JournalReader;

  private constructor(o: LabOptions, server: SimServer, dir: string) {
    this.#o = o;
    this.server = server;
    this.dir = dir;
    this.#reader = new JournalReader(`${dir}/journal`);
  }

  /** Starts the server in a fresh scratch directory. */
  static async start(options: LabOptions): Promise<Lab> {
    const dir = await Deno.makeTempDir({ prefix: "berth-sim-" });
    await Deno.chmod(dir, 0o755);
    await Deno.mkdir(`${dir}/journal`);
    const server = await SimServer.start();
    return new Lab(options, server, dir);
  }

  /** The options the lab was started with. */
  get options(): LabOptions {
    return this.#o;
  }

  /**
   * Creates and starts a pod whose helpers reach the server through a fault
   * proxy of its own ({@linkcode Lab.proxies}). `bound` limits the wait for
   * a namespace to start.
   */
  async addPod(name: string, bound: AbortSignal): Promise<Pod> {
    const o = this.#o;
    const proxy = FaultProxy.start(this.server.port);
    this.proxies.set(name, proxy);
    const host: ProcessHost = o.enforce === "signal"
      ? await NamespaceHost.start(bound)
      : new DirectHost();
    const dir = `${this.dir}/${name}`;
    await Deno.mkdir(dir);
    const pod = new Pod({
      name,
      namespace: o.namespace ?? "sim",
      leaseName: o.leaseName ?? "singleton",
      apiServer: proxy.url,
      enforce: o.enforce,
      ttlSeconds: o.ttlSeconds,
      heartbeatSeconds: o.heartbeatSeconds,
      enforceLeadSeconds: o.enforceLeadSeconds,
      probe: o.probe,
      journalPath: `${this.dir}/journal/${name}.log`,
      dir,
      host,
      onEvent: o.onEvent,
      helperEnv: o.helperEnv,
      gated: o.gated?.(name) ?? false,
    });
    this.pods.push(pod);
    await pod.start();
    return pod;
  }

  /** The pod with this name. */
  pod(name: string): Pod {
    const p = this.pods.find((x) => x.name === name);
    if (!p) throw new Error(`no pod ${name}`);
    return p;
  }

  /** Every journal line written so far. */
  lines(): Promise<JournalLine[]> {
    return this.#reader.all();
  }

  /**
   * Resolves with the first journal line matching `pred` (looking at lines
   * written before the call too), polling the journals; rejects when
   * `signal` aborts first, naming `what`.
   */
  async waitForLine(
    what: string,
    pred: (l: JournalLine) => boolean,
    signal: AbortSignal,
  ): Promise<JournalLine> {
    for (;;) {
      const hit = (await this.#reader.all()).find(pred);
      if (hit) return hit;
      if (signal.aborted) throw this.#timedOut(what);
      await aborted(AbortSignal.any([signal, AbortSignal.timeout(50)]));
    }
  }

  /**
   * The error of a wait that timed out: names `what`, then the last
   * {@linkcode RECENT_EVENTS} events of every pod `what` names (and the
   * server's grants and renewals of those pods), so a failure explains itself.
   */
  #timedOut(what: string): Error {
    const lines = [`timed out waiting for ${what}`];
    for (const p of this.pods) {
      if (!new RegExp(`\\b${p.name}\\b`).test(what)) continue;
      lines.push(`recent events of ${p.name} (ms since the lab started):`);
      for (const e of p.events.slice(-RECENT_EVENTS)) {
        lines.push(`  ${formatEvent(e, this.startedAt)}`);
      }
      const lease = this.server.events.filter((e) => e.holder === p.holder)
        .slice(-RECENT_EVENTS / 4)
        .map((e) => `${e.at - this.startedAt} ${e.kind} ${e.epoch}:${e.token}`);
      lines.push(`  server, last for ${p.name}: ${lease.join(", ") || "none"}`);
    }
    return new Error(lines.join("\n"));
  }

  /** Polls `cond` every 50 ms until it holds; rejects when `signal` aborts first. */
  async waitFor(
    what: string,
    cond: () => boolean | Promise<boolean>,
    signal: AbortSignal,
  ): Promise<void> {
    while (!(await cond())) {
      if (signal.aborted) throw this.#timedOut(what);
      await aborted(AbortSignal.any([signal, AbortSignal.timeout(50)]));
    }
  }

  /** All pod events, merged in time order. */
  events(): PodEvent[] {
    return this.pods.flatMap((p) => p.events).sort((a, b) => a.at - b.at);
  }

  /** The analysis input from everything recorded so far. */
  async analysisInput(): Promise<AnalysisInput> {
    const podOf = new Map(this.pods.map((p) => [p.holder, p.name]));
    return {
      lines: await this.lines(),
      runs: this.pods.flatMap((p) => mainRunsOf(p.events)),
      grants: this.server.events
        .filter((e) => e.kind === "acquired" && podOf.has(e.holder))
        .map((e) => ({
          pod: podOf.get(e.holder)!,
          epoch: e.epoch,
          token: e.token,
          at: e.at,
        })),
      epochStarts: this.server.epochStarts,
    };
  }

  /** Judges the journals; see sim/journal.ts. */
  async analyze(): Promise<Analysis> {
    return analyze(await this.analysisInput());
  }

  /**
   * When the server would let the lease of `pod` go, as of now: its last
   * grant or renewal plus the TTL (wall ms), or undefined if it never held it.
   */
  serverExpiry(pod: string, before = Infinity): number | undefined {
    const holder = this.pod(pod).holder;
    let last: number | undefined;
    for (const e of this.server.events) {
      if (e.at > before) break;
      if (e.holder === holder && e.kind !== "released") last = e.at;
    }
    return last === undefined ? undefined : last + this.#o.ttlSeconds * 1000;
  }

  /**
   * The server's view of the lease: which pod held it from when to when
   * (wall ms), from the first grant of a token to its release or its last
   * renewal plus the TTL, capped at `end`.
   */
  leaseIntervals(end: number): { pod: string; from: number; to: number }[] {
    const podOf = new Map(this.pods.map((p) => [p.holder, p.name]));
    const ttlMs = this.#o.ttlSeconds * 1000;
    const out: { pod: string; from: number; to: number }[] = [];
    let cur: { pod: string; from: number; to: number; key: string } | undefined;
    for (const e of this.server.events) {
      const pod = podOf.get(e.holder);
      if (pod === undefined) continue;
      const key = `${e.epoch}:${e.token}`;
      if (e.kind === "released") {
        if (cur?.key === key) cur.to = Math.min(cur.to, e.at);
        continue;
      }
      if (cur?.key !== key) {
        if (cur) out.push(cur);
        cur = { pod, from: e.at, to: e.at + ttlMs, key };
      } else {
        cur.to = e.at + ttlMs;
      }
    }
    if (cur) out.push(cur);
    // A server restart forgets every lease at once.
    return out.map(({ pod, from, to }) => {
      const restart = this.server.epochStarts.find((s) => s > from);
      return { pod, from, to: Math.min(to, end, restart ?? Infinity) };
    });
  }

  /** Stops every pod (concurrently), the proxies and the server, and removes the scratch directory. */
  async close(): Promise<void> {
    await Promise.allSettled(this.pods.map((p) => p.stop()));
    await Promise.allSettled([...this.proxies.values()].map((p) => p.close()));
    await this.server.close();
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }

  /** Same as {@linkcode Lab.close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** How many of a pod's last events a timed-out wait shows. */
const RECENT_EVENTS = 40;

/** One pod event on one line, its time relative to `origin` (wall ms). */
export function formatEvent(e: PodEvent, origin: number): string {
  const t = `${e.at - origin}`;
  switch (e.kind) {
    case "start":
      return `${t} start ${e.container}#${e.restart} pid ${e.pid}` +
        (e.leased === undefined ? "" : e.leased ? " leased" : " unleased");
    case "exit":
      return `${t} exit ${e.container}#${e.restart} code ${e.code}` +
        `${e.signal ? ` ${e.signal}` : ""} (${e.cause})`;
    case "probe-failed":
      return `${t} probe failed #${e.restart}: ${e.output}`;
    case "probe-passed":
      return `${t} probe passed #${e.restart}`;
    case "restart-scheduled":
      return `${t} restart ${e.container} in ${e.delayMs} ms`;
    case "log": {
      const { msg, level, time: _t, ...rest } = e.record;
      const extra = Object.entries(rest).map(([k, v]) =>
        `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`
      ).join(" ");
      return `${t} ${e.container} ${level ?? ""} ${msg}${
        extra ? ` ${extra.slice(0, 200)}` : ""
      }`;
    }
  }
}

/** Reads the journals incrementally, so polling them stays cheap as they grow. */
class JournalReader {
  #dir: string;
  #files = new Map<string, { offset: number; rest: string }>();
  #lines: JournalLine[] = [];

  constructor(dir: string) {
    this.#dir = dir;
  }

  async all(): Promise<JournalLine[]> {
    for await (const entry of Deno.readDir(this.#dir)) {
      if (!entry.isFile) continue;
      const path = `${this.#dir}/${entry.name}`;
      const state = this.#files.get(path) ?? { offset: 0, rest: "" };
      this.#files.set(path, state);
      const f = await Deno.open(path, { read: true });
      try {
        await f.seek(state.offset, Deno.SeekMode.Start);
        const chunks: Uint8Array[] = [];
        const buf = new Uint8Array(64 * 1024);
        for (;;) {
          const n = await f.read(buf);
          if (n === null || n === 0) break;
          chunks.push(buf.slice(0, n));
          state.offset += n;
        }
        if (chunks.length === 0) continue;
        const text = state.rest +
          new TextDecoder().decode(concat(chunks));
        const cut = text.lastIndexOf("\n");
        state.rest = text.slice(cut + 1);
        this.#lines.push(...parseJournal(text.slice(0, cut + 1)));
      } finally {
        f.close();
      }
    }
    return this.#lines;
  }
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}
