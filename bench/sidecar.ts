/**
 * The sidecar (`renew`) over each transport at heartbeat 10 s and 1 s, next
 * to the floor program (one kept-alive `fetch` POST and one fsynced atomic
 * write per beat) at the same heartbeats, all running side by side through
 * one window so they see the same machine; and the soak: RSS from the first
 * to the Nth renewal at heartbeat 1 s.
 *
 * @module
 */
import type { DevServer } from "../lib/devserver/server.ts";
import { baseEnv, berthArgv, denoRunArgv } from "../sim/cli.ts";
import {
  cpuSeconds,
  CpuTracker,
  fmt,
  measureExec,
  memKiB,
  type Report,
} from "./measure.ts";
import {
  freshLease,
  helperEnv,
  type Servers,
  spawnQuiet,
  type Transport,
  TRANSPORT_LABEL,
  TRANSPORTS,
  TTL_SECONDS,
} from "./setup.ts";

/** One process renewing a lease: a sidecar or a floor. */
interface Renewer {
  label: string;
  heartbeatS: number;
  server: DevServer;
  child: Deno.ChildProcess;
}

/** Where the sidecars and floors run, and how long. */
export interface SidecarOptions {
  /** The run's temporary directory. */
  dir: string;
  /** The servers and PKI. */
  servers: Servers;
  /** The floor program that renews (see floors.ts). */
  floorScript: string;
  /**
   * Seconds from every process's first renewal to the window: the runtime
   * settles then (lazy compilation, the first collections of start-up
   * garbage), a cost paid once per start that a short window would
   * otherwise multiply into every hour. It is reported on its own row.
   */
  warmupS: number;
  /** The measuring window in seconds (after the warm-up). */
  windowS: number;
  /** Where the rows go. */
  report: Report;
}

async function startSidecar(
  o: SidecarOptions,
  transport: Transport,
  heartbeatS: number,
): Promise<Renewer> {
  const server = await o.servers.start(transport);
  const { lease, stateDir } = await freshLease(o.dir, "sidecar");
  const env = helperEnv({
    server,
    transport,
    caFile: o.servers.pki.caCert,
    lease,
    stateDir,
    heartbeatSeconds: heartbeatS,
  });
  // Throws with acquire's stderr when it fails.
  await measureExec(berthArgv(["acquire"]), env);
  const child = spawnQuiet(berthArgv(["renew"]), env);
  return { label: TRANSPORT_LABEL[transport], heartbeatS, server, child };
}

async function startFloor(
  o: SidecarOptions,
  transport: Transport,
  heartbeatS: number,
): Promise<Renewer> {
  const server = await o.servers.start(transport);
  const { lease, stateDir } = await freshLease(o.dir, "floor");
  const argv = denoRunArgv(o.floorScript, [
    server.url,
    "bench",
    lease,
    `bench/${lease}`,
    String(TTL_SECONDS),
    String(heartbeatS),
    stateDir,
    ...(transport === "http" ? [] : [o.servers.pki.caCert]),
  ]);
  const child = spawnQuiet(argv, baseEnv());
  return { label: "floor", heartbeatS, server, child };
}

