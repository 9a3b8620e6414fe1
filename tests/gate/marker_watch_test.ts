/**
 * `gate`'s watch of its command, the pure part: how far a stop's grace is
 * cut so that the command is gone before the lease deadline. The watch
 * itself runs in `tests/gate/gate_loop_process_test.ts`, with a real command.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  LEASE_MARGIN_MS,
  shortenedGraceMs,
} from "../../lib/gate/marker_watch.ts";

Deno.test("shortenedGraceMs: a grace that would outlast the lease deadline is cut to end LEASE_MARGIN_MS before it, never below 0", () => {
  assert.equal(shortenedGraceMs(1_000, 10_000), undefined);
  assert.equal(shortenedGraceMs(1_000, 1_000 + LEASE_MARGIN_MS), undefined);
  assert.equal(shortenedGraceMs(1_000, 900.5 + LEASE_MARGIN_MS), 900);
  assert.equal(shortenedGraceMs(1_000, 0), 0);
  // A zero grace past the deadline is still a cut (the loop warns of it).
  assert.equal(shortenedGraceMs(0, 0), 0);
});
