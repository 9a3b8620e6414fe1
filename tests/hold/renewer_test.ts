// The renewer's timing and handoff rules, driven by a fake clock and a
// scripted server: every instant asserted here is exact, none is measured.
import assert from "node:assert/strict";
import type { Enforcer, StopEvidence } from "../../lib/enforce/enforcer.ts";
import { createLogger, type Logger } from "../../lib/obs/log.ts";
import type { MarkerDeadlines } from "../../lib/state/marker.ts";
import { Renewer, type RenewerOptions } from "../../lib/hold/renewer.ts";
import type { RenewerStore } from "../../lib/hold/handoff.ts";
import {
  REPEAT_ERROR_MS as REJECTION_LOG_INTERVAL_MS,
  UNUSABLE_SERVER_MESSAGE,
} from "../../lib/hold/attempts.ts";
import type { GrantOutcome } from "../../lib/lease/rpc.ts";
import { FakeClock, settle } from "../support/fake_clock.ts";
import { record, ScriptedClient } from "../support/scripted_client.ts";

const HOLDER = "prod/pod:web-0:uid:1111";
const TTL = 10; // seconds
const HB = 10_000 / 3; // default heartbeat, kept exact
const LEAD = 4_000; // probe period + timeout + grace

interface EnforcerEvent {
  at: number;
  op: "open" | "close" | "stopped?" | "dispose";
  marker?: MarkerDeadlines;
  reason?: string;
}

class RecordingEnforcer implements Enforcer {
  events: EnforcerEvent[] = [];
  constructor(private clock: FakeClock) {}
  open(marker: MarkerDeadlines): Promise<void> {
    this.events.push({ at: this.clock.now(), op: "open", marker });
    return Promise.resolve();
  }
  close(reason: string): Promise<void> {
    this.events.push({ at: this.clock.now(), op: "close", reason });
    return Promise.resolve();
  }
  /** What workloadStopped() answers; by default the workload is gone at once. */
  stopped: (signal: AbortSignal) => Promise<StopEvidence> = () =>
    Promise.resolve({ stopped: true, detail: "test: stopped" });
  workloadStopped(signal: AbortSignal): Promise<StopEvidence> {
    this.events.push({ at: this.clock.now(), op: "stopped?" });
    return this.stopped(signal);
  }
  dispose(): Promise<void> {
    this.events.push({ at: this.clock.now(), op: "dispose" });
    return Promise.resolve();
  }
  /** Whether the workload may run now: the last open/close decides. */
  get open_(): boolean {
    const last = this.events.filter((e) => e.op === "open" || e.op === "close")
      .at(-1);
    return last?.op === "open";
  }
  firstClose(): EnforcerEvent | undefined {
    return this.events.find((e) => e.op === "close");
  }
}

class MemoryStore implements RenewerStore {
  holder?: string;
  token?: number | Error;
  marker?: MarkerDeadlines;
  writes: string[] = [];
  /** Token writes fail while set (a read-only volume). */
  refuseToken = false;
  readHolder() {
    return this.holder;
  }
  readToken() {
    if (this.token instanceof Error) throw this.token;
    return this.token;
  }
  readMarkerDeadlines() {
    return this.marker;
  }
  writeHolder(h: string) {
    this.holder = h;
    this.writes.push(`holder=${h}`);
    return Promise.resolve();
  }
  writeToken(t: number) {
    if (this.refuseToken) {
      this.writes.push(`token=${t} refused`);
      return Promise.reject(
        new Error("/berth/token: cannot write it: Read-only file system"),
      );
    }
    this.token = t;
    this.writes.push(`token=${t}`);
    return Promise.resolve();
  }
}

interface Harness {
  clock: FakeClock;
  client: ScriptedClient;
  enforcer: RecordingEnforcer;
  store: MemoryStore;
  shutdown: AbortController;
  done: Promise<void>;
  logs: string[];
}

function start(
  setup: (store: MemoryStore, clock: FakeClock) => void,
  over: Partial<RenewerOptions> = {},
): Harness {
  const clock = new FakeClock();
  const client = new ScriptedClient(() => clock.now());
  const enforcer = new RecordingEnforcer(clock);
  const store = new MemoryStore();
  const logs: string[] = [];
  const logger: Logger = createLogger({
    format: "json",
    write: (l) => logs.push(l),
  });
  setup(store, clock);
  const renewer = new Renewer({
    client,
    holder: HOLDER,
    ttlSeconds: TTL,
    heartbeatMs: HB,
    enforceLeadMs: LEAD,
    enforcer,
    store,
    clock,
    logger,
    releaseOnShutdown: true,
    guardSharedHolder: false,
    ...over,
  });
  const shutdown = new AbortController();
  const done = renewer.run(shutdown.signal);
  return { clock, client, enforcer, store, shutdown, done, logs };
}

/** A healthy handoff: the init container's holder, token and a marker whose deadline is `leftMs` away. */
function handoff(token: number, leftMs?: number) {
  return (store: MemoryStore, clock: FakeClock) => {
    store.holder = HOLDER;
    store.token = token;
    if (leftMs !== undefined) {
      store.marker = {
        leaseDeadlineBootMs: clock.bootNow() + leftMs,
        gateClosesBootMs: clock.bootNow() + leftMs - LEAD,
      };
    }
  };
}

async function stop(h: Harness): Promise<void> {
  h.shutdown.abort();
  await settle();
  h.client.pending()?.answer({ kind: "released" });
  await h.done;
}

