// The boot-time clock: read from /proc/uptime, forward-moving, the same
// clock systemClock.bootNow() reads, and a clear error for what it cannot read.
import assert from "node:assert/strict";
import { readBootMillis } from "../../lib/state/boot_clock.ts";
import { systemClock } from "../../lib/state/clock.ts";

Deno.test("the boot-time clock reads /proc/uptime and moves forward", () => {
  const a = readBootMillis();
  const viaClock = systemClock.bootNow();
  const b = readBootMillis();
  assert.ok(a > 0 && a <= viaClock && viaClock <= b);
  const uptime = Number(Deno.readTextFileSync("/proc/uptime").split(" ")[0]);
  assert.ok(Math.abs(uptime * 1000 - b) < 60_000);
});

Deno.test("an uptime file it cannot read or parse is named in the error", () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.writeTextFileSync(`${dir}/uptime`, "12.5 30.0\n");
    assert.equal(readBootMillis(`${dir}/uptime`), 12_500);
    Deno.writeTextFileSync(`${dir}/uptime`, "7.25\n");
    assert.equal(readBootMillis(`${dir}/uptime`), 7_250);
    Deno.writeTextFileSync(`${dir}/uptime`, "soon 1.0\n");
    assert.throws(
      () => readBootMillis(`${dir}/uptime`),
      /cannot read the boot-time clock from .*uptime: "soon 1.0\\n"/,
    );
    Deno.writeTextFileSync(`${dir}/uptime`, "");
    assert.throws(() => readBootMillis(`${dir}/uptime`), /boot-time clock/);
    assert.throws(
      () => readBootMillis(`${dir}/missing`),
      (e: unknown) => e instanceof Deno.errors.NotFound,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
