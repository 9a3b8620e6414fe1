/**
 * `berth-acquire run [flags] -- COMMAND [ARGS...]`: hold the lease while a
 * command runs, outside Kubernetes (VMs, systemd, CI, cron) or in any pod.
 * It reuses the acquire loop and the {@linkcode Renewer} unchanged; only the
 * enforcer differs: closing the gate stops the command's whole process group
 * (SIGTERM, SIGKILL after the grace), and the lease is released or given up
 * only once the group is gone.
 *
 * @module
 */
import { acquireLease } from "../hold/acquire_loop.ts";
import { handoffMarker, handOver } from "../hold/handover.ts";
import {
  ChildEnforcer,
  type ChildExit,
  EXIT_CANNOT_EXECUTE,
  EXIT_COMMAND_NOT_FOUND,
  ProcessGroup,
  SpawnError,
} from "../enforce/process_group.ts";
import { aborted, type Clock, systemClock } from "../state/clock.ts";
import { clientFor, RUN_ROLE, start } from "./startup.ts";
import type { SignalSource } from "./signals.ts";
import type { Config } from "../config/config.ts";
import { ConfigError } from "../config/error.ts";
import type { ExtraFlag } from "../config/flags.ts";
import { ProbeEnforcer } from "../enforce/enforcer.ts";
import {
  HEALTH_ADDR_ENV,
  type HealthAddr,
  healthAddrFrom,
  type HealthServer,
  startHealthServer,
} from "../obs/health.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";
import type { MarkerDeadlines } from "../state/marker.ts";
import { LeaseMetrics } from "../obs/metrics.ts";
import {
  type HandoffStore,
  Renewer,
  type RenewerStatus,
} from "../hold/renewer.ts";
import { ensureStateDir } from "../state/ensure_dir.ts";
import { StateDir } from "../state/state_dir.ts";

export { EXIT_CANNOT_EXECUTE, EXIT_COMMAND_NOT_FOUND };
export type { SignalSource };

/**
 * The command was stopped because the lease was lost (or could not be
 * confirmed before its local deadline). 75 is sysexits' `EX_TEMPFAIL`
 * ("try again later"), which is what it means to a supervisor: another
 * holder has the lease now. The `run` codes sit in the sysexits block
 * (64-78), which ordinary programs rarely use, away from 1/2 (generic
 * errors), 126/127 (cannot execute / not found) and 128+N (killed by signal
 * N), so a caller can tell them from the command's own statuses.
 */
export const EXIT_LEASE_LOST = 75;
/** `--acquire-timeout` passed before the lease was acquired; the command never ran (or, after a loss, did not run again). */
export const EXIT_ACQUIRE_TIMEOUT = 76;
/** SIGTERM/SIGINT/SIGHUP/SIGQUIT arrived while waiting for the lease; the command did not run (again). */
export const EXIT_CANCELLED = 77;
/** Invalid configuration or start-up failure (flags, env, CA bundle, key file, state directory, listener). sysexits' `EX_CONFIG`. */
export const EXIT_CONFIG = 78;

/** The signals `run` ends a wait on, or forwards to the command while it runs. */
export const FORWARDED_SIGNALS: readonly Deno.Signal[] = [
  "SIGTERM",
  "SIGINT",
  "SIGHUP",
  "SIGQUIT",
];

const USAGE = `Usage: berth-acquire run [flags] -- COMMAND [ARGS...]

Acquires the lease (the same configuration as acquire; runtime-singleton
semantics), then runs COMMAND directly (no shell) in a process group of its
own, with BERTH_FENCING_TOKEN, BERTH_HOLDER and BERTH_LEASE_EXPIRES_AT in its
environment, and renews the lease against a local deadline while it runs.
When the lease is lost, or cannot be confirmed in time, the whole process
group gets SIGTERM and, after --enforce-grace-seconds, SIGKILL, before the
local deadline (the enforce lead defaults to the grace + 1s); only then is
the lease given up. SIGTERM/SIGINT/SIGHUP/SIGQUIT are forwarded to the
command while it runs; the lease is released after it has exited.
BERTH_STATE_DIR / --state-dir is optional: without it nothing is written.

Exit status: the command's own (128+N when signal N ended it); 75 lease lost
(command stopped); 76 --acquire-timeout reached; 77 cancelled by a signal
while waiting for the lease; 78 configuration or start-up error; 126 command
cannot be executed; 127 command not found.
`;

