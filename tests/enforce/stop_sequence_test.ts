/**
 * Tests of lib/enforce/stop_sequence.ts on its own: which PIDs and process
 * groups {@linkcode StopSequence} sends SIGTERM and SIGKILL, at which
 * instant of a fake clock, and what it reports. The scans it is given come
 * from lib/enforce/workload_scan.ts over a scripted process table that
 * records every signal with the time it was sent.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createLogger } from "../../lib/obs/log.ts";
import { StopSequence } from "../../lib/enforce/stop_sequence.ts";
import { WorkloadScanner } from "../../lib/enforce/workload_scan.ts";
import { WorkloadSet } from "../../lib/enforce/workload_set.ts";
import { FakeClock } from "../support/fake_clock.ts";
import {
  FakeProcessTable,
  type ScriptedProcess,
} from "../support/fake_process_table.ts";

interface LogRecord {
  level: string;
  msg: string;
  [k: string]: unknown;
}

/**
 * A stop sequence wired as signal mode wires it: scans by a
 * {@linkcode WorkloadScanner} for `app`, its `spared` as the sequence's, a
 * closing's abort signal and the delayed SIGKILLs it tracks.
 */
function setup(options: { graceMs?: number; ownCopies?: string[] } = {}) {
  const clock = new FakeClock();
  const t0 = clock.now();
  const table = new FakeProcessTable({ elapsed: () => clock.now() - t0 });
  const workload = new WorkloadSet();
  const scanner = new WorkloadScanner({
    target: "app",
    processTable: table,
    ownCopies: options.ownCopies ?? [],
    workload,
  });
  const records: LogRecord[] = [];
  const logger = createLogger({
    format: "json",
    level: "DEBUG",
    write: (line) => records.push(JSON.parse(line)),
  });
  const state = { reason: "lease lost" };
  const tasks: Promise<void>[] = [];
  const stops = new StopSequence({
    graceMs: options.graceMs ?? 5000,
    clock,
    logger,
    processTable: table,
    workload,
    spared: (p) => scanner.spared(p),
    reason: () => state.reason,
    track: (task) => tasks.push(task),
  });
  /** The closing in progress; `reopen()` ends it and starts another. */
  let gate = new AbortController();
  /** One rescan of the closing: a scan, then its stop. */
  const stop = async (signal = gate.signal) => {
    const found = scanner.scan(await scanner.read());
    await stops.stop(found, signal);
  };
  /** The gate opens (pending SIGKILLs dropped) and closes again. */
  const reopen = async () => {
    gate.abort();
    await Promise.all(tasks);
    stops.clear();
    workload.clear();
    gate = new AbortController();
  };
  /** Ends the test's closing and waits for the tasks it left. */
  const done = async () => {
    gate.abort();
    await Promise.all(tasks);
  };
  const kills = () => table.journal.filter((e) => / kill /.test(e));
  const at = (ms: number) => clock.advanceTo(t0 + ms);
  return {
    clock,
    table,
    records,
    state,
    tasks,
    stops,
    stop,
    reopen,
    done,
    kills,
    at,
  };
}

/** The records of the signals sent, in order. */
function signalled(records: LogRecord[]): LogRecord[] {
  return records.filter((r) =>
    /^sent SIG(TERM|KILL) to main process$/.test(String(r.msg))
  );
}

/** The target 10 leading its group and session, and a child 11 in both that ignores SIGTERM. */
function addLeaderAndStubbornChild(table: FakeProcessTable): void {
  table.add(10, { comm: "app", ppid: 1, pgid: 10, sid: 10 });
  table.add(11, { comm: "sh", ppid: 10, pgid: 10, sid: 10, ignoreTerm: true });
}

Deno.test("StopSequence: a process that ignores SIGTERM gets SIGKILL exactly when the grace has passed, each signal reported once", async () => {
  const { table, records, stops, stop, done, kills, at } = setup({
    graceMs: 5000,
  });
  table.add(10, { comm: "app", ignoreTerm: true });
  await stop();
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM"]);
  assert.equal(stops.pendingKills, 1);
  await at(4999);
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM"], "no SIGKILL before it");
  await at(5000);
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM", "5000 kill 10 SIGKILL"]);
  assert.equal(stops.pendingKills, 0);
  assert.equal(table.procs.has(10), false);
  assert.deepEqual(
    signalled(records).map((r) => [
      r.level,
      r.pid,
      r.comm,
      r.signal,
      r.reason,
    ]),
    [
      ["INFO", 10, "app", "SIGTERM", "lease lost"],
      ["INFO", 10, "app", "SIGKILL", "lease lost"],
    ],
  );
  await done();
});

