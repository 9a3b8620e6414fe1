/**
 * The resolved configuration: env first, then explicitly given flags, then
 * defaults, then validation, exactly as the webhook relies on (see the
 * spec's configuration reference). The webhook configures the helpers
 * through env only; flags exist for people running the helper by hand.
 *
 * Rules worth knowing:
 * - An env variable that is unset or empty counts as not given (Kubernetes
 *   manifests write `value: ""` for "unset"). A flag given explicitly always
 *   counts, even with an empty value (`--lease-name=`), which then fails
 *   validation rather than falling back to env or a default.
 * - A heartbeat of 0 or less counts as not given (TTL/3), as in the Go
 *   helper, whose defaults run before its validation.
 * - Integers are plain decimal. A flag's integer that the Go helper's flag
 *   parser reads as another number (`030` is octal 24 there) or reads where
 *   plain decimal does not (`0x1e`, `3_0`) is refused, naming Go's reading.
 * - A malformed env value (integer, boolean, duration, log format) is fatal
 *   even when a flag overrides it, so a typo never hides. All env values are
 *   parsed before any flag value.
 * - Validation order: the spec's items 1-11, then (12) the lease key as the
 *   server checks it (namespace, name, both together), (13) the final holder
 *   is non-empty and at most 253 bytes, (14) the state directory is not
 *   empty, (15) the API server is a usable http(s) URL without credentials,
 *   (16) the enforce lead is not negative, (17) in runtime-singleton mode
 *   heartbeat + lead < TTL. The first problem found is the one reported.
 *   A required setting's message names its variable and its flag.
 *
 * The settings table is `settings.ts`, flag parsing `flags.ts`, value parsing
 * `values.ts`, the enforcement lead `lead.ts`, the holder identity
 * `holder.ts`, which settings were given at all `given.ts`.
 *
 * @module
 */
import { apiServerProblem } from "./api_server.ts";
import { DEFAULT_STATE_DIR } from "./defaults.ts";
import { ConfigError } from "./error.ts";
import { parseCommandLine } from "./flags.ts";
import {
  holderIdentity,
  holderProblem,
  type HostFacts,
  hostHolderIdentity,
  runtimeHolderProblem,
} from "./holder.ts";
import {
  ENFORCER_LEAD_DEFAULT,
  type GraceRoom,
  type LeadDefault,
  roomProblem,
} from "./lead.ts";
import { leaseKeyProblem } from "./lease_key.ts";
import type { EnforceMode, Mode } from "./modes.ts";
import {
  CONFIG_SETTINGS,
  type ConfigFlagName,
  type ConfigFlags,
  settingOf,
  whereToSet,
} from "./settings.ts";
import { type ParsedValue, parseValue } from "./values.ts";
import { type LogFormat, type LogLevel, Secret } from "../obs/log.ts";

export type { EnforceMode, Mode };

/** The largest TTL the API accepts. */
const MAX_TTL_SECONDS = 2147483647;

/** The resolved, validated configuration shared by `acquire`, `renew` and `run`. */
export interface Config {
  /** Lease name (path segment). */
  leaseName: string;
  /** Lease namespace (path segment); defaults to the pod's namespace. */
  leaseNamespace: string;
  /** See {@linkcode Mode}. */
  mode: Mode;
  /** See {@linkcode EnforceMode}. */
  enforce: EnforceMode;
  /** Process `comm` or executable basename to signal in `signal` mode ("" when unset). */
  signalTarget: string;
  /** Lease TTL sent to the server, whole seconds, 1..2147483647. */
  ttlSeconds: number;
  /** Renew interval in milliseconds; default TTL/3 kept exact (10 s -> 3333.33 ms). */
  heartbeatMs: number;
  /** SIGTERM -> SIGKILL grace in seconds (>= 0). */
  enforceGraceSeconds: number;
  /**
   * How long before the local lease deadline the workload's permission to
   * run closes, in ms, so the workload is already stopped when the server may
   * hand the lease over.
   */
  enforceLeadMs: number;
  /** Release the lease on a stop signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT). */
  releaseOnShutdown: boolean;
  /** Holder identity sent to the server. */
  holder: string;
  /** The shared state volume. */
  stateDir: string;
  /** Base URL of the Berth API server. */
  apiServer: string;
  /** API key given directly (mutually exclusive with `apiKeyFile`). */
  apiKey?: Secret;
  /** File holding the API key, re-read as it rotates. */
  apiKeyFile?: string;
  /** Extra PEM CA bundle added to the system's trust store (never replacing it). */
  caBundleFile?: string;
  /** TLS server-name override (SNI and verification). */
  serverName?: string;
  /** Skip TLS verification (development only). */
  insecureSkipTlsVerify: boolean;
  /** `acquire` gives up after this many ms; undefined = wait forever. */
  acquireTimeoutMs?: number;
  /** Log output shape. */
  logFormat: LogFormat;
  /** The lowest level written. */
  logLevel: LogLevel;
}

