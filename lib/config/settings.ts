/**
 * The settings table: every configuration setting with its flag, its env
 * variable, how its value parses and its documented default. One table, so
 * the flag parser, the env reader, the help text, the "did you mean"
 * suggestions and the tests cannot drift apart.
 *
 * @module
 */
import { DEFAULT_STATE_DIR } from "./defaults.ts";
import { ENFORCER_LEAD_DEFAULT } from "./lead.ts";
import { nearest } from "./nearest.ts";
import type { ValueKind } from "./values.ts";

/** One row of {@linkcode CONFIG_SETTINGS}. */
export interface Setting {
  /** The flag's name without dashes, e.g. `lease-name`. */
  flag: string;
  /** The env variable, e.g. `BERTH_LEASE_NAME`. */
  env: string;
  /** How the value parses. */
  kind: ValueKind;
  /** Placeholder for the value in the help text. */
  value: string;
  /** The default, as the help text states it. */
  default: string;
  /** One line for the help text. */
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
    help: "lease TTL in whole seconds (plain decimal), 1..2147483647",
  },
  {
    flag: "heartbeat-seconds",
    env: "BERTH_HEARTBEAT_SECONDS",
    kind: "integer",
    value: "N",
    default: "TTL/3, exact, possibly fractional (3.333s for a 10 s TTL)",
    help:
      "renew (and acquire poll) interval in whole seconds, less than the TTL; 0 or less: the default",
  },
  {
    flag: "enforce-grace-seconds",
    env: "BERTH_ENFORCE_GRACE_SECONDS",
    kind: "integer",
    value: "N",
    default: "0",
    help:
      "whole seconds from SIGTERM to SIGKILL when the workload is stopped by signal (enforce=signal, or run's command)",
  },
  {
    flag: "enforce-lead-seconds",
    env: "BERTH_ENFORCE_LEAD_SECONDS",
    kind: "integer",
    value: "N",
    default: ENFORCER_LEAD_DEFAULT.text,
    help:
      "whole seconds before the local lease deadline at which the workload is stopped",
  },
  {
    flag: "release-on-shutdown",
    env: "BERTH_RELEASE_ON_SHUTDOWN",
    kind: "boolean",
    value: "BOOL",
    default: "true for runtime-singleton, false for startup-gate",
    help:
      "release the lease on a stop signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT)",
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
    default: DEFAULT_STATE_DIR,
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
    help:
      "acquire gives up after this long: a duration such as 30s, 1m or 2m30s",
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
    flag: "log-level",
    env: "BERTH_LOG_LEVEL",
    kind: "log-level",
    value: "LEVEL",
    default: "info",
    help: "lowest level logged: debug, info, warn or error",
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

const BY_FLAG = new Map<string, Setting>(
  CONFIG_SETTINGS.map((s) => [s.flag, s]),
);

/**
 * The row of a configuration flag.
 *
 * @param flag The flag's name without dashes.
 * @returns Its setting, or undefined when it is not a configuration flag.
 */
export function settingOf(flag: string): Setting | undefined {
  return BY_FLAG.get(flag);
}

/**
 * Where a setting is set, for the tail of a message: `BERTH_API_SERVER or
 * --api-server`.
 *
 * @param flag The configuration flag.
 * @returns Its env variable and its flag.
 */
export function whereToSet(flag: ConfigFlagName): string {
  return `${BY_FLAG.get(flag)!.env} or --${flag}`;
}

/**
 * `BERTH_*` variables this project reads or sets besides the settings table:
 * the health endpoint's address (`renew`, `run`) and what `run` gives its
 * command. Known, so that they are never warned about as misspellings.
 */
export const OTHER_KNOWN_ENV: readonly string[] = [
  "BERTH_HEALTH_ADDR",
  "BERTH_FENCING_TOKEN",
  "BERTH_HOLDER",
  "BERTH_LEASE_EXPIRES_AT",
];

const KNOWN_ENV: readonly string[] = [
  ...CONFIG_SETTINGS.map((s) => s.env),
  ...OTHER_KNOWN_ENV,
];

const PREFIX = "BERTH_";

function unprefixed(name: string): string {
  return name.startsWith(PREFIX) ? name.slice(PREFIX.length) : name;
}

/** A `BERTH_*` variable in the environment that this project does not know. */
export interface UnknownVariable {
  /** The variable as set. */
  name: string;
  /** The known variable it most likely misspells, if one is close. */
  suggestion?: string;
}

/**
 * The `BERTH_*` variables in `env` that nothing reads, each with the nearest
 * known name: a misspelled variable is otherwise ignored and its setting
 * silently takes its default. Variables set empty are included too.
 *
 * @param env The environment.
 * @returns The unknown variables, sorted by name.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.deepEqual(unknownVariables({ BERTH_LEASE_NAEM: "x" }), [
 *   { name: "BERTH_LEASE_NAEM", suggestion: "BERTH_LEASE_NAME" },
 * ]);
 * ```
 */
export function unknownVariables(
  env: Record<string, string | undefined>,
): UnknownVariable[] {
  const known = new Set(KNOWN_ENV);
  const stems = KNOWN_ENV.map(unprefixed);
  const out: UnknownVariable[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith(PREFIX) || known.has(name)) continue;
    const stem = nearest(unprefixed(name), stems);
    const suggestion = KNOWN_ENV.find((k) => unprefixed(k) === stem);
    out.push(suggestion ? { name, suggestion } : { name });
  }
  return out;
}
