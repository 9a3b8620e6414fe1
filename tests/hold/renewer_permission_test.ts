// The workload's permission inside a real renewer, with a fake clock and a
// scripted server: decisions change at once and reach the enforcer later,
// in order; only a transition is logged and observed; a confirmation opens
// it until deadline minus lead, and one timer closes it then.
import assert from "node:assert/strict";
import type { Enforcer, StopEvidence } from "../../lib/enforce/enforcer.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { GO_MESSAGES as GO } from "../../lib/obs/go_messages.ts";
import type { MarkerDeadlines } from "../../lib/state/marker.ts";
import { Renewer, type RenewerOptions } from "../../lib/hold/renewer.ts";
import { MARKER_REFRESH_MS } from "../../lib/hold/lease.ts";
import type { RenewerStore } from "../../lib/hold/handoff.ts";
import type { RenewerStatus } from "../../lib/hold/lease.ts";
import type { GrantOutcome } from "../../lib/lease/rpc.ts";
import { FakeClock, settle } from "../support/fake_clock.ts";
import { record, ScriptedClient } from "../support/scripted_client.ts";

const HOLDER = "prod/pod:web-0:uid:1111";
const TTL = 10; // seconds
const HB = 10_000 / 3;
const LEAD = 4_000;
const CONFIRMING =
  "confirming the handed-over lease before the workload may run";
const NOT_IN_TIME =
  "the lease was not confirmed in time: its local deadline is near";

/** An enforcer that records its calls; `hold` keeps each pending until `finishOne`, `fail` rejects them. */
class TestEnforcer implements Enforcer {
  calls: { at: number; what: string }[] = [];
  /** The deadlines of each open, in order. */
  opened: MarkerDeadlines[] = [];
  hold = false;
  fail = false;
  /** What workloadStopped() answers; by default the workload is gone at once. */
  stopped: (signal: AbortSignal) => Promise<StopEvidence> = () =>
    Promise.resolve({ stopped: true, detail: "test: stopped" });
  #pending: (() => void)[] = [];
  constructor(private clock: FakeClock) {}
  #call(what: string): Promise<void> {
    this.calls.push({ at: this.clock.now(), what });
    const end = (ok: () => void, no: (e: Error) => void) =>
      this.fail ? no(new Error("marker: disk full")) : ok();
    return new Promise((ok, no) =>
      this.hold ? this.#pending.push(() => end(ok, no)) : end(ok, no)
    );
  }
  open(d: MarkerDeadlines): Promise<void> {
    this.opened.push(d);
    return this.#call("open");
  }
  close(reason: string): Promise<void> {
    return this.#call(`close: ${reason}`);
  }
  workloadStopped(signal: AbortSignal): Promise<StopEvidence> {
    return this.stopped(signal);
  }
  dispose(): Promise<void> {
    return Promise.resolve();
  }
  /** Lets the oldest pending call finish. */
  async finishOne(): Promise<void> {
    this.#pending.shift()?.();
    await settle();
  }
  get whats(): string[] {
    return this.calls.map((c) => c.what);
  }
}

class MemoryStore implements RenewerStore {
  holder?: string;
  token?: number;
  marker?: MarkerDeadlines;
  refuseToken = false;
  readHolder() {
    return this.holder;
  }
  readToken() {
    return this.token;
  }
  readMarkerDeadlines() {
    return this.marker;
  }
  writeHolder(h: string) {
    this.holder = h;
    return Promise.resolve();
  }
  writeToken(t: number) {
    if (this.refuseToken) return Promise.reject(new Error("read-only"));
    this.token = t;
    return Promise.resolve();
  }
}

// deno-lint-ignore no-explicit-any
type Line = Record<string, any>;

