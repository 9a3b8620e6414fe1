import { deepEqual, equal, match, ok, throws } from "node:assert/strict";
import {
  examineMarker,
  formatMarker,
  judgeMarker,
  type JudgeOptions,
  type MarkerObservation,
  type MarkerStat,
  readBootMillis,
  readSmallFileNoFollow,
  StateFileError,
} from "../../lib/state/marker.ts";
import { systemClock } from "../../lib/state/clock.ts";
import { cliArgv } from "../support/cli.ts";
import {
  inMountNamespace,
  mountNamespaceUnavailable,
} from "../support/mount_namespace.ts";

const PATH = "/berth/healthy";
const NOW = Date.UTC(2030, 0, 1, 12, 0, 0);
const BOOT = 5_000_000;

function file(ageMs: number): MarkerStat {
  return {
    isFile: true,
    isDirectory: false,
    isSymlink: false,
    isFifo: false,
    mtime: new Date(NOW - ageMs),
  };
}

const notRegular = (kind: Partial<MarkerStat>): MarkerStat => ({
  isFile: false,
  isDirectory: false,
  isSymlink: false,
  isFifo: false,
  mtime: new Date(NOW),
  ...kind,
});

/** Judges with the fixed clocks; `bootCalls` counts reads of the boot clock. */
function judge(
  obs: MarkerObservation,
  maxAgeMs: number,
  boot: () => number = () => BOOT,
) {
  let bootCalls = 0;
  const opts: JudgeOptions = {
    path: PATH,
    wallNowMs: NOW,
    bootNowMs: () => {
      bootCalls++;
      return boot();
    },
    maxAgeMs,
  };
  return { verdict: judgeMarker(obs, opts), bootCalls: () => bootCalls };
}

const ours = (gate: number) =>
  formatMarker({ gateClosesBootMs: gate, leaseDeadlineBootMs: gate + 2000 });

Deno.test("absent marker: Absent with the upstream line", () => {
  const { verdict } = judge(
    { stat: new Deno.errors.NotFound("x"), content: null },
    30_000,
  );
  deepEqual(verdict, {
    kind: "Absent",
    reason: "health marker absent: /berth/healthy",
  });
});

Deno.test("a directory, symlink or FIFO is never OK, even with presence-only", () => {
  for (
    const [kind, words] of [
      [{ isDirectory: true }, "is a directory"],
      [{ isSymlink: true }, "is a symbolic link"],
      [{ isFifo: true }, "is a named pipe"],
    ] as const
  ) {
    for (const maxAge of [0, 30_000]) {
      const { verdict } = judge(
        { stat: notRegular(kind), content: null },
        maxAge,
      );
      deepEqual(verdict.kind, "Indeterminate");
      ok(
        verdict.reason.startsWith(
          `health marker indeterminate: /berth/healthy: ${words}`,
        ),
        verdict.reason,
      );
    }
  }
});

Deno.test("an error examining the path is Indeterminate, path named once", () => {
  const { verdict } = judge({
    stat: new StateFileError(PATH, "cannot open the health marker: denied"),
    content: null,
  }, 30_000);
  deepEqual(verdict, {
    kind: "Indeterminate",
    reason:
      "health marker indeterminate: /berth/healthy: cannot open the health marker: denied",
  });
  const other = judge({
    stat: new Deno.errors.PermissionDenied("Permission denied (os error 13)"),
    content: null,
  }, 30_000).verdict;
  deepEqual(other, {
    kind: "Indeterminate",
    reason:
      "health marker indeterminate: /berth/healthy: Permission denied (os error 13)",
  });
});

Deno.test("fresh marker passes; age equal to the limit passes; 1 ms over fails", () => {
  deepEqual(judge({ stat: file(0), content: "" }, 30_000).verdict, {
    kind: "OK",
  });
  deepEqual(judge({ stat: file(15_000), content: "" }, 15_000).verdict, {
    kind: "OK",
  });
  deepEqual(judge({ stat: file(15_001), content: "" }, 15_000).verdict, {
    kind: "Stale",
    reason:
      "health marker stale: /berth/healthy not refreshed for 15.1s (limit 15s); the lease sidecar is not renewing",
  });
});

