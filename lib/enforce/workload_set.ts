/**
 * Which processes belong to the workload besides the ones named like it:
 * what the targets signal mode stopped brought along. A target's `sh -c`
 * child, a renamed worker, a `setsid` daemon and a double-forked one are the
 * workload's too whatever their names, and two copies of the workload run
 * while any of them does. Signal mode stops them with the targets and calls
 * the workload stopped only once they are gone.
 *
 * A process belongs when it is a remembered target, is in a remembered
 * target's process group or session, is in a remembered target's control
 * groups, or descends (through live parents) from a process that does. The
 * sidecar's own group, session and control groups are never remembered: they
 * say nothing about the workload, and the sidecar must not stop itself. Nor is
 * a control group that is the root of every hierarchy (`/`): on a machine
 * without per-container groups it holds unrelated processes.
 *
 * The control groups are what closes a double-forked daemon: it leaves the
 * target's group and session and loses its parent, but in Kubernetes every
 * container has control groups of its own that an unprivileged process cannot
 * leave, so it stays in the target's. Where the workload shares the sidecar's
 * control groups (no containers), such a daemon is not seen.
 *
 * Pure: it judges the lists the process table gives it.
 *
 * @module
 */
import { isDead, type ProcessInfo } from "./proc.ts";

/**
 * Whether `cgroup` (the text of `/proc/PID/cgroup`) names only root groups:
 * every line's path is `/`.
 */
function isRootCgroup(cgroup: string): boolean {
  return cgroup.split("\n").every((line) => line.endsWith(":/"));
}

/** Processes that are the workload's by what its targets brought along; see the module doc. */
export class WorkloadSet {
  /** Remembered processes, by `pid` -> `startTime` (a reused PID is another process). */
  #roots = new Map<number, number>();
  #groups = new Set<number>();
  #sessions = new Set<number>();
  #cgroups = new Set<string>();

  /** Whether nothing was remembered since the last {@linkcode clear}. */
  get empty(): boolean {
    return this.#roots.size === 0;
  }

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
   * they are the sidecar's own (`self`) or the root.
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
      p.cgroup !== self.cgroup && !isRootCgroup(p.cgroup)
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
      (q.cgroup !== undefined && this.#cgroups.has(q.cgroup));
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
