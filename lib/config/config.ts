/**
 * Configuration: env first, then explicitly given flags, then defaults, then
 * validation, exactly as the webhook relies on (see the spec's configuration
 * reference). The webhook configures the helpers through env only; flags
 * exist for people running the helper by hand.
 *
 * Rules worth knowing:
 * - An env variable that is unset or empty counts as not given (Kubernetes
 *   manifests write `value: ""` for "unset"). A flag given explicitly always
 *   counts, even with an empty value (`--lease-name=`), which then fails
 *   validation rather than falling back to env or a default.
 * - A malformed env value (integer, boolean, duration, log format) is fatal
 *   even when a flag overrides it, so a typo never hides. All env values are
 *   parsed before any flag value.
 * - Flags follow Go's `flag` package, which the webhook's users know:
 *   `-name` and `--name` are the same, `--name=value` or `--name value` for
 *   values, and a boolean takes `--flag` or `--flag=false` but never a
 *   separate word.
 * - Validation order: the spec's items 1-11, then (12) the final holder is
 *   non-empty and at most 253 bytes, (13) the state directory is not empty,
 *   (14) the API server is an http(s) URL, (15) the enforce lead is not
 *   negative, (16) in runtime-singleton mode heartbeat + lead < TTL. The
 *   first problem found is the one reported.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { formatDurationMs, parseDurationMs } from "./duration.ts";
import {
  holderIdentity,
  holderProblem,
  runtimeHolderProblem,
} from "./holder.ts";
import { type LogFormat, parseLogFormat, Secret } from "../obs/log.ts";

/** `startup-gate` only proves admission; `runtime-singleton` keeps the lease for the pod's life. */
export type Mode = "startup-gate" | "runtime-singleton";

/** How a lost lease stops the workload: by failing its liveness probe, or by signals. */
export type EnforceMode = "probe" | "signal";

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
   * How long before the local lease deadline the gate closes, in ms, so the
   * workload is already stopped when the server may hand the lease over.
   */
  enforceLeadMs: number;
  /** Release the lease on SIGTERM/SIGINT. */
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
  /** Extra PEM CA bundle added to the system roots. */
  caBundleFile?: string;
  /** TLS server-name override (SNI and verification). */
  serverName?: string;
  /** Skip TLS verification (development only). */
  insecureSkipTlsVerify: boolean;
  /** `acquire` gives up after this many ms; undefined = wait forever. */
  acquireTimeoutMs?: number;
  /** Log output shape. */
  logFormat: LogFormat;
}

/**
 * A configuration the helper must not start with. Its own class so that a
 * subcommand can tell "the operator must fix the pod spec" (print the message,
 * exit 1) from a bug. The message never contains the API key.
 */
export class ConfigError extends Error {
  /** The problem alone, without the `invalid configuration: ` prefix. */
  readonly problem: string;
  /** Wraps `problem` as `invalid configuration: <problem>`. */
  constructor(problem: string) {
    super(`invalid configuration: ${problem}`);
    this.name = "ConfigError";
    this.problem = problem;
  }
}

/**
 * The lead the probe enforcer needs by default, in seconds: the webhook's
 * liveness probe runs every 2 s with a 1 s timeout, and the kubelet then
 * allows 1 s of termination grace, so the workload is surely stopped 4 s
 * after the gate closes.
 */
export const PROBE_ENFORCE_LEAD_SECONDS = 4;

/**
 * The margin added to the enforce grace for the signal enforcer's default
 * lead: SIGKILL goes out `grace` seconds after SIGTERM, and the process must
 * be gone before the server may hand the lease over.
 */
export const SIGNAL_ENFORCE_LEAD_MARGIN_SECONDS = 1;

/** The largest TTL the API accepts. */
export const MAX_TTL_SECONDS = 2147483647;

/**
 * The lead a signal sender needs on its own: SIGKILL goes out `grace`
 * seconds after SIGTERM, plus a margin. `run`, which signals its own child
 * and has no liveness probe behind it, uses exactly this.
 */
export function signalLeadSeconds(graceSeconds: number): number {
  return graceSeconds + SIGNAL_ENFORCE_LEAD_MARGIN_SECONDS;
}

/**
 * The enforce lead used when none is configured, in seconds, so that the gate
 * closes early enough for the chosen enforcer to have stopped the workload by
 * the lease deadline. In signal mode it is never shorter than the probe's
 * lead: when the sidecar itself is dead nobody sends signals, and the liveness
 * probe, reading the deadline in the marker, is what stops the workload.
 */
