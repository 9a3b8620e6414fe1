/**
 * The acquire loop (the init container's and `run`'s), driven by a fake
 * clock and a scripted server: every instant asserted here is exact.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  type AcquiredLease,
  acquireLease,
  type AcquireOptions,
  type AcquireResult,
} from "../../lib/hold/acquire.ts";
import {
  OUTAGE_MESSAGE,
  REPEAT_ERROR_MS,
  SHARED_HOLDER_MESSAGE,
  UNUSABLE_SERVER_MESSAGE,
} from "../../lib/hold/attempts.ts";
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  type GrantOutcome,
} from "../../lib/lease/rpc.ts";
import {
  createLogger,
  type LogFields,
  type Logger,
} from "../../lib/obs/log.ts";
import { FakeClock, settle } from "../support/fake_clock.ts";
import {
  record,
  type ScriptedCall,
  ScriptedClient,
} from "../support/scripted_client.ts";

const HOLDER = "prod/pod:web-0:uid:1111";
const OTHER = "prod/pod:web-1:uid:2222";
const HB = 3_000;

interface LogRecord {
  level: string;
  msg: string;
  fields: LogFields;
}

function recordingLogger(into: LogRecord[]): Logger {
  const make = (base: LogFields): Logger => {
    const at = (level: string) => (msg: string, fields?: LogFields) =>
      into.push({ level, msg, fields: { ...base, ...fields } });
    return {
      debug: at("DEBUG"),
      info: at("INFO"),
      warn: at("WARN"),
      error: at("ERROR"),
      with: (f) => make({ ...base, ...f }),
    };
  };
  return make({});
}

const acquired = (token: number): GrantOutcome => ({
  kind: "acquired",
  lease: record(HOLDER, token),
});
const held = (token: number): GrantOutcome => ({
  kind: "not-acquired",
  lease: record(OTHER, token),
});
const broken: GrantOutcome = {
  kind: "server-error",
  status: 500,
  message: "internal error",
  requestId: "r1",
};

/** One acquire loop under test, with its clock, server and log. */
function setup(over: Partial<AcquireOptions> = {}) {
  const clock = new FakeClock();
  const client = new ScriptedClient(() => clock.now());
  const logs: LogRecord[] = [];
  const stop = new AbortController();
  let result: AcquiredLease | undefined | "pending" = "pending";
  let ended: AcquireResult | undefined;
  const done = acquireLease({
    client,
    holder: HOLDER,
    ttlSeconds: 10,
    heartbeatMs: HB,
    enforceLeadMs: 0,
    guardSharedHolder: true,
    signal: stop.signal,
    clock,
    logger: recordingLogger(logs),
    random: () => 0.5,
    ...over,
  }).then((r) => {
    ended = r;
    result = r.lease;
  });
  return {
    clock,
    client,
    logs,
    stop,
    done,
    result: () => result,
    ended: () => ended,
    /** The call in flight; fails when there is none. */
    async pending(): Promise<ScriptedCall> {
      await settle();
      const c = client.pending();
      assert.ok(c, "a request is in flight");
      return c;
    },
    /** Asserts the next request goes out exactly `gap` ms after the previous one was sent. */
    async expectNextAfter(gap: number): Promise<ScriptedCall> {
      await settle();
      const prev = client.calls.at(-1)!;
      const n = client.calls.length;
      await clock.advanceTo(prev.at! + gap - 1);
      assert.equal(client.calls.length, n, `no request before ${gap} ms`);
      await clock.advanceTo(prev.at! + gap);
      assert.equal(client.calls.length, n + 1, `a request at ${gap} ms`);
      return client.calls.at(-1)!;
    },
    /** Answers 401s (which settle nothing and extend nothing) at each heartbeat until `until`. */
    async rejectUntil(until: number): Promise<void> {
      while (clock.now() < until) {
        await clock.advanceTo(clock.now() + HB);
        (await this.pending()).answer({
          kind: "server-error",
          status: 401,
          message: "unauthorized",
        });
      }
      await clock.advanceTo(clock.now() + HB);
    },
    /** Asserts the last answer was taken for another process's lease, then stops. */
    async notAdmitted(): Promise<void> {
      await clock.advance(1);
      assert.ok(
        logs.some((l) => l.msg === SHARED_HOLDER_MESSAGE),
        JSON.stringify(logs.map((l) => l.msg)),
      );
      assert.equal(result, "pending", "not admitted");
      stop.abort();
      await done;
    },
  };
}

