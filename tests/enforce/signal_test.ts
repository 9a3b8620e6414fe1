/**
 * Signal mode against a scripted process table and a fake clock: which
 * PIDs and process groups get SIGTERM and SIGKILL, when, what is reported,
 * and what `workloadStopped` says meanwhile.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { StopEvidence } from "../../lib/enforce/enforcer.ts";
import {
  SignalEnforcer,
  type SignalEnforcerOptions,
} from "../../lib/enforce/signal.ts";
import { createLogger } from "../../lib/obs/log.ts";
import type { MarkerDeadlines } from "../../lib/state/marker.ts";
import { FakeClock, settle } from "../support/fake_clock.ts";
import { FakeMarker } from "../support/fake_marker.ts";
import {
  FakeProcessTable,
  type FakeProcessTableOptions,
  processInfo,
  type ScriptedProcess,
} from "../support/fake_process_table.ts";

/** Another container's control group as a container sees it (cgroup namespace). */
const MAIN = `0::/../cri-containerd-${"0123456789abcdef".repeat(4)}.scope`;
const SHIPPER = `0::/../cri-containerd-${"fedcba9876543210".repeat(4)}.scope`;

const DEADLINES: MarkerDeadlines = {
  gateClosesBootMs: 51_000_000,
  leaseDeadlineBootMs: 51_005_000,
};

/**
 * The target 10 leading its process group and session, and a `sh -c` child
 * 11 in both that ignores SIGTERM.
 */
function addLeaderAndStubbornChild(table: FakeProcessTable): void {
  table.add(10, { comm: "app", ppid: 1, pgid: 10, sid: 10 });
  table.add(11, { comm: "sh", ppid: 10, pgid: 10, sid: 10, ignoreTerm: true });
}

interface LogRecord {
  level: string;
  msg: string;
  [k: string]: unknown;
}

/** The records of the signals sent, in order. */
function signalled(records: LogRecord[]): LogRecord[] {
  return records.filter((r) =>
    /^sent SIG(TERM|KILL) to main process$/.test(String(r.msg))
  );
}

/**
 * An enforcer for `app` with a grace of 5 s, its marker and table journaling
 * into one list (`kill <pid> <signal>`, `marker remove`, ...).
 */
function setup(
  overrides: Partial<SignalEnforcerOptions> = {},
  tableOptions: FakeProcessTableOptions = {},
) {
  const journal: string[] = [];
  const records: LogRecord[] = [];
  const clock = new FakeClock();
  const table = new FakeProcessTable({ journal, ...tableOptions });
  const marker = new FakeMarker(journal);
  const logger = createLogger({
    format: "json",
    level: "DEBUG",
    write: (line) => records.push(JSON.parse(line)),
  });
  const enforcer = new SignalEnforcer({
    target: "app",
    graceMs: 5000,
    clock,
    logger,
    processTable: table,
    marker,
    ...overrides,
  });
  const kills = () => journal.filter((e) => e.startsWith("kill "));
  return { journal, records, clock, table, marker, enforcer, kills };
}

Deno.test("signal: the marker is removed before any signal is sent", async () => {
  const { journal, enforcer, table, marker } = setup();
  table.add(10, { comm: "app" });
  await enforcer.close("lease lost");
  assert.deepEqual(journal, ["marker remove", "kill 10 SIGTERM"]);
  assert.equal(marker.present, false);
  await enforcer.dispose();
});

Deno.test("signal: SIGKILL follows SIGTERM exactly when the grace has passed", async () => {
  const { enforcer, table, clock, kills, records } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill 10 SIGTERM"]);
  await clock.advanceTo(t0 + 4999);
  assert.deepEqual(kills(), ["kill 10 SIGTERM"], "no KILL before the grace");
  await clock.advanceTo(t0 + 5000);
  assert.deepEqual(kills(), ["kill 10 SIGTERM", "kill 10 SIGKILL"]);
  const sent = records.filter((r) =>
    /^sent SIG(TERM|KILL) to main process$/.test(String(r.msg))
  );
  assert.deepEqual(
    sent.map((r) => [r.level, r.pid, r.comm, r.signal, r.reason]),
    [
      ["INFO", 10, "app", "SIGTERM", "lease lost"],
      ["INFO", 10, "app", "SIGKILL", "lease lost"],
    ],
  );
  await enforcer.dispose();
});

Deno.test("signal: each target gets one SIGTERM however often close() is re-applied", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  await clock.advanceTo(t0 + 1000);
  await enforcer.close("lease lost");
  await clock.advanceTo(t0 + 2000);
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill 10 SIGTERM"]);
  await clock.advanceTo(t0 + 5000);
  assert.deepEqual(kills(), ["kill 10 SIGTERM", "kill 10 SIGKILL"]);
  await clock.advanceTo(t0 + 7000);
  assert.equal(kills().length, 2, "one SIGKILL only");
  await enforcer.dispose();
});

