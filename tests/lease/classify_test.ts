// What a Renew answer means (classifyRenew), and a grant's age on the
// server's clock (grantAgeNs, parseTimeNs), as pure functions.
import assert from "node:assert/strict";
import {
  classifyRenew,
  grantAgeNs,
  type GrantOutcome,
  parseTimeNs,
} from "../../lib/lease/rpc.ts";
import { record } from "../support/scripted_client.ts";

const HOLDER = "prod/pod:web-0:uid:1";

Deno.test("classifyRenew: only a definite answer loses the lease; a failure to get one leaves it unconfirmed", () => {
  const cases: [GrantOutcome, string][] = [
    [{ kind: "acquired", lease: record(HOLDER, 4) }, "confirmed"],
    [{ kind: "acquired", lease: record(HOLDER, 5) }, "lost"],
    [{ kind: "not-acquired", lease: record("other", 5) }, "lost"],
    [{ kind: "conflict", message: "held" }, "lost"],
    [{ kind: "server-error", status: 500, message: "x" }, "unconfirmed"],
    [{ kind: "server-error", status: 401, message: "x" }, "unconfirmed"],
    [{ kind: "timeout", message: "slow" }, "unconfirmed"],
    [{ kind: "transport-error", message: "reset" }, "unconfirmed"],
    [{ kind: "aborted", message: "stop" }, "cancelled"],
  ];
  for (const [outcome, kind] of cases) {
    assert.equal(
      classifyRenew(outcome, 4, ME).kind,
      kind,
      JSON.stringify(outcome),
    );
  }
  const other = classifyRenew(
    { kind: "acquired", lease: record(HOLDER, 5) },
    4,
    ME,
  );
  assert.ok(other.kind === "lost");
  assert.match(other.reason, /fencing token 5, not the held 4/);
});

const ME = "prod/pod:web-0:uid:me";

Deno.test("a lost lease's summary carries no server text; the reason for the log does", () => {
  const refused = classifyRenew(
    {
      kind: "not-acquired",
      lease: record("prod/pod:web-1:uid:other", 5),
    },
    4,
    ME,
  );
  assert.ok(refused.kind === "lost");
  assert.equal(refused.summary, "the server refused the renewal");
  assert.match(refused.reason, /prod\/pod:web-1:uid:other/);
  assert.equal(refused.holder, "prod/pod:web-1:uid:other");
  assert.equal(
    refused.message,
    "renew reports lease held by another: lease lost",
  );
  const expired = classifyRenew(
    {
      kind: "not-acquired",
      lease: record("", 5),
    },
    4,
    ME,
  );
  assert.ok(expired.kind === "lost" && expired.holder === undefined);
  assert.match(expired.reason, /expired or was released, and nobody holds it/);
  // The server names this very holder: its own lease lapsed (renew started
  // more than a TTL after acquire); it is never "held by" itself.
  const lapsed = classifyRenew(
    {
      kind: "not-acquired",
      lease: record(ME, 4),
    },
    4,
    ME,
  );
  assert.ok(lapsed.kind === "lost" && lapsed.holder === undefined);
  assert.match(lapsed.reason, /this holder's lease expired/);
  assert.doesNotMatch(lapsed.reason, /held by/);
  const conflict = classifyRenew(
    {
      kind: "conflict",
      message: "lease held by another identity or token (echo: secret)",
    },
    4,
    ME,
  );
  assert.ok(conflict.kind === "lost" && !conflict.summary.includes("secret"));
  assert.equal(conflict.message, "renew conflict: lease lost");
});

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

Deno.test("grantAgeNs: a fresh grant is 0 to the nanosecond, an extension its age on the server's clock; unknown times say nothing", () => {
  const age = (acquiredAt: string, expiresAt: string) =>
    grantAgeNs(record(HOLDER, 1, { acquiredAt, expiresAt }), 10);
  const cases: [string, string, bigint | undefined][] = [
    ["2026-05-07T00:00:00Z", "2026-05-07T00:00:10Z", 0n],
    [
      "2026-05-07T00:00:00.123456789Z",
      "2026-05-07T00:00:10.123456789Z",
      0n,
    ],
    ["2026-05-07T05:30:00+05:30", "2026-05-07T00:00:10Z", 0n], // offsets
    ["2026-05-07T00:00:00Z", "2026-05-07T00:00:11Z", 1_000_000_000n],
    // A second process's Acquire 3 ms after the first.
    ["2026-05-07T00:00:00.000900Z", "2026-05-07T00:00:10.003900Z", 3_000_000n],
    // 1 ms apart, which millisecond parsing would hide (0.0009 -> 0, 0.0019 -> 1).
    ["2026-05-07T00:00:00.0009Z", "2026-05-07T00:00:10.0019Z", 1_000_000n],
    // A server that read its clock twice, microseconds apart.
    ["2026-05-07T00:00:00.000000Z", "2026-05-07T00:00:10.000999Z", 999_000n],
    ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z", undefined], // unset
    ["garbage", "2026-05-07T00:00:10Z", undefined],
    ["", "2026-05-07T00:00:10Z", undefined],
  ];
  for (const [acquiredAt, expiresAt, want] of cases) {
    assert.equal(age(acquiredAt, expiresAt), want, acquiredAt);
  }
});
