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
 * Paths that only a container's control groups have: the kubelet's
 * (`kubepods`), a container runtime's scope (`cri-containerd-<id>.scope`,
 * `crio-`, `docker-`, `libpod-`), or a group outside this process's cgroup
 * namespace (`/../<id>`: another container's, as a container sees it).
 */
const CONTAINER_CGROUP =
  /kubepods|containerd-|crio-|\/docker[/-]|docker-|libpod-|^\/\.\.(\/|$)/;

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
    CONTAINER_CGROUP.test(p)
  );
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
  #groups = new Set<number>();
  #sessions = new Set<number>();
  #cgroups = new Set<string>();

  /**
   * Whether `pgid` is a remembered process group (the workload's, never the
   * sidecar's).
   *
   * @param pgid A process group id.
   * @returns True when it is remembered.
   */
  hasGroup(pgid: number): boolean {
    return this.#groups.has(pgid);
  }

  /** Forgets everything (the gate reopened: a new closing starts afresh). */
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
    if (p.pgid !== undefined && p.pgid > 1 && p.pgid !== self?.pgid) {
      this.#groups.add(p.pgid);
    }
    if (p.sid !== undefined && p.sid > 1 && p.sid !== self?.sid) {
      this.#sessions.add(p.sid);
    }
    if (
      p.cgroup !== undefined && self?.cgroup !== undefined &&
      p.cgroup !== self.cgroup && isContainerCgroup(p.cgroup)
    ) {
      this.#cgroups.add(p.cgroup);
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
    const direct = (q: ProcessInfo): boolean =>
      this.#roots.get(q.pid) === q.startTime ||
      (q.pgid !== undefined && this.#groups.has(q.pgid)) ||
      (q.sid !== undefined && this.#sessions.has(q.sid)) ||
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
