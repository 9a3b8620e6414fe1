/**
 * Which processes belong to the workload besides the ones named like it:
 * what the targets signal mode stopped brought along. A target's `sh -c`
 * child, a renamed worker, a `setsid` daemon and a double-forked one are the
 * workload's too whatever their names, and two copies of the workload run
 * while any of them does. Signal mode stops them with the targets and calls
 * the workload stopped only once they are gone.
 *
 * A process belongs when it is a remembered target, is in a remembered
 * target's process group or session, is in a remembered target's container
 * (its control groups, or groups below them), or descends (through live
 * parents) from a process that does. The sidecar's own group, session and
 * control groups are never remembered: they say nothing about the workload,
 * and the sidecar must not stop itself. Nor are control groups that are not
 * a container's (see {@linkcode isContainerCgroup}): a systemd unit or a
 * login session's scope holds processes of other programs too.
 *
 * The control groups are what closes a double-forked daemon: it leaves the
 * target's group and session and loses its parent, but in Kubernetes every
 * container has control groups of its own that an unprivileged process cannot
 * leave, so it stays in the target's. Where the workload is not in a
 * container's control groups, or shares the sidecar's, such a daemon is not
 * seen.
 *
 * Pure: it judges the lists the process table gives it.
 *
 * @module
 */
import { isDead, type ProcessInfo } from "./proc.ts";

/**
 * Paths that only a container's control groups have: one under the
 * kubelet's (`kubepods`), or one whose last part is a container's id, as the
 * runtimes name them (`cri-containerd-<64 hex>.scope`, `crio-`, `docker-`,
 * `libpod-`, or the bare id, `/docker/<id>`, `/pod<uid>/<id>`), also as
 * another container sees it through its cgroup namespace (`/../<...>`).
 */
const CONTAINER_ID =
  /(?:^|\/)(?:(?:cri-containerd|crio|docker|libpod)-)?[0-9a-f]{64}(?:\.scope)?(?=\/|$)/;
const KUBEPODS = /(?:^|\/)kubepods/;

/**
 * The container's own group for a path inside it: cut after the container
 * id, so that sibling groups a workload made inside its container count as
 * the same container; a path without an id is kept whole.
 */
function containerPath(path: string): string {
  const m = CONTAINER_ID.exec(path);
  return m === null ? path : path.slice(0, m.index + m[0].length);
}

/** The lines of a `/proc/PID/cgroup` text, as `hierarchy:controllers` -> path. */
function cgroupPaths(cgroup: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of cgroup.split("\n")) {
    const at = line.indexOf(":", line.indexOf(":") + 1);
    if (at > 0) out.set(line.slice(0, at), line.slice(at + 1));
  }
  return out;
}

/**
 * Whether `cgroup` (the text of `/proc/PID/cgroup`) is a container's: one of
 * its paths has a form only containers' control groups have.
 *
 * @param cgroup The text of `/proc/PID/cgroup`.
 * @returns True for a container's control groups.
 */
export function isContainerCgroup(cgroup: string): boolean {
  return [...cgroupPaths(cgroup).values()].some((p) =>
    KUBEPODS.test(p) || CONTAINER_ID.test(p)
  );
}

/** `cgroup` with each path cut to its container's group (see {@linkcode containerPath}). */
function containerCgroup(cgroup: string): string {
  return [...cgroupPaths(cgroup)].map(([h, p]) => `${h}:${containerPath(p)}`)
    .join("\n");
}

/**
 * Whether `member` is in the control groups `group` names or below them, in
 * every hierarchy (a privileged workload may make groups of its own inside
 * its container's).
 */
function within(member: string, group: string): boolean {
  const m = cgroupPaths(member);
  const g = cgroupPaths(group);
  if (m.size !== g.size) return false;
  for (const [h, path] of g) {
    const mine = m.get(h);
    if (mine === undefined) return false;
    if (
      mine !== path && !mine.startsWith(path.endsWith("/") ? path : `${path}/`)
    ) {
      return false;
    }
  }
  return true;
}

/** Processes that are the workload's by what its targets brought along; see the module doc. */
export class WorkloadSet {
  /** Remembered processes, by `pid` -> `startTime` (a reused PID is another process). */
  #roots = new Map<number, number>();
  /**
   * Process groups and sessions, by id -> the start time of their leader
   * when it was seen (undefined: not seen). An id whose leader has since
   * exited and been reused by another process's new group or session is not
   * the one remembered.
   */
  #groups = new Map<number, number | undefined>();
  #sessions = new Map<number, number | undefined>();
  #cgroups = new Set<string>();