Deno.test("signal: grace 0 sends SIGKILL right after SIGTERM, without waiting", async () => {
  const { enforcer, table, kills } = setup({ graceMs: 0 });
  table.add(10, { comm: "app", ignoreTerm: true });
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill 10 SIGTERM", "kill 10 SIGKILL"]);
  await enforcer.dispose();
});

Deno.test("signal: PID 1, itself, its parent, its own executable, dead and other processes are spared", async () => {
  const { enforcer, table, kills } = setup();
  table.add(1, { comm: "app" });
  table.add(table.selfPid, { comm: "app" });
  table.add(table.parentPid, { comm: "app" });
  table.add(50, { comm: "app", exe: table.selfExe });
  table.add(51, { comm: "app", state: "Z" });
  table.add(54, { comm: "app", state: "X" });
  table.add(52, { comm: "app-sidecar", exe: "/bin/app-sidecar" });
  table.add(53, { comm: "ap" });
  table.add(60, { comm: "app", exe: "/usr/bin/app" });
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill 60 SIGTERM"]);
  await enforcer.dispose();
});

Deno.test("signal: a long target matches the kernel's 15-byte comm only when the full name is the target's", async () => {
  const { enforcer, table, kills } = setup({
    target: "payments-worker-main",
    graceMs: 0,
  });
  // comm keeps 15 bytes; argv[0] (a symlink to another binary) has the full name.
  table.add(10, {
    comm: "payments-worker",
    exe: "/usr/bin/sleep",
    cmdline: ["/app/payments-worker-main", "1000"],
  });
  // Same cut comm, another full name: never signalled.
  table.add(11, {
    comm: "payments-worker",
    exe: "/usr/bin/sleep",
    cmdline: ["/app/payments-worker-aux", "1000"],
  });
  // Same cut comm, full name unknown: not signalled either.
  table.add(12, { comm: "payments-worker" });
  // A script started through its interpreter: the script's path follows it.
  table.add(13, {
    comm: "payments-worker",
    exe: "/usr/bin/python3.12",
    cmdline: ["/usr/bin/python3", "/app/payments-worker-main"],
  });
  table.add(14, { comm: "payments-worke" });
  table.add(15, { comm: "payments-worker-main-2" });
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill 10 SIGTERM", "kill 13 SIGTERM"]);
  await enforcer.dispose();
});

Deno.test("signal: a 15-byte target is confirmed by the full name too", async () => {
  const { enforcer, table, kills } = setup({
    target: "payments-worker", // exactly 15 bytes: a comm of it may be cut
    graceMs: 0,
  });
  table.add(10, { comm: "payments-worker", cmdline: ["./payments-worker"] });
  table.add(11, { comm: "payments-worker", cmdline: ["payments-worker-2"] });
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill 10 SIGTERM"]);
  await enforcer.dispose();
});

Deno.test("signal: a process that renamed itself is found by its executable's basename", async () => {
  const { enforcer, table, kills } = setup({ target: "payments", graceMs: 0 });
  table.add(10, { comm: "renamed", exe: "/opt/app/payments" });
  table.add(11, { comm: "other", exe: "/opt/payments/other" });
  table.add(12, { comm: "unreadable" });
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill 10 SIGTERM"]);
  await enforcer.dispose();
});

Deno.test("signal: a target that exits before the signal (ESRCH) or at its SIGTERM gets no SIGKILL and no warning", async () => {
  const { enforcer, table, clock, journal, records } = setup();
  table.add(10, { comm: "app", vanishes: true });
  table.add(11, { comm: "app" });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  await clock.advanceTo(t0 + 10_000);
  assert.deepEqual(journal, [
    "marker remove",
    "gone 10 SIGTERM",
    "kill 11 SIGTERM",
  ]);
  assert.deepEqual(
    records.filter((r) => r.level === "WARN" || r.level === "ERROR"),
    [],
  );
  assert.ok(
    records.some((r) =>
      r.msg === "target exited after SIGTERM" && r.pid === 11
    ),
  );
  await enforcer.dispose();
});

Deno.test("signal: a refused signal (EPERM) is reported once with the fix, and enforcement goes on", async () => {
  const { enforcer, table, clock, kills, records, journal } = setup({
    graceMs: 0,
  });
  table.add(10, { comm: "app", denied: true, uid: 65532 });
  table.add(11, { comm: "app" });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  await enforcer.close("lease lost");
  await clock.advanceTo(t0 + 1000); // four rescans, all refused again
  assert.deepEqual(kills(), ["kill 11 SIGTERM"]);
  assert.equal(
    journal.filter((e) => e === "denied 10 SIGTERM").length,
    6,
    "tried again at every scan",
  );
  const warns = records.filter((r) => r.level === "WARN");
  assert.equal(warns.length, 1, JSON.stringify(warns));
  assert.equal(warns[0].msg, "SIGTERM failed", "the Go helper's message");
  assert.equal(warns[0].pid, 10);
  assert.equal(warns[0].signal, "SIGTERM");
  assert.equal(warns[0].reason, "lease lost");
  assert.equal(warns[0].target_uid, 65532);
  for (const hint of ["CAP_KILL", "runAsUser", "BERTH_ENFORCE=probe"]) {
    assert.match(String(warns[0].detail), new RegExp(hint));
  }
  // A restarted target is still found while the refused one keeps failing.
  table.add(12, { comm: "app" });
  await clock.advance(250);
  assert.deepEqual(kills().slice(1), ["kill 12 SIGTERM"]);
  await enforcer.dispose();
});