Deno.test("a sidecar restart with a healthy lease keeps the workload running", async () => {
  const h = start(handoff(7, 9_000));
  await settle();
  assert.equal(
    h.enforcer.firstClose(),
    undefined,
    "the gate must not close on adoption",
  );
  const renew = h.client.pending()!;
  assert.equal(renew.rpc, "renew", "the handoff is confirmed at once");
  assert.equal(renew.token, 7);
  renew.answer({ kind: "acquired", lease: record(HOLDER, 7) });
  await settle();
  assert.equal(h.enforcer.events.at(-1)?.op, "open");
  assert.equal(h.enforcer.firstClose(), undefined);
  await stop(h);
});

Deno.test("a restarted sidecar never lets the workload run past the last confirmed deadline", async () => {
  const h = start(handoff(7, 5_000)); // gate closes 1 s after start
  const t0 = h.clock.now();
  await settle();
  assert.equal(h.enforcer.firstClose(), undefined);
  // The confirming renew hangs.
  await h.clock.advanceTo(t0 + 999);
  assert.equal(h.enforcer.firstClose(), undefined);
  await h.clock.advanceTo(t0 + 1_000);
  assert.equal(h.enforcer.firstClose()?.at, t0 + 1_000);
  await stop(h);
});

Deno.test("a restarted sidecar adopts the earlier of the marker's boot-clock and wall-clock deadlines", async () => {
  // The boot clock says 9 s are left, the wall copy only 5 s (the boot clock
  // was not shared): the gate closes 1 s after start, by the wall copy.
  const h = start((store, clock) => {
    store.holder = HOLDER;
    store.token = 7;
    store.marker = {
      leaseDeadlineBootMs: clock.bootNow() + 9_000,
      gateClosesBootMs: clock.bootNow() + 5_000,
      leaseDeadlineWallMs: clock.wallNow() + 5_000,
      gateClosesWallMs: clock.wallNow() + 1_000,
    };
  });
  const t0 = h.clock.now();
  await settle();
  assert.equal(h.enforcer.firstClose(), undefined);
  await h.clock.advanceTo(t0 + 999);
  assert.equal(h.enforcer.firstClose(), undefined);
  await h.clock.advanceTo(t0 + 1_000);
  assert.equal(h.enforcer.firstClose()?.at, t0 + 1_000);
  await stop(h);
});

Deno.test("a handoff without a marker deadline gates first, then confirms with an immediate renew", async () => {
  const h = start(handoff(3));
  await settle();
  assert.equal(h.enforcer.events[0].op, "close", "gate first");
  const renew = h.client.pending()!;
  assert.equal(renew.rpc, "renew");
  assert.equal(renew.token, 3);
  renew.answer({ kind: "acquired", lease: record(HOLDER, 3) });
  await settle();
  assert.ok(h.enforcer.open_);
  await stop(h);
});

for (
  const [name, setup] of [
    ["a foreign holder", (s: MemoryStore) => {
      s.holder = "prod/pod:web-1:uid:2222";
      s.token = 5;
    }],
    ["the same pod name with another pod UID", (s: MemoryStore) => {
      s.holder = "prod/pod:web-0:uid:9999";
      s.token = 5;
    }],
    ["token 0", (s: MemoryStore) => {
      s.holder = HOLDER;
      s.token = new Error("token file: 0 is not a positive int32");
    }],
  ] as const
) {
  Deno.test(`a handoff with ${name} is never renewed or released; the sidecar acquires as itself`, async () => {
    const h = start(setup);
    await settle();
    assert.equal(h.enforcer.events[0].op, "close");
    const call = h.client.pending()!;
    assert.equal(call.rpc, "acquire");
    assert.equal(call.holder, HOLDER);
    call.answer({ kind: "acquired", lease: record(HOLDER, 6) });
    await settle();
    assert.ok(h.enforcer.open_);
    assert.deepEqual(h.store.writes, ["holder=" + HOLDER, "token=6"]);
    await stop(h);
    assert.ok(h.client.calls.every((c) => c.holder === HOLDER));
    assert.equal(
      h.client.of("release")[0]?.token,
      6,
      "releases only its own lease",
    );
  });
}

for (
  const [name, setup] of [
    ["no handoff at all", () => {}],
    ["a holder file but no token file", (s: MemoryStore) => {
      s.holder = HOLDER;
    }],
    ["a foreign holder", (s: MemoryStore) => {
      s.holder = "prod/pod:web-1:uid:2222";
      s.token = 5;
    }],
    ["an unreadable token", (s: MemoryStore) => {
      s.holder = HOLDER;
      s.token = new Error("token file: 0 is not a positive int32");
    }],
  ] as const
) {
  Deno.test(`${name}: the Go helper's "no matching lease handoff" WARN, once, before acquiring`, async () => {
    const h = start(setup);
    await settle();
    const lines = h.logs.map((l) => JSON.parse(l)).filter((r) =>
      r.msg ===
        "no matching lease handoff; gating before acquiring as the configured holder"
    );
    assert.equal(lines.length, 1, h.logs.join("\n"));
    assert.equal(lines[0].level, "WARN");
    assert.equal(h.client.pending()?.rpc, "acquire");
    h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 6) });
    await settle();
    await stop(h);
  });
}