Deno.test("stale reason: exact upstream wording, age rounded to whole seconds as upstream rounds it", () => {
  const at = (age: number, limit: number) => {
    const v = judge({ stat: file(age), content: "" }, limit).verdict;
    return v.kind === "OK" ? "OK" : v.reason;
  };
  deepEqual(
    at(16_000, 15_000),
    "health marker stale: /berth/healthy not refreshed for 16s (limit 15s); the lease sidecar is not renewing",
  );
  // Rounding down to the limit would read as passing: rounded up to 100 ms.
  deepEqual(
    at(15_430, 15_000),
    "health marker stale: /berth/healthy not refreshed for 15.5s (limit 15s); the lease sidecar is not renewing",
  );
  // The probe's own start-up lag does not change the line.
  for (const age of [15_500, 16_099, 16_499]) {
    deepEqual(
      at(age, 15_000),
      "health marker stale: /berth/healthy not refreshed for 16s (limit 15s); the lease sidecar is not renewing",
      String(age),
    );
  }
  deepEqual(
    at(16_500, 15_000),
    "health marker stale: /berth/healthy not refreshed for 17s (limit 15s); the lease sidecar is not renewing",
  );
  deepEqual(
    at(150_000, 90_000),
    "health marker stale: /berth/healthy not refreshed for 2m30s (limit 1m30s); the lease sidecar is not renewing",
  );
  // A sub-second age keeps its milliseconds rather than printing "0s".
  deepEqual(
    at(50, 1),
    "health marker stale: /berth/healthy not refreshed for 50ms (limit 1ms); the lease sidecar is not renewing",
  );
});

Deno.test("presence only (max age 0): any age passes", () => {
  deepEqual(
    judge({ stat: file(86_400_000), content: "" }, 0).verdict,
    { kind: "OK" },
  );
});

Deno.test("an mtime in the future counts as fresh", () => {
  deepEqual(judge({ stat: file(-60_000), content: "" }, 15_000).verdict, {
    kind: "OK",
  });
});

Deno.test("no mtime: Indeterminate", () => {
  const { verdict } = judge(
    { stat: { ...file(0), mtime: null }, content: "" },
    15_000,
  );
  deepEqual(verdict.kind, "Indeterminate");
});

Deno.test("content that is not ours is judged by the mtime alone, without reading the boot clock", () => {
  for (const content of ["", "ok\n", "berth-acquire health marker v2\n"]) {
    const r = judge({ stat: file(1_000), content }, 30_000, () => {
      throw new Error("must not be read");
    });
    deepEqual(r.verdict, { kind: "OK" }, JSON.stringify(content));
    deepEqual(r.bootCalls(), 0);
  }
});

Deno.test("deadline not passed: OK; equal to the boot clock: OK", () => {
  const r = judge({ stat: file(1_000), content: ours(BOOT + 5_000) }, 30_000);
  deepEqual(r.verdict, { kind: "OK" });
  deepEqual(r.bootCalls(), 1);
  deepEqual(
    judge({ stat: file(1_000), content: ours(BOOT) }, 30_000).verdict,
    { kind: "OK" },
  );
});

Deno.test("deadline passed: Stale naming the gate deadline, though the mtime is fresh", () => {
  const r = judge({ stat: file(1_000), content: ours(BOOT - 1_250) }, 30_000);
  deepEqual(r.verdict, {
    kind: "Stale",
    reason:
      "health marker stale: /berth/healthy gate deadline passed 1s ago (gate_closes_boottime_ms in the marker); the lease sidecar has not confirmed the lease or cannot write the marker (its log says which)",
  });
  const justPast = judge({ stat: file(0), content: ours(BOOT - 1) }, 30_000);
  deepEqual(justPast.verdict.kind, "Stale");
});

Deno.test("deadline passed applies with presence-only too (content only makes it stricter)", () => {
  const r = judge({ stat: file(0), content: ours(BOOT - 3_000) }, 0);
  deepEqual(r.verdict.kind, "Stale");
});

Deno.test("both bounds failed: the mtime line wins and the boot clock is not read", () => {
  const r = judge(
    { stat: file(40_000), content: ours(BOOT - 3_000) },
    30_000,
  );
  deepEqual(r.verdict, {
    kind: "Stale",
    reason:
      "health marker stale: /berth/healthy not refreshed for 40s (limit 30s); the lease sidecar is not renewing",
  });
  deepEqual(r.bootCalls(), 0);
});

