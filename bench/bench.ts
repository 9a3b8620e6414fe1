/**
 * `deno task bench`: what the helper costs and how fast it fails over, each
 * figure next to a floor measured in the same run on the same machine (not
 * pass/fail):
 *
 * - `check` (the liveness probe, run every 2 s inside the workload's
 *   container): wall time and peak RSS per exec, against an empty Deno
 *   program started the same way (the installed wrapper's `deno run`).
 * - the sidecar: RSS and CPU while renewing at the default heartbeat
 *   (TTL/3), over a short window extrapolated to an hour, against an idle
 *   Deno program over the same window.
 * - failover on simulated pods (sim/): from the holder's cut to the
 *   standby's first journal line, as a multiple of the TTL; and the handover
 *   margins (old workload's last line to the server-side expiry of its
 *   lease, and to the new workload's first line).
 * - `acquire`, uncontended: start to exit, against the empty program.
 *
 * `--quick` shortens the windows and rounds (for a smoke run).
 *
 * @module
 */
import { readBootMillis } from "../lib/state/clock.ts";
import { StateDir } from "../lib/state/state_dir.ts";
import { baseEnv, berthArgv, denoRunArgv, REPO_ROOT } from "../sim/cli.ts";
import { FailoverDriver } from "../sim/failover.ts";
import { median } from "../sim/journal.ts";
import { Lab } from "../sim/lab.ts";
import { WEBHOOK_PROBE } from "../sim/pod.ts";

const quick = Deno.args.includes("--quick");
const TIME = "/usr/bin/time";

/** One measured exec: wall ms (spawn to exit, as the kubelet sees it) and peak RSS in KiB. */
interface Exec {
  wallMs: number;
  peakKiB: number | undefined;
}

const hasTime = await Deno.stat(TIME).then(() => true, () => false);

/**
 * Runs `argv` once and measures it: peak RSS from GNU time's `%M` when
 * /usr/bin/time exists (its own exec adds about a millisecond to the wall
 * time, for the floor as much as for the subject), else from polling
 * /proc/<pid>/status VmHWM (a lower bound for short processes).
 */
