/**
 * `deno run -A bench/compare.ts --before DIR`: this checkout against another
 * one (a copy of an earlier commit) in one run, on the same machine at the
 * same time, and this checkout under other V8 flags:
 *
 * - `acquire`, uncontended, start to exit, over HTTP, HTTPS with a CA
 *   bundle, and HTTPS with the server-name override: `--runs` runs of each,
 *   interleaved, medians;
 * - the sidecar (`renew`, heartbeat 1 s) over HTTPS with the CA bundle and
 *   with the server-name override, every variant side by side until each
 *   has renewed `--renewals` times: CPU per renewal after a warm-up, and RSS
 *   (and anonymous RSS) at the first renewal, every tenth of the way and at
 *   the end.
 *
 * `--soak` runs only the sidecars, before and after on each TLS path (for a
 * soak of 10,000 renewals, about 2.8 h). In either mode every RSS sample is
 * also printed as it is taken.
 *
 * The figures are printed as markdown tables. Not pass/fail.
 *
 * @module
 */
import { PERMISSION_SET, V8_FLAGS } from "../lib/cmd/self_argv.ts";
import type { DevServer } from "../lib/devserver/server.ts";
import { REPO_ROOT } from "../sim/cli.ts";
import { CpuTracker, fmt, measureExec, memKiB, stats } from "./measure.ts";
import {
  freshLease,
  helperEnv,
  Servers,
  spawnQuiet,
  type Transport,
  TRANSPORT_LABEL,
  TRANSPORTS,
} from "./setup.ts";

/** One way of running the CLI: a checkout and its V8 flags. */
interface Variant {
  label: string;
  root: string;
  v8: readonly string[];
}

/** The argv of `berth-acquire ...args` from `v.root` with `v.v8`. */
function argvOf(v: Variant, args: string[]): string[] {
  return [
    Deno.execPath(),
    "run",
    "-q",
    "--no-prompt",
    `-P=${PERMISSION_SET}`,
    `--v8-flags=${v.v8.join(",")}`,
    "--config",
    `${v.root}/deno.json`,
    `${v.root}/main.ts`,
    ...args,
  ];
}

interface Args {
  before: string;
  renewals: number;
  runs: number;
  warmup: number;
  /** Only the sidecars, before and after on each TLS path (a long soak). */
  soak: boolean;
}

function parseArgs(args: string[]): Args {
  const out: Args = {
    before: "",
    renewals: 1500,
    runs: 10,
    warmup: 120,
    soak: false,
  };
  for (let i = 0; i < args.length; i++) {
    const [name, value] = [args[i], args[i + 1]];
    if (name === "--") continue;
    if (name === "--before") out.before = value, i++;
    else if (name === "--renewals") out.renewals = Number(value), i++;
    else if (name === "--runs") out.runs = Number(value), i++;
    else if (name === "--warmup") out.warmup = Number(value), i++;
    else if (name === "--soak") out.soak = true;
    else throw new Error(`unknown argument ${JSON.stringify(name)}`);
  }
  if (out.before === "") {
    throw new Error(
      "--before DIR (a checkout of the earlier commit) is needed",
    );
  }
  return out;
}

const SINGLE = [...V8_FLAGS, "--single-threaded"];
/** A young generation that starts at 2 MiB a half (docs/benchmarks.md). */
const YOUNG_2 = [...V8_FLAGS, "--min-semi-space-size=2"];

async function compareAcquire(
  dir: string,
  servers: Servers,
  variants: Variant[],
  runs: number,
): Promise<void> {
  const server = new Map<Transport, DevServer>();
  for (const t of TRANSPORTS) server.set(t, await servers.start(t));
  const once = async (v: Variant, t: Transport) => {
    const { lease, stateDir } = await freshLease(dir, "acquire");
    const env = helperEnv({
      server: server.get(t)!,
      transport: t,
      caFile: servers.pki.caCert,
      lease,
      stateDir,
    });
    return (await measureExec(argvOf(v, ["acquire"]), env)).wallMs;
  };
  const walls = new Map<string, number[]>();
  for (const v of variants) for (const t of TRANSPORTS) await once(v, t);
  for (let i = 0; i < runs; i++) {
    for (const t of TRANSPORTS) {
      for (const v of variants) {
        const key = `${v.label}|${t}`;
        walls.set(key, [...walls.get(key) ?? [], await once(v, t)]);
      }
    }
  }
  console.log(
    `\n### \`acquire\`, uncontended, start to exit: median (min-max) ms of ${runs} runs each, interleaved\n`,
  );
  console.log(
    `| variant | ${TRANSPORTS.map((t) => TRANSPORT_LABEL[t]).join(" | ")} |`,
  );
  console.log(`|---|${TRANSPORTS.map(() => "---").join("|")}|`);
  for (const v of variants) {
    const cells = TRANSPORTS.map((t) => {
      const s = stats(walls.get(`${v.label}|${t}`)!);
      return `${fmt(s.median, 0)} (${fmt(s.min, 0)}-${fmt(s.max, 0)})`;
    });
    console.log(`| ${v.label} | ${cells.join(" | ")} |`);
  }
}

interface Sidecar {
  label: string;
  server: DevServer;
  child: Deno.ChildProcess;
  cpu?: CpuTracker;
  rss: { at: number; rss: number; anon: number }[];
  warm?: { cpu: number; n: number };
}