  /**
   * Whether `p` leads a remembered process group (the workload's, never the
   * sidecar's): it is the group's leader, and the leader remembered, when
   * one was seen.
   *
   * @param p A process.
   * @returns True when it leads a remembered group.
   */
  leadsGroup(p: ProcessInfo): boolean {
    if (p.pgid !== p.pid || !this.#groups.has(p.pid)) return false;
    const leader = this.#groups.get(p.pid);
    return leader === undefined || leader === p.startTime;
  }

  /**
   * The live members of the group `p` leads, when it leads a remembered one
   * whose id no other process has taken since.
   *
   * @param p A process.
   * @param procs One listing of the process table.
   * @returns The members, `p` among them while it lives; none otherwise.
   */
  group(p: ProcessInfo, procs: ProcessInfo[]): ProcessInfo[] {
    if (
      !this.leadsGroup(p) ||
      procs.some((q) => q.pid === p.pid && q.startTime !== p.startTime)
    ) return [];
    return procs.filter((q) => q.pgid === p.pid && !isDead(q));
  }

  /** Forgets everything (the permission reopened: a new closing starts afresh). */
  clear(): void {
    this.#roots.clear();
    this.#groups.clear();
    this.#sessions.clear();
    this.#cgroups.clear();
  }

  /**
   * Remembers `p` (a target, or a process already found to belong) and what
   * it brings along: its process group, session and control groups, unless
   * they are the sidecar's own (`self`), or the control groups are not a
   * container's.
   *
   * @param p The process to remember.
   * @param self The sidecar itself as the same table shows it; `undefined`
   * when the table does not show it, and then no control group is
   * remembered (it could be the sidecar's own).
   */
  remember(p: ProcessInfo, self: ProcessInfo | undefined): void {
    this.#roots.set(p.pid, p.startTime);
    // A live leader seen now is the id's leader, whatever was remembered.
    const note = (ids: Map<number, number | undefined>, id: number) => {
      if (id === p.pid) ids.set(id, p.startTime);
      else if (!ids.has(id)) ids.set(id, undefined);
    };
    if (p.pgid !== undefined && p.pgid > 1 && p.pgid !== self?.pgid) {
      note(this.#groups, p.pgid);
    }
    if (p.sid !== undefined && p.sid > 1 && p.sid !== self?.sid) {
      note(this.#sessions, p.sid);
    }
    if (
      p.cgroup !== undefined && self?.cgroup !== undefined &&
      p.cgroup !== self.cgroup && isContainerCgroup(p.cgroup) &&
      !within(self.cgroup, containerCgroup(p.cgroup))
    ) {
      this.#cgroups.add(containerCgroup(p.cgroup));
    }
  }

  /**
   * The live processes of `procs` that belong (see the module doc), leaving
   * out those `skip` names (the targets themselves, the sidecar, its parent,
   * PID 1). The walk up the parents stops at PID 1 and at the sidecar:
   * what the sidecar started is not the workload's.
   *
   * @param procs One listing of the process table.
   * @param selfPid The sidecar's PID in that table.
   * @param skip Processes never returned.
   * @returns The members, in the table's order.
   */
  members(
    procs: ProcessInfo[],
    selfPid: number,
    skip: (p: ProcessInfo) => boolean,
  ): ProcessInfo[] {
    if (this.#roots.size === 0) return [];
    const byPid = new Map(procs.map((p) => [p.pid, p]));
    // The id is the remembered one unless its leader now is another process.
    const same = (ids: Map<number, number | undefined>, id?: number) => {
      if (id === undefined || !ids.has(id)) return false;
      const leader = ids.get(id);
      const now = byPid.get(id);
      return leader === undefined || now === undefined ||
        now.startTime === leader;
    };
    const direct = (q: ProcessInfo): boolean =>
      this.#roots.get(q.pid) === q.startTime ||
      same(this.#groups, q.pgid) || same(this.#sessions, q.sid) ||
      (q.cgroup !== undefined &&
        [...this.#cgroups].some((g) => within(q.cgroup!, g)));
    const belongs = (p: ProcessInfo): boolean => {
      for (let q: ProcessInfo | undefined = p, n = 0; q && n < 64; n++) {
        if (q.pid <= 1 || q.pid === selfPid) return false;
        if (direct(q)) return true;
        q = q.ppid === undefined ? undefined : byPid.get(q.ppid);
      }
      return false;
    };
    return procs.filter((p) => !isDead(p) && !skip(p) && belongs(p));
  }
}
