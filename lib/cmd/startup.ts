/**
 * Start-up shared by the lease-holding subcommands (`acquire`, `renew`,
 * `run`): the command line, the configuration, the logger, the lease client.
 * One place, so the roles start alike and a configuration error reads the
 * same in all: one line on stderr, or a JSON record with
 * `BERTH_LOG_FORMAT=json` (the log format is settled first, even when the
 * rest is invalid); unknown `BERTH_*` variables are warned about.
 *
 * @module
 */
import { ConfigError, UsageError } from "../config/argv.ts";
import {
  type Config,
  givenSettings,
  missingSettings,
  resolveConfig,
  type ResolveOptions,
} from "../config/config.ts";
import type { LeadDefault } from "../config/lead.ts";
import {
  type CommandLine,
  CONFIG_SETTINGS,
  type ConfigFlagName,
  configFlagsHelp,
  envOf,
  type ExtraFlag,
  parseCommandLine,
  unknownVariables,
} from "../config/settings.ts";
import { apiKeySourceFromConfig } from "../lease/api_key.ts";
import { createHttpLeaseClient } from "../lease/client.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import { GO_MESSAGES } from "../obs/go_messages.ts";
import { createLogger, type LogFormat, type Logger } from "../obs/log.ts";
import type { Clock } from "../state/clock.ts";

/** Any failure of `acquire`, `renew` or `check`, configuration errors included, as Go's helper exits. */
export const EXIT_FAILURE = 1;

/** A started subcommand: its own flags (`extra`), the words after `--`, the settings given by env or flag, a logger with the lease's fields. */
export interface Started {
  config: Config;
  extra: Record<string, string | boolean | undefined>;
  command: string[];
  given: ReadonlySet<ConfigFlagName>;
  logger: Logger;
  /** Reports a problem found after start-up as {@linkcode start} reports its own; returns {@linkcode EXIT_FAILURE}. */
  configProblem(problem: string): number;
}

/**
 * What a subcommand tells {@linkcode start}: its usage paragraph and own
 * flags; its lead and grace defaults (`leadDefault`); what it says to a mode
 * but runtime-singleton (`singletonOnly`); the settings its help hides or states
 * another default for; `command`: a command after `--` (`run`), whose `hint`
 * is said to a stray word and, while the command is missing, after every
 * configuration error (not after a mistake in the command line itself);
 * `hostHolder`: a holder from the host when no holder or pod fact is given;
 * `unused`: settings whose flags are refused, saying `why`, and whose env
 * variables, which a shared environment may well set, are ignored with an
 * INFO line (but for `envRead`); `listMissing`: name every missing setting;
 * `goFailureLine`: report as Go's helper does, `level=ERROR msg="berth-acquire
 * failed" error=...` (operators alert on that text), not a plain line.
 */
export interface CommandSpec {
  name: string;
  usage: string;
  flags?: Record<string, ExtraFlag>;
  leadDefault?: LeadDefault;
  singletonOnly?: string;
  hiddenSettings?: readonly ConfigFlagName[];
  helpDefaults?: Partial<Record<ConfigFlagName, string>>;
  command?: { hint: string };
  hostHolder?: boolean;
  unused?: {
    settings: readonly ConfigFlagName[];
    why: string;
    envRead?: readonly ConfigFlagName[];
  };
  listMissing?: boolean;
  goFailureLine?: boolean;
}