export function defaultEnforceLeadSeconds(
  enforce: EnforceMode,
  graceSeconds: number,
): number {
  return enforce === "signal"
    ? Math.max(signalLeadSeconds(graceSeconds), PROBE_ENFORCE_LEAD_SECONDS)
    : PROBE_ENFORCE_LEAD_SECONDS;
}

type Kind = "string" | "integer" | "boolean" | "duration" | "log-format";

interface Setting {
  flag: string;
  env: string;
  kind: Kind;
  /** Placeholder for the value in the help text. */
  value: string;
  /** The default, as the help text states it. */
  default: string;
  help: string;
}

/**
 * Every configuration setting: its flag, its env variable, how it parses and
 * its documented default. One table, so the parser, the help text and the
 * tests cannot drift apart.
 */
export const CONFIG_SETTINGS = [
  {
    flag: "lease-name",
    env: "BERTH_LEASE_NAME",
    kind: "string",
    value: "NAME",
    default: "required",
    help: "lease name",
  },
  {
    flag: "lease-namespace",
    env: "BERTH_LEASE_NAMESPACE",
    kind: "string",
    value: "NS",
    default: "the pod's namespace",
    help: "lease namespace",
  },
  {
    flag: "mode",
    env: "BERTH_MODE",
    kind: "string",
    value: "MODE",
    default: "runtime-singleton",
    help: "startup-gate or runtime-singleton",
  },
  {
    flag: "enforce",
    env: "BERTH_ENFORCE",
    kind: "string",
    value: "HOW",
    default: "probe",
    help: "how a lost lease stops the workload: probe or signal",
  },
  {
    flag: "signal-target",
    env: "BERTH_SIGNAL_TARGET",
    kind: "string",
    value: "NAME",
    default: "none; required for signal in runtime-singleton",
    help: "process comm or executable basename to signal, e.g. nginx",
  },
  {
    flag: "ttl-seconds",
    env: "BERTH_TTL_SECONDS",
    kind: "integer",
    value: "N",
    default: "required",
    help: "lease TTL in whole seconds, 1..2147483647",
  },
  {
    flag: "heartbeat-seconds",
    env: "BERTH_HEARTBEAT_SECONDS",
    kind: "integer",
    value: "N",
    default: "TTL/3, exact",
    help: "renew (and acquire poll) interval in seconds, less than the TTL",
  },
  {
    flag: "enforce-grace-seconds",
    env: "BERTH_ENFORCE_GRACE_SECONDS",
    kind: "integer",
    value: "N",
    default: "0",
    help: "signal enforcer: seconds from SIGTERM to SIGKILL",
  },
  {
    flag: "enforce-lead-seconds",
    env: "BERTH_ENFORCE_LEAD_SECONDS",
    kind: "integer",
    value: "N",
    default: "probe: 4; signal: the larger of enforce grace + 1 and 4",
    help:
      "seconds before the local lease deadline at which the workload is stopped",
  },
  {
    flag: "release-on-shutdown",
    env: "BERTH_RELEASE_ON_SHUTDOWN",
    kind: "boolean",
    value: "BOOL",
    default: "true for runtime-singleton, false for startup-gate",
    help: "release the lease on SIGTERM/SIGINT",
  },
  {
    flag: "holder-identity",
    env: "BERTH_HOLDER_IDENTITY",
    kind: "string",
    value: "ID",
    default: "derived from the pod",
    help: "holder identity, used verbatim",
  },
  {
    flag: "cluster-id",
    env: "BERTH_CLUSTER_ID",
    kind: "string",
    value: "ID",
    default: "none",
    help: "cluster id, the first part of a derived holder",
  },
  {
    flag: "workload-kind",
    env: "BERTH_WORKLOAD_KIND",
    kind: "string",
    value: "KIND",
    default: "none",
    help: "kind of the pod's controller, e.g. ReplicaSet",
  },
  {
    flag: "workload-name",
    env: "BERTH_WORKLOAD_NAME",
    kind: "string",
    value: "NAME",
    default: "none",
    help: "name of the pod's controller, e.g. checkout-7f6c",
  },
  {
    flag: "state-dir",
    env: "BERTH_STATE_DIR",
    kind: "string",
    value: "DIR",
    default: "/berth",
    help: "the shared state volume",
  },
  {
    flag: "api-server",
    env: "BERTH_API_SERVER",
    kind: "string",
    value: "URL",
    default: "required",
    help: "base URL of the Berth API server",
  },
  {
    flag: "api-key",
    env: "BERTH_API_KEY",
    kind: "string",
    value: "KEY",
    default: "none",
    help: "API key; prefer --api-key-file",
  },
  {
    flag: "api-key-file",
    env: "BERTH_API_KEY_FILE",
    kind: "string",
    value: "PATH",
    default: "none",
    help: "file holding the API key, re-read as it rotates",
  },
  {
    flag: "ca-bundle-file",
    env: "BERTH_CA_BUNDLE_FILE",
    kind: "string",
    value: "PATH",
    default: "none",
    help: "PEM CA bundle added to the system roots",
  },
  {
    flag: "server-name",
    env: "BERTH_SERVER_NAME",
    kind: "string",
    value: "NAME",
    default: "the URL's host",
    help: "TLS server name override (SNI and verification)",
  },
  {
    flag: "insecure-skip-tls-verify",
    env: "BERTH_INSECURE_SKIP_TLS_VERIFY",
    kind: "boolean",
    value: "BOOL",
    default: "false",
    help: "skip TLS verification (development only)",
  },
  {
    flag: "acquire-timeout",
    env: "BERTH_ACQUIRE_TIMEOUT",
    kind: "duration",
    value: "DURATION",
    default: "none, 0 = wait forever",
    help: "acquire gives up after this long, e.g. 2m30s",
  },
  {
    flag: "log-format",
    env: "BERTH_LOG_FORMAT",
    kind: "log-format",
    value: "FORMAT",
    default: "text",
    help: "log output: text or json",
  },
  {
    flag: "pod-namespace",
    env: "POD_NAMESPACE",
    kind: "string",
    value: "NS",
    default: "none",
    help: "the pod's namespace (downward API)",
  },
  {
    flag: "pod-name",
    env: "POD_NAME",
    kind: "string",
    value: "NAME",
    default: "none",
    help: "the pod's name (downward API)",
  },
  {
    flag: "pod-uid",
    env: "POD_UID",
    kind: "string",
    value: "UID",
    default: "none",
    help: "the pod's UID (downward API metadata.uid)",
  },
] as const satisfies readonly Setting[];

