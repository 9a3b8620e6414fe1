// The attempt recorder on its own, with a fake clock: which grants are
// another process's under the same holder identity (by the server's times),
// which unanswered Acquires may explain an extension, and the rejection and
// outage lines said once a minute.
import assert from "node:assert/strict";
import {
  type Attempt,
  Attempts,
  OUTAGE_MESSAGE,
  REJECTION_MESSAGE,
  REPEAT_ERROR_MS,
  SHARED_HOLDER_MESSAGE,
  UNUSABLE_SERVER_MESSAGE,
} from "../../lib/hold/attempts.ts";
import type { GrantOutcome, LeaseFailure } from "../../lib/lease/rpc.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { GO_MESSAGES as GO } from "../../lib/obs/go_messages.ts";
import { FakeClock } from "../support/fake_clock.ts";
import { record } from "../support/scripted_client.ts";

const HOLDER = "prod/pod:web-0:uid:1111";
const TTL = 10;
const BOUND = 1_000;

// deno-lint-ignore no-explicit-any
type Line = Record<string, any>;

function recorder(guardSharedHolder = true) {
  const clock = new FakeClock();
  const t0 = clock.now();
  const lines: Line[] = [];
  let own = 0;
  const a = new Attempts({
    ownToken: () => own,
    ttlSeconds: TTL,
    clock,
    logger: createLogger({
      level: "DEBUG",
      format: "json",
      write: (l) => lines.push(JSON.parse(l)),
    }),
    guardSharedHolder,
    boundMs: BOUND,
    lines: { held: GO.waitingToReacquire, failed: GO.reacquireFailed },
  });
  /** Records `outcome` for an Acquire sent at t0 + `sent`, read at t0 + `read` (default: the send). */
  const at = (sent: number, outcome: GrantOutcome, read = sent, token = 0) => {
    clock.jumpTo(t0 + read);
    own = token;
    return a.record(outcome, t0 + sent, BOUND);
  };
  return { clock, t0, lines, a, at };
}

const grant = (acquiredAt: string, expiresAt: string): GrantOutcome => ({
  kind: "acquired",
  lease: record(HOLDER, 7, { acquiredAt, expiresAt }),
});

/** A grant `ageMs` old (on the server's clock) when this answer renewed it. */
function aged(ageMs: number, token = 7): GrantOutcome {
  const renewedAt = Date.parse("2026-05-07T00:01:00Z");
  return {
    kind: "acquired",
    lease: record(HOLDER, token, {
      acquiredAt: new Date(renewedAt - ageMs).toISOString(),
      expiresAt: new Date(renewedAt + TTL * 1000).toISOString(),
    }),
  };
}

const timeout: GrantOutcome = { kind: "timeout", message: "no answer" };
const refused = (status: number, requestId?: string): LeaseFailure => ({
  kind: "server-error",
  status,
  message: "unauthorized",
  requestId,
});
const held = (holder = "other", token = 3): GrantOutcome => ({
  kind: "not-acquired",
  lease: record(holder, token),
});

Deno.test("a grant that extends an older one under this identity is another process's, on the server's times; the guard is off where the identity is this process's own", () => {
  const cases: [string, GrantOutcome, Attempt["kind"]][] = [
    ["fresh", aged(0), "granted"],
    ["5 minutes old", aged(300_000), "shared"],
    [
      "3 ms old",
      grant("2026-05-07T00:00:00.000900Z", "2026-05-07T00:00:10.003900Z"),
      "shared",
    ],
    [
      "1 ms old, hidden by millisecond parsing",
      grant("2026-05-07T00:00:00.0009Z", "2026-05-07T00:00:10.0019Z"),
      "shared",
    ],
    [
      "microseconds: a server that read its clock twice",
      grant("2026-05-07T00:00:00.000000Z", "2026-05-07T00:00:10.000999Z"),
      "granted",
    ],
    ["unknown times (an old server)", grant("", ""), "granted"],
  ];
  for (const [name, outcome, kind] of cases) {
    const r = recorder();
    const got = r.at(0, outcome);
    assert.equal(got.kind, kind, name);
    const warns = r.lines.filter((l) => l.msg === SHARED_HOLDER_MESSAGE);
    assert.equal(warns.length, kind === "shared" ? 1 : 0, name);
    if (got.kind === "shared") {
      // Unless its holder renews it, it expires within a TTL and a second.
      assert.equal(got.quietMs, TTL * 1000 + 1000);
      assert.equal(warns[0].level, "WARN");
      assert.equal(warns[0].current_fencing_token, 7);
      assert.ok(warns[0].acquired_at);
    }
    if (got.kind === "granted") assert.equal(got.token, 7);
    // Without the guard (startup-gate, the sidecar's derived holder), any grant is admission.
    const open = recorder(false);
    assert.equal(open.at(0, outcome).kind, "granted", name);
    assert.equal(open.lines.length, 0);
  }
});

