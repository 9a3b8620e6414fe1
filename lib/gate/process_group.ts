/**
 * A supervised command, what `run` and `gate` start and stop: a process
 * group in a session of its own, so a shell that forked a worker, or a
 * worker pool, is stopped whole (SIGTERM, SIGKILL after the grace). It is
 * stopped only once no live process is left in it (zombies that no parent
 * reaps count as gone); only then may the lease be given away.
 *
 * A worker that calls `setsid` leaves the group, and once its parent exits
 * it would be reparented to init, out of sight. A child subreaper
 * (`prctl(PR_SET_CHILD_SUBREAPER)`, through FFI) gets those orphans
 * instead, so its descendants by parent PID are every process the command
 * started. A process that double-forks before the subreaper was set up, or
 * whose ancestors all exited before, is not seen (docs/known-limits.md).
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import type { Logger } from "../obs/log.ts";
import { parseProcStat, type ProcStat } from "../enforce/proc.ts";

/** The exit statuses of a command that cannot be executed and of one not found, as shells report them. */
export const EXIT_CANNOT_EXECUTE = 126;
export const EXIT_COMMAND_NOT_FOUND = 127;

const POLL_MS = 50;
/** How long the group may take to go after SIGKILL before the caller moves on. */
const KILL_WAIT_MS = 10_000;

/** The command could not be started; `exitCode` (126 or 127) is what `run` exits with. */
export class SpawnError extends Error {
  constructor(command: string, readonly exitCode: number, cause: Error) {
    super(
      `cannot start ${JSON.stringify(command)}: ${cause.message}` +
        (exitCode === EXIT_COMMAND_NOT_FOUND
          ? " (give a path, or a name found in PATH; the command is run directly, without a shell)"
          : " (is it an executable file?)"),
    );
    this.name = "SpawnError";
  }
}

/** How the command ended. */
export interface ChildExit {
  /** 128 + the signal number when a signal ended it, as shells report it. */
  code: number;
  signal?: Deno.Signal;
  /** Why {@linkcode ProcessGroup.stop} was called before it exited. */
  stopReason?: string;
  /** It exited leaving live processes, which {@linkcode ProcessGroup.finished} then stopped. */
  leftBehind?: true;
}

/** Options for {@linkcode ProcessGroup.spawn}: `argv` is started directly (no shell) with `env` alone. */
export interface ProcessGroupOptions {
  argv: string[];
  env: Record<string, string>;
  graceMs: number;
  clock: Clock;
  logger: Logger;
  /** Told each stop signal sent (for metrics). */
  onStopSignal?: (signal: "SIGTERM" | "SIGKILL") => void;
  /**
   * Also wait for and signal this process's descendants outside the group
   * (with this process a subreaper): `"all"`, every signal; `"kill"`, only
   * SIGKILL and SIGCONT while the leader lives, because the leader is a
   * supervisor that passes the others on (a second SIGTERM from here would
   * reach its command twice). Default the group alone.
   */
  descendants?: "all" | "kill";
}

/** One row of `/proc`, as supervision needs it. */
export type ProcRow =
  & { pid: number }
  & Pick<ProcStat, "ppid" | "pgrp" | "state">;

/** Every process procfs lists, read synchronously; throws when `/proc` cannot be listed. */
export function readProcTable(): ProcRow[] {
  const out: ProcRow[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^[1-9]\d*$/.test(entry.name)) continue;
    try {
      const { ppid, pgrp, state } = parseProcStat(
        Deno.readTextFileSync(`/proc/${entry.name}/stat`),
      );
      out.push({ pid: Number(entry.name), ppid, pgrp, state });
    } catch {
      // exited meanwhile, or malformed
    }
  }
  return out;
}

/** Zombies count as gone: orphans no PID 1 reaps stay zombies for good and would hold the supervisor. */
const live = (r: ProcRow) => r.state !== "Z" && r.state !== "X";