/** A renewer with a handed-over `token` (none: 0) whose marker has `leftMs` left; `run` starts it. */
function make(
  token: number,
  leftMs?: number,
  over: Partial<RenewerOptions> = {},
) {
  const clock = new FakeClock();
  const t0 = clock.now();
  const client = new ScriptedClient(() => clock.now());
  const enforcer = new TestEnforcer(clock);
  const store = new MemoryStore();
  if (token > 0) {
    store.holder = HOLDER;
    store.token = token;
  }
  if (leftMs !== undefined) {
    store.marker = {
      leaseDeadlineBootMs: clock.bootNow() + leftMs,
      gateClosesBootMs: clock.bootNow() + leftMs - LEAD,
    };
  }
  const lines: Line[] = [];
  const seen: RenewerStatus[] = [];
  const reacquired: number[] = [];
  const renewer = new Renewer({
    client,
    holder: HOLDER,
    ttlSeconds: TTL,
    heartbeatMs: HB,
    enforceLeadMs: LEAD,
    enforcer,
    store,
    clock,
    logger: createLogger({
      level: "DEBUG",
      format: "json",
      write: (l) => lines.push(JSON.parse(l)),
    }),
    releaseOnShutdown: true,
    guardSharedHolder: false,
    observer: {
      changed: (s) => seen.push(s),
      reacquired: (t) => reacquired.push(t),
    },
    ...over,
  });
  const shutdown = new AbortController();
  let done: Promise<void> = Promise.resolve();
  return {
    clock,
    t0,
    client,
    enforcer,
    store,
    lines,
    seen,
    reacquired,
    renewer,
    shutdown,
    done: () => done,
    run: async () => {
      done = renewer.run(shutdown.signal);
      await settle();
    },
    /** Answers the call in flight. */
    answer: async (o: GrantOutcome) => {
      client.pending()!.answer(o);
      await settle();
    },
    /** Stops the loop, answering a release and letting held enforcer calls finish. */
    stop: async () => {
      shutdown.abort();
      enforcer.hold = false;
      for (let i = 0; i < 10; i++) await enforcer.finishOne();
      client.pending()?.answer(
        client.pending()!.rpc === "release"
          ? { kind: "released" }
          : { kind: "not-acquired", lease: record("other", 1) },
      );
      await settle();
      client.pending()?.answer({ kind: "released" });
      await done;
    },
  };
}

const ours = (token: number): GrantOutcome => ({
  kind: "acquired",
  lease: record(HOLDER, token),
});
const said = (lines: Line[], level: string) =>
  lines.filter((l) => l.level === level).map((l) => l.msg);

Deno.test("the permission starts closed, for 'starting', closed since the renewer was made: a shutdown without a lease waits out the lead from then", async () => {
  const h = make(0);
  assert.deepEqual(h.renewer.status(), {
    permissionOpen: false,
    token: 0,
    deadline: undefined,
    permissionClosesAt: undefined,
    reason: "starting",
  });
  assert.ok(h.renewer.applied, "nothing decided yet");
  await h.clock.advanceTo(h.t0 + 1_000);
  let stopWaitEnded: number | undefined;
  // The wait is bounded: its signal ends at the lead after construction.
  h.enforcer.stopped = (signal) =>
    new Promise<StopEvidence>((r) =>
      signal.addEventListener("abort", () => {
        stopWaitEnded = h.clock.now();
        r({ stopped: false, detail: "unseen" });
      })
    );
  await h.run();
  assert.equal(h.client.pending()?.rpc, "acquire");
  h.shutdown.abort();
  await h.answer({ kind: "not-acquired", lease: record("other", 1) });
  await h.clock.advanceTo(h.t0 + LEAD);
  await h.done();
  assert.equal(stopWaitEnded, h.t0 + LEAD);
  assert.equal(h.lines.at(-1)!.msg, GO.noRelease);
  assert.equal(h.lines.at(-1)!.reason, "the lease is not held");
});

