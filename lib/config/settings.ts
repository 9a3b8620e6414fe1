/**
 * The settings table, which the command line, the env reader, the help text
 * and the "did you mean" suggestions are made from. Values parse as Go's
 * helper parsed them: a pod spec that worked there works here, the rest is
 * refused.
 *
 * @module
 */
import {
  type Argv,
  CONFIG_FLAG_KINDS,
  ConfigError,
  DEFAULT_STATE_DIR,
  flagBoolean,
  type FlagDef,
  lastValue,
  nearest,
  parseArgv,
  UsageError,
} from "./argv.ts";
import { parseDurationMs } from "./duration.ts";
import { ENFORCER_LEAD_DEFAULT, type LeadDefault } from "./lead.ts";
import { parseLogFormat, parseLogLevel } from "../obs/log.ts";

export type ConfigFlagName = keyof typeof CONFIG_FLAG_KINDS;

// deno-fmt-ignore
const TABLE: Record<ConfigFlagName, [string, ValueKind, string, string, string]> = {
  "lease-name": ["BERTH_LEASE_NAME", "string", "NAME", "required", "lease name"],
  "lease-namespace": ["BERTH_LEASE_NAMESPACE", "string", "NS", "the pod's namespace", "lease namespace"],
  mode: ["BERTH_MODE", "string", "MODE", "runtime-singleton", "startup-gate or runtime-singleton"],
  enforce: ["BERTH_ENFORCE", "string", "HOW", "probe", "how a lost lease stops the workload: probe or signal"],
  "signal-target": ["BERTH_SIGNAL_TARGET", "string", "NAME", "none; required for signal in runtime-singleton",
    "process comm or executable basename to signal, e.g. nginx"],
  "ttl-seconds": ["BERTH_TTL_SECONDS", "integer", "N", "required",
    "lease TTL in whole seconds (plain decimal), 1..2147483647"],
  "heartbeat-seconds": ["BERTH_HEARTBEAT_SECONDS", "integer", "N", "TTL/3, exact, possibly fractional (3.333s for a 10 s TTL)",
    "renew (and acquire poll) interval in whole seconds, less than the TTL; 0 or less: the default"],
  "enforce-grace-seconds": ["BERTH_ENFORCE_GRACE_SECONDS", "integer", "N", "0",
    "whole seconds from SIGTERM to SIGKILL when the workload is stopped by signal (enforce=signal, or run's command)"],
  "enforce-lead-seconds": ["BERTH_ENFORCE_LEAD_SECONDS", "integer", "N", ENFORCER_LEAD_DEFAULT.text,
    "whole seconds before the local lease deadline at which the workload is stopped"],
  "release-on-shutdown": ["BERTH_RELEASE_ON_SHUTDOWN", "boolean", "BOOL", "true for runtime-singleton, false for startup-gate",
    "release the lease on a stop signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT)"],
  "holder-identity": ["BERTH_HOLDER_IDENTITY", "string", "ID", "derived from the pod", "holder identity, used verbatim"],
  "cluster-id": ["BERTH_CLUSTER_ID", "string", "ID", "none", "cluster id, the first part of a derived holder"],
  "workload-kind": ["BERTH_WORKLOAD_KIND", "string", "KIND", "none", "kind of the pod's controller, e.g. ReplicaSet"],
  "workload-name": ["BERTH_WORKLOAD_NAME", "string", "NAME", "none", "name of the pod's controller, e.g. checkout-7f6c"],
  "state-dir": ["BERTH_STATE_DIR", "string", "DIR", DEFAULT_STATE_DIR, "the shared state volume"],
  "api-server": ["BERTH_API_SERVER", "string", "URL", "required", "base URL of the Berth API server"],
  "api-key": ["BERTH_API_KEY", "string", "KEY", "none", "API key; prefer --api-key-file"],
  "api-key-file": ["BERTH_API_KEY_FILE", "string", "PATH", "none", "file holding the API key, re-read as it rotates"],
  "ca-bundle-file": ["BERTH_CA_BUNDLE_FILE", "string", "PATH", "none", "PEM CA bundle added to the system roots"],
  "server-name": ["BERTH_SERVER_NAME", "string", "NAME", "the URL's host",
    "TLS server name override (SNI and verification)"],
  "insecure-skip-tls-verify": ["BERTH_INSECURE_SKIP_TLS_VERIFY", "boolean", "BOOL", "false",
    "skip TLS verification (development only)"],
  "acquire-timeout": ["BERTH_ACQUIRE_TIMEOUT", "duration", "DURATION", "none, 0 = wait forever",
    "acquire gives up after this long: a duration such as 30s, 1m or 2m30s"],
  "log-format": ["BERTH_LOG_FORMAT", "log-format", "FORMAT", "text", "log output: text or json"],
  "log-level": ["BERTH_LOG_LEVEL", "log-level", "LEVEL", "info", "lowest level logged: debug, info, warn or error"],
  "pod-namespace": ["POD_NAMESPACE", "string", "NS", "none", "the pod's namespace (downward API)"],
  "pod-name": ["POD_NAME", "string", "NAME", "none", "the pod's name (downward API)"],
  "pod-uid": ["POD_UID", "string", "UID", "none", "the pod's UID (downward API metadata.uid)"],
};

