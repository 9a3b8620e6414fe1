/**
 * Tests of lib/enforce/workload_scan.ts on its own: which processes of a
 * scripted process table {@linkcode WorkloadScanner} calls the targets,
 * which it never lets be signalled (PID 1, the sidecar, its parent, a copy
 * of this program by file identity, the dead) and what else it finds the
 * targets brought along. The table refuses every signal: a scan only looks.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { KillResult, ProcessInfo } from "../../lib/enforce/proc.ts";
import { WorkloadScanner } from "../../lib/enforce/workload_scan.ts";
import { WorkloadSet } from "../../lib/enforce/workload_set.ts";
import {
  FakeProcessTable,
  processInfo,
} from "../support/fake_process_table.ts";

/** Another container's control group as a container sees it (cgroup namespace). */
const MAIN = `0::/../cri-containerd-${"0123456789abcdef".repeat(4)}.scope`;
const SHIPPER = `0::/../cri-containerd-${"fedcba9876543210".repeat(4)}.scope`;

/**
 * The scripted process table, where a process is by default asleep, a child
 * of PID 1 leading its own group and session; a signal fails the test.
 */
class FakeTable extends FakeProcessTable {
  constructor() {
    super({ defaults: processInfo });
  }

  override kill(pid: number): KillResult {
    assert.fail(`a scan signalled ${pid}: it must only look`);
  }
}

function setup(ownCopies: string[] = []) {
  const table = new FakeTable();
  const workload = new WorkloadSet();
  const scanner = new WorkloadScanner({
    target: "app",
    processTable: table,
    ownCopies,
    workload,
  });
  const scanOnce = async () => scanner.scan(await scanner.read());
  return { table, workload, scanner, scanOnce };
}

const pids = (ps: ProcessInfo[]) => ps.map((p) => p.pid);

Deno.test("WorkloadScanner: the targets are the processes named like the target, in the listing's order, and nothing is read before read()", async () => {
  const { table, scanOnce } = setup();
  table.add(12, { comm: "app" });
  table.add(10, { comm: "renamed", exe: "/usr/bin/app" });
  table.add(11, { comm: "application" });
  table.add(13, { comm: "ap" });
  table.add(14, { comm: "app-sidecar", exe: "/bin/app-sidecar" });
  assert.equal(table.lists, 0, "the constructor reads nothing");
  const found = await scanOnce();
  assert.equal(table.lists, 1);
  assert.deepEqual(pids(found.targets), [12, 10]);
  assert.deepEqual(pids(found.others), []);
  assert.deepEqual(pids(found.procs), [12, 10, 11, 13, 14]);
});

Deno.test("WorkloadScanner: PID 1, the sidecar, its parent and dead processes are never targets, even named like the target", async () => {
  const { table, scanner, scanOnce } = setup();
  table.add(1, { comm: "app" });
  table.add(table.selfPid, { comm: "app" });
  table.add(table.parentPid, { comm: "app" });
  table.add(50, { comm: "app", state: "Z" });
  table.add(51, { comm: "app", state: "X" });
  table.add(60, { comm: "app" });
  const found = await scanOnce();
  assert.deepEqual(pids(found.targets), [60]);
  assert.equal(found.self?.pid, table.selfPid);
  for (const pid of [1, table.selfPid, table.parentPid, 50, 51]) {
    const p = table.procs.get(pid)!;
    assert.equal(scanner.spared(p), true, `${pid} is spared`);
    assert.equal(scanner.isTarget(p), false, `${pid} is no target`);
  }
  assert.equal(scanner.spared(table.procs.get(60)!), false);
  assert.equal(scanner.isTarget(table.procs.get(60)!), true);
});

