/**
 * The short-lived execs and the probes: `check` (the exec liveness probe)
 * and `acquire` against the empty program, and what each way of probing
 * costs a container per hour at the webhook's period: the exec probe (execs
 * × CPU each) and the sidecar's `httpGet` `/healthz` (requests × the
 * sidecar's CPU each, against a listener that only answers `200`).
 *
 * @module
 */
import type { DevServer } from "../lib/devserver/server.ts";
import { readBootMillis, WEBHOOK_PROBE_MAX_AGE } from "../lib/state/marker.ts";
import { StateDir } from "../lib/state/state_dir.ts";
import { installProbe } from "../lib/cmd/install_check.ts";
import { discardLogger } from "../lib/obs/log.ts";
import { baseEnv, berthArgv, denoRunArgv, REPO_ROOT } from "../sim/cli.ts";
import {
  cpuPerExec,
  CpuTracker,
  type Exec,
  hasTime,
  measureExec,
  type Report,
  stats,
} from "./measure.ts";
import {
  freshLease,
  helperEnv,
  type Servers,
  spawnQuiet,
  type Transport,
  TRANSPORT_LABEL,
  TRANSPORTS,
} from "./setup.ts";

/** The webhook's probe period: 1800 execs or requests an hour. */
const PROBES_PER_HOUR = 3600 / 2;

const rss = hasTime
  ? "peak RSS (GNU time)"
  : "peak RSS (VmHWM polled: a lower bound)";

/**
 * `check` as the webhook runs it (`<state>/check check <state>/healthy
 * --max-age 30s`, through the wrapper `acquire` installs under `deno run`)
 * on a marker with deadlines, interleaved with the empty program behind the
 * same wrapper; `n` runs each after one warm-up.
 */
export async function benchCheck(
  dir: string,
  emptyScript: string,
  n: number,
  report: Report,
): Promise<void> {
  const state = new StateDir(`${dir}/check-state`);
  await Deno.mkdir(state.dir);
  // Rewritten before each series, so it stays younger than --max-age.
  const freshMarker = () => {
    const boot = readBootMillis();
    return state.writeMarker({
      gateClosesBootMs: boot + 3_600_000,
      leaseDeadlineBootMs: boot + 3_604_000,
    });
  };
  await freshMarker();
  await installProbe(state, discardLogger);
  const wrapper = await Deno.readTextFile(`${state.dir}/check`);
  const floorWrapper = `${dir}/empty-wrapper`;
  const floorText = wrapper.replace(`${REPO_ROOT}/main.ts`, emptyScript);
  if (floorText === wrapper) {
    throw new Error(`the probe wrapper does not run ${REPO_ROOT}/main.ts`);
  }
  await Deno.writeTextFile(floorWrapper, floorText, { mode: 0o755 });
  await Deno.chmod(floorWrapper, 0o755);
  const probe = [
    `${state.dir}/check`,
    "check",
    `${state.dir}/healthy`,
    "--max-age",
    WEBHOOK_PROBE_MAX_AGE,
  ];
  const env = baseEnv();
  await measureExec(probe, env);
  await measureExec([floorWrapper], env);
  const check: Exec[] = [];
  const empty: Exec[] = [];
  for (let i = 0; i < n; i++) {
    check.push(await measureExec(probe, env));
    empty.push(await measureExec([floorWrapper], env));
  }
  const floorName = "empty program, same `deno run` wrapper";
  const runs = `${n} runs each, interleaved`;
  report.add({
    figure: "`check` exec, wall median",
    value: stats(check.map((e) => e.wallMs)).median,
    floor: stats(empty.map((e) => e.wallMs)).median,
    unit: "ms",
    floorName,
    runs,
    target: 1.15,
  });
  const peak = (xs: Exec[]) =>
    xs.every((e) => e.peakKiB)
      ? stats(xs.map((e) => e.peakKiB!)).median / 1024
      : undefined;
  report.add({
    figure: `\`check\` exec, ${rss} median`,
    value: peak(check),
    floor: peak(empty),
    unit: "MiB",
    floorName,
    runs,
    target: 1.15,
  });
  if (!hasTime) return;
  const loops = 3 * n;
  await freshMarker();
  const checkCpu = await cpuPerExec(probe, env, loops);
  const emptyCpu = await cpuPerExec([floorWrapper], env, loops);
  report.add({
    figure: "`check` exec, CPU (user + system) each",
    value: 1000 * checkCpu!,
    floor: 1000 * emptyCpu!,
    unit: "ms",
    floorName,
    runs: `${loops} execs in a row each`,
    digits: 2,
  });
  report.add({
    figure:
      "exec probe cost per container per hour: 1800 execs × CPU each (period 2 s)",
    value: PROBES_PER_HOUR * checkCpu!,
    floor: PROBES_PER_HOUR * emptyCpu!,
    unit: "CPU s",
    floorName,
    runs: `${loops} execs in a row each`,
  });
}

/**
 * The `httpGet` probe's cost on the sidecar: `requests` GETs of `/healthz`,
 * each on a new connection as the kubelet makes them, against a listener
 * that only answers `200 ok`; reported per hour at the 2 s period.
 */