Deno.test("an extension of the token this process holds is its own", () => {
  assert.equal(recorder().at(0, aged(5_000), 0, 7).kind, "granted");
  assert.equal(recorder().at(0, aged(5_000), 0, 6).kind, "shared");
});

Deno.test("unanswered Acquires explain an extension no older than the first of them (with 1 % and 50 ms), while such a grant can be alive", () => {
  const cases: [
    string,
    [number, GrantOutcome | "settled"][],
    Attempt["kind"],
  ][] = [
    ["no ask yet", [[2_000, aged(500)]], "shared"],
    ["younger than the first ask", [
      [1_000, timeout],
      [2_000, timeout], // another: the first ask still counts
      [3_100, aged(1_500)],
    ], "granted"],
    ["older than the first ask", [
      [1_000, timeout],
      [2_000, timeout],
      [3_100, aged(5_000)],
    ], "shared"],
    ["within the slack", [[1_000, timeout], [3_000, aged(2_069)]], "granted"],
    ["past the slack", [[1_000, timeout], [3_000, aged(2_071)]], "shared"],
    // Unrenewed, the last possible grant expired a TTL after its bound: 2000 + 1000 + 10000.
    ["expired", [
      [1_000, timeout],
      [2_000, timeout],
      [13_001, aged(500)],
    ], "shared"],
    // A new ask after that starts afresh: counted from 20000, not 1000.
    ["afresh, older", [
      [1_000, timeout],
      [2_000, timeout],
      [20_000, timeout],
      [21_400, aged(1_500)],
    ], "shared"],
    ["afresh, younger", [
      [1_000, timeout],
      [2_000, timeout],
      [20_000, timeout],
      [21_500, aged(1_500)],
    ], "granted"],
    ["cleared by a holder's answer", [
      [1_000, timeout],
      [1_500, held()],
      [2_000, aged(100)],
    ], "shared"],
    // A grant too late to use is confirmed again: its asks still count.
    ["kept past a grant", [
      [1_000, timeout],
      [1_500, aged(0)],
      [2_000, aged(100)],
    ], "granted"],
    ["cleared once the lease is settled", [
      [1_000, timeout],
      [1_500, "settled"],
      [2_000, aged(100)],
    ], "shared"],
  ];
  for (const [name, steps, kind] of cases) {
    const r = recorder();
    let last: Attempt | undefined;
    for (const [t, outcome] of steps) {
      if (outcome === "settled") r.a.forget();
      else last = r.at(t, outcome);
    }
    assert.equal(last?.kind, kind, name);
  }
});

Deno.test("no answer, or one that cannot be read, may hide a grant; a refusal or a cancelled request does not", () => {
  const cases: [LeaseFailure, boolean][] = [
    [{ kind: "timeout", message: "t" }, true],
    [{ kind: "transport-error", message: "reset" }, true],
    [{ kind: "bad-response", status: 200, message: "not JSON" }, true],
    [{ kind: "server-error", status: 503, message: "x", requestId: "r" }, true],
    [{ kind: "server-error", status: 500, message: "x" }, true],
    [
      { kind: "server-error", status: 401, message: "x", requestId: "r" },
      false,
    ],
    [{ kind: "conflict", message: "409" }, false],
    [{ kind: "aborted", message: "stop" }, false],
  ];
  for (const [failure, may] of cases) {
    const r = recorder();
    const first = r.at(0, failure);
    assert.equal(
      first.kind,
      failure.kind === "aborted" ? "cancelled" : "failed",
    );
    assert.equal(
      r.at(1_000, aged(500)).kind,
      may ? "granted" : "shared",
      JSON.stringify(failure),
    );
  }
  // A cancelled request says nothing.
  const r = recorder();
  r.at(0, { kind: "aborted", message: "stop" });
  assert.deepEqual(r.lines, []);
});

Deno.test("a holder's answer is the Go helper's INFO line at every attempt, with who holds it, until when, and the next try", () => {
  const r = recorder();
  for (let i = 0; i < 4; i++) {
    assert.equal(r.at(i * BOUND, held()).kind, "held");
  }
  assert.equal(r.lines.length, 4);
  for (const l of r.lines) {
    assert.equal(l.level, "INFO");
    assert.equal(l.msg, GO.waitingToReacquire);
    assert.equal(l.current_holder, "other");
    assert.equal(l.current_fencing_token, 3);
    assert.equal(l.expires_at, record("other", 3).expiresAt);
    assert.equal(l.retry_in_ms, BOUND);
  }
});