/** The name (without dashes) of a configuration flag. */
export type ConfigFlagName = typeof CONFIG_SETTINGS[number]["flag"];

/**
 * The configuration flags given on a command line, as raw strings (a bare
 * boolean flag is `"true"`). Absent keys were not given; `""` was given empty.
 */
export type ConfigFlags = Partial<Record<ConfigFlagName, string>>;

/**
 * A flag a subcommand adds to the configuration flags (for example `help`),
 * so one command line is parsed once, by one set of rules.
 */
export interface ExtraFlag {
  /** `boolean` takes `--x` or `--x=false`; `string` takes `--x=v` or `--x v`. */
  type: "string" | "boolean";
  /** One-letter alias, e.g. `h` for `-h`. */
  short?: string;
  /** One line for the help text. */
  help?: string;
  /** Placeholder for the value in the help text (string flags). */
  value?: string;
}

/** A command line split into configuration flags and the subcommand's own flags. */
export interface CommandLine {
  /** The configuration flags given explicitly; pass to {@linkcode resolveConfig}. */
  flags: ConfigFlags;
  /**
   * The extra flags by name: a boolean, a string, or undefined when absent.
   * A malformed boolean value is already rejected.
   */
  extra: Record<string, string | boolean | undefined>;
}

const SETTING_BY_FLAG = new Map<string, Setting>(
  CONFIG_SETTINGS.map((s) => [s.flag, s]),
);

/**
 * Splits a subcommand's arguments into configuration flags and the
 * subcommand's `extraOptions`, with Go `flag` package syntax (see the module
 * doc). Positional arguments are refused. Use this and then
 * {@linkcode resolveConfig} when the subcommand has flags of its own (such as
 * `--help`, which must work without a valid configuration); otherwise
 * {@linkcode loadConfig} does both. Throws a {@linkcode ConfigError} that
 * never echoes a flag's value.
 */