/** Resolves at the process's first renewal; throws when it exits first or `signal` aborts. */
async function waitRenewed(r: Renewer, signal: AbortSignal): Promise<void> {
  let exited: Deno.CommandStatus | undefined;
  r.child.status.then((s) => exited = s);
  while (r.server.rpcCount("renew") < 1) {
    if (exited) {
      throw new Error(
        `${r.label} (heartbeat ${r.heartbeatS} s) exited ${exited.code} before renewing`,
      );
    }
    if (signal.aborted) {
      throw new Error(
        `${r.label} (heartbeat ${r.heartbeatS} s) did not renew within 60 s`,
      );
    }
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function stop(rs: Renewer[]): Promise<void> {
  for (const r of rs) {
    try {
      r.child.kill("SIGKILL");
    } catch { /* exited */ }
    await r.child.status;
  }
}

/** What one process did in the window. */
interface Sample {
  cpuPerHourS: number;
  rssMiB: number;
  renewals: number;
}

/**
 * Runs every transport's sidecar and the floor (over HTTPS with the CA: the
 * production path) at heartbeat 10 s and 1 s side by side for one window, and
 * adds the rows: CPU per hour and RSS against the floor at the same
 * heartbeat, and CPU per renewal over HTTPS against HTTP.
 */
export async function benchSidecars(o: SidecarOptions): Promise<void> {
  const heartbeats = [10, 1];
  const procs: Renewer[] = [];
  let trackers: CpuTracker[] = [];
  try {
    for (const hb of heartbeats) {
      procs.push(await startFloor(o, "https-ca", hb));
      for (const t of TRANSPORTS) procs.push(await startSidecar(o, t, hb));
    }
    const ready = AbortSignal.timeout(60_000);
    await Promise.all(procs.map((r) => waitRenewed(r, ready)));
    trackers = procs.map((r) => new CpuTracker(r.child.pid));
    const warm0 = trackers.map((t) => t.seconds());
    await new Promise((res) => setTimeout(res, o.warmupS * 1000));
    const c0 = trackers.map((t) => t.seconds());
    const ticks0 = procs.map((r) => cpuSeconds(r.child.pid));
    const n0 = procs.map((r) => r.server.rpcCount("renew"));
    const t0 = performance.now();
    await new Promise((res) => setTimeout(res, o.windowS * 1000));
    const elapsedS = (performance.now() - t0) / 1000;
    const samples: Sample[] = procs.map((r, i) => ({
      cpuPerHourS: ((trackers[i].seconds() - c0[i]) * 3600) / elapsedS,
      rssMiB: memKiB(r.child.pid).rss / 1024,
      renewals: r.server.rpcCount("renew") - n0[i],
    }));
    procs.forEach((r, i) =>
      console.log(
        `  ${r.label}, heartbeat ${r.heartbeatS} s: CPU ${
          fmt(samples[i].cpuPerHourS * elapsedS / 3600, 3)
        } s by thread (${
          fmt(cpuSeconds(r.child.pid) - ticks0[i], 2)
        } s in /proc/<pid>/stat ticks)`,
      )
    );
    const at = (label: string, hb: number) => {
      const i = procs.findIndex((r) =>
        r.label === label && r.heartbeatS === hb
      );
      return samples[i];
    };
    const window = `${
      fmt(elapsedS, 0)
    } s window after a ${o.warmupS} s warm-up`;
    for (const hb of heartbeats) {
      const floor = at("floor", hb);
      const settle = (label: string) => {
        const i = procs.findIndex((r) =>
          r.label === label && r.heartbeatS === hb
        );
        return (c0[i] - warm0[i]) * 1000;
      };
      o.report.add({
        figure:
          `\`renew\` sidecar CPU in the ${o.warmupS} s warm-up after its first renewal (once per start), heartbeat ${hb} s, ${
            TRANSPORT_LABEL["https-ca"]
          }`,
        value: settle(TRANSPORT_LABEL["https-ca"]),
        floor: settle("floor"),
        unit: "ms",
        floorName: "minimal fetch + fsync program, HTTPS, CA",
        runs: "1 start each",
        digits: 0,
      });
      for (const t of TRANSPORTS) {
        const s = at(TRANSPORT_LABEL[t], hb);
        const runs =
          `${s.renewals} renewals in a ${window} (floor ${floor.renewals})`;
        const floorName = `minimal fetch + fsync program, HTTPS, CA`;
        o.report.add({
          figure: `\`renew\` sidecar CPU per hour, heartbeat ${hb} s, ${
            TRANSPORT_LABEL[t]
          }`,
          value: s.cpuPerHourS,
          floor: floor.cpuPerHourS,
          unit: "s",
          floorName,
          runs,
          digits: 2,
          target: t === "http" ? undefined : 1.5,
        });
        o.report.add({
          figure: `\`renew\` sidecar RSS, heartbeat ${hb} s, ${
            TRANSPORT_LABEL[t]
          }`,
          value: s.rssMiB,
          floor: floor.rssMiB,
          unit: "MiB",
          floorName,
          runs,
          target: t === "http" ? undefined : 1.2,
        });
      }
    }
    // Per request: at heartbeat 1 s the renewals dominate the sidecar's CPU.
    const perRenewalMs = (s: Sample) =>
      (s.cpuPerHourS * elapsedS * 1000) / 3600 / s.renewals;
    const http = at(TRANSPORT_LABEL.http, 1);
    for (const t of TRANSPORTS.filter((t) => t !== "http")) {
      const s = at(TRANSPORT_LABEL[t], 1);
      o.report.add({
        figure: `client CPU per renewal (sidecar, heartbeat 1 s), ${
          TRANSPORT_LABEL[t]
        }`,
        value: perRenewalMs(s),
        floor: perRenewalMs(http),
        unit: "ms",
        floorName: "the same over HTTP",
        runs: `${s.renewals} / ${http.renewals} renewals`,
        digits: 2,
        target: 1.5,
      });
    }
  } finally {
    for (const t of trackers) t[Symbol.dispose]();
    await stop(procs);
  }
}

/**
 * The soak: one sidecar over HTTPS with the CA at heartbeat 1 s (the
 * smallest the CLI takes) until its `renewals`th renewal, RSS sampled at the
 * first and every tenth of the way, next to the floor over the same span.
 */
export async function benchSoak(
  o: SidecarOptions,
  renewals: number,
): Promise<void> {
  const procs: Renewer[] = [];
  try {
    const sidecar = await startSidecar(o, "https-ca", 1);
    const floor = await startFloor(o, "https-ca", 1);
    procs.push(sidecar, floor);
    const ready = AbortSignal.timeout(60_000);
    await Promise.all(procs.map((r) => waitRenewed(r, ready)));
    const mem = () => procs.map((r) => memKiB(r.child.pid));
    const line = (n: number, m: ReturnType<typeof mem>) =>
      `  renewal ${n}: ${fmt(m[0].rss / 1024)} / ${
        fmt(m[1].rss / 1024)
      } (anonymous ${fmt(m[0].anon / 1024)} / ${fmt(m[1].anon / 1024)})`;
    const start = mem();
    const first = start.map((m) => m.rss / 1024);
    console.log(
      `soak: ${renewals} renewals at heartbeat 1 s (about ${
        fmt(renewals / 3600, 1)
      } h); RSS MiB sidecar / floor, and of it the anonymous memory (RssAnon: all but the runtime's executable and other files paged in)`,
    );
    console.log(line(1, start));
    let next = Math.max(1, Math.floor(renewals / 10));
    for (;;) {
      const n = sidecar.server.rpcCount("renew");
      if (n >= next) {
        const now = mem();
        const rss = now.map((m) => m.rss / 1024);
        console.log(line(n, now));
        if (n >= renewals) {
          o.report.add({
            figure:
              `\`renew\` sidecar anonymous RSS (RssAnon) at renewal ${n} / at renewal 1, heartbeat 1 s, HTTPS, CA bundle`,
            value: now[0].anon / 1024,
            floor: start[0].anon / 1024,
            unit: "MiB",
            floorName: "its own at renewal 1",
            runs: `1 soak of ${n} renewals (floor: ${
              fmt(start[1].anon / 1024)
            } → ${fmt(now[1].anon / 1024)} MiB)`,
          });
          o.report.add({
            figure:
              `\`renew\` sidecar RSS at renewal ${n} / at renewal 1, heartbeat 1 s, HTTPS, CA bundle`,
            value: rss[0],
            floor: first[0],
            unit: "MiB",
            floorName: "its own RSS at renewal 1",
            runs: `1 soak of ${n} renewals (floor: ${fmt(first[1])} → ${
              fmt(rss[1])
            } MiB)`,
            target: 1.05,
          });
          return;
        }
        next = Math.min(
          renewals,
          next + Math.max(1, Math.floor(renewals / 10)),
        );
      }
      const status = await Promise.race([
        sidecar.child.status,
        new Promise<undefined>((res) => setTimeout(() => res(undefined), 1000)),
      ]);
      if (status !== undefined) {
        throw new Error(`the soak's sidecar exited (${status.code})`);
      }
    }
  } finally {
    await stop(procs);
  }
}