export async function benchHealth(
  dir: string,
  servers: Servers,
  healthScript: string,
  requests: number,
  report: Report,
): Promise<void> {
  const server = await servers.start("http");
  const stateDir = `${dir}/health-state`;
  await Deno.mkdir(stateDir);
  const env = helperEnv({
    server,
    transport: "http",
    caFile: servers.pki.caCert,
    lease: "health",
    stateDir,
  });
  await measureExec(berthArgv(["acquire"]), env);
  const [sidecarPort, floorPort] = [freePort(), freePort()];
  const procs = [
    spawnQuiet(
      berthArgv(["renew", "--health-addr", `127.0.0.1:${sidecarPort}`]),
      env,
    ),
    spawnQuiet(denoRunArgv(healthScript, [String(floorPort)]), baseEnv()),
  ];
  try {
    const cost: number[] = [];
    // No idle connection is kept: a new one for each request, as the kubelet does.
    using client = Deno.createHttpClient({ poolMaxIdlePerHost: 0 });
    for (const [i, port] of [sidecarPort, floorPort].entries()) {
      const url = `http://127.0.0.1:${port}/healthz`;
      const bound = AbortSignal.timeout(120_000);
      await untilOk(url, bound);
      using cpu = new CpuTracker(procs[i].pid);
      const c0 = cpu.seconds();
      for (let k = 0; k < requests; k++) {
        const r = await fetch(url, { client, signal: bound });
        await r.body?.cancel();
      }
      cost.push((cpu.seconds() - c0) / requests);
    }
    report.add({
      figure:
        "`httpGet` `/healthz` cost per container per hour: 1800 requests × the sidecar's CPU each",
      value: PROBES_PER_HOUR * cost[0],
      floor: PROBES_PER_HOUR * cost[1],
      unit: "CPU s",
      floorName: "a Deno listener answering 200",
      runs: `${requests} requests each, a new connection each`,
      digits: 2,
    });
  } finally {
    for (const p of procs) {
      p.kill("SIGKILL");
      await p.status;
    }
  }
}

/** `acquire`, uncontended, start to exit 0, over each transport; `n` runs each interleaved with the empty program. */
export async function benchAcquire(
  dir: string,
  servers: Servers,
  floors: { empty: string; acquire: string },
  n: number,
  report: Report,
): Promise<void> {
  const byTransport = new Map<Transport, number[]>();
  const floor: number[] = [];
  const oneFetch = new Map<"http" | "https-ca", number[]>([
    ["http", []],
    ["https-ca", []],
  ]);
  const server = new Map<Transport, DevServer>();
  for (const t of TRANSPORTS) {
    server.set(t, await servers.start(t));
    byTransport.set(t, []);
  }
  const once = async (t: Transport) => {
    const { lease, stateDir } = await freshLease(dir, "acquire");
    const env = helperEnv({
      server: server.get(t)!,
      transport: t,
      caFile: servers.pki.caCert,
      lease,
      stateDir,
    });
    return (await measureExec(berthArgv(["acquire"]), env)).wallMs;
  };
  const bare = async (t: "http" | "https-ca") => {
    const { lease, stateDir } = await freshLease(dir, "acquire");
    const argv = denoRunArgv(floors.acquire, [
      server.get(t)!.url,
      "bench",
      lease,
      `bench/${lease}`,
      "30",
      stateDir,
      ...(t === "http" ? [] : [servers.pki.caCert]),
    ]);
    return (await measureExec(argv, baseEnv())).wallMs;
  };
  for (const t of TRANSPORTS) await once(t); // warm the module cache
  for (const t of oneFetch.keys()) await bare(t);
  for (let i = 0; i < n; i++) {
    for (const t of TRANSPORTS) byTransport.get(t)!.push(await once(t));
    for (const [t, xs] of oneFetch) xs.push(await bare(t));
    floor.push(
      (await measureExec(denoRunArgv(floors.empty), baseEnv())).wallMs,
    );
  }
  const f = stats(floor).median;
  for (const t of TRANSPORTS) {
    report.add({
      figure: `\`acquire\`, uncontended, start to exit, ${TRANSPORT_LABEL[t]}`,
      value: stats(byTransport.get(t)!).median,
      floor: f,
      unit: "ms",
      floorName: "empty program",
      runs: `${n} runs each (fresh lease and state volume each)`,
      target: t === "http" ? 2.5 : 3,
    });
  }
  for (const t of TRANSPORTS) {
    const floorT = t === "http" ? "http" : "https-ca";
    report.add({
      figure: `\`acquire\`, uncontended, start to exit, ${
        TRANSPORT_LABEL[t]
      }, against one bare request`,
      value: stats(byTransport.get(t)!).median,
      floor: stats(oneFetch.get(floorT)!).median,
      unit: "ms",
      floorName: `one \`fetch\` Acquire and a file write, ${
        TRANSPORT_LABEL[floorT]
      }`,
      runs: `${n} runs each`,
    });
  }
}

/** A port that was free a moment ago (listen on 0, close). */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

async function untilOk(url: string, signal: AbortSignal): Promise<void> {
  for (;;) {
    try {
      const r = await fetch(url, { signal });
      await r.body?.cancel();
      if (r.ok) return;
    } catch (e) {
      if (signal.aborted) throw new Error(`${url} never answered 200: ${e}`);
    }
    await new Promise((res) => setTimeout(res, 100));
  }
}