/** Every configuration setting, in the help text's order. */
export const CONFIG_SETTINGS = Object.entries(TABLE).map((
  [flag, [env, kind, value, text, help]],
) => ({ flag: flag as ConfigFlagName, env, kind, value, default: text, help }));

type Setting = typeof CONFIG_SETTINGS[number];

/** The configuration flags given, as text (a bare boolean is `"true"`, `""` was given empty). */
export type ConfigFlags = Partial<Record<ConfigFlagName, string>>;

/** The variable of a configuration flag. */
export const envOf = (flag: ConfigFlagName): string => TABLE[flag][0];

const DECIMAL = /^[+-]?[0-9]+$/;

// Go's strconv.ParseInt(s, 0, 64), which its flag parser reads integers with.
const GO_INTEGER =
  /^[+-]?(0[xX](_?[0-9a-fA-F])+|0[bB](_?[01])+|0[oO](_?[0-7])+|0(_?[0-7])*|[1-9](_?[0-9])*)$/;

function goFlagInteger(text: string): bigint | undefined {
  if (!GO_INTEGER.test(text)) return undefined;
  const s = text.replace(/^[+-]/, "").replaceAll("_", "");
  const n = BigInt(/^0[0-7]/.test(s) ? `0o${s.slice(1)}` : s);
  return text.startsWith("-") ? -n : n;
}

// Plain base-10, as Go's strconv.Atoi, not rounded beyond the safe range; a
// flag the Go helper reads otherwise is refused, so a fleet that mixes both
// helpers never runs two values from one pod spec.
function parseInteger(value: string, source: string, flag: boolean): number {
  const decimal = DECIMAL.test(value) ? BigInt(value) : undefined;
  const go = flag ? goFlagInteger(value) : decimal;
  const what = `${source}=${JSON.stringify(value)}`;
  if (go !== decimal) {
    throw new ConfigError(
      `${what}: ${
        go === undefined
          ? `the Go helper refuses it (a leading zero means octal there); write ${decimal} without the leading zero, which both helpers read alike`
          : decimal === undefined
          ? `the Go helper reads it as ${go} (Go integer syntax), this one reads plain decimal only; write ${go}`
          : `the Go helper reads a leading zero as octal (${go}, not ${decimal}); write ${go} or ${decimal} without the leading zero, which both helpers read alike`
      }`,
    );
  }
  const n = Number(value);
  if (decimal === undefined || !Number.isSafeInteger(n)) {
    throw new ConfigError(
      `${what}: must be an integer number of seconds${
        decimal === undefined ? "" : " (this one is out of range)"
      }`,
    );
  }
  return n === 0 ? 0 : n; // no -0
}

// A duration of 0 is none: `undefined`.
type ParsedValue = string | number | boolean | undefined;

const PARSERS = {
  string: (value) => value,
  integer: parseInteger,
  boolean: flagBoolean,
  duration: (value, source) => parseDurationMs(value, source) || undefined,
  "log-format": parseLogFormat,
  "log-level": parseLogLevel,
} satisfies Record<
  string,
  (value: string, source: string, flag: boolean) => ParsedValue
>;

export type ValueKind = keyof typeof PARSERS;

/**
 * Every setting given, parsed, with its source (`BERTH_X`, `--x`): all env
 * values first, so a malformed one is fatal even when a flag overrides it.
 */
export function readSettings(
  env: Record<string, string | undefined>,
  flags: ConfigFlags,
): Map<ConfigFlagName, { value: ParsedValue; source: string }> {
  const out: ReturnType<typeof readSettings> = new Map();
  const read = (s: Setting, text: string | undefined, source: string) => {
    if (text === undefined) return;
    try {
      const flag = source.startsWith("-");
      out.set(s.flag, { value: PARSERS[s.kind](text, source, flag), source });
    } catch (e) {
      throw e instanceof ConfigError
        ? e
        : new ConfigError((e as Error).message);
    }
  };
  for (const s of CONFIG_SETTINGS) read(s, env[s.env] || undefined, s.env);
  for (const s of CONFIG_SETTINGS) read(s, flags[s.flag], `--${s.flag}`);
  return out;
}

/** A flag a subcommand adds to the configuration flags, with its help text and value placeholder. */
export interface ExtraFlag extends FlagDef {
  help?: string;
  value?: string;
}

/** A command line: the configuration flags, the subcommand's own, and with `takesCommand` the command after `--`. */
export interface CommandLine {
  flags: ConfigFlags;
  extra: Record<string, string | boolean | undefined>;
  command?: string[];
}

const configFlags = (values: Record<string, string[]>): ConfigFlags =>
  Object.fromEntries(
    Object.entries(values).filter(([name]) => Object.hasOwn(TABLE, name))
      .map(([name, v]) => [name, v.at(-1)]),
  );