Deno.test("signal: a refused signal is reported again after the gate reopened and closed", async () => {
  const { enforcer, table, records } = setup({ graceMs: 0 });
  table.add(10, { comm: "app", denied: true });
  await enforcer.close("lease lost");
  await enforcer.open(DEADLINES);
  await enforcer.close("lease lost again");
  assert.equal(records.filter((r) => r.level === "WARN").length, 2);
  await enforcer.dispose();
});

Deno.test("signal: a target restarted while gated is stopped at the next rescan, and not after open()", async () => {
  const { enforcer, table, clock, kills, marker } = setup({
    graceMs: 0,
    scanIntervalMs: 250,
  });
  table.add(10, { comm: "app" });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill 10 SIGTERM"]);
  table.add(11, { comm: "app" }); // the kubelet restarted the container
  await clock.advanceTo(t0 + 249);
  assert.equal(kills().length, 1, "not before the scan interval");
  await clock.advanceTo(t0 + 250);
  assert.deepEqual(kills().slice(1), ["kill 11 SIGTERM"]);

  await enforcer.open(DEADLINES);
  assert.equal(marker.present, true);
  assert.deepEqual(marker.written, [DEADLINES]);
  const lists = table.lists;
  table.add(12, { comm: "app" });
  await clock.advance(5000);
  assert.equal(
    kills().length,
    2,
    "the workload runs again once the gate is open",
  );
  assert.equal(table.lists, lists, "no scanning while the gate is open");
  assert.ok(table.procs.has(12));
  await enforcer.dispose();
});

Deno.test("signal: open() cancels a pending SIGKILL and forgets the SIGTERM times", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  await clock.advanceTo(t0 + 1000);
  await enforcer.open(DEADLINES);
  await clock.advanceTo(t0 + 10_000);
  assert.deepEqual(
    kills(),
    ["kill 10 SIGTERM"],
    "no KILL after the gate reopened",
  );
  await enforcer.close("lease lost again");
  assert.deepEqual(kills(), ["kill 10 SIGTERM", "kill 10 SIGTERM"]);
  await clock.advanceTo(t0 + 15_000);
  assert.deepEqual(kills().at(-1), "kill 10 SIGKILL");
  await enforcer.dispose();
});

Deno.test("signal: a PID reused by another process between SIGTERM and SIGKILL is not killed", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true, startTime: 500 });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  // The target exits and an unrelated process gets the same PID.
  table.add(10, { comm: "unrelated", ignoreTerm: true, startTime: 777 });
  await clock.advanceTo(t0 + 5000);
  assert.deepEqual(kills(), ["kill 10 SIGTERM"]);
  assert.ok(table.procs.has(10));
  await enforcer.dispose();
});

Deno.test("signal: a restarted target that got the old PID is treated as a new process", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true, startTime: 500 });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  await clock.advanceTo(t0 + 1000);
  table.add(10, { comm: "app", ignoreTerm: true, startTime: 600 });
  await clock.advanceTo(t0 + 1250);
  assert.deepEqual(kills(), ["kill 10 SIGTERM", "kill 10 SIGTERM"]);
  await clock.advanceTo(t0 + 5000);
  assert.equal(
    kills().length,
    2,
    "the first grace must not kill the new process",
  );
  await clock.advanceTo(t0 + 6250);
  assert.deepEqual(kills().at(-1), "kill 10 SIGKILL");
  await enforcer.dispose();
});

Deno.test("signal: a marker that cannot be removed is reported and the workload is still stopped", async () => {
  const { enforcer, table, marker, kills, records } = setup({ graceMs: 0 });
  marker.failRemove = true;
  table.add(10, { comm: "app" });
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill 10 SIGTERM"]);
  const errors = records.filter((r) =>
    r.level === "WARN" && r.msg === "enforce on lease loss failed"
  );
  assert.equal(errors.length, 1);
  assert.match(String(errors[0].detail), /health marker/);
  // Stopped, but the marker still passes: a restarted container would run.
  const evidence = await enforcer.workloadStopped(
    new AbortController().signal,
  );
  assert.equal(evidence.stopped, true);
  assert.equal(evidence.markerLeft, true);
  await enforcer.dispose();
});

Deno.test("signal: dispose() stops rescans and pending SIGKILLs", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  const disposed = enforcer.dispose();
  await settle();
  await disposed;
  const lists = table.lists;
  table.add(11, { comm: "app" });
  await clock.advanceTo(t0 + 10_000);
  assert.deepEqual(kills(), ["kill 10 SIGTERM"]);
  assert.equal(table.lists, lists);
  assert.equal(clock.nextWake(), undefined, "no timer left behind");
});

