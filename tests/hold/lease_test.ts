// A held lease seen locally: the marker's deadlines, the release and its
// words, and the wait until releasing is safe, with a fake clock.
import assert from "node:assert/strict";
import type { Enforcer, StopEvidence } from "../../lib/enforce/enforcer.ts";
import {
  markerDeadlines,
  releaseLease,
  releaseWhenSafe,
} from "../../lib/hold/lease.ts";
import type { ReleaseOutcome } from "../../lib/lease/rpc.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { GO_MESSAGES as GO } from "../../lib/obs/go_messages.ts";
import { FakeClock, settle } from "../support/fake_clock.ts";
import { ScriptedClient } from "../support/scripted_client.ts";

const HOLDER = "prod/pod:web-0:uid:1";
const LEAD = 4_000;

// deno-lint-ignore no-explicit-any
type Line = Record<string, any>;

function params(evidence?: (s: AbortSignal) => Promise<StopEvidence>) {
  const clock = new FakeClock();
  const client = new ScriptedClient(() => clock.now());
  const lines: Line[] = [];
  const enforcer: Enforcer = {
    open: () => Promise.resolve(),
    close: () => Promise.resolve(),
    workloadStopped: (s) => evidence!(s),
    dispose: () => Promise.resolve(),
  };
  const p = {
    client,
    holder: HOLDER,
    ttlSeconds: 10,
    heartbeatMs: 3_000,
    enforceLeadMs: LEAD,
    clock,
    logger: createLogger({
      level: "DEBUG",
      format: "json",
      write: (l) => lines.push(JSON.parse(l)),
    }),
    enforcer,
  };
  return { p, clock, client, lines, t0: clock.now() };
}

const said = (lines: Line[]) => lines.map((l) => `${l.level} ${l.msg}`);

Deno.test("markerDeadlines: the lease's deadline and the gate's closing time on the boot and the wall clock", () => {
  assert.deepEqual(markerDeadlines(8_000, 4_000, 50_000, 1_700_000_000_000), {
    leaseDeadlineBootMs: 58_000,
    gateClosesBootMs: 54_000,
    leaseDeadlineWallMs: 1_700_000_008_000,
    gateClosesWallMs: 1_700_000_004_000,
  });
  assert.deepEqual(markerDeadlines(2_500, 0, 0, 10), {
    leaseDeadlineBootMs: 2_500,
    gateClosesBootMs: 2_500,
    leaseDeadlineWallMs: 2_510,
    gateClosesWallMs: 2_510,
  });
});

Deno.test("releaseLease says each answer in the Go helper's words at shutdown and in this project's otherwise", async () => {
  const failure: ReleaseOutcome = {
    kind: "server-error",
    status: 503,
    message: "unavailable",
  };
  const cases: [ReleaseOutcome, boolean, string, string | undefined][] = [
    [{ kind: "released" }, true, `INFO ${GO.released}`, undefined],
    [{ kind: "released" }, false, "INFO lease released", undefined],
    [
      { kind: "conflict", message: "held" },
      true,
      `INFO ${GO.releaseConflict}`,
      undefined,
    ],
    [
      { kind: "conflict", message: "held" },
      false,
      "INFO lease already belongs to another holder; nothing to release",
      undefined,
    ],
    [failure, true, `WARN ${GO.releaseFailed}`, "the lease expires on its own"],
    [
      failure,
      false,
      "WARN lease release failed; it will expire on its own",
      undefined,
    ],
  ];
  for (const [outcome, atShutdown, line, detail] of cases) {
    const { p, client, lines } = params();
    client.queue.push(outcome);
    await releaseLease(p, 7, atShutdown);
    assert.deepEqual(client.calls.map((c) => [c.rpc, c.holder, c.token]), [
      ["release", HOLDER, 7],
    ]);
    assert.deepEqual(said(lines), [line]);
    assert.equal(lines[0].fencing_token, 7);
    assert.equal(lines[0].detail, detail);
    if (outcome === failure) assert.match(lines[0].error, /503/);
  }
});

Deno.test("releaseLease is bounded at 5 s and tied to no shutdown signal", async () => {
  const { p, client, clock, lines, t0 } = params();
  const done = releaseLease(p, 7, true);
  await settle();
  const call = client.pending()!;
  await clock.advanceTo(t0 + 4_999);
  assert.equal(call.signal.aborted, false);
  await clock.advanceTo(t0 + 5_000);
  assert.equal((call.signal.reason as Error).name, "TimeoutError");
  await done;
  assert.deepEqual(said(lines), [`WARN ${GO.releaseFailed}`]);
});

/** Evidence that a stop the enforcer started finishes at `at` (never: Infinity). */
function stopsAt(clock: FakeClock, at: number) {
  return (signal: AbortSignal) =>
    new Promise<StopEvidence>((resolve) => {
      const done = () =>
        resolve(
          clock.now() >= at
            ? { stopped: true, detail: "gone" }
            : { stopped: false, stopping: true, detail: "SIGKILL due" },
        );
      if (clock.now() >= at) return done();
      const cancel = at === Infinity
        ? () => {}
        : clock.after(at - clock.now(), done);
      signal.addEventListener("abort", () => (cancel(), done()), {
        once: true,
      });
    });
}