const RUN_FLAGS: Record<string, ExtraFlag> = {
  "restart-on-reacquire": {
    type: "boolean",
    help:
      "after the lease was lost and the command stopped, wait to reacquire and run it again instead of exiting 75",
  },
  "health-addr": {
    type: "string",
    value: "HOST:PORT",
    help:
      `serve GET /healthz and /metrics on this address (env ${HEALTH_ADDR_ENV}); default: off`,
  },
};

/** The arguments split at the first `--`: `run`'s flags, and the command. */
export function splitCommand(
  args: string[],
): { flags: string[]; command: string[] | undefined } {
  const i = args.indexOf("--");
  return i < 0
    ? { flags: args, command: undefined }
    : { flags: args.slice(0, i), command: args.slice(i + 1) };
}

/** What the command is told about the lease. */
export interface ChildLease {
  /** The holder identity. */
  holder: string;
  /** The fencing token to pass to the systems it writes to. */
  token: number;
  /** The local lease deadline as wall-clock ms since the epoch. */
  expiresAtMs: number;
}

/**
 * The command's environment: `base` plus `BERTH_FENCING_TOKEN`,
 * `BERTH_HOLDER` and `BERTH_LEASE_EXPIRES_AT` (RFC 3339, UTC, milliseconds
 * rounded down: stop before it). `BERTH_API_KEY` is removed: the command
 * needs the token, not the credential that can take the lease.
 */
export function childEnv(
  base: Record<string, string>,
  lease: ChildLease,
): Record<string, string> {
  const env = { ...base };
  delete env.BERTH_API_KEY;
  env.BERTH_FENCING_TOKEN = String(lease.token);
  env.BERTH_HOLDER = lease.holder;
  env.BERTH_LEASE_EXPIRES_AT = new Date(Math.floor(lease.expiresAtMs))
    .toISOString();
  return env;
}

/**
 * The handoff from `run`'s own acquisition to its renewer, in memory: the
 * renewer adopts it as the sidecar adopts the init container's. Writes go
 * to the state directory too when one is configured.
 */
class RunHandoff implements HandoffStore {
  constructor(
    private holder: string,
    private token: number,
    private marker: MarkerDeadlines | undefined,
    private state: StateDir | undefined,
  ) {}
  readHolder(): string | undefined {
    return this.holder;
  }
  readToken(): number | undefined {
    return this.token;
  }
  readMarkerDeadlines(): MarkerDeadlines | undefined {
    return this.marker;
  }
  async writeHolder(holder: string): Promise<void> {
    await this.state?.writeHolder(holder);
    this.holder = holder;
  }
  async writeToken(token: number): Promise<void> {
    await this.state?.writeToken(token);
    this.token = token;
  }
}

/**
 * Routes the four stop signals: while no command runs they cancel the wait
 * (once); while one runs they are forwarded to its process group.
 */
class SignalRouter {
  #cancel = new AbortController();
  #target: ProcessGroup | undefined;
  #stopForwarded = false;
  #handlers: [Deno.Signal, () => void][];