Deno.test("WorkloadScanner: a process running this program or a probe copy is spared by file identity, whatever its path or name", async () => {
  const { table, scanOnce } = setup(["/berth/check", "/berth/missing"]);
  table.files.set("/berth/check", "9:77");
  // The probe copy, seen from the workload's container under another path.
  table.add(20, {
    comm: "app",
    exe: "/var/lib/kubelet/pods/x/volumes/berth/check",
    exeId: "9:77",
  });
  // The sidecar's own binary under another path.
  table.add(21, { comm: "app", exe: "/other/app", exeId: "8:1" });
  // Named like a copy, but another file: the workload's.
  table.add(22, { comm: "app", exe: "/berth/check-old/app", exeId: "5:5" });
  // Its executable cannot be examined: nothing says it is a copy.
  table.add(23, { comm: "app" });
  const found = await scanOnce();
  assert.deepEqual(pids(found.targets), [22, 23]);
});

Deno.test("WorkloadScanner: the file identities of the copies are read again at each read(), so a reinstalled copy is recognised", async () => {
  const { table, scanner } = setup(["/berth/check"]);
  table.files.set("/berth/check", "9:77");
  table.add(20, { comm: "app", exeId: "9:77" });
  table.add(21, { comm: "app", exeId: "9:78" });
  const probe = () => table.procs.get(20)!;
  const reinstalled = () => table.procs.get(21)!;
  assert.equal(
    scanner.spared(probe()),
    false,
    "before the first read() no identity is known",
  );
  await scanner.read();
  assert.equal(scanner.spared(probe()), true);
  assert.equal(scanner.isTarget(reinstalled()), true);
  // The init container installed the copy again: a new file.
  table.files.set("/berth/check", "9:78");
  assert.equal(scanner.isTarget(reinstalled()), true, "as of the last read()");
  await scanner.read();
  assert.equal(scanner.spared(reinstalled()), true);
  assert.equal(scanner.isTarget(reinstalled()), false);
});

Deno.test("WorkloadScanner: read() fails when the process table or a file identity cannot be read", async () => {
  const { table, scanner } = setup(["/berth/check"]);
  table.add(10, { comm: "app" });
  table.listError = new Error("EACCES reading /proc");
  await assert.rejects(scanner.read(), /EACCES reading \/proc/);
  table.listError = undefined;
  table.fileIdError = new Error("EIO on the state volume");
  await assert.rejects(scanner.read(), /EIO on the state volume/);
  table.fileIdError = undefined;
  assert.deepEqual(pids(await scanner.read()), [10]);
});

Deno.test("WorkloadScanner: scan() finds what the targets brought along under other names, but never a spared or dead process nor the targets again", async () => {
  const { table, scanOnce } = setup(["/berth/check"]);
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
  const found = await scanOnce();
  assert.equal(found.self?.pid, table.selfPid);
  assert.deepEqual(pids(found.targets), [10]);
  assert.deepEqual(pids(found.others), [11, 12, 13, 14]);
});

Deno.test("WorkloadScanner: the targets a scan found are remembered, so what they brought along is found after they exited", async () => {
  const { table, workload, scanOnce } = setup();
  table.add(10, { comm: "app" });
  table.add(11, { comm: "sh", ppid: 10, pgid: 10, sid: 10 });
  const first = await scanOnce();
  assert.deepEqual(pids(first.targets), [10]);
  assert.equal(workload.leadsGroup(first.targets[0]), true);
  // The target exited; its child was reparented to PID 1.
  table.procs.delete(10);
  table.add(11, { comm: "sh", ppid: 1, pgid: 10, sid: 10 });
  const second = await scanOnce();
  assert.deepEqual(pids(second.targets), []);
  assert.deepEqual(pids(second.others), [11]);
});

Deno.test("WorkloadScanner: a listing that does not show the sidecar finds the target's group, but not its control group", async () => {
  const { table, scanOnce } = setup();
  table.add(10, { comm: "app", cgroup: MAIN });
  table.add(11, { comm: "sh", ppid: 10, pgid: 10, sid: 10, cgroup: MAIN });
  table.add(14, { comm: "forked", cgroup: MAIN });
  const found = await scanOnce();
  assert.equal(found.self, undefined);
  assert.deepEqual(pids(found.targets), [10]);
  assert.deepEqual(pids(found.others), [11]);
});
