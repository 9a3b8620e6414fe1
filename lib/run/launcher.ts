/**
 * How `run` starts its command: once it is known to be executable, under
 * this program's `gate` watching a private directory, so a killed or frozen
 * `run` cannot leave it running.
 *
 * @module
 */
import {
  becomeSubreaper,
  EXIT_CANNOT_EXECUTE,
  EXIT_COMMAND_NOT_FOUND,
  ProcessGroup,
  SpawnError,
} from "../gate/process_group.ts";
import type { Logger } from "../obs/log.ts";
import { StateDir } from "../state/state_dir.ts";
import { selfArgv } from "../cmd/self_argv.ts";
import type { CommandLauncher } from "./run_supervise.ts";

/**
 * The directory the gate watches, private (mode 0700, this run's alone,
 * `remove`d at exit) and named for `status` to find running `run`s by pid
 * and lease: `$TMPDIR/berth-run-<pid>-<random>/<namespace>.<name>`
 * (docs/run-and-gate.md, "State directory").
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const own = await privateDir({ leaseNamespace: "dev", leaseName: "demo" });
 * assert.match(own.state.dir, new RegExp(`/berth-run-${Deno.pid}-\\w+/dev\\.demo$`));
 * await own.remove();
 * ```
 */
export async function privateDir(
  config: { leaseNamespace: string; leaseName: string },
): Promise<{ state: StateDir; remove: () => Promise<void> }> {
  const own = await Deno.makeTempDir({ prefix: `berth-run-${Deno.pid}-` });
  const remove = () => Deno.remove(own, { recursive: true }).catch(() => {});
  const state = new StateDir(
    `${own}/${config.leaseNamespace}.${config.leaseName}`,
  );
  await Deno.mkdir(state.dir, { mode: 0o700 }).catch(async (e) => {
    await remove();
    throw e;
  });
  return { state, remove };
}

/** run SIGKILLs what is left this much after the gate's own grace: only when the gate could not. */
const GATE_MARGIN_MS = 500;

/** The gate logs the command's stop with the grace it really uses: run's own lines of it go at DEBUG. */
function quieter(logger: Logger): Logger {
  const { debug, error } = logger;
  return {
    debug,
    info: debug,
    warn: debug,
    error,
    with: (f) => quieter(logger.with(f)),
  };
}

/**
 * The error (127, 126) starting `command` would give, found as `execvp`
 * would, so `run -- nosuchcmd` says so before taking the lease.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(executableProblem("nosuchcmd", "/nonexistent")?.exitCode, 127);
 * assert.equal(executableProblem("sh"), undefined); // found on PATH
 * ```
 */
export function executableProblem(
  command: string,
  path: string = Deno.env.get("PATH") ?? "",
): SpawnError | undefined {
  const candidates = command.includes("/")
    ? [command]
    : path.split(":").map((dir) => `${dir === "" ? "." : dir}/${command}`);
  let found: string | undefined;
  for (const candidate of candidates) {
    let info: Deno.FileInfo;
    try {
      info = Deno.statSync(candidate);
    } catch {
      continue;
    }
    if (info.isFile && ((info.mode ?? 0o111) & 0o111) !== 0) return undefined;
    found ??= info.isDirectory
      ? `${candidate} is a directory`
      : `${candidate} has no execute permission`;
  }
  if (found !== undefined) {
    return new SpawnError(command, EXIT_CANNOT_EXECUTE, new Error(found));
  }
  const missing = command.includes("/") ? "no such file" : "not found in PATH";
  return new SpawnError(command, EXIT_COMMAND_NOT_FOUND, new Error(missing));
}

/**
 * Starts the command under `gate`, run a subreaper so that a killed gate's
 * command is reparented to run, which still stops it. A gate never exits
 * before its command on its own: one that did was killed or failed.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const { deathReason } = gatedLauncher();
 * assert.equal(deathReason({ code: 1 }), "the command's gate failed (exit code 1)");
 * assert.equal(deathReason({ code: 137, signal: "SIGKILL" }), "the command's gate died (SIGKILL)");
 * ```
 */
export function gatedLauncher(
  gateArgv: (args: string[]) => string[] = selfArgv,
): CommandLauncher {
  return {
    prepare: becomeSubreaper,
    deathReason: (exit) =>
      exit.signal === undefined
        ? `the command's gate failed (exit code ${exit.code})`
        : `the command's gate died (${exit.signal})`,
    start: (c) =>
      ProcessGroup.spawn({
        argv: gateArgv([
          "gate",
          "--state-dir",
          c.fence.dir,
          "--grace",
          `${c.config.enforceGraceSeconds}s`,
          "--interval",
          "100ms",
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
        logger: quieter(c.logger),
        // The gate passes SIGTERM on itself; run's SIGKILL reaches everything.
        descendants: "kill",
        onStopSignal: (sig) =>
          c.keeper.metrics.countEnforcement(
            sig === "SIGTERM" ? "sigterm" : "sigkill",
          ),
      }),
  };
}