Deno.test("with an explicit holder identity, the sidecar does not take a lease another pod holds under it", async () => {
  // nothing handed over: acquire as itself
  const h = start(() => {}, { guardSharedHolder: true });
  const t0 = h.clock.now();
  await settle();
  const first = h.client.pending()!;
  assert.equal(first.rpc, "acquire");
  // acquiredAt older than the renewal this answer reports: an extension of
  // someone else's grant under our identity, not a grant to us.
  first.answer({
    kind: "acquired",
    lease: record(HOLDER, 5, {
      acquiredAt: "2026-05-07T00:00:00Z",
      expiresAt: "2026-05-07T00:05:10Z",
    }),
  });
  await settle();
  assert.equal(h.enforcer.open_, false, "the workload stays stopped");
  assert.ok(
    h.logs.some((l) => l.includes("already held under this holder identity")),
  );
  // No Acquire for a TTL + 1 s: each one would keep the other pod's lease alive.
  await h.clock.advanceTo(t0 + 11_000 - 1);
  assert.equal(h.client.of("acquire").length, 1);
  await h.clock.advanceTo(t0 + 11_000 + HB);
  const again = h.client.pending()!;
  assert.equal(again.rpc, "acquire");
  again.answer({ kind: "acquired", lease: record(HOLDER, 6) });
  await settle();
  assert.ok(h.enforcer.open_, "a fresh grant opens the gate");
  assert.deepEqual(h.store.writes, ["holder=" + HOLDER, "token=6"]);
  await stop(h);
});

Deno.test("after an Acquire without an answer, an extension of that grant is taken as ours", async () => {
  const h = start(() => {});
  await settle();
  h.client.pending()!.answer({ kind: "timeout", message: "no answer" });
  await h.clock.advance(HB + 1);
  h.client.pending()!.answer({
    kind: "acquired",
    lease: record(HOLDER, 5, {
      acquiredAt: "2026-05-07T00:00:00Z",
      expiresAt: "2026-05-07T00:00:13Z",
    }),
  });
  await settle();
  assert.ok(h.enforcer.open_);
  await stop(h);
});

Deno.test("a derived holder (it carries the pod's UID) adopts its own live lease at once when the handoff is missing", async () => {
  const h = start(() => {}); // the init container's handoff is gone
  await settle();
  assert.ok(h.logs.some((l) => l.includes("no matching lease handoff")));
  const first = h.client.pending()!;
  assert.equal(first.rpc, "acquire", "it asks at once");
  // The server extends the init container's live grant under this holder.
  first.answer({
    kind: "acquired",
    lease: record(HOLDER, 5, {
      acquiredAt: "2026-05-07T00:00:00Z",
      expiresAt: "2026-05-07T00:05:10Z",
    }),
  });
  await settle();
  assert.ok(h.enforcer.open_, "the workload may run on its own pod's lease");
  assert.ok(!h.logs.some((l) => l.includes("already held under this holder")));
  assert.deepEqual(h.store.writes, ["holder=" + HOLDER, "token=5"]);
  await stop(h);
});

Deno.test("after an Acquire without an answer, an extension of a grant older than that ask is another process's", async () => {
  const h = start(() => {}, { guardSharedHolder: true });
  await settle();
  h.client.pending()!.answer({ kind: "timeout", message: "no answer" });
  await h.clock.advance(HB + 1);
  h.client.pending()!.answer({
    kind: "acquired",
    lease: record(HOLDER, 5, {
      acquiredAt: "2026-05-07T00:00:00Z",
      expiresAt: "2026-05-07T00:05:10Z", // granted 5 min before: not ours
    }),
  });
  await settle();
  assert.equal(h.enforcer.open_, false, "another pod's lease taken as ours");
  assert.ok(
    h.logs.some((l) => l.includes("this holder identity")),
    h.logs.join(""),
  );
  await stop(h);
});

Deno.test("renews at the heartbeat and closes the gate exactly at the deadline minus the lead, between heartbeats", async () => {
  const h = start(handoff(4, 10_000));
  const t0 = h.clock.now();
  await settle();
  // Confirmation sent at t0 succeeds: deadline t0 + 10 s, gate closes at t0 + 6 s.
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await settle();
  // Every later renew fails with a server error.
  await h.clock.advanceTo(t0 + HB);
  const second = h.client.pending()!;
  assert.equal(second.at, t0 + HB, "renews at the heartbeat");
  second.answer({
    kind: "server-error",
    status: 500,
    message: "internal error",
  });
  await h.clock.advanceTo(t0 + 6_000 - 1);
  assert.equal(
    h.enforcer.firstClose(),
    undefined,
    "a transient error inside the TTL keeps the workload",
  );
  await h.clock.advanceTo(t0 + 6_000);
  assert.equal(
    h.enforcer.firstClose()?.at,
    t0 + 6_000,
    "closes at deadline - lead, not at a heartbeat",
  );
  assert.deepEqual(
    h.client.calls.filter((c) => c.at! > t0 + HB).map((c) => c.at),
    [],
    "no renewal answered or sent since the failed one: the gate's own timer closed it",
  );
  await stop(h);
});

Deno.test("a hung renew is abandoned at the lease deadline", async () => {
  const h = start(handoff(4, 10_000));
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  // Renews at t0+HB and t0+2HB fail fast; the one at t0+3HB (= t0 + 10 s, the
  // deadline) would be bounded to 0. Make the one at t0+2HB hang: its bound is
  // min(HB, deadline - send) = 10000 - 6666.67.
  await h.clock.advanceTo(t0 + HB);
  h.client.pending()!.answer({ kind: "timeout", message: "slow" });
  await h.clock.advanceTo(t0 + 2 * HB + 1);
  const hung = h.client.pending()!;
  assert.equal(hung.rpc, "renew");
  await h.clock.advanceTo(t0 + 10_000 - 1);
  assert.equal(hung.signal.aborted, false);
  await h.clock.advanceTo(t0 + 10_000);
  assert.equal(hung.signal.aborted, true, "bounded by the deadline");
  assert.equal(hung.done, true);
  await settle();
  // The first failure is inside the TTL, the abandoned one at its end: the
  // Go helper's line for each.
  const failures = h.logs.map((l) => JSON.parse(l)).filter((r) =>
    r.msg.startsWith("renew fail")
  ).map((r) => `${r.level} ${r.msg}`);
  assert.deepEqual(failures, [
    "WARN renew failed; still within lease TTL, will retry",
    "WARN renew failing past lease expiry; enforcing",
  ]);
  assert.equal(h.enforcer.open_, false);
  await stop(h);
});

