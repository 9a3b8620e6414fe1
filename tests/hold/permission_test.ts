// The workload's permission record and its queue: decisions change at once, are applied in
// order, and only a transition is logged.
import assert from "node:assert/strict";
import type { Enforcer } from "../../lib/enforce/enforcer.ts";
import { Permission } from "../../lib/hold/permission.ts";
import { createLogger } from "../../lib/obs/log.ts";
import type { MarkerDeadlines } from "../../lib/state/marker.ts";
import { FakeClock, settle } from "../support/fake_clock.ts";

const MARKER: MarkerDeadlines = {
  gateClosesBootMs: 6_000,
  leaseDeadlineBootMs: 10_000,
};

/** An enforcer whose every call waits until the test lets it finish. */
class HeldEnforcer implements Enforcer {
  calls: string[] = [];
  #pending: (() => void)[] = [];
  fail = false;
  #call(what: string): Promise<void> {
    this.calls.push(what);
    return new Promise((resolve, reject) =>
      this.#pending.push(() =>
        this.fail ? reject(new Error("marker: disk full")) : resolve()
      )
    );
  }
  open(): Promise<void> {
    return this.#call("open");
  }
  close(reason: string): Promise<void> {
    return this.#call(`close: ${reason}`);
  }
  workloadStopped() {
    return Promise.resolve({ stopped: true, detail: "test" });
  }
  dispose(): Promise<void> {
    return Promise.resolve();
  }
  /** Lets the oldest call finish. */
  finishOne(): void {
    this.#pending.shift()?.();
  }
}

function permission() {
  const clock = new FakeClock();
  const lines: string[] = [];
  const enforcer = new HeldEnforcer();
  const logger = createLogger({ write: (l) => lines.push(l) });
  return {
    clock,
    lines,
    enforcer,
    p: new Permission({ enforcer, clock, logger }),
  };
}

Deno.test("permission: starts closed, for the reason 'starting', closed since it was made", () => {
  const { p: g, clock } = permission();
  assert.equal(g.isOpen, false);
  assert.equal(g.reason, "starting");
  assert.equal(g.closedAt, clock.now());
  assert.ok(g.applied, "nothing decided yet");
});

Deno.test("permission: a decision changes at once; applied only once the enforcer is done, in order", async () => {
  const { p: g, enforcer } = permission();
  assert.equal(g.open(MARKER), true, "it was closed");
  assert.equal(g.isOpen, true);
  assert.equal(g.reason, undefined);
  g.close("lease lost");
  assert.equal(g.isOpen, false);
  assert.equal(g.reason, "lease lost");
  assert.equal(g.applied, false);
  await settle();
  assert.deepEqual(enforcer.calls, ["open"], "the close waits for the open");
  enforcer.finishOne();
  await settle();
  assert.deepEqual(enforcer.calls, ["open", "close: lease lost"]);
  assert.equal(g.applied, false, "the close is still being applied");
  enforcer.finishOne();
  await g.whenApplied();
  assert.ok(g.applied);
});

Deno.test("permission: only the close from open is logged and timed; a repeated close is applied again", async () => {
  const { p: g, enforcer, lines, clock } = permission();
  g.open(MARKER);
  assert.equal(g.open(MARKER), false, "already open");
  await clock.advance(1_000);
  assert.equal(g.close("lease lost"), true);
  assert.equal(g.closedAt, clock.now());
  await clock.advance(1_000);
  assert.equal(g.close("lease lost"), false, "same state, same reason");
  assert.equal(g.close("lease not held"), true, "a new reason is a change");
  assert.equal(g.closedAt, clock.now() - 1_000, "closed since the first");
  for (let i = 0; i < 5; i++) {
    enforcer.finishOne();
    await settle();
  }
  await g.whenApplied();
  assert.equal(enforcer.calls.filter((c) => c.startsWith("close")).length, 3);
  assert.equal(
    lines.filter((l) => l.includes("gate closed: stopping the workload"))
      .length,
    1,
    lines.join(""),
  );
});

Deno.test("permission: the close before a release at shutdown is logged as expected, not as a warning", () => {
  const { p: g, lines } = permission();
  g.open(MARKER);
  g.close("the lease is being released at shutdown", true);
  assert.equal(lines.length, 1);
  assert.match(lines[0], /INFO.*gate closed for the release at shutdown/);
});

Deno.test("permission: an enforcement that fails is logged and the queue goes on", async () => {
  const { p: g, enforcer, lines } = permission();
  enforcer.fail = true;
  g.open(MARKER);
  g.close("lease lost");
  await settle();
  enforcer.finishOne();
  await settle();
  enforcer.fail = false;
  enforcer.finishOne();
  await g.whenApplied();
  assert.deepEqual(enforcer.calls, ["open", "close: lease lost"]);
  assert.ok(
    lines.some((l) => /WARN.*msg="enforcer release failed".*disk full/.test(l)),
    lines.join(""),
  );
});

Deno.test("permission: adopting a handed-over lease opens it without a marker write", async () => {
  const { p: g, enforcer } = permission();
  g.adopt();
  assert.equal(g.isOpen, true);
  await settle();
  assert.deepEqual(enforcer.calls, []);
});