/**
 * Parses the command line and the environment; returns an exit code instead
 * when the command is done: `--help` (0), or a configuration error
 * (reported, {@linkcode EXIT_FAILURE}). `options` are output seams for tests:
 * stderr lines (each with its newline), the help text, the reader of the
 * variables (one set but not UTF-8 throws).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const errors: string[] = [];
 * const out = { writeError: (line: string) => errors.push(line) };
 * const spec = { name: "acquire", usage: "usage: berth-acquire acquire [flags]" };
 * const env = {
 *   BERTH_LEASE_NAMESPACE: "prod",
 *   BERTH_API_SERVER: "http://127.0.0.1:8080",
 *   BERTH_HOLDER_IDENTITY: "east/prod:pod:p1",
 *   BERTH_TTL_SECONDS: "30",
 * };
 * // A configuration error is reported on stderr and ends with exit code 1.
 * assert.equal(start(spec, [], env, out), EXIT_FAILURE);
 * assert.match(errors[0], /^berth-acquire acquire: invalid configuration: lease name is required/);
 * // Otherwise the subcommand gets its configuration.
 * const started = start(spec, ["--lease-name", "checkout"], env, out);
 * assert.ok(typeof started !== "number");
 * assert.equal(started.config.leaseName, "checkout");
 * ```
 */