Deno.test("signal: no target is blamed on the PID namespace only until one was seen, and said once per streak", async () => {
  const { enforcer, table, clock, records, kills } = setup();
  const namespace = () =>
    records.filter((r) => r.msg.includes("shareProcessNamespace")).length;
  const notRunning = () =>
    records.filter((r) => r.msg.startsWith("the signal target is not running"))
      .length;
  await enforcer.close("lease lost");
  await clock.advance(1000); // four rescans, still nothing
  await enforcer.close("lease lost");
  assert.equal(namespace(), 1, "said once, not at every scan");
  assert.equal(
    records.find((r) => r.level === "WARN")?.msg.includes(
      "shareProcessNamespace",
    ),
    true,
  );
  table.add(10, { comm: "app" });
  await clock.advance(250);
  assert.deepEqual(kills(), ["kill 10 SIGTERM"]);
  // The target was seen: from now on its absence is just "not running".
  await clock.advance(1000);
  await enforcer.open(DEADLINES);
  await enforcer.close("lease lost");
  await clock.advance(1000);
  assert.equal(namespace(), 1);
  assert.equal(notRunning(), 1, "once for the whole streak, across closings");
  table.add(11, { comm: "app" });
  await clock.advance(250);
  await clock.advance(250);
  assert.equal(notRunning(), 2, "a new streak after a target was seen again");
  await enforcer.dispose();
});

Deno.test("signal: workloadStopped waits for the SIGKILL of a target that ignores SIGTERM", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  const result: { evidence?: StopEvidence } = {};
  enforcer.workloadStopped(clock.timeout(6000)).then((e) =>
    result.evidence = e
  );
  await clock.advanceTo(t0 + 4999);
  assert.ok(!("evidence" in result), "still running: no verdict yet");
  await clock.advanceTo(t0 + 5250);
  assert.deepEqual(kills(), ["kill 10 SIGTERM", "kill 10 SIGKILL"]);
  assert.equal(result.evidence?.stopped, true);
  await enforcer.dispose();
});

Deno.test("signal: workloadStopped is false when no target was ever seen, or one still runs at the bound", async () => {
  const never = setup();
  await never.enforcer.close("lease lost");
  const e1 = await never.enforcer.workloadStopped(new AbortController().signal);
  assert.equal(e1.stopped, false);
  assert.match(e1.detail, /shareProcessNamespace/);
  await never.enforcer.dispose();

  const { enforcer, table, clock } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", denied: true });
  await enforcer.close("lease lost");
  const bound = clock.timeout(1000);
  const wait = enforcer.workloadStopped(bound);
  await clock.advance(1000);
  const e2 = await wait;
  assert.equal(e2.stopped, false);
  assert.match(e2.detail, /still running/);
  await enforcer.dispose();
});

Deno.test("signal: a target seen while the gate was open counts, so a workload gone before the close is known stopped (pod deletion)", async () => {
  const { enforcer, table, records } = setup();
  table.add(10, { comm: "app" });
  await enforcer.open({ gateClosesBootMs: 1, leaseDeadlineBootMs: 2 });
  // The kubelet stopped the workload first; then the sidecar's own stop.
  table.procs.delete(10);
  await enforcer.close("the lease is being released at shutdown");
  const e = await enforcer.workloadStopped(new AbortController().signal);
  assert.equal(e.stopped, true, e.detail);
  assert.ok(
    !records.some((r) => String(r.msg).includes("none was seen")),
    JSON.stringify(records),
  );
  await enforcer.dispose();
});

Deno.test("signal: an empty target or a negative grace is refused at construction", () => {
  assert.throws(() => setup({ target: "" }), /BERTH_SIGNAL_TARGET/);
  assert.throws(() => setup({ graceMs: -1 }), /must not be negative/);
});

Deno.test("signal: what the target brought along under other names is stopped with it, and counted until gone", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  // The target leads its group; a `sh -c` child in the group ignores
  // SIGTERM; a daemon left the group but not the session and ignores SIGTERM
  // too; its child moved to a session of its own.
  addLeaderAndStubbornChild(table);
  table.add(12, {
    comm: "daemon",
    ppid: 1,
    pgid: 12,
    sid: 10,
    ignoreTerm: true,
  });
  table.add(13, { comm: "worker", ppid: 12, pgid: 13, sid: 13 });
  table.add(20, { comm: "other", ppid: 1, pgid: 20, sid: 20 });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  assert.deepEqual(
    kills(),
    ["kill -10 SIGTERM", "kill -12 SIGTERM", "kill -13 SIGTERM"],
    "the target's group, then the daemon's and the worker's",
  );
  const aborted = AbortSignal.abort();
  const e1 = await enforcer.workloadStopped(aborted);
  assert.equal(e1.stopped, false);
  assert.match(e1.detail, /11 sh, 12 daemon/);
  await clock.advanceTo(t0 + 5000);
  assert.deepEqual(kills().slice(3), ["kill -10 SIGKILL", "kill -12 SIGKILL"]);
  assert.deepEqual(await enforcer.workloadStopped(aborted), {
    stopped: true,
    detail: "no process named app is running",
  });
  assert.ok(table.procs.has(20), "an unrelated process is left alone");
  await enforcer.dispose();
});