Deno.test("acquireLease polls a lease held by another at the heartbeat, logging the holder, and returns the winning request's send times", async () => {
  const t = setup();
  const first = await t.pending();
  first.answer(held(4));
  const second = await t.expectNextAfter(HB);
  second.answer(held(4));
  const third = await t.expectNextAfter(HB);
  third.answer(acquired(5));
  await t.done;
  assert.deepEqual(t.result(), {
    token: 5,
    sentAt: third.at,
    sentAtBoot: third.at! + 50_000_000,
    sentAtWall: third.at! + 1_700_000_000_000,
  });
  const waits = t.logs.filter((l) => l.msg.includes("held by another"));
  assert.equal(waits.length, 2);
  assert.equal(waits[0].level, "INFO");
  assert.equal(waits[0].fields.current_holder, OTHER);
  assert.equal(waits[0].fields.current_fencing_token, 4);
  assert.ok(t.client.calls.every((c) => c.rpc === "acquire"));
  assert.ok(
    t.client.calls.every((c) => c.ttlSeconds === 10 && c.holder === HOLDER),
  );
});

Deno.test("acquireLease backs off on errors from 0.5 s, doubling up to the heartbeat, with jitter; a held answer resets it", async () => {
  // random 0.5 -> each wait is 0.75 of the current back-off.
  const t = setup();
  (await t.pending()).answer(broken);
  for (const gap of [375, 750, 1_500, 2_250, 2_250]) {
    (await t.expectNextAfter(gap)).answer(broken);
  }
  const afterErrors = await t.expectNextAfter(2_250);
  afterErrors.answer(held(7));
  (await t.expectNextAfter(HB)).answer(broken);
  (await t.expectNextAfter(375)).answer(acquired(8));
  await t.done;
  assert.equal((t.result() as AcquiredLease).token, 8);
  const warn = t.logs.find((l) => l.level === "WARN");
  assert.equal(warn?.msg, "acquire failed, retrying");
  assert.match(String(warn?.fields.error), /500.*internal error.*r1/);
  assert.equal(warn?.fields.retry_in_ms, 375);
});

Deno.test("acquireLease jitters error waits between half and all of the back-off", async () => {
  for (const [r, first] of [[0, 250], [0.999, 499.75]] as const) {
    const t = setup({ random: () => r });
    (await t.pending()).answer(broken);
    const next = await t.expectNextAfter(first);
    next.answer(acquired(1));
    await t.done;
  }
});

Deno.test("acquireLease caps the error back-off at a heartbeat shorter than 0.5 s", async () => {
  const t = setup({ heartbeatMs: 200, random: () => 1 });
  (await t.pending()).answer(broken);
  (await t.expectNextAfter(200)).answer(broken);
  (await t.expectNextAfter(200)).answer(acquired(2));
  await t.done;
  assert.equal((t.result() as AcquiredLease).token, 2);
});

Deno.test("acquireLease bounds every request at the reference client's 10 s: a hung Acquire is abandoned then and retried at once", async () => {
  assert.equal(DEFAULT_REQUEST_TIMEOUT_MS, 10_000);
  const t = setup();
  const hung = await t.pending();
  await t.clock.advanceTo(hung.at! + 9_999);
  assert.equal(hung.done, false);
  assert.equal(t.client.calls.length, 1);
  await t.clock.advanceTo(hung.at! + 10_000);
  assert.equal(hung.done, true);
  assert.equal((hung.signal.reason as Error).name, "TimeoutError");
  // The wait counts from the send time, which is long past: retry at once.
  assert.equal(t.client.calls.length, 2);
  const retry = t.client.calls[1];
  assert.equal(retry.at, hung.at! + 10_000);
  assert.match(String(t.logs.at(-1)?.fields.error), /timed out/);
  retry.answer(acquired(1));
  await t.done;
  assert.equal((t.result() as AcquiredLease).sentAt, retry.at);
});

Deno.test("acquireLease stops at once when aborted while waiting, without another request", async () => {
  const t = setup();
  (await t.pending()).answer(held(1));
  await t.clock.advance(1_000);
  t.stop.abort();
  await t.done;
  assert.equal(t.result(), undefined);
  assert.equal(t.client.calls.length, 1);
  assert.equal(t.clock.now(), t.client.calls[0].at! + 1_000, "no time passed");
});

