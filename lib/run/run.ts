/**
 * `berth-acquire run [flags] -- COMMAND [ARGS...]`: hold the lease while a
 * command runs, outside Kubernetes (VMs, systemd, CI, cron) or in any pod
 * (docs/run.md). The acquire loop and the {@linkcode Renewer} are the
 * sidecar's; only the enforcer differs: closing the permission stops the
 * command's whole process group, and the lease is released or given up only
 * once the group is gone. The waits and the command's supervision are
 * `run_supervise.ts`.
 *
 * @module
 */
import { handoffMarker, writeHandoff } from "../hold/handoff.ts";
import { ChildEnforcer, removeMarkers } from "./child_enforcer.ts";
import { type Clock, systemClock } from "../state/clock.ts";
import { type CommandSpec, start } from "../cmd/startup.ts";
import type { Config } from "../config/config.ts";
import { ConfigError } from "../config/argv.ts";
import type { ExtraFlag } from "../config/settings.ts";
import { SIGNAL_SENDER_LEAD_DEFAULT } from "../config/lead.ts";
import { ProbeEnforcer } from "../enforce/enforcer.ts";
import {
  HEALTH_ADDR_ENV,
  type HealthAddr,
  healthAddrFrom,
} from "../cmd/health.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import type { LogFields, Logger } from "../obs/log.ts";
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { RenewerStore } from "../hold/handoff.ts";
import { prepareStateDir, StateDir } from "../state/state_dir.ts";
import { LeaseKeeper } from "../cmd/lease_keeper.ts";
import type { SignalSource } from "../cmd/signals.ts";
import { executableProblem, gatedLauncher, privateDir } from "./launcher.ts";
import {
  acquireForRun,
  type CommandLauncher,
  EXIT_CONFIG,
  SignalRouter,
  supervise,
  watchChanges,
} from "./run_supervise.ts";

/** Lines that `run`'s own lines already say, at DEBUG under it. */
const ROUTINE = new Set<string>([
  "adopted the lease; the workload keeps running while it is confirmed",
  GO_MESSAGES.localDeadline,
]);
/** Waits `run` says once per holder and token (a new holder, or the lease taken again), the rest at DEBUG. */
const ONCE_PER_HOLDER = new Set<string>([
  GO_MESSAGES.heldByAnother,
  GO_MESSAGES.waitingToReacquire,
]);

/**
 * `run`'s logger: one line per event at INFO and above, the renewer's and
 * the acquire loop's routine lines demoted to DEBUG.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { createLogger } from "../obs/log.ts";
 * const lines: string[] = [];
 * const log = routineAtDebug(createLogger({ level: "DEBUG", format: "json", write: (l) => lines.push(l) }));
 * const held = { current_holder: "other", current_fencing_token: 3 };
 * log.info("lease held by another, waiting", held);
 * log.info("lease held by another, waiting", held);
 * assert.deepEqual(lines.map((l) => JSON.parse(l).level), ["INFO", "DEBUG"]);
 * ```
 */
export function routineAtDebug(inner: Logger): Logger {
  const said = new Map<string, string>();
  const demoted = (msg: string, f: LogFields = {}) => {
    if (ROUTINE.has(msg)) return true;
    if (!ONCE_PER_HOLDER.has(msg)) return false;
    const who = `${f.current_holder}\u0000${f.current_fencing_token}`;
    const again = said.get(msg) === who;
    said.set(msg, who);
    return again;
  };
  const wrap = (l: Logger): Logger => ({
    debug: l.debug,
    info: (m, f) => (demoted(m, f) ? l.debug : l.info)(m, f),
    warn: (m, f) => (demoted(m, f) ? l.debug : l.warn)(m, f),
    error: l.error,
    with: (f) => wrap(l.with(f)),
  });
  return wrap(inner);
}

