/**
 * A supervised command as a process group (and, as a child subreaper, the
 * descendants that left it): what `run` and `gate` start and stop.
 *
 * The command is started in a session and process group of its own, so it
 * can be stopped whole: a shell that forked a worker, or a worker pool, is
 * sent SIGTERM as one group and SIGKILL after the grace. "Stopped" means no
 * live process is left in the group (zombies waiting for a parent that does
 * not reap them count as gone), and only then may the lease be given away.
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import type { Logger } from "../obs/log.ts";
import {
  commandTree,
  liveGroupMembers,
  liveTree,
  readProcTable,
} from "./process_tree.ts";

/** Exit status of a command that cannot be executed (permission denied, a directory), as shells report it. */
export const EXIT_CANNOT_EXECUTE = 126;
/** Exit status of a command that was not found, as shells report it. */
export const EXIT_COMMAND_NOT_FOUND = 127;

/** How often the group is looked at while it is being stopped. */
const POLL_MS = 50;
/** How long the group may take to disappear after SIGKILL before the caller moves on regardless. */
const KILL_WAIT_MS = 10_000;

/**
 * The command could not be started. It carries the exit status a shell
 * would give (126 or 127), because `run` must exit with it.
 */
export class SpawnError extends Error {
  /** Wraps the cause; `exitCode` is 127 for not found, else 126. */
  constructor(
    readonly command: string,
    readonly exitCode: number,
    cause: Error,
  ) {
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
  /** Its exit status; 128 + the signal number when a signal ended it, as shells report it. */
  code: number;
  /** The signal that ended it, if one did. */
  signal?: Deno.Signal;
  /** Set when {@linkcode ProcessGroup.stop} had been called before it exited: why. */
  stopReason?: string;
  /** Set when it exited leaving live processes behind, which {@linkcode ProcessGroup.finished} then stopped. */
  leftBehind?: true;
}

/** Options for {@linkcode ProcessGroup.spawn}. */
export interface ProcessGroupOptions {
  /** The command and its arguments; started directly, no shell. */
  argv: string[];
  /** Its complete environment (nothing else is inherited). */
  env: Record<string, string>;
  /** SIGTERM -> SIGKILL grace when stopping, ms. */
  graceMs: number;
  /** Times the grace and the polls. */
  clock: Clock;
  /** Receives the stop and signal records. */
  logger: Logger;
  /** Told about every stop signal actually sent (for metrics). */
  onStopSignal?: (signal: "SIGTERM" | "SIGKILL") => void;
  /**
   * Also count and signal this process's descendants outside the group:
   * workers that called `setsid` and, with this process a child subreaper
   * (lib/enforce/process_tree.ts), were reparented to it. `"all"`: every
   * signal reaches them too; `"kill"`: only SIGKILL and SIGCONT do while the
   * leader lives, because the leader is itself a supervisor that passes the
   * other signals on (a second SIGTERM straight from here would reach its
   * command twice); once the leader has exited, every signal does.
   * Default: the group alone.
   */
  descendants?: "all" | "kill";
}

/**
 * A running command in its own session and process group (its PID is the
 * group id). stdin, stdout and stderr are inherited.
 */
export class ProcessGroup {
  /** The leader's PID, which is also the process group id. */
  readonly pid: number;
  #o: ProcessGroupOptions;
  #child: Deno.ChildProcess;
  #leaderExit: Promise<ChildExit>;
  #stopReason: string | undefined;
  #stopping: Promise<void> | undefined;
  #listFailureReported = false;
  #leaderExited = false;