Deno.test("a decision changes at once and reaches the enforcer later, in order; applied and whenApplied follow it", async () => {
  const h = make(7); // no marker: closed until confirmed
  h.enforcer.hold = true;
  await h.run();
  assert.equal(h.renewer.status().reason, CONFIRMING);
  assert.equal(h.renewer.applied, false);
  assert.deepEqual(h.enforcer.whats, [`close: ${CONFIRMING}`]);
  await h.answer(ours(7));
  assert.equal(h.renewer.status().permissionOpen, true, "at once");
  assert.equal(h.renewer.status().reason, undefined);
  assert.deepEqual(
    h.enforcer.whats,
    [`close: ${CONFIRMING}`],
    "the open waits",
  );
  await h.enforcer.finishOne();
  assert.deepEqual(h.enforcer.whats, [`close: ${CONFIRMING}`, "open"]);
  assert.equal(h.renewer.applied, false, "the open is still being applied");
  // A 409 at the next heartbeat closes it at once, behind the open.
  await h.clock.advanceTo(h.t0 + HB);
  await h.answer({ kind: "conflict", message: "held" });
  const lost =
    "lease lost: the server answered 409: the lease belongs to another holder or token";
  assert.equal(h.renewer.status().permissionOpen, false);
  assert.equal(h.renewer.status().reason, lost);
  assert.equal(h.enforcer.calls.length, 2);
  let applied = false;
  h.renewer.whenApplied().then(() => applied = true);
  await h.enforcer.finishOne();
  assert.deepEqual(h.enforcer.whats.slice(2), [`close: ${lost}`]);
  assert.equal(applied, false);
  await h.enforcer.finishOne();
  assert.ok(applied);
  assert.ok(h.renewer.applied);
  assert.deepEqual(
    h.seen.map((s) => [s.permissionOpen, s.reason]),
    [[false, CONFIRMING], [true, undefined], [false, lost]],
  );
  await h.stop();
});

Deno.test("only the close from open is logged and observed; a repeated close is applied again; a new reason is a change", async () => {
  const h = make(4, 10_000);
  await h.run();
  await h.answer(ours(4));
  await h.clock.advanceTo(h.t0 + HB);
  await h.answer({ kind: "not-acquired", lease: record("other", 5) });
  const lost = "lease lost: the server refused the renewal";
  // Three ticks without the lease: each closes again and asks.
  for (let i = 2; i <= 4; i++) {
    await h.clock.advanceTo(h.t0 + i * HB + 1);
    assert.equal(h.client.pending()?.rpc, "acquire");
    await h.answer({ kind: "not-acquired", lease: record("other", 5) });
  }
  assert.deepEqual(
    h.enforcer.whats.filter((w) => w.startsWith("close")),
    Array(4).fill(`close: ${lost}`),
  );
  assert.deepEqual(said(h.lines, "WARN").filter((m) => m.startsWith("gate")), [
    "gate closed: stopping the workload",
  ]);
  const closeLine = h.lines.find((l) => l.msg.startsWith("gate closed"))!;
  assert.equal(closeLine.reason, lost);
  // Adopted, confirmed (a new deadline), lost; the repeated closes are not news.
  assert.deepEqual(h.seen.map((s) => s.reason), [undefined, undefined, lost]);
  // A refused token is a new reason: observed, not logged as a close, and
  // the permission stays closed since the loss: its release waits for no lead.
  h.store.refuseToken = true;
  h.enforcer.stopped = () =>
    Promise.resolve({ stopped: false, detail: "test: cannot see it" });
  await h.clock.advanceTo(h.t0 + 5 * HB + 1);
  await h.answer(ours(6));
  await h.clock.advance(200); // the write's retries
  assert.equal(
    h.seen.at(-1)!.reason,
    "lease not usable: the token file could not be written to the state volume",
  );
  assert.equal(
    h.lines.filter((l) => l.msg.startsWith("gate closed")).length,
    1,
  );
  assert.ok(
    !h.lines.some((l) => l.msg.startsWith("waiting for the enforcement")),
  );
  assert.equal(h.client.pending()?.rpc, "release");
  await h.stop();
});

Deno.test("the close before a release at shutdown is said at INFO, not as a warning", async () => {
  const h = make(4, 10_000);
  await h.run();
  await h.answer(ours(4));
  await h.stop();
  const line = h.lines.find((l) => l.msg.startsWith("gate closed"))!;
  assert.equal(line.level, "INFO");
  assert.equal(line.msg, "gate closed for the release at shutdown");
  assert.equal(line.reason, "the lease is being released at shutdown");
  assert.deepEqual(said(h.lines, "WARN"), []);
});