  constructor(private logger: Logger, private source: SignalSource) {
    this.#handlers = FORWARDED_SIGNALS.map((name) => {
      const handler = () => this.#on(name);
      source.addSignalListener(name, handler);
      return [name, handler];
    });
  }

  /** Aborts on the first signal received while no command runs. */
  get cancelled(): AbortSignal {
    return this.#cancel.signal;
  }

  /**
   * Whether SIGTERM, SIGINT or SIGQUIT was forwarded to the current command:
   * someone asked it to stop, so `run` does not restart it after a loss.
   */
  get stopForwarded(): boolean {
    return this.#stopForwarded;
  }

  /** Forwards to `target` from now on (undefined: nothing runs); a new command starts with a clean slate. */
  forwardTo(target: ProcessGroup | undefined): void {
    if (target !== this.#target && target !== undefined) {
      this.#stopForwarded = false;
    }
    this.#target = target;
  }

  dispose(): void {
    for (const [n, h] of this.#handlers) this.source.removeSignalListener(n, h);
  }

  #on(name: Deno.Signal): void {
    if (this.#target) {
      if (name !== "SIGHUP") this.#stopForwarded = true;
      this.logger.info("signal received; forwarding it to the command", {
        signal: name,
        pgid: this.#target.pid,
      });
      this.#target.signal(name);
    } else if (!this.#cancel.signal.aborted) {
      this.logger.info("signal received; shutting down", { signal: name });
      this.#cancel.abort(new DOMException(`received ${name}`, "AbortError"));
    } else {
      this.logger.info("signal received again; still finishing", {
        signal: name,
      });
    }
  }
}

function isTimeout(signal: AbortSignal): boolean {
  return (signal.reason as Error | undefined)?.name === "TimeoutError";
}

/** A bound on one wait for the lease: the signals, and `--acquire-timeout`. */
function waitBound(
  config: Config,
  clock: Clock,
  ...signals: AbortSignal[]
): AbortSignal {
  if (config.acquireTimeoutMs) {
    signals.push(clock.timeout(config.acquireTimeoutMs));
  }
  return AbortSignal.any(signals);
}

/** Everything {@linkcode supervise} works with once the lease is held. */
interface Supervision {
  config: Config;
  command: string[];
  restart: boolean;
  clock: Clock;
  logger: Logger;
  renewer: Renewer;
  enforcer: ChildEnforcer;
  signals: SignalRouter;
  renewerFailed: AbortSignal;
  metrics: LeaseMetrics;
}

/**
 * Waits until the command may start: the gate is open both as the renewer
 * decided it (its status, which changes synchronously) and as the enforcer
 * applied it (which lags, through the renewer's enforcement queue). Either
 * alone is not enough: a close decided but still queued leaves the enforcer
 * open, and a command started then would run without the lease. Returns
 * undefined when the command may start now (the caller must start it
 * without awaiting anything first), else `run`'s exit status: cancelled by
 * a signal (checked first, so a signal that arrived just before the start,
 * during the hand-over say, is not lost), the renewer failed, or
 * `--acquire-timeout` passed.
 */
async function gateReady(s: Supervision): Promise<number | undefined> {
  const { config, clock, logger, renewer, enforcer, signals } = s;
  let bound: AbortSignal | undefined;
  for (;;) {
    if (signals.cancelled.aborted) {
      logger.info("stopped before the command started");
      return EXIT_CANCELLED;
    }
    if (s.renewerFailed.aborted) return EXIT_LEASE_LOST;
    const applied = enforcer.isOpen;
    if (applied && renewer.status().gateOpen) return undefined;
    if (bound === undefined) {
      logger.info(
        "waiting for the lease to be confirmed before running the command",
      );
      bound = waitBound(config, clock, signals.cancelled, s.renewerFailed);
    } else if (isTimeout(bound)) {
      logger.error(
        "gave up waiting to reacquire the lease: --acquire-timeout reached",
      );
      return EXIT_ACQUIRE_TIMEOUT;
    }
    // Open as applied but closed as decided: the close is queued; wait for
    // it to be applied, then for the next open.
    await aborted(
      AbortSignal.any([applied ? enforcer.closed : enforcer.opened, bound]),
    );
  }
}

/**
 * Runs the command while the gate is open, again after each reacquire with
 * `--restart-on-reacquire`, and returns `run`'s exit status. Returns only
 * once no process of the command is left.
 */