Deno.test("signal: a group member that ignores SIGTERM gets SIGKILL, by the group's (reported once, with its group) or, when that cannot be sent, its own", async () => {
  const a = setup();
  addLeaderAndStubbornChild(a.table);
  const t1 = a.clock.now();
  await a.enforcer.close("lease lost");
  await a.clock.advanceTo(t1 + 4999);
  assert.deepEqual(a.kills(), ["kill -10 SIGTERM"]);
  await a.clock.advanceTo(t1 + 5000);
  assert.deepEqual(a.kills(), ["kill -10 SIGTERM", "kill -10 SIGKILL"]);
  assert.equal(a.table.procs.has(11), false);
  assert.deepEqual(
    signalled(a.records).map((r) => [r.pid, r.pgid, r.signal]),
    [[10, 10, "SIGTERM"], [10, 10, "SIGKILL"]],
  );
  await a.enforcer.dispose();

  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  addLeaderAndStubbornChild(table);
  const t0 = clock.now();
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill -10 SIGTERM"]);
  // The table cannot be listed when the grace ends: no group SIGKILL.
  table.listError = new Error("EACCES reading /proc");
  await clock.advanceTo(t0 + 5000);
  assert.deepEqual(kills(), ["kill -10 SIGTERM", "kill 11 SIGKILL"]);
  table.listError = undefined;
  assert.equal(
    (await enforcer.workloadStopped(AbortSignal.abort())).stopped,
    true,
  );
  await enforcer.dispose();
});

Deno.test("signal: a member the group signal reached is remembered, so what it starts after setsid is found", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  addLeaderAndStubbornChild(table);
  const t0 = clock.now();
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill -10 SIGTERM"]);
  // The member leaves for a session of its own and starts a worker there.
  table.add(11, {
    comm: "sh",
    ppid: 1,
    pgid: 11,
    sid: 11,
    ignoreTerm: true,
    startTime: 1011,
  });
  table.add(12, { comm: "worker", ppid: 11, pgid: 11, sid: 11 });
  await clock.advanceTo(t0 + 250);
  assert.deepEqual(kills(), ["kill -10 SIGTERM", "kill 12 SIGTERM"]);
  await clock.advanceTo(t0 + 5000);
  assert.ok(kills().includes("kill 11 SIGKILL"), JSON.stringify(kills()));
  assert.equal(table.procs.has(11) || table.procs.has(12), false);
  await enforcer.dispose();
});

Deno.test("signal: a process whose identity cannot be read at the grace is signalled again by the next scan, not forgotten", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  table.getFailures = 1;
  // The grace ends with the identity unread: no SIGKILL, and the next scan
  // signals it again instead of forgetting it.
  await clock.advanceTo(t0 + 5250);
  assert.deepEqual(kills(), ["kill 10 SIGTERM", "kill 10 SIGTERM"]);
  await clock.advanceTo(t0 + 10_250);
  assert.deepEqual(kills().at(-1), "kill 10 SIGKILL");
  assert.equal(table.procs.has(10), false);
  await enforcer.dispose();
});

Deno.test("signal: a group or session id taken over by another process after its leader exited is not the workload's", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ppid: 1, pgid: 10, sid: 10 });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill -10 SIGTERM"]);
  assert.equal(table.procs.has(10), false);
  // Another program gets PID 10 and leads a session and group of its own.
  table.add(10, {
    comm: "other",
    ppid: 1,
    pgid: 10,
    sid: 10,
    startTime: 99_999,
  });
  await clock.advanceTo(t0 + 5000);
  assert.deepEqual(kills(), ["kill -10 SIGTERM"]);
  assert.ok(table.procs.has(10));
  await enforcer.dispose();
});

Deno.test("signal: a leader that moved to another group after the group SIGTERM gets its own SIGKILL", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ppid: 1, pgid: 10, sid: 10, ignoreTerm: true });
  table.add(11, { comm: "sh", ppid: 10, pgid: 10, sid: 10, ignoreTerm: true });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill -10 SIGTERM"]);
  // The leader leaves for a group of its own in the same session.
  table.add(10, {
    comm: "app",
    ppid: 1,
    pgid: 20,
    sid: 10,
    ignoreTerm: true,
    startTime: 1010,
  });
  await clock.advanceTo(t0 + 5000);
  assert.ok(kills().includes("kill -10 SIGKILL"), JSON.stringify(kills()));
  assert.ok(kills().includes("kill 10 SIGKILL"), JSON.stringify(kills()));
  assert.equal(table.procs.has(10) || table.procs.has(11), false);
  await enforcer.dispose();
});