Deno.test("a success that arrives after its own gate-closing time does not reopen the gate", async () => {
  // With a valid configuration (heartbeat + lead < TTL) the RPC bound makes
  // this rare; a long heartbeat lets the answer arrive 6.5 s after the send,
  // past its own gate-closing time (send + 10 s - 4 s).
  const h = start(handoff(4), { heartbeatMs: 9_000 });
  const t0 = h.clock.now();
  await settle();
  const call = h.client.pending()!;
  await h.clock.advanceTo(t0 + 6_500);
  call.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await settle();
  assert.equal(h.enforcer.open_, false, "the gate stays closed");
  assert.ok(h.logs.some((l) => l.includes("too late")));
  await stop(h);
});

Deno.test("the deadline counts from the send time; a server clock an hour off changes nothing", async () => {
  for (
    const expiresAt of [
      "2020-01-01T00:00:00Z",
      "2099-01-01T00:00:00.123456789+05:30",
    ]
  ) {
    const h = start(handoff(4));
    const t0 = h.clock.now();
    await settle();
    const call = h.client.pending()!;
    await h.clock.advanceTo(t0 + 1_000); // the answer takes 1 s
    call.answer({ kind: "acquired", lease: record(HOLDER, 4, { expiresAt }) });
    await settle();
    const open = h.enforcer.events.findLast((e) => e.op === "open")!;
    const boot0 = h.clock.bootNow() - 1_000;
    const wall0 = h.clock.wallNow() - 1_000;
    assert.deepEqual(open.marker, {
      leaseDeadlineBootMs: boot0 + 10_000,
      gateClosesBootMs: boot0 + 6_000,
      leaseDeadlineWallMs: wall0 + 10_000,
      gateClosesWallMs: wall0 + 6_000,
    });
    // Server errors from now on: the gate closes at send + TTL - lead.
    h.client.queue.push(
      ...Array.from(
        { length: 5 },
        () => ({ kind: "server-error" as const, status: 500, message: "x" }),
      ),
    );
    await h.clock.advanceTo(t0 + 6_000 - 1);
    assert.equal(h.enforcer.open_, true);
    await h.clock.advanceTo(t0 + 6_000);
    assert.equal(h.enforcer.open_, false);
    await stop(h);
  }
});

Deno.test("acquired:false closes the gate at once; the next tick reacquires and persists the new token", async () => {
  const h = start(handoff(4, 10_000));
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await h.clock.advanceTo(t0 + HB);
  h.client.pending()!.answer({
    kind: "not-acquired",
    lease: record("prod/pod:web-1:uid:2", 5),
  });
  await settle();
  assert.equal(
    h.enforcer.firstClose()?.at,
    t0 + HB,
    "lost now, not at the deadline",
  );
  assert.equal(
    h.enforcer.firstClose()!.reason,
    "lease lost: the server refused the renewal",
    "the gate's reason is ours: no server text",
  );
  assert.ok(
    h.logs.some((l) =>
      l.includes('"level":"WARN"') &&
      l.includes('"renew reports lease held by another: lease lost"') &&
      l.includes('"current_holder":"prod/pod:web-1:uid:2"') &&
      l.includes("held by prod/pod:web-1:uid:2")
    ),
    "the Go helper's message; the log keeps the server's answer",
  );
  // While lost, every tick re-applies the enforcer and tries to acquire.
  await h.clock.advanceTo(t0 + 2 * HB + 1);
  const acq = h.client.pending()!;
  assert.equal(acq.rpc, "acquire");
  assert.equal(
    h.enforcer.events.filter((e) => e.op === "close").length,
    2,
    "re-applied on the tick",
  );
  acq.answer({
    kind: "not-acquired",
    lease: record("prod/pod:web-1:uid:2", 5),
  });
  await h.clock.advanceTo(t0 + 3 * HB + 1);
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 6) });
  await settle();
  assert.ok(h.enforcer.open_);
  assert.deepEqual(h.store.writes, ["token=6"]);
  assert.ok(
    h.logs.some((l) =>
      l.includes('"lease reacquired; main container released"') &&
      l.includes('"fencing_token":6')
    ),
  );
  await stop(h);
  assert.equal(h.client.of("release")[0].token, 6);
});