Deno.test("malformed content that claims to be ours: Indeterminate", () => {
  for (
    const content of [
      "berth-acquire health marker v1\ngarbage\n",
      "berth-acquire health marker v1\ngate_closes_boottime_ms=soon\nlease_deadline_boottime_ms=1\n",
      "berth-acquire health marker v1\ngate_closes_boottime_ms=1\n",
    ]
  ) {
    const { verdict } = judge({ stat: file(0), content }, 30_000);
    deepEqual(verdict.kind, "Indeterminate", JSON.stringify(content));
    ok(
      verdict.reason.startsWith(
        "health marker indeterminate: /berth/healthy: ",
      ),
    );
  }
});

Deno.test("our header without deadlines (startup-gate) is judged by its mtime alone", () => {
  const { verdict, bootCalls } = judge({
    stat: file(0),
    content: "berth-acquire health marker v1\n",
  }, 30_000);
  deepEqual(verdict.kind, "OK");
  deepEqual(bootCalls(), 0);
});

Deno.test("an unreadable boot clock with a deadline in the marker: Indeterminate", () => {
  const { verdict } = judge(
    { stat: file(0), content: ours(BOOT + 10_000) },
    30_000,
    () => {
      throw new Error("cannot read the boot-time clock from /proc/uptime");
    },
  );
  deepEqual(verdict, {
    kind: "Indeterminate",
    reason:
      "health marker indeterminate: /berth/healthy: cannot read the boot-time clock from /proc/uptime",
  });
});