Deno.test("signal: a group holding a spared process is signalled member by member", async () => {
  const { enforcer, table, kills } = setup({ graceMs: 0 });
  table.add(10, { comm: "app", ppid: 1, pgid: 10, sid: 10 });
  // A copy of this program in the target's group: the group signal would reach it.
  table.add(11, {
    comm: "check",
    exe: "/usr/local/bin/berth-acquire",
    ppid: 10,
    pgid: 10,
    sid: 10,
  });
  table.add(12, { comm: "worker", ppid: 10, pgid: 10, sid: 10 });
  await enforcer.close("lease lost");
  await enforcer.dispose();
  assert.deepEqual(kills(), ["kill 10 SIGTERM", "kill 12 SIGTERM"]);
  assert.ok(table.procs.has(11));
});

Deno.test("signal: a copy of this program in the workload's container (the probe, gate) is never signalled, whatever its path", async () => {
  const { enforcer, table, kills } = setup({
    graceMs: 0,
    ownCopies: ["/berth/check", "/berth/missing"],
  });
  table.files.set("/berth/check", "9:77");
  const main = MAIN;
  table.add(100, { comm: "berth-acquire", cgroup: "0::/" });
  table.add(10, { comm: "app", ppid: 1, pgid: 10, sid: 10, cgroup: main });
  // The liveness probe, exec'd into the main container: a copy of the
  // sidecar's binary on the state volume, seen there under another path.
  table.add(20, {
    comm: "check",
    exe: "/var/lib/kubelet/pods/x/volumes/berth/check",
    exeId: "9:77",
    ppid: 1,
    pgid: 20,
    sid: 20,
    cgroup: main,
  });
  // The sidecar's own binary, also under another path.
  table.add(21, { comm: "b", exe: "/other/path", exeId: "8:1", cgroup: main });
  // Same name, another file: the workload's.
  table.add(22, {
    comm: "check",
    exe: "/app/check",
    exeId: "5:5",
    cgroup: main,
  });
  await enforcer.close("lease lost");
  await enforcer.dispose();
  assert.deepEqual(kills(), ["kill -10 SIGTERM", "kill 22 SIGTERM"]);
  assert.ok(table.procs.has(20) && table.procs.has(21));
});

Deno.test("signal: a double-forked daemon is found by the target's control groups, never by the sidecar's own or the root", async () => {
  const run = async (cgroups: { self: string; target: string }) => {
    const { enforcer, table, kills } = setup({ graceMs: 0 });
    table.add(100, {
      comm: "berth-acquire",
      pgid: 100,
      sid: 100,
      cgroup: cgroups.self,
    });
    table.add(10, {
      comm: "app",
      ppid: 1,
      pgid: 10,
      sid: 10,
      cgroup: cgroups.target,
    });
    // Left the target's group and session, and its parent exited.
    table.add(30, {
      comm: "daemon",
      ppid: 1,
      pgid: 30,
      sid: 30,
      cgroup: cgroups.target,
    });
    // Another container's process.
    table.add(40, {
      comm: "shipper",
      ppid: 1,
      pgid: 40,
      sid: 40,
      cgroup: SHIPPER,
    });
    await enforcer.close("lease lost");
    const evidence = await enforcer.workloadStopped(AbortSignal.abort());
    await enforcer.dispose();
    assert.ok(table.procs.has(40), "another container's process is left alone");
    assert.ok(table.procs.has(100), "the sidecar is left alone");
    return { kills: kills(), evidence, daemonAlive: table.procs.has(30) };
  };
  const own = await run({ self: "0::/", target: MAIN });
  assert.deepEqual(own.kills, [
    "kill -10 SIGTERM",
    "kill -30 SIGTERM",
  ]);
  assert.equal(own.daemonAlive, false);
  assert.equal(own.evidence.stopped, true);
  // cgroup v1 lines, several hierarchies, as the kubelet names them.
  const v1 = await run({
    self: "2:memory:/kubepods/pod1/sidecar\n1:cpu:/kubepods/pod1/sidecar",
    target: "2:memory:/kubepods/pod1/main\n1:cpu:/kubepods/pod1/main",
  });
  assert.deepEqual(v1.kills, ["kill -10 SIGTERM", "kill -30 SIGTERM"]);
  // Sharing the sidecar's control groups, in the root, or in groups that are
  // not a container's (a login session's scope holds the user's shell too):
  // they say nothing.
  for (
    const cgroups of [
      { self: "0::/kubepods/pod1/x", target: "0::/kubepods/pod1/x" },
      { self: "0::/sidecar", target: "0::/" },
      {
        self: "0::/system.slice/berth.service",
        target: "0::/user.slice/user-1000.slice/session-3.scope",
      },
    ]
  ) {
    const shared = await run(cgroups);
    assert.deepEqual(
      shared.kills,
      ["kill -10 SIGTERM"],
      JSON.stringify(cgroups),
    );
    assert.equal(shared.daemonAlive, true);
  }
});