/** The live descendants of `root` (not `root` itself) in `table`, by parent PID, nearest first. */
export function liveDescendants(root: number, table: ProcRow[]): number[] {
  const children = Map.groupBy(table, (r) => r.ppid);
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

const PR_SET_CHILD_SUBREAPER = 36;
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
 * Makes this process a child subreaper. Returns why it could not (no libc,
 * FFI not permitted, an old kernel): the caller logs it and goes on with the
 * group alone.
 */
export function becomeSubreaper(): string | undefined {
  try {
    if (openLibc().prctl(PR_SET_CHILD_SUBREAPER, 1n, 0n, 0n, 0n) !== 0) {
      return "prctl(PR_SET_CHILD_SUBREAPER) failed";
    }
  } catch (e) {
    return `cannot load libc for prctl(PR_SET_CHILD_SUBREAPER): ${
      (e as Error).message
    }`;
  }
}

/**
 * Reaps the zombie children Deno did not start (the orphans a subreaper or
 * PID 1 inherits). Those `own` names Deno waits for itself: never
 * touched, or Deno would lose their exit status.
 */
export function reapOrphans(own: (pid: number) => boolean): void {
  let c: Libc;
  try {
    c = openLibc();
  } catch {
    return;
  }
  for (const r of readProcTable()) {
    if (r.ppid === Deno.pid && r.state === "Z" && !own(r.pid)) {
      c.waitpid(r.pid, null, WNOHANG);
    }
  }
}

/**
 * A running command in its own session and process group (its PID is the
 * group id), with stdin, stdout and stderr inherited.
 */
export class ProcessGroup {
  /** The leader's PID, also the group id. */
  readonly pid: number;
  #o: ProcessGroupOptions;
  #leaderExit: Promise<ChildExit>;
  #stopReason: string | undefined;
  #stopping: Promise<void> | undefined;
  #killed = false;
  #listFailureReported = false;
  #leaderExited = false;

  private constructor(child: Deno.ChildProcess, o: ProcessGroupOptions) {
    this.pid = child.pid;
    this.#o = o;
    this.#leaderExit = child.status.then((s) => {
      this.#leaderExited = true;
      return {
        code: s.code,
        ...(s.signal ? { signal: s.signal } : {}),
        ...(this.#stopReason !== undefined
          ? { stopReason: this.#stopReason }
          : {}),
      };
    });
  }

  /** Starts the command; throws a {@linkcode SpawnError} when it cannot be executed. */
  static spawn(o: ProcessGroupOptions): ProcessGroup {
    try {
      return new ProcessGroup(
        new Deno.Command(o.argv[0], {
          args: o.argv.slice(1),
          env: o.env,
          clearEnv: true,
          detached: true, // setsid(): a session and process group of its own
          stdin: "inherit",
          stdout: "inherit",
          stderr: "inherit",
        }).spawn(),
        o,
      );
    } catch (e) {
      throw new SpawnError(
        o.argv[0],
        e instanceof Deno.errors.NotFound
          ? EXIT_COMMAND_NOT_FOUND
          : EXIT_CANNOT_EXECUTE,
        e instanceof Error ? e : new Error(String(e)),
      );
    }
  }

  /** Why the group is being stopped, once {@linkcode stop} was called. */
  get stopReason(): string | undefined {
    return this.#stopReason;
  }

  /**
   * Stops the group: SIGTERM (and SIGCONT, so a stopped process can act on
   * it), then SIGKILL once `graceMs` has passed. Resolves when no live
   * process is left (or, if SIGKILL cannot get rid of one, after a bounded
   * wait and an error log). Later calls return the first stop.
   */
  stop(reason: string, graceMs = this.#o.graceMs): Promise<void> {
    if (this.#stopping) return this.#stopping;
    this.#stopReason = reason;
    this.#stopping = this.#stopSequence(reason, graceMs);
    return this.#stopping;
  }

  /**
   * Another Ctrl-C: SIGKILL to the group and its tree at once, not waiting
   * out the grace, said once on `logger` (the caller's: under `run` the
   * group's own is quieter); {@linkcode finished} waits for what is still
   * dying.
   */
  kill(logger: Logger): void {
    if (this.#killed) return;
    this.#killed = true;
    logger.warn("signal received again; sending SIGKILL to the command", {
      signal: "SIGINT",
      pgid: this.pid,
    });
    this.signal("SIGKILL");
    this.#stopping ??= this.#afterKill();
  }

  /**
   * The leader's exit, once its group is empty: what it left behind is
   * stopped first, as it would work on without the lease. `explain` is told
   * such an exit and returns the stop's reason after logging it, or
   * undefined for the generic WARN and reason.
   */
  async finished(
    explain?: (exit: ChildExit) => string | undefined,
  ): Promise<ChildExit> {
    const exit = await this.#leaderExit;
    if (this.#stopping) {
      await this.#stopping;
      return exit;
    }
    if (this.#live().length === 0) return exit;
    let reason = explain?.(exit);
    if (reason === undefined) {
      this.#o.logger.warn(
        "the command exited but left processes in its process group; stopping them before the lease is released",
        { pgid: this.pid },
      );
      reason = "the command exited, leaving processes behind";
    }
    await this.stop(reason);
    return { ...exit, leftBehind: true };
  }

  async #stopSequence(reason: string, graceMs: number): Promise<void> {
    const { clock, logger, onStopSignal } = this.#o;
    logger.warn("stopping the command", {
      reason,
      pgid: this.pid,
      grace_ms: graceMs,
    });
    if (this.signal("SIGTERM")) onStopSignal?.("SIGTERM");
    this.signal("SIGCONT");
    if (await this.#waitEmpty(clock.timeout(graceMs))) return;
    // A grace of 0 asks for SIGKILL at once (one cut short was real).
    if (this.#o.graceMs > 0) {
      logger.warn("the command outlived the grace; sending SIGKILL", {
        pgid: this.pid,
      });
    }
    if (this.signal("SIGKILL")) onStopSignal?.("SIGKILL");
    return await this.#afterKill();
  }

  async #afterKill(): Promise<void> {
    if (await this.#waitEmpty(this.#o.clock.timeout(KILL_WAIT_MS))) return;
    this.#o.logger.error(
      "processes of the command survive SIGKILL (uninterruptible sleep?); carrying on without them",
      { pgid: this.pid, pids: this.#live().join(",") },
    );
  }

  async #waitEmpty(bound: AbortSignal): Promise<boolean> {
    for (;;) {
      if (this.#live().length === 0) return true;
      if (bound.aborted) return false;
      await this.#o.clock.sleep(POLL_MS, bound);
    }
  }

  #tree(table: ProcRow[]): { group: number[]; outside: number[] } {
    const members = table.filter((r) => r.pgrp === this.pid && live(r));
    const group = members.map((r) => r.pid);
    const outside = this.#o.descendants
      ? liveDescendants(Deno.pid, table).filter((p) => !group.includes(p))
      : [];
    return { group, outside };
  }

  #live(): number[] {
    try {
      const { group, outside } = this.#tree(readProcTable());
      const all = [...group, ...outside];
      // The leader counts until it is reaped, whatever procfs says.
      return this.#leaderExited || all.includes(this.pid)
        ? all
        : [this.pid, ...all];
    } catch (e) {
      if (!this.#listFailureReported) {
        this.#listFailureReported = true;
        this.#o.logger.warn(
          "cannot read the process table; only the command itself is waited for",
          { error: e },
        );
      }
      return this.#leaderExited ? [] : [this.pid];
    }
  }

  /**
   * Sends `signal` to the whole group (a forwarded SIGHUP, say), then to the
   * descendants outside it listed before: the group first, so that under
   * `run` a SIGKILLed gate never sees its command die and reports it as a
   * command that left processes behind. False when all were already gone.
   */
  signal(signal: Deno.Signal): boolean {
    const d = this.#o.descendants;
    let outside: number[] = [];
    if (
      d === "all" ||
      (d && (this.#leaderExited || signal === "SIGKILL" ||
        signal === "SIGCONT"))
    ) {
      try {
        outside = this.#tree(readProcTable()).outside;
      } catch {
        // no procfs: the group alone
      }
    }
    let sent = false;
    let failed = false;
    try {
      Deno.kill(-this.pid, signal);
      sent = true;
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) {
        failed = true;
        this.#o.logger.error("cannot signal the command's process group", {
          pgid: this.pid,
          signal,
          error: e,
        });
      }
    }
    for (const pid of outside) {
      try {
        Deno.kill(pid, signal);
        sent = true;
      } catch {
        // exited meanwhile
      }
    }
    return sent && !failed;
  }
}
