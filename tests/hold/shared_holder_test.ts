// Telling our own grant from another process's under one holder identity, on the server's clock.
import assert from "node:assert/strict";
import {
  couldBeOurGrant,
  extendedExistingGrant,
  EXTENSION_MIN_GAP_NS,
  mayHaveBeenGranted,
  parseTimeNs,
  PossibleGrant,
} from "../../lib/hold/shared_holder.ts";
import { record } from "../support/scripted_client.ts";

Deno.test("parseTimeNs keeps all nine fractional digits and honours offsets", () => {
  assert.equal(parseTimeNs("1970-01-01T00:00:01.5Z"), 1_500_000_000n);
  assert.equal(
    parseTimeNs("2026-05-07T00:00:00.123456789Z")! -
      parseTimeNs("2026-05-07T00:00:00Z")!,
    123_456_789n,
  );
  assert.equal(
    parseTimeNs("2026-05-07T05:30:00.000000001+05:30"),
    parseTimeNs("2026-05-07T00:00:00.000000001Z"),
  );
  assert.equal(
    parseTimeNs("2026-05-07t00:00:00z"),
    parseTimeNs("2026-05-07T00:00:00Z"),
  );
  for (
    const bad of [
      "",
      "garbage",
      "2026-05-07T00:00:00",
      "2026-05-07T00:00:00.1234567890Z",
    ]
  ) {
    assert.equal(parseTimeNs(bad), undefined, bad);
  }
});

Deno.test("a second process's Acquire a few milliseconds after the first is seen as an extension, not a grant", () => {
  const at = (acquiredAt: string, expiresAt: string) =>
    extendedExistingGrant(
      record("prod/shared", 1, { acquiredAt, expiresAt }),
      10,
    );
  // 3 ms apart (the old 5 ms tolerance let both processes run).
  assert.equal(
    at("2026-05-07T00:00:00.000900Z", "2026-05-07T00:00:10.003900Z"),
    true,
  );
  // 1 ms apart, hidden by millisecond parsing (0.0009 -> 0, 0.0019 -> 1).
  assert.equal(
    at("2026-05-07T00:00:00.0009Z", "2026-05-07T00:00:10.0019Z"),
    true,
  );
  // A fresh grant: the same instant, to the nanosecond.
  assert.equal(
    at("2026-05-07T00:00:00.123456789Z", "2026-05-07T00:00:10.123456789Z"),
    false,
  );
  // A server that read its clock twice, microseconds apart: still fresh.
  assert.equal(
    at("2026-05-07T00:00:00.000000Z", "2026-05-07T00:00:10.000999Z"),
    false,
  );
  assert.equal(EXTENSION_MIN_GAP_NS, 1_000_000n);
});

/** An extension answer whose grant is `ageMs` old when this answer renewed it (TTL 10 s). */
function extension(ageMs: number) {
  const renewedAt = Date.parse("2026-05-07T00:01:00Z");
  return record("prod/pod:web-0:uid:1", 7, {
    acquiredAt: new Date(renewedAt - ageMs).toISOString(),
    expiresAt: new Date(renewedAt + 10_000).toISOString(),
  });
}

Deno.test("couldBeOurGrant: a grant no older than our asking (with 1 % and 50 ms) may be ours; an older one is not", () => {
  // Asked at 1000, answer read at 3000: 2 s on our clock.
  assert.equal(couldBeOurGrant(extension(2_000), 10, 1_000, 3_000), true);
  assert.equal(couldBeOurGrant(extension(2_069), 10, 1_000, 3_000), true);
  assert.equal(couldBeOurGrant(extension(2_071), 10, 1_000, 3_000), false);
  // Unknown times (an old server): nothing to tell them apart by.
  const unknown = record("prod/pod:web-0:uid:1", 7, { acquiredAt: "" });
  assert.equal(couldBeOurGrant(unknown, 10, 1_000, 3_000), true);
});

Deno.test("PossibleGrant explains an extension only after a lost answer, from the first such ask, while such a grant can be alive", () => {
  const p = new PossibleGrant(10);
  assert.equal(p.explains(extension(500), 2_000, 2_100), false, "no ask yet");
  p.asked(1_000, 1_000); // a timeout: granted by 2000 or never
  p.asked(2_000, 1_000); // another: the first ask still counts
  assert.equal(p.explains(extension(1_500), 3_000, 3_100), true);
  assert.equal(p.explains(extension(5_000), 3_000, 3_100), false, "older");
  // Unrenewed, the last possible grant expired one TTL after its bound.
  assert.equal(p.explains(extension(500), 13_001, 13_100), false, "expired");
  // A new ask after that starts afresh: counted from 20000, not 1000.
  p.asked(20_000, 1_000);
  assert.equal(p.explains(extension(1_500), 21_000, 21_400), false);
  assert.equal(p.explains(extension(1_500), 21_000, 21_500), true);
  p.clear();
  assert.equal(p.explains(extension(100), 21_000, 21_500), false, "cleared");
});

Deno.test("mayHaveBeenGranted: no answer or an unusable one may hide a grant; a refusal does not", () => {
  assert.equal(mayHaveBeenGranted({ kind: "timeout", message: "t" }), true);
  assert.equal(
    mayHaveBeenGranted({ kind: "transport-error", message: "reset" }),
    true,
  );
  assert.equal(
    mayHaveBeenGranted({
      kind: "server-error",
      status: 503,
      message: "unavailable",
      requestId: "r",
    }),
    true,
  );
  assert.equal(
    mayHaveBeenGranted({
      kind: "server-error",
      status: 401,
      message: "unauthorized",
      requestId: "r",
    }),
    false,
  );
  assert.equal(mayHaveBeenGranted({ kind: "aborted", message: "stop" }), false);
});
