/**
 * Which processes are the workload's besides the targets: what the targets
 * signal mode stopped brought along, whatever their names (a `sh -c` child,
 * a `setsid` or double-forked daemon; docs/enforcement.md). Two copies of
 * the workload run while any of them does. A process belongs when it is a
 * remembered target, in one's process group, session or container (its
 * control groups or below), or descends from one that belongs. The
 * sidecar's own group, session and control groups are never remembered (it
 * must not stop itself), nor control groups that are not a container's (a
 * systemd unit or a login session holds other programs too). Pure: it
 * judges the listings it is given.
 *
 * @module
 */
import { isDead, type ProcessInfo } from "./proc.ts";

/** A container's id as the runtimes name its group, also seen through a cgroup namespace (`/../<...>`). */
const CONTAINER_ID =
  /(?:^|\/)(?:(?:cri-containerd|crio|docker|libpod)-)?[0-9a-f]{64}(?:\.scope)?(?=\/|$)/;
const KUBEPODS = /(?:^|\/)kubepods/;

/** Cut after the container id: groups a workload made inside its container are that container's. */
function containerPath(path: string): string {
  const m = CONTAINER_ID.exec(path);
  return m === null ? path : path.slice(0, m.index + m[0].length);
}

/** `hierarchy:controllers` -> path. */
function cgroupPaths(cgroup: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of cgroup.split("\n")) {
    const at = line.indexOf(":", line.indexOf(":") + 1);
    if (at > 0) out.set(line.slice(0, at), line.slice(at + 1));
  }
  return out;
}

/** Whether the text of `/proc/PID/cgroup` names a container's control groups. */
export function isContainerCgroup(cgroup: string): boolean {
  return [...cgroupPaths(cgroup).values()].some((p) =>
    KUBEPODS.test(p) || CONTAINER_ID.test(p)
  );
}

function containerCgroup(cgroup: string): string {
  return [...cgroupPaths(cgroup)].map(([h, p]) => `${h}:${containerPath(p)}`)
    .join("\n");
}

/** Whether `member` is in `group`'s control groups or below them, in every hierarchy. */
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
  /** Groups and sessions by id -> their leader's start time, when seen: an id a new leader took since is another. */
  #groups = new Map<number, number | undefined>();
  #sessions = new Map<number, number | undefined>();
  #cgroups = new Set<string>();

  /** Whether `p` leads a remembered group (the workload's, never the sidecar's). */
  leadsGroup(p: ProcessInfo): boolean {
    if (p.pgid !== p.pid || !this.#groups.has(p.pid)) return false;
    const leader = this.#groups.get(p.pid);
    return leader === undefined || leader === p.startTime;
  }

  /** The live members of the remembered group `p` leads, unless another process took its id since. */
  group(p: ProcessInfo, procs: ProcessInfo[]): ProcessInfo[] {
    if (
      !this.leadsGroup(p) ||
      procs.some((q) => q.pid === p.pid && q.startTime !== p.startTime)
    ) return [];
    return procs.filter((q) => q.pgid === p.pid && !isDead(q));
  }

  /** Forgets everything: a new closing starts afresh. */
  clear(): void {
    this.#roots.clear();
    this.#groups.clear();
    this.#sessions.clear();
    this.#cgroups.clear();
  }

  /**
   * Remembers `p` (a target, or a process found to belong) with its group,
   * session and control groups, unless they are the sidecar's (`self`, as
   * the same listing shows it: without it no control group is remembered,
   * as it could be the sidecar's).
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
   * The live processes of `procs` that belong, in the listing's order, but
   * those `skip` names. The walk up the parents stops at PID 1 and at the
   * sidecar: what the sidecar started is not the workload's.
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
