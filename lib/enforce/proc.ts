/**
 * The process table of signal mode, behind an interface so its tests can
 * script one ({@linkcode LinuxProcessTable} reads `/proc`), and which of its
 * processes is the workload by name ({@linkcode matchesTarget}).
 *
 * @module
 */

export type StopSignal = "SIGTERM" | "SIGKILL";

/** What became of one `kill`: "gone" is done, "denied" needs an operator. */
export type KillResult = "sent" | "gone" | "denied";

/** The kernel keeps at most this many bytes of a process name in `comm`. */
export const COMM_BYTES = 15;

/** One process as enforcement sees it, in the reader's PID namespace. */
export interface ProcessInfo {
  pid: number;
  comm: string;
  /** The running executable; undefined when unreadable (another user's process without CAP_SYS_PTRACE, a zombie). */
  exe?: string;
  /** The first three arguments, read only when `comm` is 15 bytes long and so may be cut: they carry the full name. */
  cmdline?: string[];
  /** Clock ticks since boot; with `pid` it names one process, so a reused PID is never mistaken for an earlier one. */
  startTime: number;
  state: string;
  /** Owner of `/proc/PID`; only explains a refused signal. */
  uid?: number;
  /** 0 when the parent is outside the namespace. */
  ppid?: number;
  pgid?: number;
  sid?: number;
  /**
   * `/proc/PID/cgroup`, trimmed: every process of a container shares it and
   * no unprivileged one can leave it, so it tells the workload's container
   * from the others in a shared PID namespace.
   */
  cgroup?: string;
  /** `device:inode` of `/proc/PID/exe`: the same file under any path, and a copy is another. */
  exeId?: string;
}

/** Whether nothing is left of `p` to stop: gone from the table, a zombie, or exiting. */
export function isDead(p: ProcessInfo | undefined): boolean {
  return p === undefined || p.state === "Z" || p.state === "X";
}

/**
 * The table's operations. Its caller's identity is part of it because
 * enforcement must never signal itself, its parent or a copy of itself.
 */
export interface ProcessTable {
  readonly selfPid: number;
  /** 0 when the parent is outside the namespace. */
  readonly parentPid: number;
  readonly selfExe: string;
  /** Every user-space process now; one exiting during the scan is left out. */
  list(): Promise<ProcessInfo[]>;
  get(pid: number): Promise<ProcessInfo | undefined>;
  /** Signals `pid`, or process group `-pid` when negative, as `kill(2)`. */
  kill(pid: number, signal: StopSignal): KillResult;
  /** The file identity of `path` (following symlinks), as {@linkcode ProcessInfo.exeId}. */
  fileId(path: string): Promise<string | undefined>;
}

/** The fields of `/proc/PID/stat` the tables use. */
export interface ProcStat {
  comm: string;
  state: string;
  ppid: number;
  pgrp: number;
  session: number;
  flags: number;
  startTime: number;
}

/** `PF_KTHREAD`: kernel threads are never a workload. */
const PF_KTHREAD = 0x00200000;

/**
 * Parses one `/proc/PID/stat` line, split after the LAST `)`: a process can
 * name itself `a) R (b`. Throws on a line of another shape.
 */
export function parseProcStat(text: string): ProcStat {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < open) {
    throw new Error(`malformed /proc stat line ${JSON.stringify(text)}`);
  }
  // rest[i] is field i + 3.
  const rest = text.slice(close + 2).trim().split(" ");
  const field = (n: number): number => {
    const v = rest[n - 3];
    if (v === undefined || !/^-?\d+$/.test(v)) {
      throw new Error(
        `malformed /proc stat line: field ${n} is ${JSON.stringify(v)}`,
      );
    }
    return Number(v);
  };
  const state = rest[0] ?? "";
  if (!/^[A-Za-z]$/.test(state)) {
    throw new Error(
      `malformed /proc stat line: state ${JSON.stringify(state)}`,
    );
  }
  return {
    comm: text.slice(open + 1, close),
    state,
    ppid: field(4),
    pgrp: field(5),
    session: field(6),
    flags: field(9),
    startTime: field(22),
  };
}

const DELETED = " (deleted)";
const decoder = new TextDecoder();
const encoder = new TextEncoder();

async function read(path: string): Promise<string | undefined> {
  try {
    return decoder.decode(await Deno.readFile(path));
  } catch {
    return undefined;
  }
}

/**
 * This process's PID namespace, read from procfs (`procRoot`, default
 * `/proc`). Without `shareProcessNamespace: true` it shows only the
 * sidecar's own processes, and signal mode finds nothing to stop.
 */
