// The workload's permission by the local deadline, on its own: a
// confirmation opens it until deadline minus lead, one timer closes it then,
// a confirmation that arrives too late leaves it closed, and the shutdown
// catches a timer that fell due while the loop was ending.
import assert from "node:assert/strict";
import type { Enforcer, StopEvidence } from "../../lib/enforce/enforcer.ts";
import { PermissionControl } from "../../lib/hold/permission_control.ts";
import type { RenewerStatus } from "../../lib/hold/status.ts";
import { createLogger } from "../../lib/obs/log.ts";
import type { MarkerDeadlines } from "../../lib/state/marker.ts";
import { FakeClock, settle } from "../support/fake_clock.ts";

class LoggingEnforcer implements Enforcer {
  events: string[] = [];
  open(d: MarkerDeadlines): Promise<void> {
    this.events.push(`open ${d.gateClosesBootMs}`);
    return Promise.resolve();
  }
  close(reason: string): Promise<void> {
    this.events.push(`close ${reason}`);
    return Promise.resolve();
  }
  workloadStopped(): Promise<StopEvidence> {
    return Promise.resolve({ kind: "stopped" } as never);
  }
  dispose(): Promise<void> {
    return Promise.resolve();
  }
}

const TTL_S = 10;
const LEAD_MS = 3_000;

function control(role?: "sidecar" | "run") {
  const clock = new FakeClock();
  const enforcer = new LoggingEnforcer();
  const lines: string[] = [];
  const seen: RenewerStatus[] = [];
  const c = new PermissionControl({
    ttlSeconds: TTL_S,
    enforceLeadMs: LEAD_MS,
    enforcer,
    clock,
    logger: createLogger({ level: "DEBUG", write: (l) => lines.push(l) }),
    observer: { changed: (s) => seen.push(s) },
    token: () => 4,
    role,
  });
  return { c, clock, enforcer, lines, seen };
}

Deno.test("permission control: a confirmation opens until deadline minus lead; the timer then closes it", async () => {
  const { c, clock, enforcer, lines, seen } = control();
  c.start();
  const sentAt = clock.now();
  c.confirm(sentAt, "renewed");
  const closesAt = sentAt + TTL_S * 1000 - LEAD_MS;
  assert.deepEqual(c.status(), {
    permissionOpen: true,
    token: 4,
    deadline: sentAt + TTL_S * 1000,
    permissionClosesAt: closesAt,
    reason: undefined,
  });
  assert.ok(lines.some((l) => l.includes("INFO") && l.includes("renewed")));
  await clock.advanceTo(closesAt - 1);
  assert.equal(c.isOpen, true);
  await clock.advanceTo(closesAt);
  await settle();
  assert.equal(c.isOpen, false);
  assert.equal(
    c.reason,
    "the lease was not confirmed in time: its local deadline is near",
  );
  await c.whenApplied();
  assert.equal(enforcer.events.length, 2);
  assert.match(enforcer.events[1], /^close the lease was not confirmed/);
  assert.deepEqual(seen.map((s) => s.permissionOpen), [true, false]);
  c.stop();
  assert.equal(clock.nextWake(), undefined, "no timer left");
});

Deno.test("permission control: a confirmation past its own closing time leaves the permission closed", () => {
  const { c, clock, enforcer, lines } = control();
  c.start();
  const sentAt = clock.now() - (TTL_S * 1000 - LEAD_MS);
  c.confirm(sentAt, "renewed");
  assert.equal(c.isOpen, false);
  assert.equal(
    c.reason,
    "the last confirmation arrived after its own deadline",
  );
  assert.ok(lines.some((l) => l.includes("confirmed the lease too late")));
  assert.ok(!enforcer.events.some((e) => e.startsWith("open")));
  c.stop();
});

Deno.test("permission control: after stop no timer runs, and the shutdown closes a permission whose time came", async () => {
  const { c, clock } = control();
  c.start();
  c.confirm(clock.now(), "renewed");
  c.stop();
  assert.equal(clock.nextWake(), undefined);
  clock.jumpTo(clock.now() + TTL_S * 1000);
  assert.equal(c.isOpen, true, "no timer closed it");
  await c.closeIfDue();
  assert.equal(c.isOpen, false);
});

Deno.test("permission control: an adopted lease opens without telling the enforcer, only while its closing time is ahead", () => {
  const { c, enforcer } = control();
  assert.equal(c.adopt(LEAD_MS + 1), true);
  assert.equal(c.isOpen, true);
  assert.deepEqual(enforcer.events, []);
  const other = control();
  assert.equal(other.c.adopt(LEAD_MS), false);
  assert.equal(other.c.isOpen, false);
});

Deno.test("permission control: the timer's close is one WARN line in run (the reason), the Go helper's line beside it in the sidecar", async () => {
  for (const role of ["sidecar", "run"] as const) {
    const { c, clock, lines } = control(role);
    c.start();
    c.confirm(clock.now(), "renewed");
    await clock.advanceTo(clock.now() + TTL_S * 1000 - LEAD_MS);
    await settle();
    await c.whenApplied();
    const warns = lines.filter((l) => l.includes("level=WARN"));
    const said = warns.map((l) => /msg="([^"]*)"/.exec(l)?.[1]);
    assert.deepEqual(
      said,
      role === "run" ? ["gate closed: stopping the workload"] : [
        "local lease deadline reached; enforcing",
        "gate closed: stopping the workload",
      ],
      role,
    );
    assert.ok(warns.at(-1)!.includes("not confirmed in time"));
    c.stop();
  }
});