Deno.test("a reacquire the server rejects (401) is the Go helper's WARN every tick and an ERROR at once, then one line a minute", async () => {
  const hb = 4_000; // whole milliseconds: the minute falls on a tick
  const h = start(handoff(4, 10_000), { heartbeatMs: hb });
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({
    kind: "conflict",
    message: "lease held by another identity or token",
  });
  let id = 0;
  const rejected = (): GrantOutcome => ({
    kind: "server-error",
    status: 401,
    message: "unauthorized",
    requestId: `req-${++id}`,
  });
  const lines = (level: string) =>
    h.logs.filter((l) =>
      l.includes(`"level":"${level}"`) && l.includes("acquire")
    );
  let tick = 1;
  // The first line is at tick 1; the ticks within a minute of it are counted.
  for (; (tick - 1) * hb < REJECTION_LOG_INTERVAL_MS; tick++) {
    await h.clock.advanceTo(t0 + tick * hb + 1);
    const acq = h.client.pending()!;
    assert.equal(acq.rpc, "acquire");
    acq.answer(rejected());
    await settle();
  }
  assert.ok(tick > 5, `retried ${tick} times`);
  assert.equal(lines("ERROR").length, 1, h.logs.join(""));
  assert.match(lines("ERROR")[0], /does not heal by waiting.*401.*req-1/);
  const warns = () =>
    h.logs.filter((l) =>
      l.includes('"level":"WARN"') && l.includes('"msg":"reacquire failed"')
    );
  assert.equal(warns().length, tick - 1, "Go's line on every attempt");
  await h.clock.advanceTo(t0 + tick * hb + 1);
  h.client.pending()!.answer(rejected());
  await settle();
  assert.equal(lines("ERROR").length, 2, h.logs.join(""));
  assert.match(lines("ERROR")[1], /"rejected_since_last_line":\d+/);
  await h.clock.advanceTo(t0 + ++tick * hb + 1);
  h.client.pending()!.answer({ kind: "timeout", message: "no answer" });
  await settle();
  assert.equal(warns().length, tick, "a timeout is a plain retry");
  await h.clock.advanceTo(t0 + ++tick * hb + 1);
  h.client.pending()!.answer(rejected());
  await settle();
  assert.equal(lines("ERROR").length, 3, "after another failure it is news");
  await stop(h);
});

Deno.test("409 on renew is a loss; shutdown then does not release", async () => {
  const h = start(handoff(4, 10_000));
  await settle();
  h.client.pending()!.answer({
    kind: "conflict",
    message: "lease held by another identity or token",
  });
  await settle();
  assert.equal(h.enforcer.open_, false);
  await stop(h);
  assert.equal(h.client.of("release").length, 0);
});

Deno.test("shutdown releases a held lease with its token, bounded at 5 s and not tied to the shutdown signal", async () => {
  const h = start(handoff(9, 10_000));
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 9) });
  await settle();
  h.shutdown.abort();
  await settle();
  const rel = h.client.pending()!;
  assert.equal(rel.rpc, "release");
  assert.equal(rel.token, 9);
  assert.equal(rel.holder, HOLDER);
  assert.equal(rel.signal.aborted, false, "not tied to the shutdown signal");
  await h.clock.advance(4_999);
  assert.equal(rel.signal.aborted, false);
  await h.clock.advance(1);
  assert.equal(rel.signal.aborted, true, "bounded at 5 s");
  await h.done;
  assert.equal(h.enforcer.events.at(-1)?.op, "dispose");
});

Deno.test("shutdown does not release when release-on-shutdown is off", async () => {
  const h = start(handoff(9, 10_000), { releaseOnShutdown: false });
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 9) });
  await stop(h);
  assert.equal(h.client.of("release").length, 0);
});

Deno.test("a shutdown whose workload is not known to be stopped releases only once the lead has passed since the gate closed", async () => {
  const h = start(handoff(9, 10_000));
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 9) });
  await settle();
  h.enforcer.stopped = () =>
    Promise.resolve({ stopped: false, detail: "test: cannot see it" });
  const t0 = h.clock.now();
  h.shutdown.abort();
  await settle();
  assert.equal(h.enforcer.open_, false, "the gate closes first");
  await h.clock.advanceTo(t0 + LEAD - 1);
  assert.equal(h.client.of("release").length, 0, "not before the lead");
  await h.clock.advanceTo(t0 + LEAD);
  const rel = h.client.pending()!;
  assert.equal(rel.rpc, "release");
  rel.answer({ kind: "released" });
  await h.done;
  assert.ok(
    h.logs.some((l) =>
      l.includes("releasing the lease: the enforcement lead has passed")
    ),
  );
});

Deno.test("a shutdown releases at once when the enforcer knows the workload is stopped", async () => {
  const h = start(handoff(9, 10_000));
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 9) });
  await settle();
  const t0 = h.clock.now();
  h.shutdown.abort();
  await settle();
  const rel = h.client.pending()!;
  assert.equal(rel.rpc, "release");
  assert.equal(rel.at, t0);
  rel.answer({ kind: "released" });
  await h.done;
  assert.ok(
    h.logs.some((l) =>
      l.includes("releasing the lease: the workload is stopped")
    ),
  );
});

Deno.test("a shutdown after the gate closed for a near deadline lets the lease expire", async () => {
  const h = start(handoff(9, 10_000));
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 9) });
  h.client.queue.push(
    ...Array.from(
      { length: 5 },
      () => ({ kind: "server-error" as const, status: 500, message: "x" }),
    ),
  );
  await h.clock.advanceTo(t0 + 6_000); // gate closes: deadline t0 + 10 s
  assert.equal(h.enforcer.open_, false);
  // A renewal that fails in the lead says the workload is stopped, not running.
  await h.clock.advanceTo(t0 + 2 * HB + 1);
  const failed = h.logs.filter((l) =>
    l.includes('"msg":"renew failed; still within lease TTL, will retry"')
  );
  assert.match(
    failed.at(-1) ?? "",
    /the workload stays stopped/,
    h.logs.join(""),
  );
  assert.doesNotMatch(failed.at(-1) ?? "", /keeps running/);
  h.enforcer.stopped = (signal) =>
    new Promise((resolve) =>
      signal.addEventListener(
        "abort",
        () => resolve({ stopped: false, detail: "test: still running" }),
      )
    );
  h.shutdown.abort();
  await h.clock.advanceTo(t0 + 10_000);
  await h.done;
  assert.equal(h.client.of("release").length, 0);
  assert.ok(h.logs.some((l) => l.includes("it expires on its own")));
});