const WAITING =
  "INFO waiting for the enforcement lead to pass before releasing the lease";
const LEAD_PASSED =
  "INFO releasing the lease: the enforcement lead has passed since the gate closed";
const STOPPED = "INFO releasing the lease: the workload is stopped";
const RELEASED = `INFO ${GO.released}`;

Deno.test("releaseWhenSafe releases once the workload is known stopped, or the lead has passed since the close and no stop is unfinished; else lets the lease expire", async () => {
  const known = (ev: StopEvidence) => () => () => Promise.resolve(ev);
  const unseen = known({ stopped: false, detail: "cannot see it" });
  const cases: {
    name: string;
    evidence: (c: FakeClock) => (s: AbortSignal) => Promise<StopEvidence>;
    closedAgo: number;
    deadlineIn?: number;
    /** A release while the loop runs; its shutdown comes at this offset. */
    running?: number;
    lines: string[];
    releasedAt?: number;
  }[] = [{
    name: "known stopped",
    evidence: known({ stopped: true, detail: "gone" }),
    closedAgo: 0,
    deadlineIn: 10_000,
    lines: [STOPPED, RELEASED],
    releasedAt: 0,
  }, {
    name: "not seen: the rest of the lead",
    evidence: unseen,
    closedAgo: 1_000,
    deadlineIn: 10_000,
    lines: [WAITING, LEAD_PASSED, RELEASED],
    releasedAt: 3_000,
  }, {
    name: "not seen, the lead already past",
    evidence: unseen,
    closedAgo: 5_000,
    deadlineIn: 10_000,
    lines: [LEAD_PASSED, RELEASED],
    releasedAt: 0,
  }, {
    name: "a marker left behind",
    evidence: known({ stopped: true, markerLeft: true, detail: "EACCES" }),
    closedAgo: 0,
    deadlineIn: 10_000,
    lines: [
      "ERROR not releasing the lease: the health marker could not be removed, so the workload's liveness probe may pass until the deadline written in it; the lease expires on its own",
    ],
  }, {
    name: "a marker left behind while the loop runs (a refused token)",
    evidence: known({ stopped: false, markerLeft: true, detail: "EACCES" }),
    closedAgo: 0,
    deadlineIn: 10_000,
    running: Infinity,
    lines: [WAITING, LEAD_PASSED, "INFO lease released"],
    releasedAt: LEAD,
  }, {
    name: "the deadline first",
    evidence: unseen,
    closedAgo: 0,
    deadlineIn: 2_000,
    lines: [
      WAITING,
      "WARN not releasing the lease: its deadline passed before the workload was known to be stopped; it expires on its own",
    ],
  }, {
    name: "a shutdown during the wait",
    evidence: unseen,
    closedAgo: 0,
    deadlineIn: 10_000,
    running: 1_000,
    lines: [
      WAITING,
      "WARN not releasing the lease: shutting down before the workload was known to be stopped; it expires on its own",
    ],
  }, {
    name: "a stop that outlives the lead",
    evidence: (c) => stopsAt(c, c.now() + 6_000),
    closedAgo: 0,
    deadlineIn: 10_000,
    lines: [STOPPED, RELEASED],
    releasedAt: 6_000,
  }, {
    name: "a stop unfinished at the deadline",
    evidence: (c) => stopsAt(c, Infinity),
    closedAgo: 0,
    deadlineIn: 10_000,
    lines: [
      "WARN not releasing the lease: its deadline passed before the workload was known to be stopped; it expires on its own",
    ],
  }, {
    name: "a stop unfinished a TTL after the lead, no deadline known",
    evidence: (c) => stopsAt(c, Infinity),
    closedAgo: 0,
    lines: [
      "WARN not releasing the lease: a stop of the workload has not finished by the lease's deadline; it expires on its own",
    ],
  }];
  for (const c of cases) {
    let evidence: (s: AbortSignal) => Promise<StopEvidence> = () => {
      throw new Error("unset");
    };
    const { p, client, clock, lines, t0 } = params((s) => evidence(s));
    evidence = c.evidence(clock);
    client.queue.push({ kind: "released" });
    const stop = new AbortController();
    if (c.running !== undefined && c.running !== Infinity) {
      clock.after(c.running, () => stop.abort());
    }
    const deadline = c.deadlineIn === undefined ? undefined : t0 + c.deadlineIn;
    let ended = false;
    const done = releaseWhenSafe(
      p,
      t0 - c.closedAgo,
      7,
      deadline,
      c.running === undefined ? undefined : stop.signal,
    ).then(() => ended = true);
    await clock.advanceTo(t0 + 20_000);
    assert.ok(ended, c.name);
    await done;
    assert.deepEqual(said(lines), c.lines, c.name);
    const released = client.of("release");
    assert.deepEqual(
      released.map((r) => r.at! - t0),
      c.releasedAt === undefined ? [] : [c.releasedAt],
      c.name,
    );
    assert.ok(released.every((r) => r.token === 7 && r.holder === HOLDER));
    if (c.lines[0] === WAITING) {
      assert.equal(lines[0].wait_ms, LEAD - c.closedAgo, c.name);
    }
  }
});