Deno.test("a rejection no wait heals is an ERROR at once, then one line a minute counting those between, each request's own id aside", () => {
  const r = recorder();
  let id = 0;
  // Every answer has its own request id, as every request has.
  const rejected = (status: number) => refused(status, `req-${++id}`);
  const errors = () => r.lines.filter((l) => l.level === "ERROR");
  r.a.rejected(rejected(401), 1_000);
  assert.equal(errors().length, 1);
  assert.equal(errors()[0].msg, REJECTION_MESSAGE);
  assert.match(errors()[0].error, /401.*request id req-1/);
  assert.equal(errors()[0].retry_in_ms, 1_000);
  assert.equal(errors()[0].rejected_since_last_line, undefined);
  for (const ms of [1_000, 30_000, REPEAT_ERROR_MS - 1]) {
    r.clock.jumpTo(r.t0 + ms);
    r.a.rejected(rejected(401), 1_000);
  }
  assert.equal(errors().length, 1, "one line within the minute");
  r.clock.jumpTo(r.t0 + REPEAT_ERROR_MS);
  r.a.rejected(rejected(401), 1_000);
  assert.equal(errors().length, 2);
  assert.equal(errors()[1].rejected_since_last_line, 3);
  // Another rejection is news, at once.
  r.a.rejected(rejected(403), 1_000);
  assert.equal(errors().length, 3);
  assert.match(errors()[2].error, /403/);
  // So is the same one after any other answer (`forget`).
  r.a.forget();
  r.a.rejected(rejected(403), 1_000);
  assert.equal(errors().length, 4);
  assert.equal(errors()[3].rejected_since_last_line, undefined);
  // A failure that names its fix says the fix.
  const fix = "use http:// in --api-server / BERTH_API_SERVER";
  r.a.rejected({ kind: "transport-error", message: "TLS", fix }, 1_000);
  assert.equal(errors()[4].msg, UNUSABLE_SERVER_MESSAGE);
  assert.equal(errors()[4].fix, fix);
});

Deno.test("record says a rejection (400, 401, 403, 404, or a fix) with Go's WARN and the ERROR line; a 500 only with the WARN", () => {
  const fix = "use http:// in --api-server / BERTH_API_SERVER";
  const cases: [LeaseFailure, string[]][] = [
    ...[400, 401, 403, 404].map((status): [LeaseFailure, string[]] => [
      refused(status),
      [`WARN ${GO.reacquireFailed}`, `ERROR ${REJECTION_MESSAGE}`],
    ]),
    [
      { kind: "transport-error", message: "TLS", fix },
      [`WARN ${GO.reacquireFailed}`, `ERROR ${UNUSABLE_SERVER_MESSAGE}`],
    ],
    [
      { kind: "server-error", status: 500, message: "internal" },
      [`WARN ${GO.reacquireFailed}`],
    ],
  ];
  for (const [failure, said] of cases) {
    const r = recorder();
    assert.equal(r.at(0, failure).kind, "failed");
    assert.deepEqual(r.lines.map((l) => `${l.level} ${l.msg}`), said);
    assert.equal(r.lines[0].fix, "fix" in failure ? fix : undefined);
    assert.equal(r.lines[0].retry_in_ms, BOUND);
    assert.equal(r.lines[0].failing_for, "0s");
  }
});

Deno.test("a server that does not answer is said with the time waited in each line, and an ERROR each minute once past a minute; an answer ends the outage", () => {
  const down: GrantOutcome = {
    kind: "transport-error",
    message: "http://127.0.0.1:8080: connection refused",
  };
  const r = recorder();
  // One attempt every 5 s for 3.5 minutes.
  for (let i = 0; i <= 42; i++) r.at(i * 5_000, down);
  const warns = r.lines.filter((l) => l.msg === GO.reacquireFailed);
  assert.equal(warns.length, 43);
  assert.equal(warns[0].failing_for, "0s");
  assert.ok(warns.some((w) => w.failing_for === "1m0s"));
  const errors = r.lines.filter((l) => l.level === "ERROR");
  assert.deepEqual(
    errors.map((e) => e.failing_for),
    ["1m0s", "2m0s", "3m0s"],
    "one ERROR a minute once past a minute",
  );
  assert.equal(errors[0].msg, OUTAGE_MESSAGE);
  assert.match(errors[0].error, /connection refused/);
  // An answer ends the outage: the next failure starts from 0s again.
  r.at(215_000, held());
  r.at(220_000, down);
  assert.equal(r.lines.at(-1)!.failing_for, "0s");
  // A rejection that goes on has its own ERROR line, not the outage's.
  const rejected = recorder();
  for (let i = 0; i <= 30; i++) {
    rejected.at(i * 5_000, refused(401));
  }
  assert.ok(!rejected.lines.some((l) => l.msg === OUTAGE_MESSAGE));
  assert.equal(rejected.lines.at(-1)!.failing_for, "2m30s");
});
