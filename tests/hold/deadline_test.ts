// Deadline arithmetic and outcome classification, as pure functions.
import assert from "node:assert/strict";
import {
  classifyRenew,
  extendedExistingGrant,
  EXTENSION_MIN_GAP_NS,
  parseTimeNs,
} from "../../lib/hold/deadline.ts";
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

Deno.test("a lost lease's summary carries no server text; the reason for the log does", () => {
  const refused = classifyRenew({
    kind: "not-acquired",
    lease: record("prod/pod:web-1:uid:other", 5),
  }, 4);
  assert.equal(refused.kind, "lost");
  if (refused.kind !== "lost") return;
  assert.equal(refused.summary, "the server refused the renewal");
  assert.match(refused.reason, /prod\/pod:web-1:uid:other/);
  const conflict = classifyRenew({
    kind: "conflict",
    message: "lease held by another identity or token (echo: secret)",
  }, 4);
  assert.ok(conflict.kind === "lost" && !conflict.summary.includes("secret"));
});