  private constructor(child: Deno.ChildProcess, o: ProcessGroupOptions) {
    this.#child = child;
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

  /**
   * Starts the command. Throws a {@linkcode SpawnError} (exit status 126 or
   * 127) when it cannot be executed.
   */
  static spawn(o: ProcessGroupOptions): ProcessGroup {
    if (o.argv.length === 0) throw new Error("no command to run");
    let child: Deno.ChildProcess;
    try {
      child = new Deno.Command(o.argv[0], {
        args: o.argv.slice(1),
        env: o.env,
        clearEnv: true,
        // setsid(): a session and process group of its own.
        detached: true,
        stdin: "inherit",
        stdout: "inherit",
        stderr: "inherit",
      }).spawn();
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
      throw new SpawnError(
        o.argv[0],
        e instanceof Deno.errors.NotFound
          ? EXIT_COMMAND_NOT_FOUND
          : EXIT_CANNOT_EXECUTE,
        err,
      );
    }
    return new ProcessGroup(child, o);
  }

  /** Why the group is being stopped, once {@linkcode stop} was called. */
  get stopReason(): string | undefined {
    return this.#stopReason;
  }

  /**
   * Sends `signal` to the whole group (a forwarded SIGHUP, say). A group
   * that is already gone is not an error.
   */
  signal(signal: Deno.Signal): void {
    this.#kill(signal);
  }

  /**
   * Stops the group: SIGTERM (and SIGCONT, so a stopped process can act on
   * it), then SIGKILL once the grace has passed while anything is left.
   * Resolves when no live process is left in the group (or, if SIGKILL
   * cannot get rid of one, after a bounded wait and an error log).
   * Idempotent: later calls return the first stop.
   *
   * @param reason Why, for the log and {@linkcode ChildExit.stopReason}.
   * @param graceMs The SIGTERM -> SIGKILL grace of this stop; default the
   * configured one (a caller with a deadline to keep passes a shorter one).
   */
  stop(reason: string, graceMs = this.#o.graceMs): Promise<void> {
    if (this.#stopping) return this.#stopping;
    this.#stopReason = reason;
    this.#stopping = this.#stopSequence(reason, graceMs);
    return this.#stopping;
  }

  /**
   * Resolves once the command has exited and its group is empty. Processes
   * the command left behind in its group are stopped first (they would
   * otherwise keep working without the lease); the exit is the leader's,
   * with {@linkcode ChildExit.leftBehind} set then.
   *
   * @param explain Called with the leader's exit when it left processes
   * behind: returns the stop's reason after logging it, or undefined for the
   * generic WARN and reason.
   * @returns The leader's exit.
   */
  async finished(
    explain?: (exit: ChildExit) => string | undefined,
  ): Promise<ChildExit> {
    const exit = await this.#leaderExit;
    if (this.#stopping) {
      await this.#stopping;
      return exit;
    }
    if ((await this.#live()).length === 0) return exit;
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
    if (this.#kill("SIGTERM")) onStopSignal?.("SIGTERM");
    this.#kill("SIGCONT");
    if (await this.#waitEmpty(clock.timeout(graceMs))) return;
    logger.warn("the command outlived the grace; sending SIGKILL", {
      pgid: this.pid,
    });
    if (this.#kill("SIGKILL")) onStopSignal?.("SIGKILL");
    if (await this.#waitEmpty(clock.timeout(KILL_WAIT_MS))) return;
    logger.error(
      "processes of the command survive SIGKILL (uninterruptible sleep?); carrying on without them",
      { pgid: this.pid, pids: (await this.#live()).join(",") },
    );
  }

  /** True once the group is empty; false when `bound` aborted first. */
  async #waitEmpty(bound: AbortSignal): Promise<boolean> {
    for (;;) {
      if ((await this.#live()).length === 0) return true;
      if (bound.aborted) return false;
      await this.#o.clock.sleep(POLL_MS, bound);
    }
  }

  async #live(): Promise<number[]> {
    try {
      const live = this.#o.descendants
        ? liveTree(this.pid)
        : await liveGroupMembers(this.pid);
      // The leader counts until it is reaped, whatever procfs says.
      return this.#leaderExited || live.includes(this.pid)
        ? live
        : [this.pid, ...live];
    } catch (e) {
      if (!this.#listFailureReported) {
        this.#listFailureReported = true;
        this.#o.logger.warn(
          "cannot read the process table; only the command itself is waited for",
          { error: e },
        );
      }
      // Without procfs, the leader's exit is all that can be known.
      return this.#leaderExited ? [] : [this.pid];
    }
  }

  /** Signals the group (and the descendants it covers); false when it is already gone. */
  #kill(signal: Deno.Signal): boolean {
    const d = this.#o.descendants;
    let sent = false;
    if (
      d === "all" ||
      (d && (this.#leaderExited || signal === "SIGKILL" ||
        signal === "SIGCONT"))
    ) {
      try {
        // Those outside the group: the group itself is signalled below, once.
        for (const pid of commandTree(this.pid, readProcTable()).outside) {
          try {
            Deno.kill(pid, signal);
            sent = true;
          } catch {
            // exited meanwhile
          }
        }
      } catch {
        // no procfs: the group alone
      }
    }
    try {
      Deno.kill(-this.pid, signal);
      return true;
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return sent;
      this.#o.logger.error("cannot signal the command's process group", {
        pgid: this.pid,
        signal,
        error: e,
      });
      return false;
    }
  }
}
