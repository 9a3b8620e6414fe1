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
  /** The kernel's short name, at most 15 bytes. */
  comm: string;
  /** The running executable; undefined when unreadable (another user's process without CAP_SYS_PTRACE, a zombie). */
  exe?: string;
  /** The first three arguments, read only when `comm` is 15 bytes long and so may be cut: they carry the full name. */
  cmdline?: string[];
  /** Clock ticks since boot; with `pid` it names one process, so a reused PID is never mistaken for an earlier one. */
  startTime: number;
  /** From `/proc/PID/stat`; `Z` and `X` are dead. */
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

/**
 * Whether a process is gone or dead (a zombie, or exiting).
 *
 * @param p The process, or `undefined` when the table no longer has it.
 * @returns True when there is nothing left of it to stop.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(isDead({ pid: 7, comm: "app", startTime: 1, state: "Z" }), true);
 * assert.equal(isDead(undefined), true);
 * ```
 */
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
  /** One process, or `undefined` when it no longer exists. */
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
  /** The kernel's `PF_*` flags. */
  flags: number;
  startTime: number;
}

/** `PF_KTHREAD`: kernel threads are never a workload. */
const PF_KTHREAD = 0x00200000;

/**
 * Parses one `/proc/PID/stat` line, splitting after the LAST `)`: a
 * process can name itself `a) R (b`.
 *
 * @param text One line of `/proc/PID/stat`.
 * @returns The fields the tables use.
 * @throws {Error} When the line does not have the expected shape.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const line = "42 (a) R (b) S 1 42 42 0 -1 4194560" + " 0".repeat(12) + " 777";
 * const stat = parseProcStat(line);
 * assert.equal(stat.comm, "a) R (b");
 * assert.equal(stat.startTime, 777);
 * ```
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

/** Reads a file of procfs; undefined when it cannot. */
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
 *
 * @param p The process as the table shows it.
 * @param target The configured target name.
 * @returns True when `p` is the target, exclusions aside.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const p = { pid: 10, startTime: 1, state: "S", comm: "worker-payments" };
 * const started = (argv0: string) => ({ ...p, cmdline: [argv0] });
 * const target = "worker-payments-1";
 * assert.equal(matchesTarget(started("/app/worker-payments-1"), target), true);
 * assert.equal(matchesTarget(started("/app/worker-payments-2"), target), false);
 * assert.equal(matchesTarget(p, target), false); // the full name is unknown
 * ```
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
