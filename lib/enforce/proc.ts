/**
 * The process table, behind an interface: signal enforcement finds the
 * workload among the processes of the pod's shared PID namespace and signals
 * it, and its tests must be able to do that against a scripted table instead
 * of real processes. {@linkcode LinuxProcessTable} is the real one, read from
 * `/proc`.
 *
 * @module
 */

/** The two signals enforcement sends: a polite stop, then the one that cannot be ignored. */
export type StopSignal = "SIGTERM" | "SIGKILL";

/**
 * What became of one `kill`: the caller must tell "already gone" (fine, the
 * job is done) from "not allowed" (an operator must fix the pod's security
 * settings).
 */
export type KillResult = "sent" | "gone" | "denied";

/** The kernel keeps at most this many bytes of a process name in `comm`. */
export const COMM_BYTES = 15;

/** How many leading `cmdline` arguments {@linkcode LinuxProcessTable} keeps. */
const CMDLINE_ARGS = 3;

/** One process as enforcement needs to see it. */
export interface ProcessInfo {
  /** Process id, as seen in the reader's PID namespace. */
  pid: number;
  /** The kernel's short name (`comm`), at most 15 bytes: the executable's file name unless the process renamed itself. */
  comm: string;
  /** Absolute path of the running executable; `undefined` when it cannot be read (another user's process without CAP_SYS_PTRACE, a zombie). */
  exe?: string;
  /**
   * The first arguments of `/proc/PID/cmdline` (at most three), read only
   * when `comm` is {@linkcode COMM_BYTES} long and so may be cut: they carry
   * the full name (`argv[0]`, or a `#!` script's path after its
   * interpreter). `undefined` when not read or unreadable.
   */
  cmdline?: string[];
  /** Start time in clock ticks since boot; with `pid` it identifies one process, so a reused PID is never mistaken for the process seen earlier. */
  startTime: number;
  /** One-letter state from `/proc/PID/stat` (`R`, `S`, `D`, `Z`, ...); `Z` and `X` are already dead. */
  state: string;
  /** Effective user id (the owner of `/proc/PID`), when known; only used to explain a refused signal. */
  uid?: number;
  /** Parent PID (0 when the parent is outside the namespace), when known. */
  ppid?: number;
  /** Process group id, when known. */
  pgid?: number;
  /** Session id, when known. */
  sid?: number;
  /**
   * The text of `/proc/PID/cgroup` (trimmed), when readable: the control
   * groups the process is in. Every process of one container shares them,
   * and no unprivileged process can leave them, so they tell the workload's
   * container apart from the others in a shared PID namespace.
   */
  cgroup?: string;
  /**
   * The running executable's file identity (`device:inode` of
   * `/proc/PID/exe`), when it can be examined: the same file under another
   * path or in another container's mount is the same identity; a copy is
   * not. Compared with {@linkcode ProcessTable.fileId}.
   */
  exeId?: string;
}

/**
 * Whether a process the table shows is already dead (a zombie waiting to be
 * reaped, or exiting): there is nothing left of it to stop.
 *
 * @param p The process, or `undefined` when the table no longer has it.
 * @returns True when `p` is gone or dead.
 */
export function isDead(p: ProcessInfo | undefined): boolean {
  return p === undefined || p.state === "Z" || p.state === "X";
}

/**
 * The operations enforcement needs on the process table. The identity of the
 * caller (`selfPid`, `parentPid`, `selfExe`) is part of it because
 * enforcement must never signal itself, its parent or another copy of itself.
 */
export interface ProcessTable {
  /** This process's PID in the table's namespace. */
  readonly selfPid: number;
  /** This process's parent PID (0 when the parent is outside the namespace). */
  readonly parentPid: number;
  /** Path of this process's own executable, comparable with {@linkcode ProcessInfo.exe}. */
  readonly selfExe: string;
  /** Every user-space process visible now; processes exiting during the scan are left out, never an error. */
  list(): Promise<ProcessInfo[]>;
  /** One process, or `undefined` when it no longer exists; used to re-identify a PID before a delayed SIGKILL. */
  get(pid: number): Promise<ProcessInfo | undefined>;
  /** Sends `signal` to `pid`, or to process group `-pid` when negative (as `kill(2)`); never throws for a missing process or a refused signal. */
  kill(pid: number, signal: StopSignal): KillResult;
  /** The file identity of `path` (following symlinks), comparable with {@linkcode ProcessInfo.exeId}; undefined when it cannot be examined. */
  fileId(path: string): Promise<string | undefined>;
}

