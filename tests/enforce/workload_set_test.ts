import assert from "node:assert/strict";
import type { ProcessInfo } from "../../lib/enforce/proc.ts";
import {
  isContainerCgroup,
  WorkloadSet,
} from "../../lib/enforce/workload_set.ts";

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
  const target = proc(10, { cgroup: "0::/../main" });
  set.remember(target, self);
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
  const box = "0::/kubepods/pod1/box";
  const mine = proc(SELF_PID, { pgid: 7, sid: 7, cgroup: box });
  set.remember(proc(10, { pgid: 7, sid: 7, cgroup: box }), mine);
  set.remember(proc(20, { cgroup: "1:cpu:/\n0::/" }), mine);
  set.remember(proc(21, { cgroup: "0::/user.slice/session-3.scope" }), mine);
  const procs = [
    proc(30, { pgid: 7, sid: 7, cgroup: box }),
    proc(31, { cgroup: "1:cpu:/\n0::/" }),
    proc(32, { cgroup: "0::/user.slice/session-3.scope" }),
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
  assert.equal(set.hasGroup(50), false);
  assert.deepEqual(pids(set.members([same, child], SELF_PID, none)), []);
});

Deno.test("WorkloadSet: groups below the target's container's count too, in every hierarchy", () => {
  const set = new WorkloadSet();
  const main = "1:memory:/kubepods/pod1/main\n0::/kubepods/pod1/main";
  set.remember(proc(10, { cgroup: main }), proc(SELF_PID, { cgroup: "0::/" }));
  const procs = [
    proc(40, {
      cgroup: "1:memory:/kubepods/pod1/main/sub\n0::/kubepods/pod1/main/sub",
    }),
    proc(41, {
      cgroup: "1:memory:/kubepods/pod1/mainx\n0::/kubepods/pod1/mainx",
    }),
    proc(42, {
      cgroup: "1:memory:/kubepods/pod1/main\n0::/kubepods/pod1/other",
    }),
    proc(43, { cgroup: "0::/kubepods/pod1/main" }),
  ];
  assert.deepEqual(pids(set.members(procs, SELF_PID, none)), [40]);
});

Deno.test("isContainerCgroup: the kubelet's, a runtime's scope, another cgroup namespace's; not a unit, a session or the root", () => {
  for (
    const c of [
      "0::/../cri-containerd-0123abcd.scope",
      "0::/..",
      "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-0123.scope",
      "4:memory:/kubepods/burstable/pod1/0123abcd\n0::/",
      "0::/system.slice/docker-0123abcd.scope",
      "0::/docker/0123abcd",
      "0::/machine.slice/libpod-0123abcd.scope",
      "0::/system.slice/crio-0123abcd.scope",
    ]
  ) assert.equal(isContainerCgroup(c), true, c);
  for (
    const c of [
      "0::/",
      "0::/system.slice/app.service",
      "0::/user.slice/user-1000.slice/session-3.scope",
      "1:cpu:/\n0::/",
      "0::/..hidden",
    ]
  ) assert.equal(isContainerCgroup(c), false, c);
});