Deno.test("an enforcement that fails is logged and the queue goes on; the decision stands", async () => {
  const h = make(0); // no handoff: closed, then closed again by the tick
  h.enforcer.fail = true;
  await h.run();
  await h.answer(ours(6));
  await h.renewer.whenApplied();
  assert.equal(h.enforcer.whats.length, 3);
  assert.equal(h.enforcer.whats[2], "open");
  const warns = h.lines.filter((l) =>
    l.level === "WARN" && l.msg !== GO.noHandoff
  );
  assert.deepEqual(warns.map((l) => l.msg), [
    GO.enforceFailed,
    GO.reenforceFailed,
    GO.enforcerReleaseFailed,
  ]);
  assert.ok(warns.every((l) => l.error === "marker: disk full"));
  assert.equal(warns[2].write, "health marker");
  assert.ok(h.renewer.applied);
  assert.equal(h.renewer.status().permissionOpen, true);
  await h.stop();
});

Deno.test("an adopted lease opens without telling the enforcer (its deadline is nearer than the probe's max-age), only while its closing time is ahead", async () => {
  const open = make(4, LEAD + 1);
  await open.run();
  assert.equal(open.renewer.status().permissionOpen, true);
  assert.equal(open.renewer.status().permissionClosesAt, open.t0 + 1);
  assert.deepEqual(open.enforcer.calls, []);
  const adopted = open.lines.find((l) => l.msg.startsWith("adopted"))!;
  assert.equal(adopted.level, "INFO");
  assert.equal(adopted.fencing_token, 4);
  assert.equal(adopted.deadline_in_ms, LEAD + 1);
  assert.deepEqual(open.seen.map((s) => s.permissionOpen), [true]);
  // Confirmed while open: said at DEBUG.
  await open.answer(ours(4));
  const renewed = open.lines.find((l) => l.msg === GO.leaseRenewed)!;
  assert.equal(renewed.level, "DEBUG");
  await open.stop();

  const late = make(4, LEAD);
  await late.run();
  assert.equal(late.renewer.status().permissionOpen, false);
  assert.equal(late.renewer.status().reason, CONFIRMING);
  assert.deepEqual(late.enforcer.whats, [`close: ${CONFIRMING}`]);
  await late.stop();
});

Deno.test("a confirmation opens until deadline minus lead, status says so; the timer then closes it, with the Go helper's line beside the close", async () => {
  const h = make(4);
  await h.run();
  await h.answer(ours(4));
  const closesAt = h.t0 + TTL * 1000 - LEAD;
  assert.deepEqual(h.renewer.status(), {
    permissionOpen: true,
    token: 4,
    deadline: h.t0 + TTL * 1000,
    permissionClosesAt: closesAt,
    reason: undefined,
  });
  const renewed = h.lines.find((l) => l.msg === GO.leaseRenewed)!;
  assert.equal(renewed.level, "INFO");
  assert.equal(renewed.detail, "the gate is open: the workload may run");
  // Renewals hang from now on; the first gives up only past the closing time.
  await h.clock.advanceTo(closesAt - 1);
  assert.equal(h.renewer.status().permissionOpen, true);
  assert.deepEqual(said(h.lines, "WARN"), []);
  await h.clock.advanceTo(closesAt);
  assert.equal(h.renewer.status().permissionOpen, false);
  assert.equal(h.renewer.status().reason, NOT_IN_TIME);
  await h.renewer.whenApplied();
  assert.deepEqual(h.enforcer.calls.slice(1), [
    { at: h.t0, what: "open" },
    { at: closesAt, what: `close: ${NOT_IN_TIME}` },
  ]);
  assert.deepEqual(h.seen.map((s) => s.permissionOpen), [false, true, false]);
  // run's logger demotes the first of these (tests/run/run_logger_test.ts).
  assert.deepEqual(said(h.lines, "WARN"), [
    GO.localDeadline,
    "gate closed: stopping the workload",
  ]);
  assert.equal(h.lines.at(-1)!.reason, NOT_IN_TIME);
  await h.stop();
});