export function start(
  spec: CommandSpec,
  args: string[],
  env: Record<string, string | undefined> = Deno.env.toObject(),
  options: {
    writeError?: (line: string) => void;
    writeOut?: (text: string) => void;
    getEnv?: (name: string) => string | undefined;
  } = {},
): Started | number {
  const flags = {
    help: { kind: "boolean", short: "h", help: "show this help" },
    ...spec.flags,
  } as Record<string, ExtraFlag>;
  // The command line first: the log format to report even its own mistakes
  // in is on it (the last valid --log-format before the mistake), else in a
  // valid BERTH_LOG_FORMAT; a malformed one is the configuration's to report.
  const line = ((): CommandLine | UsageError => {
    try {
      return parseCommandLine(args, flags, {
        takesCommand: spec.command !== undefined,
        positionalHint: spec.command?.hint,
      });
    } catch (e) {
      if (e instanceof UsageError) return e;
      throw e;
    }
  })();
  const failed = line instanceof UsageError;
  const valid = (v?: string): v is LogFormat => v === "text" || v === "json";
  const format = [
    failed ? line.given["log-format"]?.at(-1) : line.flags["log-format"],
    env.BERTH_LOG_FORMAT,
  ].find(valid) ?? "text";
  const { writeError } = options;
  const base = createLogger({ format, write: writeError });
  // A stray word is told where the command goes by the parser itself; a
  // flag that took the `--` as its value (`run --state-dir -- CMD`) is named.
  const took = failed
    ? undefined
    : Object.entries({ ...line.flags, ...line.extra })
      .find(([, v]) => v === "--")?.[0];
  const hint = spec.command === undefined || failed || line.command?.length
    ? undefined
    : took === undefined || line.command !== undefined
    ? spec.command.hint
    : `the -- is the value of --${took} (a flag's value may be --); ${spec.command.hint}`;
  const configProblem = (
    problem: string,
    missing: ReturnType<typeof missingSettings> = [],
  ) => {
    const message = `invalid configuration: ${problem}${
      hint === undefined ? "" : `; ${hint}`
    }`;
    const named = missing.map((m) =>
      `${m.env} (or --${m.flag}${m.or ? ` or ${m.or}` : ""})`
    );
    const all = missing.length > 1
      ? `missing settings: ${named.join(", ")}`
      : undefined;
    if (spec.goFailureLine) {
      base.error(GO_MESSAGES.failed, {
        error: all ? `${message}; ${all}` : message,
        subcommand: spec.name,
      });
    } else if (format === "json") {
      base.error(message, {
        subcommand: spec.name,
        ...(all ? { missing: missing.map((m) => m.env).join(",") } : {}),
      });
    } else {
      const line = `berth-acquire ${spec.name}: ${message}\n${
        all ? `  ${all}\n` : ""
      }`;
      if (writeError) writeError(line);
      else console.error(line.slice(0, -1));
    }
    return EXIT_FAILURE;
  };
  const warnUnknown = () => {
    for (const v of unknownVariables(env)) {
      base.warn(
        `unknown environment variable ${v.name} is ignored${
          v.suggestion ? `; did you mean ${v.suggestion}?` : ""
        }`,
        { variable: v.name },
      );
    }
  };
  if (line instanceof UsageError) {
    warnUnknown();
    return configProblem(line.message);
  }
  const refused = spec.unused?.settings.find((f) =>
    line.flags[f] !== undefined
  );
  if (refused !== undefined) {
    return configProblem(
      `${spec.name} does not use --${refused}: ${
        spec.unused!.why
      }; remove the flag`,
    );
  }
  if (line.extra.help === true) {
    const text = `${spec.usage}\n${
      configFlagsHelp({
        extra: flags,
        leadDefault: spec.leadDefault,
        omit: spec.hiddenSettings,
        defaults: spec.helpDefaults,
      })
    }`;
    if (options.writeOut) options.writeOut(text + "\n");
    else console.log(text);
    return 0;
  }
  warnUnknown();
  // `env` (Deno.env.toObject()) leaves out a variable that is not UTF-8: a
  // holder so set must not count as unset.
  const getEnv = options.getEnv ?? ((name: string) => Deno.env.get(name));
  const unreadable = CONFIG_SETTINGS.find((s) => {
    try {
      getEnv(s.env);
      return false;
    } catch {
      return true;
    }
  });
  if (unreadable) {
    return configProblem(
      `${unreadable.env} is not valid UTF-8; set it to UTF-8 text (a setting that cannot be read is never taken as unset)`,
    );
  }
  // Settings the subcommand does not use are not read (nor validated).
  const ignored = (spec.unused?.settings ?? [])
    .filter((f) => !spec.unused?.envRead?.includes(f))
    .map(envOf)
    .filter((v) => env[v] !== undefined && env[v] !== "");
  const used = { ...env };
  for (const v of ignored) delete used[v];
  const resolveOptions: ResolveOptions = {
    leadDefault: spec.leadDefault,
    singletonOnly: spec.singletonOnly,
    hostHolder: spec.hostHolder
      ? {
        hostname: Deno.hostname(),
        pid: Deno.pid,
        instance: crypto.randomUUID(),
      }
      : undefined,
  };
  let config: Config;
  try {
    config = resolveConfig(used, line.flags, resolveOptions);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return configProblem(
      e.problem,
      spec.listMissing ? missingSettings(used, line.flags, resolveOptions) : [],
    );
  }
  const logger = createLogger({
    format: config.logFormat,
    level: config.logLevel,
    write: writeError,
  }).with({
    lease: config.leaseName,
    namespace: config.leaseNamespace,
    holder: config.holder,
  });
  for (const v of ignored) {
    logger.info(`${v} is set, but ${spec.name} does not use it`, {
      variable: v,
    });
  }
  return {
    config,
    extra: line.extra,
    command: line.command ?? [],
    given: givenSettings(env, line.flags),
    logger,
    configProblem,
  };
}

/**
 * Go's one line for a failure that ends `acquire` or `renew` (a bad CA
 * bundle, a missing key file, ...),
 * `level=ERROR msg="berth-acquire failed" error="<what>: <why>"`; returns
 * {@linkcode EXIT_FAILURE}.
 */
export function startupFailure(
  logger: Logger,
  what: string,
  e: unknown,
): number {
  logger.error(GO_MESSAGES.failed, {
    error: `${what}: ${e instanceof Error ? e.message : String(e)}`,
  });
  return EXIT_FAILURE;
}

/**
 * The HTTP lease client `config` describes (key source, TLS, lease key);
 * `clock` paces the key file's re-reads.
 *
 * @throws {Error} When the key file, the CA bundle or the URL cannot be used.
 */
export async function clientFor(
  config: Config,
  logger: Logger,
  clock: Clock,
): Promise<LeaseClient> {
  return createHttpLeaseClient({
    apiServer: config.apiServer,
    key: { namespace: config.leaseNamespace, name: config.leaseName },
    auth: await apiKeySourceFromConfig(config, { clock, logger }),
    caBundleFile: config.caBundleFile,
    serverName: config.serverName,
    insecureSkipTlsVerify: config.insecureSkipTlsVerify,
    logger,
  });
}