async function measure(
  argv: string[],
  env: Record<string, string>,
): Promise<Exec> {
  const full = hasTime ? [TIME, "-f", "%M", ...argv] : argv;
  const t0 = performance.now();
  const child = new Deno.Command(full[0], {
    args: full.slice(1),
    env,
    clearEnv: true,
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let polled: number | undefined;
  let done = false;
  const status = child.status.then((s) => {
    done = true;
    return s;
  });
  if (!hasTime) {
    while (!done) {
      try {
        const st = Deno.readTextFileSync(`/proc/${child.pid}/status`);
        const kb = Number(/VmHWM:\s+(\d+)/.exec(st)?.[1]);
        if (kb) polled = Math.max(polled ?? 0, kb);
      } catch { /* exited */ }
      await new Promise((r) => setTimeout(r, 1));
    }
  }
  const [s, err] = await Promise.all([
    status,
    new Response(child.stderr).text(),
  ]);
  const wallMs = performance.now() - t0;
  if (!s.success) throw new Error(`${argv.join(" ")} failed: ${err}`);
  const peakKiB = hasTime ? Number(err.trim().split("\n").at(-1)) : polled;
  return { wallMs, peakKiB };
}

function fmt(n: number | undefined, digits = 1): string {
  return n === undefined || Number.isNaN(n) ? "n/a" : n.toFixed(digits);
}

function ratio(a: number | undefined, b: number | undefined): string {
  return a === undefined || b === undefined || b === 0
    ? "n/a"
    : `${(a / b).toFixed(2)}x`;
}

interface Stats {
  median: number;
  min: number;
  max: number;
}

function stats(xs: number[]): Stats {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
}

async function benchCheck(dir: string): Promise<void> {
  const state = new StateDir(`${dir}/state`);
  await Deno.mkdir(state.dir);
  const boot = readBootMillis();
  await state.writeMarker({
    gateClosesBootMs: boot + 3_600_000,
    leaseDeadlineBootMs: boot + 3_604_000,
  });
  await state.installCheck();
  await Deno.writeTextFile(`${dir}/empty.ts`, "");
  // The floor: the same wrapper shape (sh exec deno run with the permission set) on an empty program.
  const wrapper = await Deno.readTextFile(`${state.dir}/check`);
  await Deno.writeTextFile(
    `${dir}/empty`,
    wrapper.replace(`'${REPO_ROOT}/main.ts'`, `'${dir}/empty.ts'`),
    { mode: 0o755 },
  );
  await Deno.chmod(`${dir}/empty`, 0o755);
  const env = baseEnv();
  const n = quick ? 8 : 30;
  const check: Exec[] = [];
  const empty: Exec[] = [];
  // The webhook's probe argv.
  const probe = [
    `${state.dir}/check`,
    "check",
    `${state.dir}/healthy`,
    "--max-age",
    "30s",
  ];
  // Warm the module cache once each, then interleave so both see the same load.
  await measure(probe, env);
  await measure([`${dir}/empty`], env);
  for (let i = 0; i < n; i++) {
    check.push(
      await measure(probe, env),
    );
    empty.push(await measure([`${dir}/empty`], env));
  }
  const cw = stats(check.map((e) => e.wallMs));
  const ew = stats(empty.map((e) => e.wallMs));
  const cr = check.every((e) => e.peakKiB)
    ? stats(check.map((e) => e.peakKiB!))
    : undefined;
  const er = empty.every((e) => e.peakKiB)
    ? stats(empty.map((e) => e.peakKiB!))
    : undefined;
  console.log(`\n## check (liveness probe) exec, ${n} runs each, interleaved`);
  console.log(
    `peak RSS from ${
      hasTime ? "GNU time %M" : "/proc VmHWM polling (lower bound)"
    }`,
  );
  console.log("| | wall median (min-max) ms | peak RSS median MiB |");
  console.log("|---|---|---|");
  console.log(
    `| check (marker with deadline, --max-age 30s) | ${fmt(cw.median)} (${
      fmt(cw.min)
    }-${fmt(cw.max)}) | ${fmt(cr && cr.median / 1024)} |`,
  );
  console.log(
    `| empty Deno program, same wrapper (floor) | ${fmt(ew.median)} (${
      fmt(ew.min)
    }-${fmt(ew.max)}) | ${fmt(er && er.median / 1024)} |`,
  );
  console.log(
    `| ratio | ${ratio(cw.median, ew.median)} | ${
      ratio(cr?.median, er?.median)
    } |`,
  );
  console.log(
    `per hour at the webhook's period (2 s): 1800 execs, ${
      fmt((1800 * cw.median) / 1000, 0)
    } s of wall time (floor ${fmt((1800 * ew.median) / 1000, 0)} s)`,
  );
}

/** CPU seconds (user + system) of a process so far, from /proc/<pid>/stat. */
function cpuSeconds(pid: number): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

function memKiB(pid: number): { rss: number; hwm: number } {
  const st = Deno.readTextFileSync(`/proc/${pid}/status`);
  return {
    rss: Number(/VmRSS:\s+(\d+)/.exec(st)?.[1]),
    hwm: Number(/VmHWM:\s+(\d+)/.exec(st)?.[1]),
  };
}

async function benchSidecar(dir: string): Promise<void> {
  const windowS = quick ? 20 : 60;
  const ttl = 30;
  await using lab = await Lab.start({
    enforce: "probe",
    ttlSeconds: ttl,
    probe: WEBHOOK_PROBE,
  });
  await Deno.writeTextFile(
    `${dir}/idle.ts`,
    "setInterval(() => {}, 10_000);\n",
  );
  const [idleExe, ...idleArgs] = denoRunArgv(`${dir}/idle.ts`);
  const idle = new Deno.Command(idleExe, {
    args: idleArgs,
    env: baseEnv(),
    clearEnv: true,
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    const bound = AbortSignal.timeout(60_000);
    const pod = await lab.addPod("pod-a", bound);
    // Start the window after the first renewal, so start-up is not counted.
    await lab.waitFor(
      "the first renewal",
      () => lab.server.events.some((e) => e.kind === "renewed"),
      bound,
    );
    const pid = pod.sidecarPid!;
    const c0 = cpuSeconds(pid);
    const i0 = cpuSeconds(idle.pid);
    const renews0 = lab.server.events.filter((e) =>
      e.kind === "renewed"
    ).length;
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, windowS * 1000));
    const elapsedS = (performance.now() - t0) / 1000;
    const cpu = cpuSeconds(pid) - c0;
    const idleCpu = cpuSeconds(idle.pid) - i0;
    const renews = lab.server.events.filter((e) =>
      e.kind === "renewed"
    ).length - renews0;
    const mem = memKiB(pid);
    const idleMem = memKiB(idle.pid);
    const perHour = (x: number) => (x * 3600) / elapsedS;
    console.log(
      `\n## sidecar (renew), TTL ${ttl} s, default heartbeat ${
        ttl / 3
      } s: ${renews} renewals in a ${
        fmt(elapsedS, 0)
      } s window, extrapolated to one hour`,
    );
    console.log(
      "CPU from /proc/<pid>/stat (10 ms ticks), so short windows are coarse",
    );
    console.log("| | RSS MiB | peak RSS MiB | CPU s per hour | CPU share |");
    console.log("|---|---|---|---|---|");
    console.log(
      `| renew sidecar | ${fmt(mem.rss / 1024)} | ${fmt(mem.hwm / 1024)} | ${
        fmt(perHour(cpu), 2)
      } | ${fmt((100 * cpu) / elapsedS, 3)} % |`,
    );
    console.log(
      `| idle Deno program (floor) | ${fmt(idleMem.rss / 1024)} | ${
        fmt(idleMem.hwm / 1024)
      } | ${fmt(perHour(idleCpu), 2)} | ${
        fmt((100 * idleCpu) / elapsedS, 3)
      } % |`,
    );
    console.log(
      `| ratio | ${ratio(mem.rss, idleMem.rss)} | ${
        ratio(mem.hwm, idleMem.hwm)
      } | ${ratio(cpu, idleCpu)} | |`,
    );
  } finally {
    idle.kill("SIGKILL");
    await idle.status;
  }
}

async function benchFailover(
  label: string,
  o: {
    ttl: number;
    heartbeat?: number;
    lead?: number;
    probe: typeof WEBHOOK_PROBE;
    rounds: number;
  },
): Promise<void> {
  await using lab = await Lab.start({
    enforce: "probe",
    ttlSeconds: o.ttl,
    heartbeatSeconds: o.heartbeat,
    enforceLeadSeconds: o.lead,
    probe: o.probe,
  });
  const driver = new FailoverDriver(lab);
  const bound = () => AbortSignal.timeout(180_000);
  await driver.begin(bound());
  const rounds = [];
  for (let i = 0; i < o.rounds; i++) {
    rounds.push(await driver.round("blackhole", bound()));
  }
  await driver.settle();
  await Promise.all(lab.pods.map((p) => p.stop()));
  const a = await lab.analyze();
  if (a.violations.length) {
    console.log(`VIOLATIONS: ${a.violations.map((v) => v.detail).join("; ")}`);
  }
  const ttlMs = o.ttl * 1000;
  const times = rounds.map((r) => (r.newStart - r.injectedAt) / ttlMs);
  const toNew = a.failovers.map((f) => f.marginMs / 1000);
  const toExpiry = a.failovers.map((f) =>
    (lab.serverExpiry(f.fromPod, f.newStart)! - f.oldStop) / 1000
  );
  const row = (name: string, xs: number[], unit: string) => {
    const st = stats(xs);
    console.log(
      `| ${name} | ${fmt(st.median, 2)} ${unit} | ${fmt(st.min, 2)}-${
        fmt(st.max, 2)
      } ${unit} |`,
    );
  };
  console.log(
    `\n## failover, ${label}: ${rounds.length} rounds (holder's proxy blackholed)`,
  );
  console.log("| | median | min-max |");
  console.log("|---|---|---|");
  row("cut to the standby's first journal line, in TTLs", times, "x TTL");
  row(
    "old workload's last line to its lease's expiry on the server",
    toExpiry,
    "s",
  );
  row("old workload's last line to the new workload's first line", toNew, "s");
}

async function benchAcquire(dir: string): Promise<void> {
  await using lab = await Lab.start({ enforce: "probe", ttlSeconds: 30 });
  const n = quick ? 4 : 10;
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const state = `${dir}/acquire-${i}`;
    await Deno.mkdir(state);
    const e = await measure(berthArgv(["acquire"]), {
      ...baseEnv(),
      BERTH_LEASE_NAME: `bench-${i}`,
      BERTH_TTL_SECONDS: "30",
      BERTH_STATE_DIR: state,
      BERTH_API_SERVER: lab.server.url,
      POD_NAMESPACE: "bench",
      POD_NAME: `pod-${i}`,
      POD_UID: crypto.randomUUID(),
    });
    times.push(e.wallMs);
  }
  await Deno.writeTextFile(`${dir}/empty2.ts`, "");
  const floor: number[] = [];
  for (let i = 0; i < n; i++) {
    floor.push(
      (await measure(denoRunArgv(`${dir}/empty2.ts`), baseEnv())).wallMs,
    );
  }
  const a = stats(times);
  const f = stats(floor);
  console.log(
    `\n## acquire, uncontended, ${n} runs (fresh lease and state volume each)`,
  );
  console.log("| | wall median (min-max) ms |");
  console.log("|---|---|");
  console.log(
    `| acquire: start to exit 0 | ${fmt(a.median)} (${fmt(a.min)}-${
      fmt(a.max)
    }) |`,
  );
  console.log(
    `| empty Deno program (floor) | ${fmt(f.median)} (${fmt(f.min)}-${
      fmt(f.max)
    }) |`,
  );
  console.log(`| ratio | ${ratio(a.median, f.median)} |`);
}

if (import.meta.main) {
  const dir = await Deno.makeTempDir({ prefix: "berth-bench-" });
  try {
    console.log(
      `# berth-acquire benchmarks (${
        quick ? "quick" : "full"
      } run), deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} CPUs`,
    );
    await benchCheck(dir);
    await benchAcquire(dir);
    await benchSidecar(dir);
    await benchFailover("TTL 6 s, heartbeat 1 s, probe every 1 s, lead 3 s", {
      ttl: 6,
      heartbeat: 1,
      lead: 3,
      probe: { periodMs: 1000, timeoutMs: 1000, terminationGraceMs: 1000 },
      rounds: quick ? 2 : 5,
    });
    await benchFailover(
      "TTL 12 s, default heartbeat 4 s, the webhook's probe (2 s), default lead 4 s",
      {
        ttl: 12,
        probe: WEBHOOK_PROBE,
        rounds: quick ? 1 : 3,
      },
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  // Pending bounds (AbortSignal.timeout) would keep the process alive.
  Deno.exit(0);
}
