/**
 * Failover on simulated pods (sim/): from the holder's cut to the standby's
 * first journal line, as a multiple of the TTL; and the handover margins
 * (old workload's last line to the server-side expiry of its lease, and to
 * the new workload's first line). Printed as its own table: these are
 * times, not costs against a floor.
 *
 * @module
 */
import { FailoverDriver } from "../sim/failover.ts";
import { Lab } from "../sim/lab.ts";
import type { WEBHOOK_PROBE } from "../sim/liveness_probe.ts";
import { fmt, stats } from "./measure.ts";

/** Runs `o.rounds` blackhole failovers with the given settings and prints the table. */
export async function benchFailover(
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
