import assert from "node:assert/strict";
import { ProbeEnforcer } from "../../lib/enforce/enforcer.ts";
import { createLogger } from "../../lib/obs/log.ts";
import type { MarkerDeadlines } from "../../lib/state/marker.ts";
import { FakeMarker } from "../support/fake_marker.ts";

const DEADLINES: MarkerDeadlines = {
  gateClosesBootMs: 51_000_000,
  leaseDeadlineBootMs: 51_005_000,
};

interface LogRecord {
  level: string;
  msg: string;
  [k: string]: unknown;
}

Deno.test("probe: close() removes the marker, open() rewrites it, a missing marker is fine", async () => {
  const journal: string[] = [];
  const marker = new FakeMarker(journal);
  const records: LogRecord[] = [];
  const enforcer = new ProbeEnforcer({
    marker,
    logger: createLogger({
      format: "json",
      write: (l) => records.push(JSON.parse(l)),
    }),
  });
  await enforcer.close("lease lost");
  assert.equal(marker.present, false);
  await enforcer.close("lease lost");
  await enforcer.open(DEADLINES);
  assert.equal(marker.present, true);
  assert.deepEqual(marker.written, [DEADLINES]);
  assert.deepEqual(journal, [
    "marker remove",
    "marker remove",
    "marker write",
  ]);
  assert.equal((await enforcer.workloadStopped()).markerLeft, undefined);
  marker.failRemove = true;
  await enforcer.close("lease lost"); // reported, not thrown
  assert.equal(
    records.filter((r) =>
      r.level === "WARN" && r.msg === "enforce on lease loss failed"
    ).length,
    1,
  );
  const evidence = await enforcer.workloadStopped();
  assert.equal(evidence.stopped, false, "probe mode never knows");
  assert.equal(evidence.markerLeft, true, "the probe may still pass");
  marker.failRemove = false;
  await enforcer.close("lease lost");
  assert.equal((await enforcer.workloadStopped()).markerLeft, undefined);
  await enforcer.dispose();
});