async function supervise(s: Supervision): Promise<number> {
  const { config, command, clock, logger, renewer, enforcer, signals } = s;
  const base = Deno.env.toObject();
  for (;;) {
    const stop = await gateReady(s);
    if (stop !== undefined) return stop;
    // From here to the start nothing is awaited: the gate cannot change.
    const status = renewer.status();
    let child: ProcessGroup | undefined;
    try {
      child = enforcer.startIfOpen(status.gateOpen, () =>
        ProcessGroup.spawn({
          argv: command,
          env: childEnv(base, {
            holder: config.holder,
            token: status.token,
            expiresAtMs: Date.now() +
              ((status.deadline ?? clock.now()) - clock.now()),
          }),
          graceMs: config.enforceGraceSeconds * 1000,
          clock,
          logger,
          onStopSignal: (sig) =>
            s.metrics.countEnforcement(
              sig === "SIGTERM" ? "sigterm" : "sigkill",
            ),
        }));
    } catch (e) {
      if (!(e instanceof SpawnError)) throw e;
      logger.error("cannot run the command", { error: e.message });
      return e.exitCode;
    }
    if (!child) continue; // the gate closed meanwhile; wait again
    logger.info("running the command", {
      command: command[0],
      pid: child.pid,
      fencing_token: status.token,
    });
    signals.forwardTo(child);
    let exit: ChildExit;
    try {
      exit = await child.finished();
    } finally {
      signals.forwardTo(undefined);
      enforcer.detach(child);
    }
    if (exit.stopReason === undefined) {
      logger.info("the command exited", {
        code: exit.code,
        ...(exit.signal ? { signal: exit.signal } : {}),
      });
      return exit.code;
    }
    logger.error("the command was stopped: the lease is not held", {
      reason: exit.stopReason,
      code: exit.code,
    });
    if (!s.restart || signals.stopForwarded || s.renewerFailed.aborted) {
      return EXIT_LEASE_LOST;
    }
  }
}

/** `berth-acquire run`: see the usage text. */
export async function main(args: string[]): Promise<number> {
  const split = splitCommand(args);
  const env = Deno.env.toObject() as Record<string, string | undefined>;
  const started = start(
    { name: "run", usage: USAGE, flags: RUN_FLAGS, ...RUN_ROLE },
    split.flags,
    env,
  );
  if (typeof started === "number") {
    if (started !== 0 && split.command === undefined) {
      console.error(
        "berth-acquire run: put the command after --, e.g. berth-acquire run [flags] -- COMMAND [ARGS...]",
      );
    }
    return started === 0 ? 0 : EXIT_CONFIG;
  }
  const { config, extra, logger } = started;
  const problem = (msg: string): number => {
    started.configProblem(msg);
    return EXIT_CONFIG;
  };
  if (split.command === undefined || split.command.length === 0) {
    return problem(
      "no command to run: put it after --, e.g. berth-acquire run [flags] -- COMMAND [ARGS...]",
    );
  }
  if (config.mode !== "runtime-singleton") {
    return problem(
      `run keeps the lease while the command runs (runtime-singleton semantics); mode ${
        JSON.stringify(config.mode)
      } is not supported: unset BERTH_MODE or set it to runtime-singleton`,
    );
  }
  let healthAddr: HealthAddr | undefined;
  try {
    healthAddr = healthAddrFrom(extra["health-addr"], env[HEALTH_ADDR_ENV]);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return problem(e.problem);
  }
  if (config.enforce === "signal") {
    logger.info(
      "run stops its own command's process group; the signal target setting is not used",
    );
  }
  const stateDirGiven = started.given.has("state-dir");
  return await runWith({
    config,
    command: split.command,
    restart: extra["restart-on-reacquire"] === true,
    healthAddr,
    state: stateDirGiven ? new StateDir(config.stateDir) : undefined,
    logger,
    clock: systemClock,
  });
}

/**
 * Everything {@linkcode runWith} needs, resolved. Its own type so that a
 * test can run `run` in-process with a scripted server, a fake clock and
 * fake signals, and stop it at points a real process cannot be stopped at.
 */