/** Options for {@linkcode resolveConfig}: what differs between the roles. */
export interface ResolveOptions {
  /**
   * The enforce lead when none is configured. Default
   * {@linkcode ENFORCER_LEAD_DEFAULT} (what the Kubernetes enforcer needs);
   * `run` passes `SIGNAL_SENDER_LEAD_DEFAULT`.
   */
  leadDefault?: LeadDefault;
  /**
   * The SIGTERM -> SIGKILL grace when none is configured, from the TTL,
   * heartbeat and lead as configured; default 0 (the spec's). `run` passes
   * `runGraceDefaultSeconds`.
   */
  graceDefault?: (room: GraceRoom) => number;
  /**
   * The host a holder is derived from when no holder is given and no pod
   * fact (`POD_UID`, `POD_NAME`, `POD_NAMESPACE`) is set: `run` on a plain
   * machine. Undefined: the pod rules alone (the spec's).
   */
  hostHolder?: HostFacts;
}

/**
 * Builds the validated configuration from the environment and the flags given
 * on the command line, in the order and with the messages the spec lists (see
 * the module doc).
 *
 * @param env The environment.
 * @param flags The configuration flags given (see `parseCommandLine`).
 * @param options What differs between the roles.
 * @returns The configuration.
 * @throws {ConfigError} The first problem found.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const env = {
 *   BERTH_LEASE_NAME: "checkout",
 *   BERTH_LEASE_NAMESPACE: "prod",
 *   BERTH_API_SERVER: "https://berth-api.berth-system.svc:8443",
 *   BERTH_HOLDER_IDENTITY: "east/prod:pod:p1",
 * };
 * const config = resolveConfig(env, { "ttl-seconds": "30" });
 * assert.equal(config.ttlSeconds, 30);
 * assert.equal(config.heartbeatMs, 10_000); // TTL/3
 * assert.throws(() => resolveConfig({}, {}), /lease name is required/);
 * ```
 */
