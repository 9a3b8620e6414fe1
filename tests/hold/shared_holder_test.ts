// Telling our own grant from another process's under one holder identity, on the server's clock.
import assert from "node:assert/strict";
import {
  extendedExistingGrant,
  EXTENSION_MIN_GAP_NS,
  parseTimeNs,
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
