/**
 * A scripted {@linkcode ProcessTable}, so signal enforcement (its scan, its
 * stop sequence, the enforcer around them) is tested against processes a
 * test adds, changes and removes, not against real ones. Signals act on the
 * script as the kernel would (a process exits at SIGTERM unless it ignores
 * it, always at SIGKILL; a negative PID is its process group) and each one
 * asked for is journaled, optionally with the instant it was sent.
 *
 * @module
 */
import type {
  KillResult,
  ProcessInfo,
  ProcessTable,
  StopSignal,
} from "../../lib/enforce/proc.ts";

/** How a scripted process answers the signals sent to it. */
export interface SignalBehaviour {
  /** Survives SIGTERM (traps or ignores it). */
  ignoreTerm?: boolean;
  /** Signals are refused with EPERM. */
  denied?: boolean;
  /** Exits just before any signal arrives (ESRCH). */
  vanishes?: boolean;
}

/** One process of the script, as {@linkcode FakeProcessTable.procs} holds it. */
export type FakeProcess = ProcessInfo & SignalBehaviour;

/** What {@linkcode FakeProcessTable.add} is given: any field of a process but its PID. */
export type ScriptedProcess = Partial<Omit<FakeProcess, "pid">>;

/**
 * A process as a test most often wants one: asleep, started at tick
 * `1000 + pid`, a child of PID 1 leading its own process group and session,
 * named `p<pid>`; `p` sets any other field.
 *
 * @param pid Its PID.
 * @param p The fields that differ from those defaults.
 * @returns The process.
 */
export function processInfo(
  pid: number,
  p: Partial<ProcessInfo> = {},
): ProcessInfo {
  return { ...bare(pid), ppid: 1, pgid: pid, sid: pid, ...p };
}

/** The fields every added process has unless given: a name, a start time, asleep. */
function bare(pid: number): ProcessInfo {
  return { pid, comm: `p${pid}`, startTime: 1000 + pid, state: "S" };
}

/** Options for {@linkcode FakeProcessTable}. */
export interface FakeProcessTableOptions {
  /**
   * Where a line `<kill|denied|gone> <pid> <signal>` goes for every signal
   * asked for (a group's only when it has members); default a new array.
   * Give one the test also writes to, to see the signals in order with
   * what else happened.
   */
  journal?: string[];
  /** When given, each journal line starts with what it returns at the signal (e.g. ms since the test began) and a space. */
  elapsed?: () => number;
  /**
   * Fields a process gets when {@linkcode FakeProcessTable.add} is not
   * given them, on top of the name `p<pid>`, the start time `1000 + pid`
   * and state `S` every process gets; default none (no parent, group or
   * session). Pass {@linkcode processInfo} for all of its defaults.
   */
  defaults?: (pid: number) => Partial<ProcessInfo>;
}

/** The PID namespace the caller sees: a test adds processes, reads and removes them through {@linkcode FakeProcessTable.procs}. */
export class FakeProcessTable implements ProcessTable {
  readonly selfPid = 100;
  readonly parentPid = 99;
  readonly selfExe = "/usr/local/bin/berth-acquire";
  /** The processes by PID, listed in insertion order. */
  procs = new Map<number, FakeProcess>();
  /** The signals asked for; see {@linkcode FakeProcessTableOptions.journal}. */
  readonly journal: string[];
  /** How many times list() was called. */
  lists = 0;
  /** When set, list() rejects with it. */
  listError: Error | undefined;
  /** How many next get() calls reject. */
  getFailures = 0;
  /** When set, fileId() rejects with it. */
  fileIdError: Error | undefined;
  /** File identities by path, for fileId() and the `exeId` of a process that has an `exe` but no `exeId`; `selfExe` is `8:1`. */
  files = new Map<string, string>([[this.selfExe, "8:1"]]);
  #elapsed: (() => number) | undefined;
  #defaults: (pid: number) => Partial<ProcessInfo>;

  /** See {@linkcode FakeProcessTableOptions}. */
  constructor(options: FakeProcessTableOptions = {}) {
    this.journal = options.journal ?? [];
    this.#elapsed = options.elapsed;
    this.#defaults = options.defaults ?? (() => ({}));
  }

  /** Adds process `pid`, or replaces the one that had it (a reused PID). */
  add(pid: number, p: ScriptedProcess = {}): void {
    this.procs.set(pid, { ...bare(pid), ...this.#defaults(pid), ...p, pid });
  }

  /** What the table shows of `p`: a copy, without how it answers signals. */
  #info(p: FakeProcess): ProcessInfo {
    const { ignoreTerm: _t, denied: _d, vanishes: _v, ...info } = p;
    // Readable together: the file behind the path, when the table knows it.
    info.exeId ??= info.exe === undefined
      ? undefined
      : this.files.get(info.exe);
    return info;
  }

  list(): Promise<ProcessInfo[]> {
    this.lists++;
    if (this.listError) return Promise.reject(this.listError);
    return Promise.resolve([...this.procs.values()].map((p) => this.#info(p)));
  }

  get(pid: number): Promise<ProcessInfo | undefined> {
    if (this.getFailures > 0) {
      this.getFailures--;
      return Promise.reject(new Error("EMFILE reading /proc"));
    }
    const p = this.procs.get(pid);
    return Promise.resolve(p && this.#info(p));
  }

  fileId(path: string): Promise<string | undefined> {
    if (this.fileIdError) return Promise.reject(this.fileIdError);
    return Promise.resolve(this.files.get(path));
  }

  kill(pid: number, signal: StopSignal): KillResult {
    const at = this.#elapsed?.();
    const note = (what: "kill" | "denied" | "gone") =>
      this.journal.push(
        `${at === undefined ? "" : `${at} `}${what} ${pid} ${signal}`,
      );
    if (pid < 0) {
      const members = [...this.procs].filter(([, p]) => p.pgid === -pid);
      if (members.length === 0) return "gone";
      note("kill");
      for (const [m, p] of members) {
        if (signal === "SIGKILL" || !p.ignoreTerm) this.procs.delete(m);
      }
      return "sent";
    }
    const p = this.procs.get(pid);
    if (!p || p.vanishes) {
      this.procs.delete(pid);
      note("gone");
      return "gone";
    }
    if (p.denied) {
      note("denied");
      return "denied";
    }
    note("kill");
    if (signal === "SIGKILL" || !p.ignoreTerm) this.procs.delete(pid);
    return "sent";
  }
}