export function resolveConfig(
  env: Record<string, string | undefined>,
  flags: ConfigFlags,
  options: ResolveOptions = {},
): Config {
  const leadDefault = options.leadDefault ?? ENFORCER_LEAD_DEFAULT;
  const fromEnv = new Map<string, ParsedValue>();
  for (const s of CONFIG_SETTINGS) {
    const v = env[s.env];
    if (v !== undefined && v !== "") {
      fromEnv.set(s.flag, parseValue(s.kind, v, s.env));
    }
  }
  const fromFlags = new Map<string, ParsedValue>();
  for (const s of CONFIG_SETTINGS) {
    const v = flags[s.flag];
    if (v !== undefined) {
      fromFlags.set(s.flag, parseValue(s.kind, v, `--${s.flag}`, "flag"));
    }
  }
  const get = (flag: ConfigFlagName): ParsedValue =>
    fromFlags.has(flag) ? fromFlags.get(flag) : fromEnv.get(flag);
  const str = (flag: ConfigFlagName): string | undefined =>
    get(flag) as string | undefined;
  const int = (flag: ConfigFlagName): number | undefined =>
    get(flag) as number | undefined;
  const bool = (flag: ConfigFlagName): boolean | undefined =>
    get(flag) as boolean | undefined;

  const podNamespace = str("pod-namespace") ?? "";
  const leaseName = str("lease-name") ?? "";
  const leaseNamespace = str("lease-namespace") ?? podNamespace;
  const mode = str("mode") ?? "runtime-singleton";
  const enforce = str("enforce") ?? "probe";
  const signalTarget = str("signal-target") ?? "";
  const ttlSeconds = int("ttl-seconds");
  // 0 or less means "not set" (TTL/3), as in the Go helper, whose defaults
  // run before its validation.
  const heartbeatGiven = int("heartbeat-seconds");
  const heartbeatSeconds = heartbeatGiven !== undefined && heartbeatGiven > 0
    ? heartbeatGiven
    : undefined;
  const leadSeconds = int("enforce-lead-seconds");
  const apiServer = str("api-server") ?? "";
  const apiKey = str("api-key") ?? "";
  const apiKeyFile = str("api-key-file") ?? "";
  const stateDir = str("state-dir") ?? DEFAULT_STATE_DIR;
  const holderInput = {
    mode: mode as Mode,
    explicit: str("holder-identity") ?? "",
    clusterId: str("cluster-id") ?? "",
    podNamespace,
    workloadKind: str("workload-kind") ?? "",
    workloadName: str("workload-name") ?? "",
    podName: str("pod-name") ?? "",
    podUid: str("pod-uid") ?? "",
  };
  const onHost = options.hostHolder !== undefined &&
    mode === "runtime-singleton" &&
    holderInput.explicit === "" && holderInput.podUid === "" &&
    holderInput.podName === "" && podNamespace === "";

  const fail = (problem: string): never => {
    throw new ConfigError(problem);
  };
  // 1-11: the spec's list, in its order.
  if (leaseName === "") {
    fail(`lease name is required (set ${whereToSet("lease-name")})`);
  }
  if (leaseNamespace === "") {
    // The spec's words, then the variable the webhook would set.
    fail(
      `lease namespace is required (set --lease-namespace or POD_NAMESPACE), or set ${
        settingOf("lease-namespace")!.env
      }`,
    );
  }
  if (mode !== "startup-gate" && mode !== "runtime-singleton") {
    fail(
      `invalid mode ${
        JSON.stringify(mode)
      } (want "startup-gate" or "runtime-singleton")`,
    );
  }
  if (enforce !== "probe" && enforce !== "signal") {
    fail(
      `invalid enforce ${JSON.stringify(enforce)} (want "probe" or "signal")`,
    );
  }
  if (
    mode === "runtime-singleton" && enforce === "signal" && signalTarget === ""
  ) {
    fail(
      'enforce "signal" in runtime-singleton mode needs BERTH_SIGNAL_TARGET (or --signal-target): ' +
        "an empty target would signal every process in the shared PID namespace, " +
        "including co-located sidecars; set it to the workload's process name (comm) " +
        "or executable basename, e.g. nginx",
    );
  }
  const holderIssue = onHost ? undefined : runtimeHolderProblem(holderInput);
  if (holderIssue !== undefined) fail(holderIssue);
  if (
    ttlSeconds === undefined || ttlSeconds < 1 || ttlSeconds > MAX_TTL_SECONDS
  ) {
    fail(
      `ttl must be positive and at most ${MAX_TTL_SECONDS} seconds (the API limit)` +
        (ttlSeconds === undefined
          ? "; set BERTH_TTL_SECONDS or --ttl-seconds"
          : ""),
    );
  }
  const ttl = ttlSeconds as number;
  const enforceGraceSeconds = int("enforce-grace-seconds") ??
    options.graceDefault?.({ ttl, heartbeatSeconds, leadSeconds }) ?? 0;
  if (
    heartbeatSeconds !== undefined && heartbeatSeconds >= ttl
  ) {
    fail(
      `heartbeat must be less than the ttl (heartbeat ${heartbeatSeconds}s, ttl ${ttl}s; ` +
        "set BERTH_HEARTBEAT_SECONDS below BERTH_TTL_SECONDS, or leave it unset for ttl/3)",
    );
  }
  if (enforceGraceSeconds < 0) fail("enforce grace must not be negative");
  if (apiServer === "") {
    fail(`api server URL is required (set ${whereToSet("api-server")})`);
  }
  if (apiKey !== "" && apiKeyFile !== "") {
    fail("api key and api key file are mutually exclusive");
  }

  // 12-17: checks upstream lacks; each one replaces a silent hang or a
  // misbehaving helper with an error at start-up.
  const key = leaseKeyProblem(leaseNamespace, leaseName);
  if (key !== undefined) {
    fail(
      `${key.message}; ${
        key.part === "namespace"
          ? `set ${
            whereToSet("lease-namespace")
          } (default: POD_NAMESPACE) to a valid namespace`
          : key.part === "name"
          ? `set ${whereToSet("lease-name")} to a valid name`
          : "shorten the lease name or namespace"
      }`,
    );
  }
  const holder = onHost
    ? hostHolderIdentity(holderInput.clusterId, options.hostHolder!)
    : holderIdentity(holderInput);
  const finalHolderIssue = holderProblem(holder);
  if (finalHolderIssue !== undefined) fail(finalHolderIssue);
  if (stateDir === "") {
    fail(
      `state directory must not be empty (set ${
        whereToSet("state-dir")
      }, default ${DEFAULT_STATE_DIR})`,
    );
  }
  const urlIssue = apiServerProblem(apiServer);
  if (urlIssue !== undefined) fail(urlIssue);
  const lead = leadSeconds ??
    leadDefault.seconds(enforce as EnforceMode, enforceGraceSeconds);
  if (lead < 0) fail("enforce lead must not be negative");
  const heartbeatMs = heartbeatSeconds !== undefined
    ? heartbeatSeconds * 1000
    : ttl * 1000 / 3;
  if (mode === "runtime-singleton") {
    const room = roomProblem({
      ttl,
      heartbeatSeconds,
      heartbeatMs,
      lead,
      graceSeconds: enforceGraceSeconds,
      leadExplicit: leadSeconds !== undefined,
      enforce: enforce as EnforceMode,
      leadDefault,
    });
    if (room !== undefined) fail(room);
  }

  const release = bool("release-on-shutdown") ?? mode === "runtime-singleton";
  const caBundleFile = str("ca-bundle-file") ?? "";
  const serverName = str("server-name") ?? "";
  const acquireTimeoutMs = get("acquire-timeout") as number | undefined;
  return {
    leaseName,
    leaseNamespace,
    mode: mode as Mode,
    enforce: enforce as EnforceMode,
    signalTarget,
    ttlSeconds: ttl,
    heartbeatMs,
    enforceGraceSeconds,
    enforceLeadMs: lead * 1000,
    releaseOnShutdown: release,
    holder,
    stateDir,
    apiServer,
    ...(apiKey !== "" ? { apiKey: new Secret(apiKey) } : {}),
    ...(apiKeyFile !== "" ? { apiKeyFile } : {}),
    ...(caBundleFile !== "" ? { caBundleFile } : {}),
    ...(serverName !== "" ? { serverName } : {}),
    insecureSkipTlsVerify: bool("insecure-skip-tls-verify") ?? false,
    ...(acquireTimeoutMs !== undefined ? { acquireTimeoutMs } : {}),
    logFormat: (get("log-format") as LogFormat | undefined) ?? "text",
    logLevel: (get("log-level") as LogLevel | undefined) ?? "INFO",
  };
}

/**
 * Parses `args` (configuration flags only) and resolves them against `env`:
 * the whole start-up path for a subcommand without flags of its own.
 *
 * @param env The environment.
 * @param args Configuration flags.
 * @param options What differs between the roles.
 * @returns The configuration.
 * @throws {ConfigError} The first problem, of the command line or the configuration.
 */
export function loadConfig(
  env: Record<string, string | undefined>,
  args: string[],
  options: ResolveOptions = {},
): Config {
  return resolveConfig(env, parseCommandLine(args).flags, options);
}