/** The head of `run --help`, before its flags. */
export const RUN_USAGE = `Usage: berth-acquire run [flags] -- COMMAND [ARGS...]

Acquires the lease (the same configuration as acquire; runtime-singleton
semantics), then runs COMMAND directly (no shell) in a process group of its
own, with BERTH_FENCING_TOKEN, BERTH_HOLDER and BERTH_LEASE_EXPIRES_AT in its
environment, and renews the lease against a local deadline while it runs.
When the lease is lost, or cannot be confirmed in time, the whole process
group gets SIGTERM and, after --enforce-grace-seconds, SIGKILL, before the
local deadline (the enforce lead defaults to the grace + 1s); only then is
the lease given up. The grace defaults to the smaller of 5s and what the TTL
leaves after two heartbeats, a 1s stall and the lead (TTL 30 -> 5s, TTL 10 ->
1s), so that one failed renewal and a slow next one do not stop the command;
a longer grace lets a command that traps SIGTERM clean up, but stops it
sooner when the server goes silent. SIGTERM/SIGINT/SIGHUP/SIGQUIT
are forwarded to the command while it runs; the lease is released after it
has exited. BERTH_STATE_DIR / --state-dir is optional: without it nothing is
written.

Holder: BERTH_HOLDER_IDENTITY when set; in a pod (POD_* set) the pod's, as
acquire derives it; else the host's, HOST/pid:PID:uid:RANDOM, or
CLUSTER/HOST:pid:PID:uid:RANDOM with BERTH_CLUSTER_ID, new for every start:
two runs never share one, and a restarted run waits for its predecessor's
lease to be released or to expire. An API server no wait can fix (https://
on a plain-HTTP port or the reverse, an untrusted certificate, not a Berth
API server) ends run at once with 78 and the fix; one that does not answer
is retried.

The command runs under "berth-acquire gate" with a marker of run's own, so it
is stopped by the last confirmed deadline even when run is killed or frozen,
and workers it moves to a new session (setsid) are stopped with it.

Exit status: the command's own (128+N when signal N ended it); 75 lease lost
(command stopped); 76 --acquire-timeout reached; 77 cancelled by a signal
while waiting for the lease; 78 configuration or start-up error, or an API
server that cannot be used as configured; 79 the lease was confirmed again,
too late: the command had been stopped; 70 the command's gate was killed (run
stopped the command it left); 126 command cannot be executed; 127 command not
found.
`;

const RUN_FLAGS: Record<string, ExtraFlag> = {
  "restart-on-reacquire": {
    kind: "boolean",
    help:
      "after the lease was lost and the command stopped, wait to reacquire and run it again instead of exiting 75",
  },
  "health-addr": {
    kind: "value",
    value: "HOST:PORT",
    help:
      `serve GET /healthz and /metrics on this address (env ${HEALTH_ADDR_ENV}); default: off`,
  },
};

/**
 * What `run` differs in at start-up from `acquire` and `renew`: the signal
 * sender's lead and grace defaults (it stops its own command), a holder from the host when no pod fact is
 * set, runtime-singleton semantics only (`--mode`, `--enforce` and
 * `--signal-target` refused as flags, their env variables ignored but for
 * `BERTH_MODE`), and one message naming every missing setting.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(RUN_ROLE.hostHolder, true);
 * assert.deepEqual(RUN_ROLE.unused?.envRead, ["mode"]);
 * ```
 */
export const RUN_ROLE = {
  leadDefault: SIGNAL_SENDER_LEAD_DEFAULT,
  hiddenSettings: ["mode", "enforce", "signal-target"],
  helpDefaults: {
    "release-on-shutdown": "true",
    // Without it run keeps its state private and writes nothing shared.
    "state-dir": "none (nothing is written)",
    "holder-identity":
      "from the pod when POD_* is set, else from the host: HOST/pid:PID:uid:RANDOM (CLUSTER/HOST:pid:PID:uid:RANDOM with --cluster-id), new for every start",
  },
  singletonOnly:
    'run keeps the lease while the command runs (runtime-singleton semantics); mode "startup-gate" is not supported: unset BERTH_MODE or set it to runtime-singleton',
  hostHolder: true,
  unused: {
    settings: ["mode", "enforce", "signal-target"],
    why:
      "run keeps the lease while its command runs and stops the command's own process group itself",
    // BERTH_MODE=startup-gate asks for what run does not do: refused (78).
    envRead: ["mode"],
  },
  listMissing: true,
} satisfies Partial<CommandSpec>;

/** `berth-acquire run`: see the usage text. */
export async function main(args: string[]): Promise<number> {
  const env = Deno.env.toObject() as Record<string, string | undefined>;
  const started = start(
    {
      name: "run",
      usage: RUN_USAGE,
      flags: RUN_FLAGS,
      ...RUN_ROLE,
      command: {
        hint:
          "put the command after --, e.g. berth-acquire run [flags] -- COMMAND [ARGS...]",
      },
    },
    args,
    env,
  );
  if (typeof started === "number") return started === 0 ? 0 : EXIT_CONFIG;
  const { config, extra, command, logger } = started;
  const problem = (msg: string): number => {
    started.configProblem(msg);
    return EXIT_CONFIG;
  };
  // The command hint (given to start above) says where to put it.
  if (command.length === 0) return problem("no command to run");
  // Before anything is acquired: a command that cannot start would only
  // take the lease to give it back.
  const notExecutable = executableProblem(command[0]);
  if (notExecutable !== undefined) {
    logger.error("the command cannot be executed; the lease was not acquired", {
      error: notExecutable.message,
    });
    return notExecutable.exitCode;
  }
  let healthAddr: HealthAddr | undefined;
  try {
    healthAddr = healthAddrFrom(extra["health-addr"], env[HEALTH_ADDR_ENV]);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return problem(e.problem);
  }
  return await runWith({
    config,
    command,
    restart: extra["restart-on-reacquire"] === true,
    healthAddr,
    state: started.given.has("state-dir")
      ? new StateDir(config.stateDir)
      : undefined,
    logger,
    clock: systemClock,
    guardSharedHolder: started.given.has("holder-identity"),
  });
}