export function parseCommandLine(
  args: string[],
  extraOptions: Record<string, ExtraFlag> = {},
): CommandLine {
  const types = new Map<string, "string" | "boolean">();
  for (const s of CONFIG_SETTINGS) {
    types.set(s.flag, s.kind === "boolean" ? "boolean" : "string");
  }
  const shorts = new Map<string, string>();
  for (const [name, spec] of Object.entries(extraOptions)) {
    if (types.has(name)) {
      throw new Error(
        `extra flag --${name} collides with a configuration flag`,
      );
    }
    types.set(name, spec.type);
    if (spec.short !== undefined) shorts.set(spec.short, name);
  }

  // Normalise to `--name=value` so parseArgs sees no ambiguity: Go consumes
  // the next word as a string flag's value even when it starts with "-", and
  // a bare boolean flag means "true".
  const normalised: string[] = [];
  let previous = "";
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--") {
      if (i + 1 < args.length) throw unexpectedArgument(previous, types);
      break;
    }
    if (!arg.startsWith("-") || arg === "-") {
      throw unexpectedArgument(previous, types);
    }
    const body = arg.startsWith("--") ? arg.slice(2) : arg.slice(1);
    const eq = body.indexOf("=");
    const given = eq < 0 ? body : body.slice(0, eq);
    const written = arg.slice(0, arg.length - body.length) + given;
    if (given === "" || given.startsWith("-")) {
      throw new ConfigError(
        `bad flag syntax${
          showName(written, i)
        } (write --name=value or --name value)`,
      );
    }
    const name = types.has(given) ? given : shorts.get(given);
    if (name === undefined) {
      throw new ConfigError(
        `unknown flag${showName(written, i)}; run with --help for the list`,
      );
    }
    let value = eq < 0 ? undefined : body.slice(eq + 1);
    if (types.get(name) === "boolean") {
      value ??= "true";
    } else if (value === undefined) {
      if (i + 1 >= args.length) {
        throw new ConfigError(`flag --${name} needs a value`);
      }
      value = args[++i];
    }
    normalised.push(`--${name}=${value}`);
    previous = eq < 0 ? name : "";
  }

  const options: Record<string, { type: "string" }> = {};
  for (const name of types.keys()) options[name] = { type: "string" };
  const { values } = parseArgs({
    args: normalised,
    options,
    strict: true,
    allowPositionals: false,
  });

  const flags: ConfigFlags = {};
  const extra: Record<string, string | boolean | undefined> = {};
  for (const [name, value] of Object.entries(values)) {
    if (typeof value !== "string") continue;
    if (SETTING_BY_FLAG.has(name)) {
      flags[name as ConfigFlagName] = value;
    } else if (extraOptions[name].type === "boolean") {
      extra[name] = parseBoolean(value, `--${name}`);
    } else {
      extra[name] = value;
    }
  }
  return { flags, extra };
}

// Names a flag in an error only when it looks like one: a word that is not
// (a key typed after `--api-key=` followed by a space, say) is not echoed.
function showName(written: string, index: number): string {
  return /^-+[a-z][a-z0-9-]{0,63}$/.test(written)
    ? ` ${written}`
    : ` in argument ${index + 1} (not shown: it may hold a secret)`;
}

function unexpectedArgument(
  previous: string,
  types: Map<string, "string" | "boolean">,
): ConfigError {
  // The word itself is not echoed: it may be a key typed after `--api-key=`.
  if (previous !== "" && types.get(previous) === "boolean") {
    return new ConfigError(
      `unexpected argument after --${previous}: a boolean flag takes its value as --${previous}=false, not as a separate word`,
    );
  }
  return new ConfigError(
    `unexpected argument${
      previous ? ` after --${previous}` : ""
    }: this subcommand takes flags only (--name=value)`,
  );
}

const TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const FALSE = new Set(["0", "f", "F", "FALSE", "false", "False"]);

/**
 * Parses a boolean exactly as Go's `strconv.ParseBool` does, the parser
 * upstream used for env and flags, so values that worked there work here.
 */
export function parseBoolean(value: string, source: string): boolean {
  if (TRUE.has(value)) return true;
  if (FALSE.has(value)) return false;
  throw new ConfigError(
    `${source}=${
      JSON.stringify(value)
    }: must be a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false or False)`,
  );
}

/**
 * Parses a plain base-10 integer as Go's `strconv.Atoi` does (`+30` and `030`
 * are 30; ` 30`, `30s`, `3.0`, `0x1e` and "" are errors), refusing values
 * beyond the safe integer range instead of rounding them.
 */