export class LinuxProcessTable implements ProcessTable {
  readonly selfPid: number = Deno.pid;
  readonly parentPid: number = Deno.ppid;
  readonly selfExe: string = Deno.execPath();
  #root: string;

  constructor(options: { procRoot?: string } = {}) {
    this.#root = options.procRoot ?? "/proc";
  }

  async list(): Promise<ProcessInfo[]> {
    const pids: number[] = [];
    for await (const entry of Deno.readDir(this.#root)) {
      if (/^[1-9]\d*$/.test(entry.name)) pids.push(Number(entry.name));
    }
    pids.sort((a, b) => a - b);
    const out: ProcessInfo[] = [];
    for (const pid of pids) {
      const info = await this.get(pid);
      if (info) out.push(info);
    }
    return out;
  }

  async get(pid: number): Promise<ProcessInfo | undefined> {
    const dir = `${this.#root}/${pid}`;
    let stat: ProcStat;
    let uid: number | undefined;
    try {
      stat = parseProcStat(decoder.decode(await Deno.readFile(`${dir}/stat`)));
      uid = (await Deno.stat(dir)).uid ?? undefined;
    } catch {
      return undefined; // gone since readDir, or refused
    }
    if (stat.flags & PF_KTHREAD) return undefined;
    let exe: string | undefined;
    try {
      exe = await Deno.readLink(`${dir}/exe`);
      // A binary replaced on disk still runs: matched by its old name.
      if (exe.endsWith(DELETED)) exe = exe.slice(0, -DELETED.length);
    } catch {
      exe = undefined;
    }
    const cmdline = encoder.encode(stat.comm).length < COMM_BYTES
      ? undefined
      : (await read(`${dir}/cmdline`))?.split("\0").slice(0, 3).filter((a) =>
        a !== ""
      );
    return {
      pid,
      comm: stat.comm,
      exe,
      cmdline,
      cgroup: (await read(`${dir}/cgroup`))?.trim() || undefined,
      exeId: await this.fileId(`${dir}/exe`),
      startTime: stat.startTime,
      state: stat.state,
      uid,
      ppid: stat.ppid,
      pgid: stat.pgrp,
      sid: stat.session,
    };
  }

  async fileId(path: string): Promise<string | undefined> {
    try {
      const info = await Deno.stat(path);
      return info.dev === null || info.ino === null
        ? undefined
        : `${info.dev}:${info.ino}`;
    } catch {
      return undefined;
    }
  }

  kill(pid: number, signal: StopSignal): KillResult {
    try {
      Deno.kill(pid, signal);
      return "sent";
    } catch (e) {
      // Deno maps ESRCH to NotFound and EPERM/EACCES to PermissionDenied.
      if (e instanceof Deno.errors.NotFound) return "gone";
      if (e instanceof Deno.errors.PermissionDenied) return "denied";
      throw e;
    }
  }
}

const basename = (path: string) => path.slice(path.lastIndexOf("/") + 1);
/** `name` cut as the kernel cuts `comm`, decoded as the table decodes it. */
const truncateComm = (name: string) =>
  decoder.decode(encoder.encode(name).subarray(0, COMM_BYTES));

/**
 * Whether `p` is the workload named `target`: its executable's basename is
 * `target`, or its `comm` is. The kernel keeps 15 bytes of a name, so a
 * `comm` of 15 bytes may be the start of a longer one (`worker-payments-1`
 * and `worker-payments-2` both show `worker-payments`): it matches only when
 * the full name is `target`, the full name being the first whose start is
 * that `comm` of: `cmdline[0]`'s basename (a symlink's name), the
 * executable's (an argv the process rewrote), or for a `#!` script the
 * basename of `cmdline[1]` or `cmdline[2]` (after its interpreter's one
 * argument). An argument that merely names the target never is.
 */
export function matchesTarget(p: ProcessInfo, target: string): boolean {
  if (target === "") return false;
  if (p.exe !== undefined && basename(p.exe) === target) return true;
  if (p.comm === target && encoder.encode(target).length < COMM_BYTES) {
    return true;
  }
  if (p.comm !== truncateComm(target)) return false;
  const gaveName = (path: string) => truncateComm(basename(path)) === p.comm;
  const [argv0, ...rest] = p.cmdline ?? [];
  if (argv0 !== undefined && gaveName(argv0)) return basename(argv0) === target;
  if (p.exe !== undefined && gaveName(p.exe)) return false;
  const script = rest.slice(0, 2).find(gaveName);
  return script !== undefined && basename(script) === target;
}