Deno.test("signal: workloadStopped is false when the process table or a copy's file identity cannot be read", async () => {
  const { enforcer, table, clock, records } = setup({
    graceMs: 0,
    ownCopies: ["/berth/check"],
  });
  table.add(10, { comm: "app" });
  await enforcer.close("lease lost");
  assert.equal(table.procs.size, 0);
  table.listError = new Error("EACCES reading /proc");
  const t0 = clock.now();
  await clock.advanceTo(t0 + 1000);
  const e = await enforcer.workloadStopped(AbortSignal.abort());
  assert.equal(e.stopped, false);
  assert.match(e.detail, /cannot read the process table.*EACCES/);
  assert.equal(
    records.filter((r) => r.msg.startsWith("cannot read the process table"))
      .length,
    1,
    "said once per closing",
  );
  table.listError = undefined;
  table.fileIdError = new Error("EIO on the state volume");
  assert.match(
    (await enforcer.workloadStopped(AbortSignal.abort())).detail,
    /cannot read the process table.*EIO on the state volume/,
  );
  table.fileIdError = undefined;
  assert.equal(
    (await enforcer.workloadStopped(AbortSignal.abort())).stopped,
    true,
  );
  await enforcer.dispose();
});

Deno.test("signal: a group holding PID 1, the sidecar, its parent or a probe copy is signalled member by member, the spared one never", async () => {
  const cases: [string, number, ScriptedProcess][] = [
    ["PID 1", 1, { comm: "init", ppid: 0, pgid: 10, sid: 10 }],
    ["the sidecar", 100, { comm: "berth-acquire", ppid: 99, pgid: 10 }],
    ["its parent", 99, { comm: "sh", ppid: 1, pgid: 10, sid: 10 }],
    ["a probe copy", 11, {
      comm: "check",
      exeId: "9:77",
      ppid: 10,
      pgid: 10,
      sid: 10,
    }],
  ];
  for (const [what, pid, spared] of cases) {
    const { enforcer, table, clock, kills, journal } = setup({
      ownCopies: ["/berth/check"],
    });
    table.files.set("/berth/check", "9:77");
    table.add(10, {
      comm: "app",
      ppid: 1,
      pgid: 10,
      sid: 10,
      ignoreTerm: true,
    });
    table.add(pid, spared);
    table.add(12, { comm: "worker", ppid: 10, pgid: 10, ignoreTerm: true });
    const t0 = clock.now();
    await enforcer.close("lease lost");
    assert.deepEqual(kills(), ["kill 10 SIGTERM", "kill 12 SIGTERM"], what);
    await clock.advanceTo(t0 + 5000);
    assert.deepEqual(kills(), [
      "kill 10 SIGTERM",
      "kill 12 SIGTERM",
      "kill 10 SIGKILL",
      "kill 12 SIGKILL",
    ], what);
    assert.ok(table.procs.has(pid), `${what} is left alone`);
    assert.ok(!journal.some((e) => e.includes(` ${pid} `)), what);
    await enforcer.dispose();
  }
});

Deno.test("signal: a SIGKILL due later is reported with the reason current when it is sent", async () => {
  const { enforcer, table, clock, records } = setup();
  table.add(10, { comm: "app", ignoreTerm: true });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  await clock.advanceTo(t0 + 1000);
  await enforcer.close("the lease is being released at shutdown");
  await clock.advanceTo(t0 + 5000);
  assert.deepEqual(signalled(records).map((r) => [r.signal, r.reason]), [
    ["SIGTERM", "lease lost"],
    ["SIGKILL", "the lease is being released at shutdown"],
  ]);
  await enforcer.dispose();
});

Deno.test("signal: while a SIGTERMed target runs or its SIGKILL is due, workloadStopped says stopping, never stopped; then stopped", async () => {
  const { enforcer, table, clock, kills } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true });
  const t0 = clock.now();
  await enforcer.close("lease lost");
  const early = enforcer.workloadStopped(clock.timeout(1000));
  await clock.advanceTo(t0 + 1000);
  assert.deepEqual(await early, {
    stopped: false,
    detail: "1 process(es) named app still running",
    stopping: true,
  });
  // The same process (same start time) now refuses signals: its SIGKILL
  // will fail, and it goes on running.
  table.add(10, { comm: "app", denied: true });
  await clock.advanceTo(t0 + 5000);
  assert.deepEqual(kills(), ["kill 10 SIGTERM"], "the SIGKILL was refused");
  assert.deepEqual(await enforcer.workloadStopped(AbortSignal.abort()), {
    stopped: false,
    detail: "1 process(es) named app still running",
    stopping: true,
  });
  table.procs.delete(10);
  assert.deepEqual(await enforcer.workloadStopped(AbortSignal.abort()), {
    stopped: true,
    detail: "no process named app is running",
  });
  await enforcer.dispose();
});

