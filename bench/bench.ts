/**
 * `deno task bench`: what the helper costs and how fast it fails over. Every
 * cost is printed next to a floor measured in the same run on the same
 * machine, as a ratio, with the number of runs behind it; the end of the
 * output is one markdown table ready for docs/benchmarks.md. Not pass/fail: the
 * issue's targets are printed beside the ratios.
 *
 * - `check` (the exec liveness probe, every 2 s in the workload's
 *   container): wall, peak RSS and CPU per exec against the empty program
 *   behind the same wrapper; its cost per container per hour next to the
 *   `httpGet` `/healthz` probe's.
 * - `acquire`, uncontended, start to exit, over HTTP, HTTPS with a CA
 *   bundle, and HTTPS with the server-name override, against the empty
 *   program and against one bare `fetch` of the same request.
 * - the sidecar over each transport at heartbeat 10 s and 1 s: CPU per hour
 *   (after a warm-up, whose CPU is a row of its own) and RSS against the
 *   minimal renewing program (bench/floors.ts), and CPU per renewal over
 *   HTTPS against HTTP.
 * - failover on simulated pods (bench/failover.ts).
 *
 * Flags: `--quick` (a few runs and a short window: minutes, for a smoke
 * run); `--soak [N]` (only the soak: RSS from the first to the Nth renewal
 * at heartbeat 1 s over HTTPS, default 10000, about 2.8 h); `--no-failover`.
 *
 * @module
 */
import { WEBHOOK_PROBE } from "../sim/liveness_probe.ts";
import { benchFailover } from "./failover.ts";
import { writeFloors } from "./floors.ts";
import { Report } from "./measure.ts";
import { benchAcquire, benchCheck, benchHealth } from "./probes.ts";
import { benchProbeCopy } from "./probe_copy.ts";
import { benchSidecars, benchSoak } from "./sidecar.ts";
import { Servers } from "./setup.ts";

/** The parsed command line. */
interface BenchArgs {
  quick: boolean;
  soak: number | undefined;
  failover: boolean;
}

function parseBenchArgs(args: string[]): BenchArgs {
  const out: BenchArgs = { quick: false, soak: undefined, failover: true };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--") continue; // `deno task bench -- --quick` passes it on
    if (a === "--quick") out.quick = true;
    else if (a === "--no-failover") out.failover = false;
    else if (a === "--soak") {
      const n = /^\d+$/.test(args[i + 1] ?? "") ? Number(args[++i]) : 10_000;
      if (n < 1) throw new Error("--soak needs a positive number of renewals");
      out.soak = n;
    } else {
      throw new Error(
        `unknown argument ${
          JSON.stringify(a)
        }; use --quick, --soak [N], --no-failover`,
      );
    }
  }
  return out;
}

if (import.meta.main) {
  let args: BenchArgs;
  try {
    args = parseBenchArgs(Deno.args);
  } catch (e) {
    console.error(`bench: ${(e as Error).message}`);
    Deno.exit(1);
  }
  const dir = await Deno.makeTempDir({ prefix: "berth-bench-" });
  const report = new Report();
  const mode = args.soak !== undefined
    ? `soak of ${args.soak} renewals`
    : args.quick
    ? "quick"
    : "full";
  const title =
    `berth-acquire benchmarks (${mode} run), deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} CPUs, running from source (\`deno run\`)`;
  try {
    console.log(`# ${title}\n`);
    const floors = await writeFloors(dir);
    await using servers = await Servers.create();
    const sidecarOptions = {
      dir,
      servers,
      floorScript: floors.renew,
      warmupS: args.quick ? 30 : 60,
      windowS: args.quick ? 30 : 120,
      report,
    };
    if (args.soak !== undefined) {
      await benchSoak(sidecarOptions, args.soak);
    } else {
      console.log("## check (exec probe)");
      await benchCheck(dir, floors.empty, args.quick ? 8 : 30, report);
      console.log("## the probe's copy for any main image");
      await benchProbeCopy(args.quick ? 8 : 30, report);
      console.log("## httpGet /healthz");
      await benchHealth(
        dir,
        servers,
        floors.health,
        args.quick ? 500 : 2000,
        report,
      );
      console.log("## acquire");
      await benchAcquire(
        dir,
        servers,
        floors,
        args.quick ? 4 : 10,
        report,
      );
      console.log(
        `## sidecars, ${sidecarOptions.warmupS} s warm-up, then a ${sidecarOptions.windowS} s window (all side by side)`,
      );
      await benchSidecars(sidecarOptions);
      if (args.failover) {
        await benchFailover(
          "TTL 6 s, heartbeat 1 s, probe every 1 s, lead 3 s",
          {
            ttl: 6,
            heartbeat: 1,
            lead: 3,
            probe: {
              periodMs: 1000,
              timeoutMs: 1000,
              terminationGraceMs: 1000,
            },
            rounds: args.quick ? 2 : 5,
          },
        );
        await benchFailover(
          "TTL 12 s, default heartbeat 4 s, the webhook's probe (2 s), default lead 4 s",
          { ttl: 12, probe: WEBHOOK_PROBE, rounds: args.quick ? 1 : 3 },
        );
      }
    }
    console.log(`\n## Summary: ${title}\n`);
    console.log(report.markdown());
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  // Pending bounds (AbortSignal.timeout) would keep the process alive.
  Deno.exit(0);
}