Deno.test("StopSequence: a process that exits at its SIGTERM, or before it, gets no SIGKILL and no warning", async () => {
  const { table, records, stops, stop, done, at } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app" });
  table.add(11, { comm: "app", vanishes: true });
  await stop();
  assert.deepEqual(table.journal, ["0 kill 10 SIGTERM", "0 gone 11 SIGTERM"]);
  assert.equal(stops.pendingKills, 1, "only the one signalled waits");
  await at(10_000);
  assert.deepEqual(table.journal, ["0 kill 10 SIGTERM", "0 gone 11 SIGTERM"]);
  assert.equal(stops.pendingKills, 0);
  assert.deepEqual(
    records.filter((r) => r.level === "WARN" || r.level === "ERROR"),
    [],
  );
  assert.ok(
    records.some((r) =>
      r.msg === "target exited after SIGTERM" && r.pid === 10
    ),
  );
  await done();
});

Deno.test("StopSequence: with a grace of 0 the SIGKILL is sent before stop() resolves, with nothing left to wait for", async () => {
  const { clock, table, tasks, stops, stop, kills } = setup({ graceMs: 0 });
  table.add(10, { comm: "app", ignoreTerm: true });
  await stop();
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM", "0 kill 10 SIGKILL"]);
  assert.equal(tasks.length, 0);
  assert.equal(stops.pendingKills, 0);
  assert.equal(clock.nextWake(), undefined, "no timer armed");
});

Deno.test("StopSequence: rescans during one closing send no second SIGTERM and do not push the SIGKILL back", async () => {
  const { table, stop, done, kills, at } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true });
  await stop();
  await at(1000);
  await stop();
  await at(2000);
  await stop();
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM"]);
  await at(5000);
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM", "5000 kill 10 SIGKILL"]);
  await at(7000);
  assert.equal(kills().length, 2, "one SIGKILL only");
  await done();
});

Deno.test("StopSequence: a PID reused by another process between SIGTERM and SIGKILL is not SIGKILLed", async () => {
  const { table, records, stop, done, kills, at } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", startTime: 500 });
  await stop();
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM"]);
  // The target exited at its SIGTERM; an unrelated program got its PID.
  assert.equal(table.procs.has(10), false);
  table.add(10, { comm: "unrelated", ignoreTerm: true, startTime: 777 });
  await at(5000);
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM"]);
  assert.equal(table.procs.get(10)?.comm, "unrelated");
  assert.ok(records.some((r) => r.msg === "target exited after SIGTERM"));
  await done();
});

Deno.test("StopSequence: a group id taken over by another process after its leader exited gets no SIGKILL", async () => {
  const { table, stop, done, kills, at } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ppid: 1, pgid: 10, sid: 10 });
  await stop();
  assert.deepEqual(kills(), ["0 kill -10 SIGTERM"]);
  assert.equal(table.procs.has(10), false);
  // Another program gets PID 10 and leads a group and session of its own.
  table.add(10, {
    comm: "other",
    ppid: 1,
    pgid: 10,
    sid: 10,
    startTime: 99_999,
  });
  await at(5000);
  assert.deepEqual(kills(), ["0 kill -10 SIGTERM"]);
  assert.ok(table.procs.has(10));
  await done();
});

Deno.test("StopSequence: a refused signal is reported once per closing, and the other processes are still stopped", async () => {
  const { table, records, stops, stop, reopen, done, at } = setup({
    graceMs: 0,
  });
  table.add(10, { comm: "app", denied: true, uid: 65532 });
  table.add(11, { comm: "app" });
  await stop();
  await at(250);
  await stop();
  await at(500);
  await stop();
  assert.deepEqual(table.journal, [
    "0 denied 10 SIGTERM",
    "0 kill 11 SIGTERM",
    "250 denied 10 SIGTERM",
    "500 denied 10 SIGTERM",
  ], "tried again at every rescan");
  const warns = () => records.filter((r) => r.level === "WARN");
  assert.equal(warns().length, 1, JSON.stringify(warns()));
  const [warn] = warns();
  assert.equal(warn.pid, 10);
  assert.equal(warn.signal, "SIGTERM");
  assert.equal(warn.target_uid, 65532);
  assert.equal(warn.reason, "lease lost");
  assert.equal(warn.msg, "SIGTERM failed", "the Go helper's message");
  for (const hint of ["CAP_KILL", "runAsUser", "BERTH_ENFORCE=probe"]) {
    assert.ok(String(warn.detail).includes(hint), hint);
  }
  // A new closing after the gate reopened says it again, once.
  await reopen();
  await stop();
  await stop();
  assert.equal(warns().length, 2);
  // So does one that only forgot the refusals.
  stops.clearDenied();
  await stop();
  await stop();
  assert.equal(warns().length, 3);
  await done();
});