export function parseInteger(value: string, source: string): number {
  const what = `${source}=${
    JSON.stringify(value)
  }: must be an integer number of seconds`;
  if (!/^[+-]?[0-9]+$/.test(value)) throw new ConfigError(what);
  const n = Number(value);
  if (!Number.isSafeInteger(n)) {
    throw new ConfigError(`${what} (this one is out of range)`);
  }
  return n === 0 ? 0 : n; // no -0
}

type Parsed = string | number | boolean | undefined;

function parseValue(s: Setting, value: string, source: string): Parsed {
  switch (s.kind) {
    case "string":
      return value;
    case "integer":
      return parseInteger(value, source);
    case "boolean":
      return parseBoolean(value, source);
    case "duration":
      try {
        const ms = parseDurationMs(value, source);
        return ms === 0 ? undefined : ms;
      } catch (e) {
        throw new ConfigError((e as Error).message);
      }
    case "log-format":
      try {
        return parseLogFormat(value, source);
      } catch (e) {
        throw new ConfigError((e as Error).message);
      }
  }
}

/**
 * Builds the validated configuration from the environment and the flags given
 * on the command line, in the order and with the messages the spec lists (see
 * the module doc). Throws the first problem as a {@linkcode ConfigError}.
 */
export function resolveConfig(
  env: Record<string, string | undefined>,
  flags: ConfigFlags,
): Config {
  const fromEnv = new Map<string, Parsed>();
  for (const s of CONFIG_SETTINGS) {
    const v = env[s.env];
    if (v !== undefined && v !== "") {
      fromEnv.set(s.flag, parseValue(s, v, s.env));
    }
  }
  const fromFlags = new Map<string, Parsed>();
  for (const s of CONFIG_SETTINGS) {
    const v = flags[s.flag];
    if (v !== undefined) fromFlags.set(s.flag, parseValue(s, v, `--${s.flag}`));
  }
  const get = (flag: ConfigFlagName): Parsed =>
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
  const heartbeatSeconds = int("heartbeat-seconds");
  const enforceGraceSeconds = int("enforce-grace-seconds") ?? 0;
  const leadSeconds = int("enforce-lead-seconds");
  const apiServer = str("api-server") ?? "";
  const apiKey = str("api-key") ?? "";
  const apiKeyFile = str("api-key-file") ?? "";
  const stateDir = str("state-dir") ?? "/berth";
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

  const fail = (problem: string): never => {
    throw new ConfigError(problem);
  };
  // 1-11: the spec's list, in its order.
  if (leaseName === "") fail("lease name is required");
  if (leaseNamespace === "") {
    fail(
      "lease namespace is required (set --lease-namespace or POD_NAMESPACE)",
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
  const holderIssue = runtimeHolderProblem(holderInput);
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
  if (
    heartbeatSeconds !== undefined &&
    (heartbeatSeconds <= 0 || heartbeatSeconds >= ttl)
  ) {
    fail(
      `heartbeat must be positive and less than the ttl (heartbeat ${heartbeatSeconds}s, ttl ${ttl}s; ` +
        "set BERTH_HEARTBEAT_SECONDS below BERTH_TTL_SECONDS, or leave it unset for ttl/3)",
    );
  }
  if (enforceGraceSeconds < 0) fail("enforce grace must not be negative");
  if (apiServer === "") fail("api server URL is required");
  if (apiKey !== "" && apiKeyFile !== "") {
    fail("api key and api key file are mutually exclusive");
  }

  // 12-16: checks upstream lacks; each one replaces a silent hang or a
  // misbehaving helper with an error at start-up.
  const holder = holderIdentity(holderInput);
  const finalHolderIssue = holderProblem(holder);
  if (finalHolderIssue !== undefined) fail(finalHolderIssue);
  if (stateDir === "") {
    fail(
      "state directory must not be empty (set BERTH_STATE_DIR or --state-dir, default /berth)",
    );
  }
  if (!isHttpUrl(apiServer)) {
    fail(
      `api server URL ${
        JSON.stringify(apiServer)
      } is not an http:// or https:// URL (set BERTH_API_SERVER to e.g. https://berth.example:8443)`,
    );
  }
  const lead = leadSeconds ??
    defaultEnforceLeadSeconds(enforce as EnforceMode, enforceGraceSeconds);
  if (lead < 0) fail("enforce lead must not be negative");
  const heartbeatMs = heartbeatSeconds !== undefined
    ? heartbeatSeconds * 1000
    : ttl * 1000 / 3;
  if (mode === "runtime-singleton") {
    const room = roomProblem(
      ttl,
      heartbeatSeconds,
      heartbeatMs,
      lead,
      leadSeconds !== undefined,
      enforce as EnforceMode,
    );
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
  };
}

function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return (u.protocol === "http:" || u.protocol === "https:") && u.host !== "";
  } catch {
    return false;
  }
}