/** The fields of `/proc/PID/stat` that the table uses. */
export interface ProcStat {
  /** Field 2, without its parentheses. */
  comm: string;
  /** Field 3. */
  state: string;
  /** Field 4. */
  ppid: number;
  /** Field 5, the process group. */
  pgrp: number;
  /** Field 6, the session. */
  session: number;
  /** Field 9, the kernel's `PF_*` flags. */
  flags: number;
  /** Field 22, start time in clock ticks since boot. */
  startTime: number;
}

/** `PF_KTHREAD`: kernel threads cannot be stopped by a signal and are never a workload. */
const PF_KTHREAD = 0x00200000;

/**
 * Parses one `/proc/PID/stat` line. It exists on its own because `comm` may
 * hold spaces and parentheses (a process can name itself `a) R (b`), so the
 * fields must be split after the LAST `)`, which only a tested parser gets
 * right. Throws on a line that does not have the expected shape.
 *
 * @param text One line of `/proc/PID/stat`.
 * @returns The fields the table uses.
 * @throws {Error} When the line does not have the expected shape.
 */
export function parseProcStat(text: string): ProcStat {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < open) {
    throw new Error(`malformed /proc stat line ${JSON.stringify(text)}`);
  }
  const comm = text.slice(open + 1, close);
  // Fields from 3 (state) on; rest[i] is field i + 3.
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
    comm,
    state,
    ppid: field(4),
    pgrp: field(5),
    session: field(6),
    flags: field(9),
    startTime: field(22),
  };
}

/** Options for {@linkcode LinuxProcessTable}. */
export interface LinuxProcessTableOptions {
  /** Where procfs is mounted; default `/proc`. Its PID namespace must be this process's. */
  procRoot?: string;
}

const DELETED = " (deleted)";
const decoder = new TextDecoder();
const encoder = new TextEncoder();

/**
 * The process table of this process's PID namespace, read from procfs. In a
 * pod with `shareProcessNamespace: true` it shows every container's
 * processes; without it only the sidecar's own, and signal mode finds nothing
 * to stop (the probe remains the backstop).
 */
export class LinuxProcessTable implements ProcessTable {
  readonly selfPid: number = Deno.pid;
  readonly parentPid: number = Deno.ppid;
  readonly selfExe: string = Deno.execPath();
  #root: string;

  /** Reads `options.procRoot` (default `/proc`). */
  constructor(options: LinuxProcessTableOptions = {}) {
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
      // Gone between readDir and now (or procfs refused): not a process we can act on.
      return undefined;
    }
    if (stat.flags & PF_KTHREAD) return undefined;
    let exe: string | undefined;
    try {
      exe = await Deno.readLink(`${dir}/exe`);
      // A binary replaced on disk still runs; match it by its old name.
      if (exe.endsWith(DELETED)) exe = exe.slice(0, -DELETED.length);
    } catch {
      exe = undefined;
    }
    let cmdline: string[] | undefined;
    if (encoder.encode(stat.comm).length >= COMM_BYTES) {
      try {
        const raw = decoder.decode(await Deno.readFile(`${dir}/cmdline`));
        cmdline = raw.split("\0").slice(0, CMDLINE_ARGS).filter((a) =>
          a !== ""
        );
      } catch {
        cmdline = undefined;
      }
    }
    const exeId = await this.fileId(`${dir}/exe`);
    let cgroup: string | undefined;
    try {
      cgroup = decoder.decode(await Deno.readFile(`${dir}/cgroup`)).trim() ||
        undefined;
    } catch {
      cgroup = undefined;
    }
    return {
      pid,
      comm: stat.comm,
      exe,
      cmdline,
      cgroup,
      exeId,
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