/**
 * Everything {@linkcode runWith} needs, resolved: a test runs `run`
 * in-process with a scripted server, a fake clock and fake signals.
 */
export interface RunOptions {
  config: Config;
  /** Run directly (no shell). */
  command: string[];
  /** `--restart-on-reacquire`. */
  restart: boolean;
  healthAddr: HealthAddr | undefined;
  /** Undefined: nothing is written. */
  state: StateDir | undefined;
  logger: Logger;
  clock: Clock;
  /** Default: the client the configuration describes. */
  client?: LeaseClient;
  /** Default {@linkcode gatedLauncher}`()`: this program's `gate` around the command. */
  launcher?: CommandLauncher;
  /** Default `Deno`. */
  signalSource?: SignalSource;
  /** A holder identity given explicitly may be another process's too (see `RenewerOptions`). */
  guardSharedHolder?: boolean;
}

/**
 * `run` once its configuration is resolved: acquire, hand over, supervise
 * the command, release. Returns the exit status (see the usage text).
 */
export async function runWith(o: RunOptions): Promise<number> {
  const { config, clock, state } = o;
  const logger = routineAtDebug(o.logger);
  let keeper: LeaseKeeper;
  let own: Awaited<ReturnType<typeof privateDir>>;
  try {
    if (state) prepareStateDir(state);
    keeper = await LeaseKeeper.open({
      config,
      logger,
      clock,
      client: o.client,
      healthAddr: o.healthAddr,
    });
    own = await privateDir(config);
  } catch (e) {
    logger.error("cannot start", {
      error: e instanceof Error ? e.message : String(e),
    });
    return EXIT_CONFIG;
  }
  const fence = own.state;
  // Should the gate itself die (OOM killer), its command is reparented to
  // run, which then still sees it and stops it before releasing.
  const launcher = o.launcher ?? gatedLauncher();
  const notSubreaper = launcher.prepare();
  if (notSubreaper !== undefined) {
    logger.warn(
      "cannot become a child subreaper; a command whose gate was killed is not tracked",
      { reason: notSubreaper },
    );
  }
  const signals = new SignalRouter(logger, o.signalSource ?? Deno);
  const client = keeper.client;
  try {
    const lease = await acquireForRun({
      config,
      client,
      clock,
      logger,
      cancelled: signals.cancelled,
      dirs: { run_dir: fence.dir, state_dir: state?.dir },
    });
    if (typeof lease === "number") return lease;
    const dirs = state ? [fence, state] : [fence];
    for (const dir of dirs) {
      const handed = await writeHandoff({
        state: dir,
        config,
        lease,
        client,
        clock,
        logger,
      });
      if (!handed) return EXIT_CONFIG;
    }
    const marker = keeper.metrics.markerStore({
      writeMarker: async (d) => {
        for (const dir of dirs) await dir.writeMarker(d);
      },
      removeMarker: () => removeMarkers(dirs),
    });
    const enforcer = new ChildEnforcer(new ProbeEnforcer({ marker, logger }));
    const changes = watchChanges(clock, logger);
    // The renewer adopts run's own acquisition from memory, as the sidecar
    // adopts the init container's from the volume; writes go to every dir.
    let [holder, token] = [config.holder, lease.token];
    const deadlines = handoffMarker(config, lease);
    const store: RenewerStore = {
      readHolder: () => holder,
      readToken: () => token,
      readMarkerDeadlines: () => deadlines,
      writeHolder: async (h) => {
        for (const d of dirs) await d.writeHolder(h);
        holder = h;
      },
      writeToken: async (t) => {
        for (const d of dirs) await d.writeToken(t);
        token = t;
      },
    };
    const renewer = keeper.renewer(
      enforcer,
      store,
      o.guardSharedHolder ?? false,
      changes.changed,
    );
    const stopRenewer = new AbortController();
    const renewerFailed = new AbortController();
    const renewing = renewer.run(stopRenewer.signal).catch((e) => {
      logger.error("the lease renewer failed; stopping the command", {
        error: e,
      });
      renewerFailed.abort();
      return enforcer.close("the lease renewer failed");
    });
    try {
      return await supervise({
        config,
        command: o.command,
        restart: o.restart,
        clock,
        logger,
        keeper,
        renewer,
        enforcer,
        signals,
        renewerFailed: renewerFailed.signal,
        fence,
        launcher,
        changes,
      });
    } finally {
      // The command is gone: only now release (when configured and held).
      keeper.stopping();
      stopRenewer.abort();
      await renewing;
    }
  } finally {
    signals.dispose();
    await keeper.close();
    await own.remove();
  }
}