Deno.test("an open permission's marker is rewritten 20 s after its last write when no renewal did, never later than the probe's 30 s before the gate closes, never after a close", async () => {
  // TTL 120 s, heartbeat 50 s: longer than the webhook probe's max-age.
  const long = { ttlSeconds: 120, heartbeatMs: 50_000 };
  assert.equal(MARKER_REFRESH_MS, 20_000);
  const opens = (h: ReturnType<typeof make>) =>
    h.enforcer.calls.filter((c) => c.what === "open").map((c) => c.at - h.t0);

  // Adopted with 100 s left, every renewal hanging: rewritten at once (the
  // handed-over marker may be old), then every 20 s up to 30 s before the
  // gate closes (66 s), the handed-over deadlines each time; closed at 96 s.
  const adopted = make(4, 100_000, long);
  await adopted.run();
  await adopted.clock.advanceTo(adopted.t0 + 119_000);
  assert.deepEqual(opens(adopted), [0, 20e3, 40e3, 60e3, 66e3]);
  assert.ok(adopted.enforcer.opened.every((m) => m === adopted.store.marker));
  assert.deepEqual(adopted.enforcer.calls.find((c) => c.what !== "open"), {
    at: adopted.t0 + 96_000,
    what: `close: ${NOT_IN_TIME}`,
  });
  await adopted.stop();

  // A renewal's write moves the next rewrite to 20 s after it.
  const h = make(0, undefined, long);
  await h.run();
  await h.answer(ours(5));
  await h.clock.advanceTo(h.t0 + 50_000);
  await h.answer(ours(5));
  await h.clock.advanceTo(h.t0 + 89_999);
  assert.deepEqual(opens(h), [0, 20e3, 40e3, 50e3, 70e3]);
  assert.equal(h.enforcer.opened[2], h.enforcer.opened[0]);
  assert.notEqual(h.enforcer.opened[3], h.enforcer.opened[0]);
  await h.stop();
});

Deno.test("no closing timer outlives the loop: a permission left open at shutdown is not closed later", async () => {
  const h = make(4, 10_000, { releaseOnShutdown: false });
  await h.run();
  await h.answer(ours(4));
  await h.stop();
  const calls = h.enforcer.calls.length;
  await h.clock.advanceTo(h.t0 + TTL * 1000 + 1);
  assert.equal(h.enforcer.calls.length, calls);
  assert.ok(!h.lines.some((l) => l.msg === GO.localDeadline));
});

Deno.test("a confirmation past its own closing time leaves the permission closed, for the renewal and the reacquire", async () => {
  for (const [token, late] of [[4, GO.renewLate], [0, GO.acquireLate]]) {
    // A long heartbeat lets the answer arrive 6.5 s after the send.
    const h = make(token as number, undefined, { heartbeatMs: 9_000 });
    await h.run();
    await h.clock.advanceTo(h.t0 + 6_500);
    await h.answer(ours(4));
    assert.equal(h.renewer.status().permissionOpen, false);
    assert.equal(
      h.renewer.status().reason,
      "the last confirmation arrived after its own deadline",
    );
    const line = h.lines.find((l) => l.msg === late)!;
    assert.equal(line.level, "WARN");
    assert.equal(line.late_by_ms, 500);
    assert.equal(
      line.detail,
      "the server confirmed the lease too late to let the workload run",
    );
    assert.ok(!h.enforcer.whats.includes("open"));
    await h.stop();
  }
});

Deno.test("a lease acquired by the sidecar counts from its Acquire's send: status, the INFO line, and the observer", async () => {
  const h = make(0);
  await h.run();
  await h.clock.advanceTo(h.t0 + 1_000); // the answer takes 1 s
  await h.answer(ours(6));
  assert.deepEqual(h.renewer.status(), {
    permissionOpen: true,
    token: 6,
    deadline: h.t0 + TTL * 1000,
    permissionClosesAt: h.t0 + TTL * 1000 - LEAD,
    reason: undefined,
  });
  // Never held by this process (nothing handed over): acquired, not reacquired.
  assert.ok(!h.lines.some((l) => l.msg === GO.reacquired));
  const line = h.lines.find((l) => l.msg === GO.leaseAcquired)!;
  assert.equal(line.level, "INFO");
  assert.equal(line.fencing_token, 6);
  assert.deepEqual(h.reacquired, [6]);
  assert.deepEqual(h.seen.at(-1), h.renewer.status());
  await h.stop();
});
