// The system clock's waits: long ones must not fire at once (timers cap at
// 2^31-1 ms), short ones must fire, and a caller's signal ends a wait.
import assert from "node:assert/strict";
import { bounded, systemClock } from "../../lib/state/clock.ts";
import { FakeClock } from "../support/fake_clock.ts";
import { timersOf } from "../support/timers.ts";

Deno.test("a wait longer than a timer can hold does not fire early", async () => {
  const month = 30 * 24 * 3600 * 1000;
  const signal = systemClock.timeout(month);
  // Let any timer that would fire "at once" do so.
  await systemClock.sleep(50);
  assert.equal(signal.aborted, false);
  const stop = new AbortController();
  const slept = systemClock.sleep(month, stop.signal);
  stop.abort();
  await slept; // ends because of the caller's signal, not the month
});

Deno.test("a short timeout aborts with a TimeoutError", async () => {
  const signal = systemClock.timeout(1);
  await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
  assert.equal((signal.reason as Error).name, "TimeoutError");
});

Deno.test("a wait its signal ends leaves no timer to wake the process later", async () => {
  const stop = new AbortController();
  const timers = await timersOf(async () => {
    const slept = systemClock.sleep(60_000, stop.signal);
    stop.abort();
    await slept;
  });
  assert.deepEqual(timers, { armed: 1, pending: 0 });
});

Deno.test("a wait that runs its course ends on its timer", async () => {
  const timers = await timersOf(() => systemClock.sleep(5));
  assert.deepEqual(timers, { armed: 1, pending: 0 });
});

Deno.test("a bounded call's signal times out on its clock with a TimeoutError", async () => {
  const clock = new FakeClock();
  using call = bounded(clock, 1000, new AbortController().signal);
  await clock.advance(999);
  assert.equal(call.signal.aborted, false);
  await clock.advance(1);
  assert.equal(call.signal.aborted, true);
  assert.equal((call.signal.reason as Error).name, "TimeoutError");
});

Deno.test("a bounded call's signal follows the caller's, already aborted or later", () => {
  const clock = new FakeClock();
  const early = new AbortController();
  early.abort("stopping");
  using a = bounded(clock, 1000, early.signal);
  assert.equal(a.signal.reason, "stopping");
  const later = new AbortController();
  using b = bounded(clock, 1000, later.signal);
  later.abort("shutdown");
  assert.equal(b.signal.reason, "shutdown");
});

Deno.test("a bounded call that ended leaves no listener on the caller's signal", () => {
  const caller = new AbortController();
  const clock = new FakeClock();
  const kept: AbortSignal[] = [];
  for (let i = 0; i < 2; i++) {
    using call = bounded(clock, 1000, caller.signal);
    kept.push(call.signal);
  }
  // Had a listener stayed, aborting the caller now would abort a call's signal.
  caller.abort();
  assert.deepEqual(kept.map((s) => s.aborted), [false, false]);
});