Deno.test("acquireLease stops when aborted during a request, and never starts one when aborted already", async () => {
  const t = setup();
  const call = await t.pending();
  t.stop.abort();
  await t.done;
  assert.equal(call.done, true);
  assert.equal(t.result(), undefined);
  assert.equal(t.client.calls.length, 1);

  const stop = new AbortController();
  stop.abort();
  const client = new ScriptedClient();
  const r = await acquireLease({
    client,
    holder: HOLDER,
    ttlSeconds: 10,
    heartbeatMs: HB,
    enforceLeadMs: 0,
    guardSharedHolder: true,
    signal: stop.signal,
    clock: new FakeClock(),
    logger: recordingLogger([]),
  });
  assert.deepEqual(r, { last: undefined });
  assert.equal(client.calls.length, 0);
});

Deno.test("acquireLease: a grant that arrives after its own gate-closing time is confirmed again, not handed over", async () => {
  const clock = new FakeClock();
  const client = new ScriptedClient(() => clock.now());
  const logs: string[] = [];
  const t0 = clock.now();
  const done = acquireLease({
    client,
    holder: "prod/pod:web-0:uid:1",
    ttlSeconds: 10,
    heartbeatMs: 3_000,
    enforceLeadMs: 4_000,
    guardSharedHolder: true,
    signal: new AbortController().signal,
    clock,
    logger: createLogger({ format: "json", write: (l) => logs.push(l) }),
  });
  await settle();
  const slow = client.pending()!;
  // Answered 6 s after the send: its gate closed at send + 10 s - 4 s.
  await clock.advanceTo(t0 + 6_000);
  slow.answer({ kind: "acquired", lease: record("prod/pod:web-0:uid:1", 3) });
  await settle();
  const again = client.pending()!;
  assert.equal(again.rpc, "acquire", "confirmed again at once");
  assert.equal(again.at, t0 + 6_000);
  again.answer({ kind: "acquired", lease: record("prod/pod:web-0:uid:1", 3) });
  const { lease } = await done;
  assert.deepEqual(lease && { token: lease.token, sentAt: lease.sentAt }, {
    token: 3,
    sentAt: t0 + 6_000,
  });
  assert.ok(logs.some((l) => l.includes("too late")));
});

/** An answer that extended a grant this holder identity already had (acquiredAt older than the renewal). */
const extended = (token: number): GrantOutcome => ({
  kind: "acquired",
  lease: record(HOLDER, token, {
    acquiredAt: "2026-05-07T00:00:00Z",
    expiresAt: "2026-05-07T00:05:10Z", // renewed at 00:05:00 with the 10 s TTL
  }),
});

Deno.test("acquireLease does not take a lease another process holds under the same holder identity: it lets it expire first", async () => {
  const t = setup();
  const first = await t.pending();
  first.answer(extended(3));
  // Polling would extend the other process's lease; the next try waits one TTL + 1 s.
  const second = await t.expectNextAfter(10_000 + 1_000);
  second.answer(acquired(4));
  await t.done;
  assert.equal((t.result() as AcquiredLease).token, 4);
  const warn = t.logs.find((l) => l.msg === SHARED_HOLDER_MESSAGE);
  assert.equal(warn?.level, "WARN");
});

Deno.test("acquireLease with a holder shared by design (startup-gate: no guard) is admitted by a grant that extends a live one", async () => {
  const t = setup({ guardSharedHolder: false });
  const first = await t.pending();
  first.answer(extended(3));
  await t.done;
  assert.equal((t.result() as AcquiredLease).token, 3);
  assert.equal(t.client.calls.length, 1, "admitted at the first answer");
  assert.equal(t.logs.some((l) => l.level === "WARN"), false);
});

/** An extension of a grant made `ageMs` before its renewal, on the server's clock (TTL 10 s). */
const extendedAged = (token: number, ageMs: number): GrantOutcome => ({
  kind: "acquired",
  lease: record(HOLDER, token, {
    acquiredAt: "2026-05-07T00:00:00Z",
    expiresAt: new Date(Date.parse("2026-05-07T00:00:10Z") + ageMs)
      .toISOString(),
  }),
});

