// The system clock's waits: long ones must not fire at once (timers cap at
// 2^31-1 ms), short ones must fire, and a caller's signal ends a wait.
import assert from "node:assert/strict";
import { readBootMillis, systemClock } from "../../lib/state/clock.ts";
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

Deno.test("the boot-time clock reads /proc/uptime and moves forward", () => {
  const a = readBootMillis();
  const b = readBootMillis();
  assert.ok(a > 0 && b >= a);
  const dir = Deno.makeTempDirSync();
  try {
    Deno.writeTextFileSync(`${dir}/uptime`, "soon 1.0\n");
    assert.throws(() => readBootMillis(`${dir}/uptime`), /boot-time clock/);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
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
