/**
 * How `run` starts each run of its command: under this program's `gate`
 * ({@linkcode gatedLauncher}), which watches run's private marker and run
 * itself, so a killed or frozen `run` cannot leave the command running past
 * the last confirmed deadline. A {@linkcode CommandLauncher} is the seam a
 * test replaces (a stand-in gate that fails, or the command started
 * directly where a separate gate process could not share a fake clock).
 *
 * @module
 */
import {
  becomeSubreaper,
  type ChildExit,
  ProcessGroup,
} from "../gate/process_group.ts";
import type { Clock } from "../state/clock.ts";
import type { Config } from "../config/config.ts";
import type { Logger } from "../obs/log.ts";
import type { Renewer } from "../hold/renewer.ts";
import type { StateDir } from "../state/state_dir.ts";
import type { LeaseKeeper } from "../cmd/lease_keeper.ts";
import { selfArgv } from "../cmd/self_argv.ts";

/** What a {@linkcode CommandLauncher} starts one run of the command with. */
export interface LaunchContext {
  /** The command and its arguments. */
  command: string[];
  /** The environment to start from (`BERTH_API_KEY` already removed). */
  env: Record<string, string>;
  /** The resolved configuration (holder, grace). */
  config: Config;
  /** Monotonic and wall clocks. */
  clock: Clock;
  /** Receives the process group's records. */
  logger: Logger;
  /** The lease keeper (its metrics count the stop signals). */
  keeper: LeaseKeeper;
  /** The renewer (its status holds the token and deadline). */
  renewer: Renewer;
  /** The private state directory the command's gate watches. */
  fence: StateDir;
}

/** Starts each run of `run`'s command; see {@linkcode gatedLauncher}. */
export interface CommandLauncher {
  /**
   * Prepares this process once, before the lease is acquired.
   *
   * @returns Why a preparation that should have worked did not (run logs
   * it and goes on), or undefined.
   */
  prepare(): string | undefined;
  /**
   * Starts one run of the command.
   *
   * @param c What to start it with.
   * @returns The started process group.
   * @throws {SpawnError} When it cannot be started.
   */
  start(c: LaunchContext): ProcessGroup;
  /**
   * Says why the started process exited while processes of its group were
   * still running, when that means the command's gate failed.
   *
   * @param exit The leader's exit.
   * @returns The reason run logs and stops what was left with (run then
   * exits 70, `EXIT_GATE_DIED`); undefined: the command's own doing.
   */
  deathReason(exit: ChildExit): string | undefined;
}

/**
 * The gate's stop has the same grace as run's own; run sends SIGKILL to
 * everything left this much later, so it only ever acts when the gate
 * itself could not.
 */
const GATE_MARGIN_MS = 500;
/** How often the command's gate looks at run's marker (and at run itself). */
const GATE_INTERVAL = "100ms";

/**
 * Why the command's gate ended with its command still running. The gate
 * never exits before its command on its own (it stops the command first
 * when it closes), so one that did was killed or failed; its own status is
 * then no status of the command's.
 *
 * @param exit The gate's exit, with processes left behind.
 * @returns The reason run logs and stops the command with.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(
 *   gateDeathReason({ code: 137, signal: "SIGKILL" }),
 *   "the command's gate died (SIGKILL)",
 * );
 * assert.equal(
 *   gateDeathReason({ code: 1 }),
 *   "the command's gate failed (exit code 1)",
 * );
 * ```
 */
export function gateDeathReason(exit: ChildExit): string {
  return exit.signal === undefined
    ? `the command's gate failed (exit code ${exit.code})`
    : `the command's gate died (${exit.signal})`;
}

/**
 * The logger of run's process group around the gate: its gate logs the
 * stop of the command itself (with the grace it really uses), so run's own
 * stop lines of that group go at DEBUG; errors stay errors.
 *
 * @param logger run's logger.
 * @returns A logger that writes INFO and WARN at DEBUG.
 */
export function gateGroupLogger(logger: Logger): Logger {
  return {
    debug: logger.debug,
    info: logger.debug,
    warn: logger.debug,
    error: logger.error,
    with: (f) => gateGroupLogger(logger.with(f)),
  };
}

/**
 * Starts the command under `gate`, watching run's private marker and run
 * itself; prepares by making this process a child subreaper, so that should
 * the gate itself die (OOM killer), its command is reparented to run, which
 * then still sees it and stops it before releasing.
 *
 * @param gateArgv Builds the gate's command line from its arguments;
 * default this program's `gate` ({@linkcode selfArgv}).
 * @returns The launcher `run` uses unless told otherwise.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const launcher = gatedLauncher((args) => ["sh", "-c", "exit 1", ...args]);
 * assert.equal(
 *   launcher.deathReason({ code: 1 }),
 *   "the command's gate failed (exit code 1)",
 * );
 * ```
 */
export function gatedLauncher(
  gateArgv: (args: string[]) => string[] = selfArgv,
): CommandLauncher {
  return {
    prepare: becomeSubreaper,
    deathReason: gateDeathReason,
    start: (c) =>
      ProcessGroup.spawn({
        argv: gateArgv([
          "gate",
          "--state-dir",
          c.fence.dir,
          "--grace",
          `${c.config.enforceGraceSeconds}s`,
          "--interval",
          GATE_INTERVAL,
          "--exit-on-close",
          "--parent-pid",
          String(Deno.pid),
          "--log-level",
          c.config.logLevel.toLowerCase(),
          "--",
          ...c.command,
        ]),
        // The gate's lines carry the lease like run's own.
        env: {
          ...c.env,
          BERTH_LEASE_NAME: c.config.leaseName,
          BERTH_LEASE_NAMESPACE: c.config.leaseNamespace,
        },
        graceMs: c.config.enforceGraceSeconds * 1000 + GATE_MARGIN_MS,
        clock: c.clock,
        logger: gateGroupLogger(c.logger),
        // The gate passes SIGTERM on itself; run's SIGKILL reaches everything.
        descendants: "kill",
        onStopSignal: (sig) =>
          c.keeper.metrics.countEnforcement(
            sig === "SIGTERM" ? "sigterm" : "sigkill",
          ),
      }),
  };
}