Deno.test("acquireLease accepts an extension of its own grant whose answer was lost", async () => {
  const t = setup();
  const first = await t.pending();
  first.answer({ kind: "timeout", message: "no answer" });
  await t.clock.advance(1_000);
  const second = await t.pending();
  // Granted on the server 0.8 s before this renewal: after our first ask.
  second.answer(extendedAged(3, 800));
  await t.done;
  assert.equal((t.result() as AcquiredLease).token, 3);
});

Deno.test("acquireLease after a lost answer still refuses a grant older than its first ask: another process's", async () => {
  const t = setup();
  const first = await t.pending();
  first.answer({ kind: "timeout", message: "no answer" });
  await t.clock.advance(1_000);
  const second = await t.pending();
  // Granted 5 minutes ago: no request of ours can have made it.
  second.answer(extended(3));
  await t.notAdmitted();
});

Deno.test("acquireLease: a lost answer explains an extension only while its grant can still be alive", async () => {
  const t = setup();
  const first = t.clock.now();
  (await t.pending()).answer({ kind: "timeout", message: "no answer" });
  // Then 401s for longer than the request bound (10 s) and the TTL (10 s) together.
  await t.rejectUntil(first + 21_000);
  // A grant made half a second ago: not our lost one, which has expired.
  (await t.pending()).answer(extendedAged(3, 500));
  await t.notAdmitted();
});

Deno.test("acquireLease: a lost answer whose grant has expired does not explain a grant made before a later lost answer", async () => {
  const t = setup();
  const first = t.clock.now();
  (await t.pending()).answer({ kind: "timeout", message: "no answer" });
  await t.rejectUntil(first + 21_000);
  const secondAsk = await t.pending();
  const second = secondAsk.at!;
  secondAsk.answer({ kind: "timeout", message: "no answer" });
  await t.clock.advanceTo(t.clock.now() + HB);
  // Granted after the first lost answer, but 1 s before the second ask.
  const age = t.clock.now() - second + 1_000;
  (await t.pending()).answer(extendedAged(3, age));
  await t.notAdmitted();
});

Deno.test("acquireLease: a lost answer still explains its grant when the grant's extension came too late and is confirmed again", async () => {
  const t = setup({ enforceLeadMs: 4_000 });
  const first = t.clock.now();
  // The first Acquire is granted on the server (at `first`), its answer lost.
  (await t.pending()).answer({ kind: "timeout", message: "no answer" });
  const slow = await t.expectNextAfter(375);
  // The second extends that grant, 1 s old, but its answer takes 6.5 s:
  // past its own gate-closing time (send + 10 s - 4 s).
  await t.clock.advanceTo(slow.at! + 6_500);
  slow.answer(extendedAged(3, 1_000));
  await settle();
  const again = t.client.pending()!;
  assert.equal(again.at, slow.at! + 6_500, "confirmed again at once");
  // The confirmation extends the same grant, made at the first ask.
  again.answer(extendedAged(3, again.at! - first));
  await settle();
  assert.ok(
    !t.logs.some((l) => l.msg === SHARED_HOLDER_MESSAGE),
    "its own grant is not another process's",
  );
  assert.equal((t.result() as AcquiredLease | undefined)?.token, 3);
  t.stop.abort();
  await t.done;
});

Deno.test("acquireLease: its own lost grant is taken though the server's clock runs a little fast", async () => {
  const t = setup();
  (await t.pending()).answer({ kind: "timeout", message: "no answer" });
  await t.clock.advance(1_000);
  // 1 s on our clock, 1.005 s on the server's since it granted our ask.
  (await t.pending()).answer(extendedAged(3, 1_005));
  await t.done;
  assert.equal((t.result() as AcquiredLease).token, 3);
});