export interface RunOptions {
  /** The resolved configuration (runtime-singleton mode). */
  config: Config;
  /** The command and its arguments, run directly (no shell). */
  command: string[];
  /** `--restart-on-reacquire`: run the command again after a reacquire instead of exiting 75. */
  restart: boolean;
  /** Where to serve /healthz and /metrics; undefined: not served. */
  healthAddr: HealthAddr | undefined;
  /** The state directory, when one was configured; undefined: nothing is written. */
  state: StateDir | undefined;
  /** Receives every record. */
  logger: Logger;
  /** Monotonic and boot-time clocks and waits. */
  clock: Clock;
  /** The lease RPCs; default: the client the configuration describes. */
  client?: LeaseClient;
  /** Where the stop signals come from; default `Deno` (the process's own). */
  signalSource?: SignalSource;
}

/**
 * `run` once its configuration is resolved: acquire, hand over, supervise
 * the command, release. Returns the exit status (see the usage text).
 * Exported so tests can drive it in-process; the CLI calls {@linkcode main}.
 */
export async function runWith(o: RunOptions): Promise<number> {
  const { config, logger, clock, state } = o;
  let renewer: Renewer | undefined;
  let stopping = false;
  const waiting: RenewerStatus = {
    gateOpen: false,
    token: 0,
    reason: "waiting to acquire the lease",
  };
  const statusNow = () => renewer?.status() ?? waiting;
  const metrics = new LeaseMetrics({
    status: statusNow,
    clock,
    isStopping: () => stopping,
  });
  let client: LeaseClient;
  let health: HealthServer | undefined;
  try {
    if (state) await ensureStateDir(state.dir);
    await state?.cleanStaleTemps();
    client = metrics.instrumentClient(
      o.client ?? await clientFor(config, logger, clock),
    );
    if (o.healthAddr) {
      health = startHealthServer({
        ...o.healthAddr,
        status: statusNow,
        clock,
        metrics: () => metrics.render(),
        logger,
      });
    }
  } catch (e) {
    logger.error("cannot start", {
      error: e instanceof Error ? e.message : String(e),
    });
    return EXIT_CONFIG;
  }
  const signals = new SignalRouter(logger, o.signalSource ?? Deno);
  try {
    logger.info("acquiring lease", {
      ttl_seconds: config.ttlSeconds,
      enforce_lead_ms: config.enforceLeadMs,
      enforce_grace_seconds: config.enforceGraceSeconds,
    });
    const bound = waitBound(config, clock, signals.cancelled);
    const lease = await acquireLease({
      client,
      holder: config.holder,
      ttlSeconds: config.ttlSeconds,
      heartbeatMs: config.heartbeatMs,
      enforceLeadMs: config.enforceLeadMs,
      signal: bound,
      clock,
      logger,
    });
    if (!lease) {
      if (isTimeout(bound)) {
        logger.error(
          "gave up waiting for the lease: --acquire-timeout reached",
        );
        return EXIT_ACQUIRE_TIMEOUT;
      }
      logger.error("stopped before the lease was acquired");
      return EXIT_CANCELLED;
    }
    logger.info("lease acquired", { fencing_token: lease.token });
    const marker = handoffMarker(config, lease);
    if (
      state &&
      !await handOver({
        state,
        config,
        lease,
        client,
        clock,
        logger,
        installCheck: false,
      })
    ) {
      return EXIT_CONFIG;
    }
    const enforcer = new ChildEnforcer({
      initiallyOpen: true,
      marker: state
        ? new ProbeEnforcer({
          marker: metrics.markerStore({
            write: (d) => state.writeMarker(d),
            remove: () => state.removeMarker(),
          }),
          logger,
        })
        : undefined,
    });
    renewer = new Renewer({
      client,
      holder: config.holder,
      ttlSeconds: config.ttlSeconds,
      heartbeatMs: config.heartbeatMs,
      enforceLeadMs: config.enforceLeadMs,
      enforcer,
      store: new RunHandoff(config.holder, lease.token, marker, state),
      clock,
      logger,
      releaseOnShutdown: config.releaseOnShutdown,
      observer: metrics.observer(),
    });
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
        renewer,
        enforcer,
        signals,
        renewerFailed: renewerFailed.signal,
        metrics,
      });
    } finally {
      // The command is gone: only now release (when configured and held).
      stopping = true;
      stopRenewer.abort();
      await renewing;
    }
  } finally {
    signals.dispose();
    await health?.close();
  }
}
