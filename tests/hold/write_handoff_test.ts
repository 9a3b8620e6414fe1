/**
 * The marker the acquiring role hands over, as pure arithmetic, and what a
 * hand-over that fails half-way leaves behind.
 *
 * @module
 */
import assert from "node:assert/strict";
import { handoffMarker, writeHandoff } from "../../lib/hold/write_handoff.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { StateDir } from "../../lib/state/state_dir.ts";
import { FakeClock } from "../support/fake_clock.ts";
import { ScriptedClient } from "../support/scripted_client.ts";

Deno.test("handoffMarker: runtime-singleton carries the acquisition's deadline and gate; startup-gate carries none", () => {
  assert.deepEqual(
    handoffMarker(
      { mode: "runtime-singleton", ttlSeconds: 8, enforceLeadMs: 4_000 },
      { sentAtBoot: 50_000, sentAtWall: 1_700_000_000_000 },
    ),
    {
      leaseDeadlineBootMs: 58_000,
      gateClosesBootMs: 54_000,
      leaseDeadlineWallMs: 1_700_000_008_000,
      gateClosesWallMs: 1_700_000_004_000,
    },
  );
  assert.deepEqual(
    handoffMarker(
      { mode: "runtime-singleton", ttlSeconds: 30, enforceLeadMs: 2_000 },
      { sentAtBoot: 1_234, sentAtWall: 2_000 },
    ),
    {
      leaseDeadlineBootMs: 31_234,
      gateClosesBootMs: 29_234,
      leaseDeadlineWallMs: 32_000,
      gateClosesWallMs: 30_000,
    },
  );
  assert.equal(
    handoffMarker(
      { mode: "startup-gate", ttlSeconds: 8, enforceLeadMs: 4_000 },
      { sentAtBoot: 50_000, sentAtWall: 1_700_000_000_000 },
    ),
    undefined,
  );
});

Deno.test("writeHandoff: a state volume that fails after the marker is written gets the marker removed before the lease is released", async () => {
  const dir = await Deno.makeTempDir({ prefix: "berth-handover-" });
  try {
    // The probe cannot be installed: a directory with content is in its place.
    await Deno.mkdir(`${dir}/check/sub`, { recursive: true });
    const clock = new FakeClock();
    const client = new ScriptedClient(() => clock.now());
    client.queue.push({ kind: "released" });
    const logs: string[] = [];
    const state = new StateDir(dir);
    const ok = await writeHandoff({
      state,
      config: {
        mode: "runtime-singleton",
        ttlSeconds: 30,
        enforceLeadMs: 4_000,
        holder: "prod/pod:web-0:uid:1",
        stateDir: dir,
      },
      lease: { token: 7, sentAt: 0, sentAtBoot: 0, sentAtWall: 0 },
      client,
      clock,
      logger: createLogger({ format: "json", write: (l) => logs.push(l) }),
      installCheck: () =>
        state.installCheck({ script: new TextEncoder().encode("#!/bin/sh\n") }),
    });
    assert.equal(ok, false);
    assert.equal(state.readMarkerDeadlines(), undefined, "no marker left");
    assert.deepEqual(
      client.calls.map((c) => [c.rpc, c.token]),
      [["release", 7]],
    );
    assert.ok(logs.some((l) => l.includes("cannot write the state volume")));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