Deno.test("acquireLease retries 401/403/404/400 with the Go helper's WARN line on every attempt, and an ERROR: the first at once, then one line a minute", async () => {
  const t = setup();
  let id = 0;
  // Every answer has its own request id, as every request has.
  const rejected = (status: number): GrantOutcome => ({
    kind: "server-error",
    status,
    message: "unauthorized",
    requestId: `req-${++id}`,
  });
  const errors = () => t.logs.filter((l) => l.level === "ERROR");
  const first = t.clock.now();
  (await t.pending()).answer(rejected(401));
  await settle();
  assert.equal(errors().length, 1, "the first rejection is an ERROR at once");
  assert.match(String(errors()[0].fields.error), /401.*request id req-1/);
  assert.match(errors()[0].msg, /does not heal by waiting/);
  // Retried at the error back-off (capped at the heartbeat), not logged
  // again at ERROR within the minute; the Go helper's WARN every attempt.
  let attempts = 1;
  for (;;) {
    await t.clock.advanceTo(t.clock.now() + HB);
    if (t.clock.now() >= first + REPEAT_ERROR_MS) break;
    (await t.pending()).answer(rejected(401));
    attempts++;
  }
  assert.ok(attempts > 5, `retried ${attempts} times`);
  assert.equal(errors().length, 1, "one line within the first minute");
  const warns = () => t.logs.filter((l) => l.level === "WARN");
  assert.equal(warns().length, attempts);
  assert.ok(warns().every((l) => l.msg === "acquire failed, retrying"));
  // A minute after the first line, the next rejection is logged again,
  // counting the ones in between.
  (await t.pending()).answer(rejected(401));
  await settle();
  assert.equal(errors().length, 2);
  assert.equal(errors()[1].fields.rejected_since_last_line, attempts - 1);
  // A different rejection is news: logged at once.
  await t.clock.advanceTo(t.clock.now() + HB);
  (await t.pending()).answer(rejected(403));
  await settle();
  assert.equal(errors().length, 3);
  assert.match(String(errors()[2].fields.error), /403/);
  // Other failures stay WARN lines; past a minute of failures, the outage's
  // ERROR comes beside it (the rejections count as no usable answer).
  await t.clock.advanceTo(t.clock.now() + HB);
  (await t.pending()).answer(broken);
  await settle();
  assert.equal(warns().length, attempts + 3);
  assert.equal(warns().at(-1)!.fields.error, errors().at(-1)!.fields.error);
  assert.deepEqual(errors().slice(3).map((l) => l.msg), [OUTAGE_MESSAGE]);
  t.stop.abort();
  await t.done;
});

Deno.test("acquireLease logs 400 and 404 as rejections too (Go's WARN and an ERROR), and a 500 as a plain retry", async () => {
  for (const status of [400, 404]) {
    const t = setup();
    (await t.pending()).answer({
      kind: "server-error",
      status,
      message: "nope",
    });
    await settle();
    assert.deepEqual(
      t.logs.map((l) => `${l.level} ${l.msg.split(";")[0]}`),
      [
        "WARN acquire failed, retrying",
        "ERROR the API server rejects the acquire request",
      ],
      `status ${status}`,
    );
    t.stop.abort();
    await t.done;
  }
  const t = setup();
  (await t.pending()).answer(broken);
  await settle();
  assert.deepEqual(t.logs.map((l) => l.level), ["WARN"]);
  t.stop.abort();
  await t.done;
});

/** An https:// URL on a plain-HTTP port, as the client reports it: with its fix. */
const wrongScheme: GrantOutcome = {
  kind: "transport-error",
  message: "TLS handshake failed: the server answered in plain HTTP",
  fix: "use http:// in --api-server / BERTH_API_SERVER",
};
const refused: GrantOutcome = {
  kind: "transport-error",
  message: "connection refused",
};

Deno.test("acquireLease with endOnFix: a failure that names its fix ends the wait at once, with the fix", async () => {
  const t = setup({ endOnFix: true });
  (await t.pending()).answer(wrongScheme);
  await t.done;
  assert.equal(
    t.ended()?.fix,
    "use http:// in --api-server / BERTH_API_SERVER",
  );
  assert.match(t.ended()?.last ?? "", /plain HTTP/);
  assert.equal(t.client.calls.length, 1, "not retried");
});

Deno.test("acquireLease with endOnFix (run's first acquire): a 401, 403 or 404 ends the wait at once with the server's words and the fix; a 400 and a 5xx are retried", async () => {
  for (const status of [401, 403, 404]) {
    const t = setup({ endOnFix: true });
    (await t.pending()).answer({
      kind: "server-error",
      status,
      message: "no such key",
    });
    await t.done;
    assert.match(
      t.ended()?.last ?? "",
      new RegExp(`server answered ${status}: no such key`),
    );
    assert.match(t.ended()?.fix ?? "", /BERTH_/, String(status));
    assert.equal(t.client.calls.length, 1, "not retried");
  }
  for (const status of [400, 503]) {
    const t = setup({ endOnFix: true });
    (await t.pending()).answer({ kind: "server-error", status, message: "x" });
    await settle();
    assert.equal(t.result(), "pending", String(status));
    t.stop.abort();
    await t.done;
  }
});