/**
 * Parses the configuration flags and a subcommand's own (`--help` then works
 * without a valid configuration); with `takesCommand`, the command after `--`.
 * @throws {UsageError} For any mistake, never echoing a value; with the flags read before it.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const help = { help: { kind: "boolean", short: "h" } } as const;
 * const line = parseCommandLine(["--state-dir", "--", "-h", "--", "sleep"], help, { takesCommand: true });
 * assert.deepEqual(line, { flags: { "state-dir": "--" }, extra: { help: true }, command: ["sleep"] });
 * ```
 */
export function parseCommandLine(
  args: string[],
  extraFlags: Record<string, ExtraFlag> = {},
  options: { takesCommand?: boolean; positionalHint?: string } = {},
): CommandLine {
  const defs: Record<string, FlagDef> = Object.fromEntries(
    Object.entries(CONFIG_FLAG_KINDS).map(([name, kind]) => [name, { kind }]),
  );
  for (const name of Object.keys(extraFlags)) {
    if (Object.hasOwn(defs, name)) {
      throw new Error(
        `extra flag --${name} collides with a configuration flag`,
      );
    }
  }
  let argv: Argv | undefined;
  try {
    argv = parseArgv(args, {
      flags: { ...defs, ...extraFlags },
      dashDash: options.takesCommand ? "command" : "end",
      positionalHint: options.positionalHint,
    });
    const extra: CommandLine["extra"] = {};
    for (const [name, spec] of Object.entries(extraFlags)) {
      const value = lastValue(argv, name);
      if (value === undefined) continue;
      extra[name] = spec.kind === "boolean"
        ? flagBoolean(value, `--${name}`)
        : value;
    }
    const { command } = argv;
    const flags = configFlags(argv.values);
    return command ? { flags, extra, command } : { flags, extra };
  } catch (e) {
    if (e instanceof UsageError && argv) e.given = argv.values;
    throw e;
  }
}

const helpEntry = (flag: string, value: string, help: string, note: string) =>
  `  --${flag}${value}\n        ${help}${note ? ` [${note}]` : ""}\n`;

/** The help text of a subcommand's own flags (`extra`), then of the configuration flags, each with its env variable and default: a role's lead and grace defaults, the settings it omits, defaults it states otherwise. */
export function configFlagsHelp(options: {
  extra?: Record<string, ExtraFlag>;
  leadDefault?: LeadDefault;
  omit?: readonly ConfigFlagName[];
  defaults?: Partial<Record<ConfigFlagName, string>>;
} = {}): string {
  const defaults: Partial<Record<string, string>> = {
    "enforce-lead-seconds": options.leadDefault?.text,
    "enforce-grace-seconds": options.leadDefault?.grace?.text,
    ...options.defaults,
  };
  const extra = Object.entries(options.extra ?? {}).map(([name, spec]) =>
    helpEntry(
      name,
      spec.kind === "boolean" ? "" : ` ${spec.value ?? "VALUE"}`,
      spec.help ?? "",
      spec.short ? `or -${spec.short}` : "",
    )
  ).join("");
  return (extra && `Flags:\n${extra}\n`) +
    "Configuration (env first; a flag given explicitly overrides it):\n" +
    CONFIG_SETTINGS.filter((s) => !options.omit?.includes(s.flag)).map((s) =>
      helpEntry(
        s.flag,
        s.kind === "boolean" ? `[=${s.value}]` : ` ${s.value}`,
        s.help,
        `env ${s.env}; default: ${defaults[s.flag] ?? s.default}`,
      )
    ).join("");
}

/** `BERTH_*` variables this project reads or sets besides the table: the health endpoint's address, what `run` gives its command. */
export const OTHER_KNOWN_ENV: readonly string[] = [
  "BERTH_HEALTH_ADDR",
  "BERTH_FENCING_TOKEN",
  "BERTH_HOLDER",
  "BERTH_LEASE_EXPIRES_AT",
];

/**
 * The `BERTH_*` variables in `env` that nothing reads, with the nearest
 * known name: a misspelled one would silently leave its setting at the default.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const unknown = [{ name: "BERTH_LEASE_NAEM", suggestion: "BERTH_LEASE_NAME" }];
 * assert.deepEqual(unknownVariables({ BERTH_LEASE_NAEM: "x" }), unknown);
 * ```
 */
export function unknownVariables(
  env: Record<string, string | undefined>,
): { name: string; suggestion?: string }[] {
  const known = [...CONFIG_SETTINGS.map((s) => s.env), ...OTHER_KNOWN_ENV];
  const stem = (name: string) => name.replace(/^BERTH_/, "");
  return Object.keys(env).sort().filter((name) =>
    name.startsWith("BERTH_") && !known.includes(name)
  ).map((name) => {
    const near = nearest(stem(name), known.map(stem));
    const suggestion = known.find((k) => stem(k) === near);
    return suggestion ? { name, suggestion } : { name };
  });
}
