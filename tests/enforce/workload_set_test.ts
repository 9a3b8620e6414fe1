import assert from "node:assert/strict";
import type { ProcessInfo } from "../../lib/enforce/proc.ts";
import {
  isContainerCgroup,
  WorkloadSet,
} from "../../lib/enforce/workload_set.ts";
import { processInfo } from "../support/fake_process_table.ts";

/** Another container's control group as a container sees it (cgroup namespace). */
const MAIN = `0::/../cri-containerd-${"0123456789abcdef".repeat(4)}.scope`;
const SHIPPER = `0::/../cri-containerd-${"fedcba9876543210".repeat(4)}.scope`;

const SELF_PID = 100;

/** A process asleep, child of PID 1, leading its own group and session. */
const proc = processInfo;

const self = proc(SELF_PID, { cgroup: "0::/" });
const pids = (ps: ProcessInfo[]) => ps.map((p) => p.pid);
const none = () => false;

Deno.test("WorkloadSet: group, session, control group and descendants belong; the rest does not", () => {
  const set = new WorkloadSet();
  const target = proc(10, { cgroup: MAIN });
  set.remember(target, self);
  assert.equal(set.leadsGroup(target), true);
  const procs = [
    self,
    target,
    proc(11, { pgid: 10, sid: 10 }), // its group
    proc(12, { sid: 10 }), // its session
    proc(13, { cgroup: MAIN }), // its control group, double-forked
    proc(14, { ppid: 12 }), // below a member
    proc(15, { cgroup: SHIPPER }), // another container
    proc(16, { ppid: SELF_PID, cgroup: MAIN }), // in the main container, whoever its parent
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
  set.remember(proc(10, { cgroup: MAIN }), undefined);
  assert.deepEqual(
    pids(set.members([proc(13, { cgroup: MAIN })], SELF_PID, none)),
    [],
  );
  set.remember(proc(10, { cgroup: MAIN }), self);
  assert.deepEqual(
    pids(set.members([proc(13, { cgroup: MAIN })], SELF_PID, none)),
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
  assert.equal(set.leadsGroup(proc(50, { pgid: 50 })), false);
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

Deno.test("isContainerCgroup: under the kubelet's groups, or a container id as runtimes name it; not a unit, a session or the root", () => {
  const id = "0123456789abcdef".repeat(4);
  for (
    const c of [
      `0::/../cri-containerd-${id}.scope`,
      `0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-${id}.scope`,
      `4:memory:/kubepods/burstable/pod1/${id}\n0::/`,
      `0::/system.slice/docker-${id}.scope`,
      `0::/docker/${id}`,
      `0::/machine.slice/libpod-${id}.scope`,
      `0::/system.slice/crio-${id}.scope`,
      `0::/pod1/${id}`,
      "0::/kubepods/besteffort/pod1",
    ]
  ) assert.equal(isContainerCgroup(c), true, c);
  for (
    const c of [
      "0::/",
      "0::/..",
      "0::/system.slice/app.service",
      "0::/system.slice/docker-cleanup.service",
      "0::/system.slice/crio-wipe.service",
      "0::/machine.slice/libpod-conmon-0123.scope",
      "0::/user.slice/user-1000.slice/session-3.scope",
      // A host process as a container with its own cgroup namespace sees it.
      "0::/../../user.slice/user-1000.slice/session-3.scope",
      "1:cpu:/\n0::/",
      `0::/docker/${id.slice(1)}`,
    ]
  ) assert.equal(isContainerCgroup(c), false, c);
});

Deno.test("WorkloadSet: a target in a group inside its container brings the whole container along, never the sidecar's", () => {
  const id = "0123456789abcdef".repeat(4);
  const container = `0::/../cri-containerd-${id}.scope`;
  const set = new WorkloadSet();
  set.remember(
    proc(10, { cgroup: `${container}/init` }),
    proc(SELF_PID, { cgroup: "0::/" }),
  );
  const procs = [
    proc(40, { cgroup: `${container}/init` }),
    proc(41, { cgroup: `${container}/daemons` }), // a sibling group inside it
    proc(42, { cgroup: container }),
    proc(43, { cgroup: `0::/../cri-containerd-${"f".repeat(64)}.scope` }),
  ];
  assert.deepEqual(pids(set.members(procs, SELF_PID, none)), [40, 41, 42]);
  // The sidecar's own container, seen from inside a sub-group: never used.
  const own = new WorkloadSet();
  own.remember(
    proc(10, { cgroup: `0::/kubepods/pod1/${id}/app` }),
    proc(SELF_PID, { cgroup: `0::/kubepods/pod1/${id}/sidecar` }),
  );
  assert.deepEqual(
    pids(
      own.members(
        [proc(44, { cgroup: `0::/kubepods/pod1/${id}/x` })],
        SELF_PID,
        none,
      ),
    ),
    [],
  );
});

Deno.test("WorkloadSet: a leader seen later replaces the one remembered for its id", () => {
  const set = new WorkloadSet();
  // Group 10 was remembered through a member, its leader never seen; then
  // its leader (a restarted target that got that PID) is remembered.
  set.remember(proc(11, { pgid: 10, sid: 10 }), self);
  set.remember(proc(10, { pgid: 10, sid: 10, startTime: 5000 }), self);
  const leader = proc(10, { pgid: 10, sid: 10, startTime: 5000 });
  assert.equal(set.leadsGroup(leader), true);
  assert.deepEqual(
    pids(
      set.members(
        [leader, proc(12, { pgid: 10, sid: 10 })],
        SELF_PID,
        (p) => p.pid === 10,
      ),
    ),
    [12],
  );
  // Another leader of the id, seen later still: it replaces the first.
  set.remember(proc(10, { pgid: 10, sid: 10, startTime: 9000 }), self);
  assert.equal(set.leadsGroup(leader), false);
});