Deno.test("a shutdown after the local deadline passed (a frozen sidecar) does not release: the lease is not held", async () => {
  const h = start(handoff(9, 10_000));
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 9) });
  // Every renewal hangs until the deadline; then another holder has it.
  await h.clock.advanceTo(t0 + 10_000 + HB);
  const acq = h.client.pending()!;
  assert.equal(acq.rpc, "acquire");
  acq.answer({
    kind: "not-acquired",
    lease: record("prod/pod:web-1:uid:2", 10),
  });
  await settle();
  h.shutdown.abort();
  await h.done;
  assert.equal(h.client.of("release").length, 0);
  assert.ok(
    h.logs.some((l) =>
      l.includes('"msg":"sidecar shutting down without release"') &&
      l.includes("its local deadline has passed")
    ),
    h.logs.join(""),
  );
  assert.ok(!h.logs.some((l) => l.includes("before the workload was known")));
});

Deno.test("a sidecar frozen past its deadline with SIGTERM pending stops the workload before it exits, and does not release", async () => {
  const h = start(handoff(9, 10_000));
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 9) });
  await settle();
  assert.ok(h.enforcer.open_);
  // Frozen until well past the deadline; on waking, the stop is there first.
  h.clock.jumpTo(t0 + 20_000);
  h.shutdown.abort();
  await h.clock.advanceTo(t0 + 20_000);
  await h.done;
  assert.equal(h.enforcer.open_, false, "the workload was left running");
  assert.equal(
    h.enforcer.firstClose()?.reason,
    "the lease was not confirmed in time: its local deadline is near",
  );
  assert.equal(h.client.of("release").length, 0);
});

Deno.test("a sidecar frozen past the gate's closing time (not the deadline) with SIGTERM pending stops the workload before it exits", async () => {
  const h = start(handoff(9, 10_000), { releaseOnShutdown: false });
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 9) });
  await settle();
  assert.ok(h.enforcer.open_);
  h.clock.jumpTo(t0 + 8_000); // the gate closes at t0 + 6 s, the deadline t0 + 10 s
  h.shutdown.abort();
  await h.clock.advanceTo(t0 + 8_000);
  await h.done;
  assert.equal(h.enforcer.open_, false, "the workload was left running");
});

Deno.test("a reacquired token the volume refuses is kept, retried, and its lease released; the next grant is not mistaken for another process's", async () => {
  const h = start(() => {});
  await settle();
  h.store.refuseToken = true;
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 6) });
  await h.clock.advance(1_000); // the retries
  assert.deepEqual(h.store.writes, [
    "holder=" + HOLDER,
    "token=6 refused",
    "token=6 refused",
    "token=6 refused",
  ]);
  const rel = h.client.pending()!;
  assert.equal(
    rel.rpc,
    "release",
    "a token the workload cannot get is given back",
  );
  assert.equal(rel.token, 6);
  rel.answer({ kind: "server-error", status: 500, message: "x" }); // not released
  await settle();
  assert.equal(h.enforcer.open_, false);
  const error = h.logs.find((l) =>
    l.includes('"level":"WARN"') &&
    l.includes('"msg":"persist reacquired state failed"')
  )!;
  assert.match(error, /cannot write the token file/);
  assert.match(error, /\/berth\/token/);
  // The volume is writable again; the server extends our own unreleased grant.
  h.store.refuseToken = false;
  await h.clock.advance(HB);
  h.client.pending()!.answer({
    kind: "acquired",
    lease: record(HOLDER, 6, {
      acquiredAt: "2026-05-07T00:00:00Z",
      expiresAt: "2026-05-07T00:00:13Z",
    }),
  });
  await settle();
  assert.ok(h.enforcer.open_, "our own grant, not another process's");
  assert.ok(!h.logs.some((l) => l.includes("already held under this holder")));
  assert.equal(h.store.token, 6);
  await stop(h);
});

Deno.test("a refused token right after a loss is released only once the workload stopped at the loss is gone, or the lead has passed", async () => {
  const h = start(handoff(4, 10_000));
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await h.clock.advanceTo(t0 + HB);
  // The loss: the gate closes, and the workload takes its time to stop;
  // the marker could not be removed either (the volume is read-only), yet
  // keeping the lease would only have the next tick extend it for no one.
  h.enforcer.stopped = () =>
    Promise.resolve({
      stopped: false,
      detail: "test: still stopping",
      markerLeft: true,
    });
  h.client.pending()!.answer({
    kind: "not-acquired",
    lease: record("prod/pod:web-1:uid:2", 5),
  });
  await settle();
  const closedAt = h.enforcer.firstClose()!.at;
  // The next tick gets the lease back, but the volume refuses its token.
  h.store.refuseToken = true;
  await h.clock.advanceTo(t0 + 2 * HB + 1);
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 6) });
  await h.clock.advanceTo(closedAt + LEAD - 1);
  assert.equal(
    h.client.of("release").length,
    0,
    "no release while the stopped workload may still run",
  );
  await h.clock.advanceTo(closedAt + LEAD);
  const rel = h.client.pending()!;
  assert.equal(rel.rpc, "release");
  assert.equal(rel.token, 6);
  rel.answer({ kind: "released" });
  await settle();
  assert.equal(h.enforcer.open_, false);
  h.store.refuseToken = false;
  await stop(h);
});