/**
 * The renewer must get a renewal through before the gate closes, i.e. within
 * TTL - lead of the last one; a heartbeat that long or longer would stop a
 * healthy workload every cycle. The comparisons are on whole seconds (the
 * default heartbeat TTL/3 as 2 * TTL > 3 * lead), so no rounding decides.
 */
function roomProblem(
  ttl: number,
  heartbeatSeconds: number | undefined,
  heartbeatMs: number,
  lead: number,
  leadExplicit: boolean,
  enforce: EnforceMode,
): string | undefined {
  const fits = heartbeatSeconds === undefined
    // ttl - ttl/3 > lead  <=>  2 * ttl > 3 * lead
    ? 2 * ttl > 3 * lead
    : heartbeatSeconds + lead < ttl;
  if (fits) return undefined;
  const minTtl = heartbeatSeconds === undefined
    ? Math.floor((3 * lead) / 2) + 1
    : heartbeatSeconds + lead + 1;
  const hb = heartbeatSeconds === undefined
    ? `the heartbeat (${formatDurationMs(heartbeatMs)}, the default ttl/3)`
    : `the heartbeat (${heartbeatSeconds}s)`;
  const leadText = leadExplicit
    ? `the enforce lead (${lead}s)`
    : `the enforce lead (${lead}s, the ${enforce} default: ${
      enforce === "probe"
        ? "probe period 2s + timeout 1s + termination grace 1s"
        : `the larger of enforce grace + ${SIGNAL_ENFORCE_LEAD_MARGIN_SECONDS}s and the probe's ${PROBE_ENFORCE_LEAD_SECONDS}s`
    })`;
  const maxHeartbeat = ttl - lead - 1;
  return `no room to renew: ${hb} plus ${leadText} must be less than the ttl (${ttl}s), ` +
    "or the gate closes before each renewal and a healthy workload is stopped; " +
    `the smallest workable ttl for this heartbeat and lead is ${minTtl}s: ` +
    `raise BERTH_TTL_SECONDS to at least ${minTtl}` +
    (maxHeartbeat >= 1
      ? `, set BERTH_HEARTBEAT_SECONDS to at most ${maxHeartbeat}`
      : "") +
    ", or lower BERTH_ENFORCE_LEAD_SECONDS" +
    (enforce === "signal" && !leadExplicit
      ? " or BERTH_ENFORCE_GRACE_SECONDS"
      : "");
}

/**
 * Parses `args` (configuration flags only) and resolves them against `env`:
 * the whole start-up path for a subcommand without flags of its own. Throws a
 * {@linkcode ConfigError}.
 */
export function loadConfig(
  env: Record<string, string | undefined>,
  args: string[],
): Config {
  return resolveConfig(env, parseCommandLine(args).flags);
}

function helpEntry(
  flag: string,
  value: string | undefined,
  help: string,
  note: string,
): string {
  return `  --${flag}${value ?? ""}\n        ${help}${
    note ? ` [${note}]` : ""
  }\n`;
}

/**
 * The help text for every configuration flag, with its env variable and
 * default, so that `acquire`, `renew` and `run` print one text that cannot
 * disagree with the parser.
 */
export const CONFIG_FLAGS_HELP: string =
  "Configuration (env first; a flag given explicitly overrides it):\n" +
  CONFIG_SETTINGS.map((s) =>
    helpEntry(
      s.flag,
      s.kind === "boolean" ? `[=${s.value}]` : ` ${s.value}`,
      s.help,
      `env ${s.env}; default: ${s.default}`,
    )
  ).join("");

/**
 * Formats a subcommand's own flags in the style of
 * {@linkcode CONFIG_FLAGS_HELP}, so a usage text reads as one list.
 */
export function formatExtraFlagsHelp(
  extraOptions: Record<string, ExtraFlag>,
): string {
  return Object.entries(extraOptions).map(([name, spec]) =>
    helpEntry(
      name,
      spec.type === "boolean" ? undefined : ` ${spec.value ?? "VALUE"}`,
      spec.help ?? "",
      spec.short ? `or -${spec.short}` : "",
    )
  ).join("");
}
