/**
 * Which processes a supervised command consists of, read from procfs, and the
 * kernel's help in keeping them: a child subreaper (`prctl(2)`
 * `PR_SET_CHILD_SUBREAPER`, through Deno's FFI to libc) and the reaping of
 * the orphans it collects.
 *
 * A process group alone misses a worker that called `setsid` (a daemonising
 * child): it leaves the group, and once its parent exits it is reparented
 * to init, out of sight. A subreaper gets those orphans as its own children
 * instead, so walking the subreaper's descendants by parent PID finds every
 * process the command started, whatever group or session it moved to. A
 * process that double-forks before the subreaper was set up, or whose
 * ancestors all exited before, is the one thing this cannot see
 * (docs/known-limits.md).
 *
 * @module
 */
import { parseProcStat } from "./proc.ts";

/** One row of the process table, as far as supervision needs it. */
export interface ProcRow {
  /** The process ID. */
  pid: number;
  /** Its parent's PID (field 4). */
  ppid: number;
  /** Its process group (field 5). */
  pgrp: number;
  /** Its state letter (field 3); `Z` and `X` are gone. */
  state: string;
}

/** State, parent and process group of a `/proc/PID/stat` line; undefined when malformed. */
export function statRow(pid: number, text: string): ProcRow | undefined {
  try {
    const { state, ppid, pgrp } = parseProcStat(text);
    return { pid, ppid, pgrp, state };
  } catch {
    return undefined;
  }
}

/**
 * Every process procfs lists, read synchronously (a few hundred small reads
 * on a busy host; a handful in a container). A process that exits during
 * the scan is skipped. Throws when `procRoot` cannot be listed.
 */
export function readProcTable(procRoot = "/proc"): ProcRow[] {
  const out: ProcRow[] = [];
  for (const entry of Deno.readDirSync(procRoot)) {
    if (!/^[1-9]\d*$/.test(entry.name)) continue;
    let text: string;
    try {
      text = Deno.readTextFileSync(`${procRoot}/${entry.name}/stat`);
    } catch {
      continue; // exited meanwhile
    }
    const row = statRow(Number(entry.name), text);
    if (row) out.push(row);
  }
  return out;
}

function live(r: ProcRow): boolean {
  return r.state !== "Z" && r.state !== "X";
}

/**
 * The live (not zombie) processes of process group `pgid`. "Gone" must
 * ignore zombies: outside a proper init (a container whose PID 1 does not
 * reap), orphans stay zombies for good and would otherwise hold the
 * supervisor forever.
 */
export function liveGroupMembers(
  pgid: number,
  procRoot = "/proc",
): Promise<number[]> {
  return Promise.resolve(
    readProcTable(procRoot).filter((r) => r.pgrp === pgid && live(r)).map((
      r,
    ) => r.pid),
  );
}

/** The live descendants of `root` (not `root` itself) in `table`, by parent PID. */
export function liveDescendants(root: number, table: ProcRow[]): number[] {
  const children = new Map<number, ProcRow[]>();
  for (const r of table) {
    const list = children.get(r.ppid);
    if (list) list.push(r);
    else children.set(r.ppid, [r]);
  }
  const out: number[] = [];
  const queue = [root];
  const seen = new Set<number>([root]);
  while (queue.length > 0) {
    for (const c of children.get(queue.shift()!) ?? []) {
      if (seen.has(c.pid)) continue;
      seen.add(c.pid);
      queue.push(c.pid);
      if (live(c)) out.push(c.pid);
    }
  }
  return out;
}

/** The live processes of a supervised command, as {@linkcode commandTree} splits them. */
export interface CommandTree {
  /** The live members of the process group. */
  group: number[];
  /** The live descendants of the root that are not in the group (workers that called `setsid`, orphans reparented to a subreaper). */
  outside: number[];
}

/**
 * The live members of group `pgid`, and the live descendants of `root`
 * (this process, by default) outside it: what a supervisor that is a child
 * subreaper must see gone before the command counts as stopped, and must
 * signal besides the group.
 */
export function commandTree(
  pgid: number,
  table: ProcRow[],
  root = Deno.pid,
): CommandTree {
  const group = table.filter((r) => r.pgrp === pgid && live(r)).map((r) =>
    r.pid
  );
  const inGroup = new Set(group);
  const outside = liveDescendants(root, table).filter((p) => !inGroup.has(p));
  return { group, outside };
}

/** {@linkcode commandTree}'s two parts together, read from `procRoot`. */
export function liveTree(
  pgid: number,
  root = Deno.pid,
  procRoot = "/proc",
): number[] {
  const { group, outside } = commandTree(pgid, readProcTable(procRoot), root);
  return [...group, ...outside];
}

/** `prctl(2)` option number of `PR_SET_CHILD_SUBREAPER`. */
const PR_SET_CHILD_SUBREAPER = 36;
/** `waitpid(2)` flag: do not block. */
const WNOHANG = 1;

type Libc = {
  prctl(o: number, a: bigint, b: bigint, c: bigint, d: bigint): number;
  waitpid(pid: number, status: Uint8Array | null, options: number): number;
};
let libc: Libc | undefined;

function openLibc(): Libc {
  libc ??= Deno.dlopen("libc.so.6", {
    prctl: { parameters: ["i32", "u64", "u64", "u64", "u64"], result: "i32" },
    waitpid: { parameters: ["i32", "buffer", "i32"], result: "i32" },
  }).symbols as unknown as Libc;
  return libc;
}

/**
 * Makes this process a child subreaper, so orphaned descendants are
 * reparented to it instead of to init. Returns undefined on success, else
 * why it could not (no libc to load, FFI not permitted, an old kernel): the
 * caller logs it and carries on with the process group alone.
 */
export function becomeSubreaper(): string | undefined {
  try {
    if (openLibc().prctl(PR_SET_CHILD_SUBREAPER, 1n, 0n, 0n, 0n) !== 0) {
      return "prctl(PR_SET_CHILD_SUBREAPER) failed";
    }
    return undefined;
  } catch (e) {
    return `cannot load libc for prctl(PR_SET_CHILD_SUBREAPER): ${
      (e as Error).message
    }`;
  }
}

/**
 * Reaps the zombie children of this process that Deno did not start (the
 * orphans a subreaper or PID 1 inherits), so they do not pile up in the
 * process table. `own` says which PIDs Deno itself waits for: those are
 * never touched, or Deno would lose their exit status. Returns the PIDs
 * reaped. Does nothing (returns `[]`) where libc cannot be loaded.
 */
export function reapOrphans(
  own: (pid: number) => boolean,
  procRoot = "/proc",
): number[] {
  let c: Libc;
  try {
    c = openLibc();
  } catch {
    return [];
  }
  const reaped: number[] = [];
  for (const r of readProcTable(procRoot)) {
    if (r.ppid !== Deno.pid || r.state !== "Z" || own(r.pid)) continue;
    if (c.waitpid(r.pid, null, WNOHANG) === r.pid) reaped.push(r.pid);
  }
  return reaped;
}