Deno.test("a lease-loop tick that throws closes the gate with a logged reason, and the loop goes on", async () => {
  const h = start(handoff(4, 10_000));
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await settle();
  assert.ok(h.enforcer.open_);
  const bootNow = h.clock.bootNow.bind(h.clock);
  h.clock.bootNow = () => {
    throw new Error("/proc/uptime: cannot read it");
  };
  await h.clock.advanceTo(t0 + HB);
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await settle();
  assert.equal(h.enforcer.open_, false, "fails closed");
  assert.ok(
    h.logs.some((l) =>
      l.includes('"level":"ERROR"') && l.includes("the lease loop failed") &&
      l.includes("/proc/uptime")
    ),
  );
  // The clock works again: the next renewal opens the gate.
  h.clock.bootNow = bootNow;
  await h.clock.advanceTo(t0 + 2 * HB + 1);
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await settle();
  assert.ok(h.enforcer.open_, "reopened by a renewal that succeeds");
  await stop(h);
});

Deno.test("a marker the volume refuses is reported once per run of failures, with the write named", async () => {
  const h = start(handoff(4, 10_000));
  const t0 = h.clock.now();
  let refuse = true;
  h.enforcer.open = (marker) => {
    h.enforcer.events.push({ at: h.clock.now(), op: "open", marker });
    return refuse
      ? Promise.reject(
        new Error("/berth/healthy: cannot write it: No space left on device"),
      )
      : Promise.resolve();
  };
  await settle();
  h.client.queue.push(
    ...Array.from(
      { length: 3 },
      () => ({ kind: "acquired" as const, lease: record(HOLDER, 4) }),
    ),
  );
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await h.clock.advanceTo(t0 + 2 * HB + 1);
  const errors = h.logs.filter((l) =>
    l.includes("health marker cannot be written")
  );
  assert.equal(errors.length, 1);
  assert.match(errors[0], /No space left on device/);
  assert.match(errors[0], /"write":"health marker"/);
  refuse = false;
  await h.clock.advanceTo(t0 + 3 * HB + 1);
  assert.ok(
    h.logs.some((l) => l.includes("the health marker is written again")),
  );
  await stop(h);
});

Deno.test("an observer that throws neither keeps the gate timer from stopping the workload nor ends the loop", async () => {
  let calls = 0;
  const h = start(handoff(4, 10_000), {
    observer: {
      changed: () => {
        calls++;
        throw new Error("observer broke");
      },
    },
  });
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await settle();
  // No renewal answers from here: the gate timer alone closes the gate.
  await h.clock.advanceTo(t0 + HB);
  h.client.pending()!.answer({
    kind: "server-error",
    status: 500,
    message: "internal error",
  });
  await h.clock.advanceTo(t0 + 6_000);
  assert.equal(h.enforcer.firstClose()?.at, t0 + 6_000);
  assert.ok(calls > 0);
  assert.ok(
    h.logs.some((l) =>
      l.includes("a lease status observer failed") &&
      l.includes("observer broke")
    ),
    h.logs.join("\n"),
  );
  // The loop is still running: the next heartbeat sends again.
  await h.clock.advanceTo(t0 + 2 * HB + 1);
  assert.ok(h.client.pending(), "the loop goes on after the observer failed");
  await stop(h);
});

Deno.test("a reacquire in flight at shutdown is not cut short: its grant reaches no workload and is released, even with releases off", async () => {
  for (const releaseOnShutdown of [true, false]) {
    const h = start(handoff(4, 10_000), { releaseOnShutdown });
    const t0 = h.clock.now();
    await settle();
    h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
    await h.clock.advanceTo(t0 + HB);
    h.client.pending()!.answer({
      kind: "not-acquired",
      lease: record("prod/pod:web-1:uid:2", 5),
    });
    await settle();
    const closedAt = h.enforcer.firstClose()!.at;
    // The next tick asks for the lease again; the stop arrives meanwhile.
    await h.clock.advanceTo(t0 + 2 * HB + 1);
    const acq = h.client.pending()!;
    assert.equal(acq.rpc, "acquire");
    const writes = h.store.writes.length;
    h.shutdown.abort();
    await settle();
    assert.equal(acq.done, false, "the Acquire is left to finish");
    assert.equal(acq.signal.aborted, false);
    // The server granted it: the answer is read, and the lease released.
    acq.answer({ kind: "acquired", lease: record(HOLDER, 6) });
    await h.clock.advanceTo(closedAt + LEAD);
    const rel = h.client.pending()!;
    assert.equal(rel.rpc, "release");
    assert.equal(rel.token, 6);
    rel.answer({ kind: "released" });
    await h.done;
    assert.equal(h.store.writes.length, writes, "no token written for it");
    assert.ok(
      h.enforcer.events.filter((e) => e.at > closedAt).every((e) =>
        e.op !== "open"
      ),
      "the gate never opened for it",
    );
    assert.ok(
      h.logs.some((l) => l.includes("lease reacquired while shutting down")),
    );
  }
});

Deno.test("a health marker the close could not remove keeps the lease from being released at shutdown: the probe may pass until its deadline", async () => {
  const h = start(handoff(4, 10_000));
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await settle();
  h.enforcer.stopped = () =>
    Promise.resolve({
      stopped: true,
      detail: "test: stopped",
      markerLeft: true,
    });
  h.shutdown.abort();
  await h.done;
  assert.equal(h.client.of("release").length, 0, "no release");
  assert.ok(
    h.logs.some((l) =>
      l.includes('"level":"ERROR"') &&
      l.includes(
        "not releasing the lease: the health marker could not be removed",
      )
    ),
    h.logs.join("\n"),
  );
});