Deno.test("signal: a target whose SIGTERM was refused, or that was never signalled, is not stopping", async () => {
  const { enforcer, table } = setup();
  table.add(10, { comm: "app", denied: true });
  await enforcer.close("lease lost");
  assert.deepEqual(await enforcer.workloadStopped(AbortSignal.abort()), {
    stopped: false,
    detail: "1 process(es) named app still running",
  });
  await enforcer.open(DEADLINES);
  table.add(11, { comm: "app", ignoreTerm: true });
  assert.deepEqual(await enforcer.workloadStopped(AbortSignal.abort()), {
    stopped: false,
    detail: "the gate is open",
  });
  await enforcer.dispose();
});

Deno.test("signal: nothing is read before the first close, and the targets are signalled in the listing's order", async () => {
  const { enforcer, table, kills } = setup({ graceMs: 0 });
  table.add(12, { comm: "app" });
  table.add(10, { comm: "renamed", exe: "/usr/bin/app" });
  table.add(11, { comm: "application" });
  table.add(14, { comm: "app-sidecar", exe: "/bin/app-sidecar" });
  assert.equal(table.lists, 0, "the constructor reads nothing");
  await enforcer.close("lease lost");
  assert.equal(table.lists, 1);
  assert.deepEqual(kills(), ["kill 12 SIGTERM", "kill 10 SIGTERM"]);
  await enforcer.dispose();
});

Deno.test("signal: the copies' file identities are read again at each scan, so a reinstalled copy is recognised", async () => {
  const { enforcer, table, kills } = setup({ ownCopies: ["/berth/check"] });
  table.files.set("/berth/check", "9:77");
  table.add(20, { comm: "app", exeId: "9:77", ignoreTerm: true });
  table.add(21, { comm: "app", exeId: "9:78", ignoreTerm: true });
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill 21 SIGTERM"]);
  await enforcer.open(DEADLINES);
  // The init container installed the copy again: a new file.
  table.files.set("/berth/check", "9:78");
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill 21 SIGTERM", "kill 20 SIGTERM"]);
  await enforcer.dispose();
});

Deno.test("signal: what the targets brought along is found, never a spared or dead process, another container's or the sidecar's own", async () => {
  const { enforcer, table, kills } = setup({
    graceMs: 0,
    ownCopies: ["/berth/check"],
  }, { defaults: processInfo });
  table.files.set("/berth/check", "9:77");
  table.add(table.selfPid, { comm: "berth-acquire", cgroup: "0::/" });
  table.add(10, { comm: "app", cgroup: MAIN });
  table.add(11, { comm: "sh", ppid: 10, pgid: 10, sid: 10 }); // its group
  table.add(12, { comm: "daemon", sid: 10 }); // its session
  table.add(13, { comm: "worker", ppid: 12 }); // below a member
  table.add(14, { comm: "forked", cgroup: MAIN }); // double-forked
  // Never signalled, though in the target's group: a probe copy, the
  // sidecar's parent, PID 1, a zombie.
  table.add(15, { comm: "check", exeId: "9:77", pgid: 10, sid: 10 });
  table.add(table.parentPid, { comm: "sh", pgid: 10, sid: 10 });
  table.add(1, { comm: "init", ppid: 0, pgid: 10, sid: 10 });
  table.add(16, { comm: "sh", pgid: 10, sid: 10, state: "Z" });
  // Not the workload's: started by the sidecar, another container's.
  table.add(17, { comm: "helper", ppid: table.selfPid });
  table.add(18, { comm: "shipper", cgroup: SHIPPER });
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), [
    "kill 10 SIGTERM",
    "kill 11 SIGTERM",
    "kill -12 SIGTERM",
    "kill -13 SIGTERM",
    "kill -14 SIGTERM",
  ]);
  await enforcer.dispose();
});

Deno.test("signal: what a target brought along is still found after the target exited", async () => {
  const { enforcer, table } = setup();
  addLeaderAndStubbornChild(table);
  await enforcer.close("lease lost");
  // The target exited at its SIGTERM; its child was reparented to PID 1.
  table.add(11, { comm: "sh", ppid: 1, pgid: 10, sid: 10, ignoreTerm: true });
  assert.deepEqual(await enforcer.workloadStopped(AbortSignal.abort()), {
    stopped: false,
    detail:
      "0 process(es) named app still running, and 1 other process(es) they brought along (11 sh)",
    stopping: true,
  });
  await enforcer.dispose();
});

Deno.test("signal: a listing that does not show the sidecar finds the target's group, but not its control group", async () => {
  const { enforcer, table, kills } = setup({ graceMs: 0 });
  table.add(10, { comm: "app", ppid: 1, pgid: 10, sid: 10, cgroup: MAIN });
  table.add(11, { comm: "sh", ppid: 10, pgid: 10, sid: 10, cgroup: MAIN });
  table.add(14, { comm: "forked", ppid: 1, pgid: 14, sid: 14, cgroup: MAIN });
  await enforcer.close("lease lost");
  assert.deepEqual(kills(), ["kill -10 SIGTERM"]);
  assert.ok(table.procs.has(14));
  await enforcer.dispose();
});
