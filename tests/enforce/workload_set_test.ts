import assert from "node:assert/strict";
import type { ProcessInfo } from "../../lib/enforce/proc.ts";
import { WorkloadSet } from "../../lib/enforce/workload_set.ts";

const SELF_PID = 100;

function proc(pid: number, p: Partial<ProcessInfo> = {}): ProcessInfo {
  return {
    pid,
    comm: `p${pid}`,
    startTime: 1000 + pid,
    state: "S",
    ppid: 1,
    pgid: pid,
    sid: pid,
    ...p,
  };
}

const self = proc(SELF_PID, { cgroup: "0::/" });
const pids = (ps: ProcessInfo[]) => ps.map((p) => p.pid);
const none = () => false;

Deno.test("WorkloadSet: group, session, control group and descendants belong; the rest does not", () => {
  const set = new WorkloadSet();
  assert.equal(set.empty, true);
  const target = proc(10, { cgroup: "0::/../main" });
  set.remember(target, self);
  assert.equal(set.empty, false);
  assert.equal(set.hasGroup(10), true);
  const procs = [
    self,
    target,
    proc(11, { pgid: 10, sid: 10 }), // its group
    proc(12, { sid: 10 }), // its session
    proc(13, { cgroup: "0::/../main" }), // its control group, double-forked
    proc(14, { ppid: 12 }), // below a member
    proc(15, { cgroup: "0::/../shipper" }), // another container
    proc(16, { ppid: SELF_PID, cgroup: "0::/../main" }), // in the main container, whoever its parent
    proc(17, { ppid: SELF_PID }), // started by the sidecar
    proc(18, { sid: 10, state: "Z" }), // dead
  ];
  assert.deepEqual(
    pids(set.members(procs, SELF_PID, (p) => p.pid === 10)),
    [11, 12, 13, 14, 16],
  );
});

Deno.test("WorkloadSet: the sidecar's own group, session and control groups, and the root, are never remembered", () => {
  const set = new WorkloadSet();
  const mine = proc(SELF_PID, { pgid: 7, sid: 7, cgroup: "0::/box" });
  set.remember(proc(10, { pgid: 7, sid: 7, cgroup: "0::/box" }), mine);
  set.remember(proc(20, { cgroup: "1:cpu:/\n0::/" }), mine);
  const procs = [
    proc(30, { pgid: 7, sid: 7, cgroup: "0::/box" }),
    proc(31, { cgroup: "1:cpu:/\n0::/" }),
  ];
  assert.deepEqual(pids(set.members(procs, SELF_PID, none)), []);
});

Deno.test("WorkloadSet: no control group is remembered when the sidecar's own is unknown", () => {
  const set = new WorkloadSet();
  set.remember(proc(10, { cgroup: "0::/../main" }), undefined);
  assert.deepEqual(
    pids(set.members([proc(13, { cgroup: "0::/../main" })], SELF_PID, none)),
    [],
  );
  set.remember(proc(10, { cgroup: "0::/../main" }), self);
  assert.deepEqual(
    pids(set.members([proc(13, { cgroup: "0::/../main" })], SELF_PID, none)),
    [13],
  );
});

Deno.test("WorkloadSet: a reused PID is not the remembered process, and clear forgets", () => {
  const set = new WorkloadSet();
  set.remember(proc(10, { pgid: 1, sid: 1 }), self);
  const reused = proc(10, { startTime: 99_999, pgid: 50, sid: 50 });
  const child = proc(11, { ppid: 10, pgid: 50, sid: 50 });
  assert.deepEqual(pids(set.members([reused, child], SELF_PID, none)), []);
  const same = proc(10, { pgid: 50, sid: 50 });
  assert.deepEqual(pids(set.members([same, child], SELF_PID, none)), [10, 11]);
  set.clear();
  assert.equal(set.empty, true);
  assert.deepEqual(pids(set.members([same, child], SELF_PID, none)), []);
});