Deno.test("a renewal failure that names its fix keeps Go's retry line, adds fix=, and an ERROR with the fix once a minute", async () => {
  const h = start(handoff(4, 10_000));
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await settle();
  const fix = "use http:// in --api-server / BERTH_API_SERVER";
  const parsed = () => h.logs.map((l) => JSON.parse(l));
  // Failures until well past a minute; the lease lapses meanwhile, which is
  // the renewer's business: only the lines are looked at here.
  for (let t = t0 + HB; t < t0 + 70_000; t += HB) {
    await h.clock.advanceTo(t);
    const c = h.client.pending();
    c?.answer({ kind: "transport-error", message: "plain HTTP", fix });
    await settle();
  }
  const renewals = parsed().filter((r) =>
    r.level === "WARN" &&
    r.msg === "renew failed; still within lease TTL, will retry"
  );
  assert.ok(renewals.length >= 1);
  assert.ok(renewals.every((r) => r.fix === fix), "fix= on every retry line");
  const errors = parsed().filter((r) =>
    r.level === "ERROR" && r.msg === UNUSABLE_SERVER_MESSAGE
  );
  assert.ok(errors.length >= 1 && errors.length <= 2, JSON.stringify(errors));
  assert.ok(errors.every((r) => r.fix === fix));
  await stop(h);
});

Deno.test("an unreadable boot-time clock when the handoff is adopted keeps the workload stopped and the sidecar renewing", async () => {
  const h = start((store, clock) => {
    handoff(7, 9_000)(store, clock);
    clock.bootNow = () => {
      throw new Error("/proc/uptime: cannot read it");
    };
  });
  await settle();
  assert.equal(
    h.enforcer.open_,
    false,
    "not adopted on a deadline it cannot check",
  );
  assert.ok(h.logs.some((l) => l.includes("/proc/uptime: cannot read it")));
  const renew = h.client.pending()!;
  assert.equal(renew.rpc, "renew", "the handed-over lease is confirmed");
  assert.equal(renew.token, 7);
  // The clock is readable again: the next confirmation lets the workload run.
  delete (h.clock as { bootNow?: unknown }).bootNow;
  renew.answer({ kind: "acquired", lease: record(HOLDER, 7) });
  await settle();
  assert.ok(h.enforcer.open_);
  await stop(h);
});

Deno.test("a release at shutdown that throws still ends the sidecar cleanly, and the enforcer is disposed", async () => {
  const h = start(handoff(9, 10_000));
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 9) });
  await settle();
  h.client.release = () => Promise.reject(new Error("client bug"));
  h.shutdown.abort();
  await h.done; // resolves: a clean SIGTERM ends with 0
  assert.equal(h.enforcer.events.at(-1)?.op, "dispose");
  assert.ok(h.logs.some((l) => l.includes("client bug")));
});

Deno.test("a SIGTERM during the wait to release a refused token ends the wait: no release, the lease expires on its own", async () => {
  const h = start(handoff(4, 10_000));
  const t0 = h.clock.now();
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 4) });
  await h.clock.advanceTo(t0 + HB);
  h.enforcer.stopped = () =>
    Promise.resolve({ stopped: false, detail: "test: cannot see it" });
  h.client.pending()!.answer({
    kind: "not-acquired",
    lease: record("prod/pod:web-1:uid:2", 5),
  });
  await settle();
  h.store.refuseToken = true;
  await h.clock.advanceTo(t0 + 2 * HB + 1);
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 6) });
  await h.clock.advance(500); // the write retries; now waiting for the lead
  assert.ok(h.logs.some((l) => l.includes("waiting for the enforcement lead")));
  let ended = false;
  h.done.then(() => ended = true);
  h.shutdown.abort();
  await settle();
  assert.ok(ended, "no wait for the rest of the lead");
  assert.equal(h.client.of("release").length, 0);
  assert.ok(
    h.logs.some((l) => l.includes("not releasing the lease: shutting down")),
  );
});

/** An enforcer whose stop finishes only when the test says: SIGTERM ignored, the SIGKILL still due. */
function slowStop(h: Harness) {
  let finish = () => {};
  const finished = new Promise<void>((r) => finish = r);
  let done = false;
  finished.then(() => done = true);
  h.enforcer.stopped = async (signal) => {
    await Promise.race([
      finished,
      new Promise((r) => signal.addEventListener("abort", r)),
    ]);
    return done
      ? { stopped: true, detail: "test: gone" }
      : { stopped: false, stopping: true, detail: "test: SIGKILL due" };
  };
  return () => finish();
}

Deno.test("a stop the enforcer started that outlives the lead (a SIGKILL still due) holds the release until it finishes", async () => {
  const h = start(handoff(9, 10_000));
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 9) });
  await settle();
  const finish = slowStop(h);
  const t0 = h.clock.now();
  h.shutdown.abort();
  await h.clock.advanceTo(t0 + LEAD + 2_000);
  assert.equal(h.client.of("release").length, 0, "not while the stop runs");
  finish();
  await settle();
  const rel = h.client.pending()!;
  assert.equal(rel.rpc, "release");
  assert.equal(rel.at, t0 + LEAD + 2_000);
  rel.answer({ kind: "released" });
  await h.done;
  assert.ok(
    h.logs.some((l) =>
      l.includes("releasing the lease: the workload is stopped")
    ),
  );
});

Deno.test("a stop the enforcer started that has not finished by the lease's deadline: no release, the lease expires", async () => {
  const h = start(handoff(9, 10_000));
  await settle();
  h.client.pending()!.answer({ kind: "acquired", lease: record(HOLDER, 9) });
  await settle();
  slowStop(h);
  const t0 = h.clock.now();
  let ended = false;
  h.done.then(() => ended = true);
  h.shutdown.abort();
  await h.clock.advanceTo(t0 + 10_000);
  assert.ok(ended);
  assert.equal(h.client.of("release").length, 0);
  assert.ok(h.logs.some((l) => l.includes("not releasing the lease")));
});