async function compareSidecars(
  dir: string,
  servers: Servers,
  setups: [Variant, Transport][],
  o: Args,
): Promise<void> {
  const sidecars: Sidecar[] = [];
  let started = false;
  const sample = (s: Sidecar) => {
    const m = memKiB(s.child.pid);
    const r = {
      at: s.server.rpcCount("renew"),
      rss: m.rss / 1024,
      anon: m.anon / 1024,
    };
    s.rss.push(r);
    // Said as it is taken, so a long soak cut short still shows its way.
    console.log(
      `  ${s.label}: renewal ${r.at}, RSS ${fmt(r.rss)} MiB, anonymous ${
        fmt(r.anon)
      } MiB`,
    );
  };
  const step = Math.max(1, Math.floor(o.renewals / 10));
  const next = new Map<Sidecar, number>();
  // Watches every sidecar from its start, so the first sample is at its
  // first renewal, however long the others take to start.
  const watch = async () => {
    const t0 = performance.now();
    for (;;) {
      let done = started;
      for (const s of sidecars) {
        const n = s.server.rpcCount("renew");
        if (n >= 1 && s.cpu === undefined) s.cpu = new CpuTracker(s.child.pid);
        if (s.warm === undefined && n >= 1 && n >= o.warmup) {
          s.warm = { cpu: s.cpu!.seconds(), n };
        }
        const due = next.get(s) ?? 1;
        if (n >= due && due <= o.renewals) {
          sample(s);
          next.set(s, s.rss.length === 1 ? step : due + step);
        }
        if (n < o.renewals) done = false;
      }
      if (done) return;
      if ((performance.now() - t0) > (o.renewals + 600) * 1000) {
        throw new Error("the sidecars did not reach the renewals in time");
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const watching = watch();
  try {
    for (const [v, t] of setups) {
      const server = await servers.start(t);
      const { lease, stateDir } = await freshLease(dir, "sidecar");
      const env = helperEnv({
        server,
        transport: t,
        caFile: servers.pki.caCert,
        lease,
        stateDir,
        heartbeatSeconds: 1,
      });
      await measureExec(argvOf(v, ["acquire"]), env);
      const child = spawnQuiet(argvOf(v, ["renew"]), env);
      sidecars.push({
        label: `${v.label}, ${TRANSPORT_LABEL[t]}`,
        server,
        child,
        rss: [],
      });
    }
    started = true;
    await watching;
    console.log(
      `\n### Sidecar (\`renew\`, heartbeat 1 s), ${o.renewals} renewals, all side by side\n`,
    );
    console.log(
      `| variant | CPU per renewal (ms, renewals ${o.warmup}-end) | RSS at renewal 1 (MiB) | RSS at the end (MiB) | anonymous RSS at 1 / at the end (MiB) |`,
    );
    console.log("|---|---|---|---|---|");
    for (const s of sidecars) {
      const n = s.server.rpcCount("renew");
      const cpuMs = (s.cpu!.seconds() - s.warm!.cpu) * 1000 / (n - s.warm!.n);
      const [first, last] = [s.rss[0], s.rss.at(-1)!];
      console.log(
        `| ${s.label} | ${fmt(cpuMs, 2)} | ${fmt(first.rss)} | ${
          fmt(last.rss)
        } (at ${last.at}) | ${fmt(first.anon)} / ${fmt(last.anon)} |`,
      );
    }
    console.log("\nRSS MiB at each tenth of the way:\n");
    for (const s of sidecars) {
      console.log(
        `- ${s.label}: ${
          s.rss.map((r) => `${r.at}: ${fmt(r.rss)}`).join(", ")
        }`,
      );
    }
  } finally {
    for (const s of sidecars) {
      s.cpu?.[Symbol.dispose]();
      try {
        s.child.kill("SIGKILL");
      } catch { /* exited */ }
      await s.child.status;
    }
  }
}

if (import.meta.main) {
  const o = parseArgs(Deno.args);
  const before: Variant = { label: "before", root: o.before, v8: V8_FLAGS };
  const after: Variant = { label: "after", root: REPO_ROOT, v8: V8_FLAGS };
  const single: Variant = {
    label: "after, +--single-threaded",
    root: REPO_ROOT,
    v8: SINGLE,
  };
  const young2: Variant = {
    label: "after, young generation 2 MiB",
    root: REPO_ROOT,
    v8: YOUNG_2,
  };
  const dir = await Deno.makeTempDir({ prefix: "berth-compare-" });
  console.log(
    `# before (${o.before}) against after (${REPO_ROOT}), deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} CPUs; V8 flags ${
      V8_FLAGS.join(",")
    } unless named`,
  );
  try {
    await using servers = await Servers.create();
    const beforeAfter: [Variant, Transport][] = [
      [before, "https-ca"],
      [after, "https-ca"],
      [before, "https-ca-sni"],
      [after, "https-ca-sni"],
    ];
    if (o.soak) {
      await compareSidecars(dir, servers, beforeAfter, o);
    } else {
      await compareAcquire(
        dir,
        servers,
        [before, after, single, young2],
        o.runs,
      );
      await compareSidecars(dir, servers, [
        ...beforeAfter,
        [single, "https-ca"],
        [young2, "https-ca"],
        [young2, "https-ca-sni"],
      ], o);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  Deno.exit(0);
}
