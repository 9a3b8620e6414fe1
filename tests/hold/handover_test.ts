/**
 * The marker the acquiring role hands over, as pure arithmetic.
 *
 * @module
 */
import assert from "node:assert/strict";
import { handoffMarker } from "../../lib/hold/handover.ts";

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