Deno.test("StopSequence: once the closing's signal aborts, the pending SIGKILL is dropped, and after clear() the next closing starts afresh", async () => {
  const { table, stops, stop, reopen, done, kills, at } = setup({
    graceMs: 5000,
  });
  table.add(10, { comm: "app", ignoreTerm: true });
  await stop();
  await at(1000);
  await reopen();
  assert.equal(stops.pendingKills, 0);
  await at(10_000);
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM"], "no SIGKILL once open");
  await stop(AbortSignal.abort());
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM"], "nothing while aborted");
  await stop();
  await at(15_000);
  assert.deepEqual(kills(), [
    "0 kill 10 SIGTERM",
    "10000 kill 10 SIGTERM",
    "15000 kill 10 SIGKILL",
  ]);
  await done();
});

Deno.test("StopSequence: a group member that ignores SIGTERM gets SIGKILL, by the group's or, when that cannot be sent, its own", async () => {
  // The table can be listed at the grace: the group's SIGKILL reaches it.
  const a = setup({ graceMs: 5000 });
  addLeaderAndStubbornChild(a.table);
  await a.stop();
  assert.deepEqual(a.kills(), ["0 kill -10 SIGTERM"]);
  assert.ok(a.table.procs.has(11));
  await a.at(4999);
  assert.deepEqual(a.kills(), ["0 kill -10 SIGTERM"]);
  await a.at(5000);
  assert.deepEqual(a.kills(), ["0 kill -10 SIGTERM", "5000 kill -10 SIGKILL"]);
  assert.equal(a.table.procs.has(11), false);
  assert.deepEqual(
    signalled(a.records).map((r) => [r.pid, r.pgid, r.signal]),
    [[10, 10, "SIGTERM"], [10, 10, "SIGKILL"]],
    "a group signal is reported once, with its group",
  );
  await a.done();

  // It cannot: the member is SIGKILLed on its own.
  const b = setup({ graceMs: 5000 });
  addLeaderAndStubbornChild(b.table);
  await b.stop();
  b.table.listError = new Error("EACCES reading /proc");
  await b.at(5000);
  assert.deepEqual(b.kills(), ["0 kill -10 SIGTERM", "5000 kill 11 SIGKILL"]);
  assert.equal(b.table.procs.has(11), false);
  await b.done();
});

Deno.test("StopSequence: a group holding PID 1, the sidecar, its parent or a probe copy is signalled member by member, the spared one never", async () => {
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
    const { table, stop, done, kills, at } = setup({
      graceMs: 5000,
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
    await stop();
    assert.deepEqual(kills(), ["0 kill 10 SIGTERM", "0 kill 12 SIGTERM"], what);
    await at(5000);
    assert.deepEqual(kills(), [
      "0 kill 10 SIGTERM",
      "0 kill 12 SIGTERM",
      "5000 kill 10 SIGKILL",
      "5000 kill 12 SIGKILL",
    ], what);
    assert.ok(table.procs.has(pid), `${what} is left alone`);
    assert.ok(!table.journal.some((e) => e.includes(` ${pid} `)), what);
    await done();
  }
});

Deno.test("StopSequence: a SIGKILL due later is reported with the reason current when it is sent", async () => {
  const { table, records, state, stop, done, at } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true });
  await stop();
  await at(1000);
  state.reason = "the lease is being released at shutdown";
  await at(5000);
  assert.deepEqual(
    signalled(records).map((r) => [
      r.signal,
      r.reason,
    ]),
    [
      ["SIGTERM", "lease lost"],
      ["SIGKILL", "the lease is being released at shutdown"],
    ],
  );
  await done();
});

Deno.test("StopSequence: a process whose identity cannot be read at the grace is not SIGKILLed blindly, and the next rescan signals it again", async () => {
  const { table, stop, done, kills, at } = setup({ graceMs: 5000 });
  table.add(10, { comm: "app", ignoreTerm: true });
  await stop();
  table.getFailures = 1;
  await at(5000);
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM"]);
  await at(5250);
  await stop();
  assert.deepEqual(kills(), ["0 kill 10 SIGTERM", "5250 kill 10 SIGTERM"]);
  await at(10_250);
  assert.deepEqual(kills().at(-1), "10250 kill 10 SIGKILL");
  await done();
});