Deno.test("a wait cut short says what the last attempt met", async () => {
  const t = setup();
  (await t.pending()).answer({
    kind: "not-acquired",
    lease: record("prod/pod:web-1:uid:2", 3),
  });
  await settle();
  t.stop.abort();
  await t.done;
  assert.equal(
    t.ended()?.last,
    "the lease is held by prod/pod:web-1:uid:2 (fencing token 3)",
  );
});

Deno.test("acquireLease without endOnFix (a pod's acquire): retried, each retry line has fix=, and an ERROR with the fix once a minute", async () => {
  const t = setup();
  (await t.pending()).answer(wrongScheme);
  await settle();
  const errors = () => t.logs.filter((l) => l.level === "ERROR");
  const warns = () => t.logs.filter((l) => l.level === "WARN");
  assert.equal(errors().length, 1);
  assert.equal(errors()[0].msg, UNUSABLE_SERVER_MESSAGE);
  assert.equal(
    errors()[0].fields.fix,
    "use http:// in --api-server / BERTH_API_SERVER",
  );
  const first = t.clock.now();
  let attempts = 1;
  for (;;) {
    await t.clock.advanceTo(t.clock.now() + HB);
    if (t.clock.now() >= first + REPEAT_ERROR_MS) break;
    (await t.pending()).answer(wrongScheme);
    attempts++;
  }
  assert.equal(warns().length, attempts, "a retry line on every attempt");
  assert.ok(warns().every((w) => typeof w.fields.fix === "string"));
  assert.equal(errors().length, 1, "one ERROR within the first minute");
  (await t.pending()).answer(wrongScheme);
  await settle();
  assert.equal(errors().length, 2, "again a minute later");
  t.stop.abort();
  await t.done;
});

Deno.test("acquireLease says the wait at every poll (the Go helper's INFO line), with when the lease would expire", async () => {
  const t = setup();
  const infos = () =>
    t.logs.filter((l) =>
      l.level === "INFO" && l.msg === "lease held by another, waiting"
    );
  (await t.pending()).answer(held(4));
  for (let i = 0; i < 5; i++) (await t.expectNextAfter(HB)).answer(held(4));
  (await t.expectNextAfter(HB)).answer({
    kind: "not-acquired",
    lease: record("prod/pod:web-2:uid:3333", 6),
  });
  await settle();
  assert.equal(infos().length, 7, "every poll");
  assert.ok(
    infos().every((l) => l.fields.expires_at === "2026-05-07T00:00:10Z"),
  );
  assert.equal(infos()[6].fields.current_holder, "prod/pod:web-2:uid:3333");
  assert.equal(infos()[6].fields.current_fencing_token, 6);
  t.stop.abort();
  await t.done;
});

Deno.test("acquireLease: a server that does not answer is retried, the time waited in each line, an ERROR each minute once past a minute", async () => {
  const t = setup();
  const errors = () => t.logs.filter((l) => l.level === "ERROR");
  const start = t.clock.now();
  (await t.pending()).answer(refused);
  await settle();
  assert.equal(t.logs.at(-1)!.fields.failing_for, "0s");
  while (t.clock.now() < start + 3 * REPEAT_ERROR_MS) {
    await t.clock.advanceTo(t.clock.now() + HB);
    (await t.pending()).answer(refused);
    await settle();
  }
  const warns = t.logs.filter((l) => l.level === "WARN");
  assert.ok(warns.length > 20);
  assert.ok(warns.every((w) => w.msg === "acquire failed, retrying"));
  assert.ok(
    warns.some((w) => w.fields.failing_for === "1m0s"),
    "the time waited is in the line",
  );
  assert.equal(errors().length, 3, "one ERROR a minute once past a minute");
  assert.equal(errors()[0].msg, OUTAGE_MESSAGE);
  assert.match(String(errors()[0].fields.failing_for), /^1m/);
  t.stop.abort();
  await t.done;
});
