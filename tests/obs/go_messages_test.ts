/**
 * The Go helper's log messages, as its contract lists them: operators alert
 * on these texts, so the table `acquire` and `renew` log from must hold each
 * one, word for word.
 *
 * @module
 */
import assert from "node:assert/strict";
import { GO_MESSAGES } from "../../lib/obs/go_messages.ts";

/** The contract's list (the Go helper's `msg` texts), by level. */
const CONTRACT = {
  INFO: [
    "lease acquired",
    "lease held by another, waiting",
    "sidecar starting",
    "lease reacquired; main container released",
    "waiting to reacquire",
    "released lease on shutdown",
    "release on shutdown skipped: lease already held by another (conflict)",
    "sidecar shutting down without release",
    "sent SIGTERM to main process",
    "sent SIGKILL to main process",
  ],
  DEBUG: ["lease renewed"],
  WARN: [
    "acquire failed, retrying",
    "renew failed; still within lease TTL, will retry",
    "renew failing past lease expiry; enforcing",
    "renew conflict: lease lost",
    "renew reports lease held by another: lease lost",
    "local lease deadline reached; enforcing",
    "renew response arrived after its local deadline; enforcing",
    "acquire response arrived after its local deadline; remaining gated",
    "reacquire failed",
    "persist reacquired state failed",
    "enforce on lease loss failed",
    "re-enforce while gated failed",
    "enforcer release failed",
    "best-effort release on shutdown failed",
    "SIGTERM failed",
    "SIGKILL failed",
    "no matching lease handoff; gating before acquiring as the configured holder",
  ],
  ERROR: ["berth-acquire failed"],
};

Deno.test("the Go helper's messages: the table holds every one of the contract's, and nothing else", () => {
  assert.deepEqual(
    Object.values(GO_MESSAGES).sort(),
    Object.values(CONTRACT).flat().sort(),
  );
});