Deno.test("examineMarker reads real files: fresh, absent, directory, symlink, FIFO, oversized", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const p = `${dir}/healthy`;
    const opts = { maxAgeMs: 30_000 };
    deepEqual(examineMarker(p, opts).kind, "Absent");
    Deno.writeTextFileSync(p, ours(readBootMillis() + 60_000));
    deepEqual(examineMarker(p, opts), { kind: "OK" });
    Deno.writeTextFileSync(p, ours(readBootMillis() - 10_000));
    deepEqual(examineMarker(p, opts).kind, "Stale");
    Deno.utimeSync(
      p,
      new Date(Date.now() - 60_000),
      new Date(Date.now() - 60_000),
    );
    const stale = examineMarker(p, { maxAgeMs: 30_000 });
    ok(
      stale.kind === "Stale" && stale.reason.includes("not refreshed for 1m"),
    );

    Deno.writeTextFileSync(`${dir}/target`, "");
    Deno.symlinkSync(`${dir}/target`, `${dir}/link`);
    const link = examineMarker(`${dir}/link`, opts);
    ok(
      link.kind === "Indeterminate" && link.reason.includes("symbolic link"),
    );

    Deno.mkdirSync(`${dir}/d`);
    deepEqual(examineMarker(`${dir}/d`, opts).kind, "Indeterminate");

    const fifo = new Deno.Command("mkfifo", { args: [`${dir}/fifo`] })
      .outputSync();
    if (fifo.success) {
      const v = examineMarker(`${dir}/fifo`, opts);
      ok(v.kind === "Indeterminate" && v.reason.includes("named pipe"));
    } else {
      console.log("skipped the FIFO case: mkfifo failed");
    }

    Deno.writeTextFileSync(`${dir}/big`, "x".repeat(4097));
    const big = examineMarker(`${dir}/big`, opts);
    ok(
      big.kind === "Indeterminate" && big.reason.includes("limit 4096 bytes"),
    );
    Deno.writeTextFileSync(`${dir}/max`, "x".repeat(4096));
    deepEqual(examineMarker(`${dir}/max`, opts), { kind: "OK" });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("readSmallFileNoFollow: absent is not an error; content is returned exactly; a directory is not read", () => {
  const dir = Deno.makeTempDirSync();
  try {
    equal(readSmallFileNoFollow(`${dir}/x`, 8, "thing"), undefined);
    Deno.writeTextFileSync(`${dir}/x`, "12345678");
    const r = readSmallFileNoFollow(`${dir}/x`, 8, "thing");
    deepEqual(new TextDecoder().decode(r?.bytes), "12345678");
    throws(
      () => readSmallFileNoFollow(`${dir}/x`, 7, "thing"),
      /^StateFileError: .*\/x: is 8 bytes or more, larger than any thing berth-acquire writes \(limit 7 bytes\)/,
    );
    const d = readSmallFileNoFollow(dir, 8, "thing");
    ok(d?.info.isDirectory && d.bytes === undefined);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("the wall-clock copy of the gate deadline fails the probe even when the boot clock says there is time", () => {
  // A boot clock that is not shared (LXCFS gives each container its own
  // /proc/uptime) would let the marker live too long; the wall copy stops it.
  const content = formatMarker({
    gateClosesBootMs: BOOT + 60_000,
    leaseDeadlineBootMs: BOOT + 64_000,
    gateClosesWallMs: NOW - 1_500,
    leaseDeadlineWallMs: NOW + 2_500,
  });
  const { verdict } = judge({ stat: file(0), content }, 30_000);
  deepEqual(verdict, {
    kind: "Stale",
    reason:
      "health marker stale: /berth/healthy gate deadline passed 2s ago on the wall clock (gate_closes_wall_ms in the marker) with 1m0s left on the boot-time clock: either this container's boot-time clock is not the sidecar's (LXCFS) and the sidecar has not confirmed the lease (its log says why), or this node's wall clock stepped forward (the next renewal writes a new marker)",
  });
  // The same moment on both clocks, read a few ms apart: the usual line.
  const skewed = formatMarker({
    gateClosesBootMs: BOOT + 4,
    leaseDeadlineBootMs: BOOT + 4_004,
    gateClosesWallMs: NOW - 1,
    leaseDeadlineWallMs: NOW + 3_999,
  });
  deepEqual(judge({ stat: file(0), content: skewed }, 30_000).verdict, {
    kind: "Stale",
    reason:
      "health marker stale: /berth/healthy gate deadline passed 1ms ago (gate_closes_wall_ms in the marker); the lease sidecar has not confirmed the lease or cannot write the marker (its log says which)",
  });
  const fresh = formatMarker({
    gateClosesBootMs: BOOT + 60_000,
    leaseDeadlineBootMs: BOOT + 64_000,
    gateClosesWallMs: NOW + 1_500,
    leaseDeadlineWallMs: NOW + 5_500,
  });
  deepEqual(
    judge({ stat: file(0), content: fresh }, 30_000).verdict.kind,
    "OK",
  );
});

Deno.test("the boot-time clock reads /proc/uptime, moves forward, and is systemClock's", () => {
  const a = readBootMillis();
  const viaClock = systemClock.bootNow();
  const b = readBootMillis();
  ok(a > 0 && a <= viaClock && viaClock <= b);
  const uptime = Number(Deno.readTextFileSync("/proc/uptime").split(" ")[0]);
  ok(Math.abs(uptime * 1000 - b) < 60_000);
});

const noNamespace = mountNamespaceUnavailable("a mount namespace");
if (noNamespace) {
  console.log(
    `skipping the probe against a given /proc/uptime: ${noNamespace}`,
  );
}

Deno.test({
  name:
    "the probe reads /proc/uptime exactly, and one it cannot read or parse is named in its line",
  ignore: noNamespace !== undefined,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const marker = `${dir}/healthy`;
      /** check's line with `uptime` in place of /proc/uptime (`undefined`: none there) and a gate deadline at `gate`. */
      const probe = async (uptime: string | undefined, gate: number) => {
        await Deno.writeTextFile(marker, ours(gate));
        await Deno.writeTextFile(`${dir}/uptime`, uptime ?? "");
        const out = await inMountNamespace(
          uptime === undefined
            ? 'mount -t tmpfs tmpfs /proc && shift && exec "$@"'
            : 'mount --bind "$1" /proc/uptime && shift && exec "$@"',
          [`${dir}/uptime`, ...cliArgv(["check", marker])],
        );
        equal(out.stderr, "");
        const line = out.stdout;
        equal(out.code, line === "" ? 0 : 1, line);
        return line.replace(`${marker}: `, "").replace(marker, "M");
      };
      equal(await probe("12.5 30.0\n", 12_500), "");
      equal(
        await probe("12.5 30.0\n", 12_499),
        "health marker stale: M gate deadline passed 1ms ago (gate_closes_boottime_ms in the marker); the lease sidecar has not confirmed the lease or cannot write the marker (its log says which)\n",
      );
      equal(await probe("7.25\n", 7_250), "");
      match(await probe("7.25\n", 7_249), /passed 1ms ago/);
      equal(
        await probe("soon 1.0\n", 1e15),
        'health marker indeterminate: cannot read the boot-time clock from /proc/uptime: "soon 1.0\\n"\n',
      );
      // Number("") is 0: an empty file must not read as "just booted".
      equal(
        await probe("", 1e15),
        'health marker indeterminate: cannot read the boot-time clock from /proc/uptime: ""\n',
      );
      match(
        await probe(undefined, 1e15),
        /^health marker indeterminate: No such file or directory \(os error 2\): readfile '\/proc\/uptime'\n$/,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
