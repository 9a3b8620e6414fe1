/**
 * Start-up shared by the lease-holding subcommands (`acquire`, `renew`,
 * `run`): parse the command line once, resolve and validate the
 * configuration, build the logger (the client they then build is
 * `client_for.ts`'s). One place, so the three
 * roles cannot disagree on how they start, and a configuration error reads
 * the same in all of them: one line on stderr, a JSON log line when
 * `BERTH_LOG_FORMAT=json` (the log format is settled first, even when the
 * rest of the configuration is invalid). Unknown `BERTH_*` variables are
 * warned about here, with the nearest known name.
 *
 * @module
 */
import { ConfigError } from "../config/argv.ts";
import {
  type Config,
  givenSettings,
  type MissingSetting,
  missingSettings,
  resolveConfig,
  type ResolveOptions,
} from "../config/config.ts";
import type { GraceRoom, LeadDefault } from "../config/lead.ts";
import {
  type CommandLine,
  CommandLineError,
  type ConfigFlagName,
  type ConfigFlags,
  configFlagsHelp,
  type ExtraFlag,
  formatExtraFlagsHelp,
  parseCommandLine,
  settingOf,
  unknownVariables,
  unreadableVariables,
} from "../config/settings.ts";
import { GO_MESSAGES } from "../obs/go_messages.ts";
import { EXIT_FAILURE } from "./exit_codes.ts";
import { createLogger, type LogFormat, type Logger } from "../obs/log.ts";

/** A started subcommand: its configuration, its own flags and a logger carrying the lease fields. */
export interface Started {
  /** The validated configuration. */
  config: Config;
  /** The subcommand's own flags (see {@linkcode ExtraFlag}). */
  extra: Record<string, string | boolean | undefined>;
  /** With `CommandSpec.command`: the words after `--`; else empty. */
  command: string[];
  /** The settings given explicitly, by env or flag (the rest took defaults). */
  given: ReadonlySet<ConfigFlagName>;
  /** Logs with `lease`, `namespace` and `holder` on every line. */
  logger: Logger;
  /**
   * Reports a configuration problem the subcommand finds itself (after
   * start-up), in the same shape as the ones {@linkcode start} reports.
   */
  configProblem(problem: string): void;
}

/** What a subcommand tells {@linkcode start} about itself. */
export interface CommandSpec {
  /** The subcommand's name, for messages. */
  name: string;
  /** The usage line(s) and a paragraph on what it does. */
  usage: string;
  /** Flags of its own, beyond the configuration flags. */
  flags?: Record<string, ExtraFlag>;
  /**
   * The enforce lead when none is configured (stated in the help text too);
   * default: what the configured enforcer needs.
   */
  leadDefault?: LeadDefault;
  /** Configuration flags the subcommand does not offer: left out of its help text. */
  hiddenSettings?: readonly ConfigFlagName[];
  /** Defaults its help text states differently, by flag. */
  helpDefaults?: Partial<Record<ConfigFlagName, string>>;
  /**
   * Takes a command after `--` (`run`): `hint` says where it goes, to a
   * stray word (the parser's message) and, appended, to every configuration
   * error found once the command line is read, while the command is
   * missing; a mistake in the command line itself (an unknown flag, a
   * missing value) is said without it.
   */
  command?: { hint: string };
  /** The grace when none is configured (see `ResolveOptions.graceDefault`). */
  graceDefault?: (room: GraceRoom) => number;
  /** Derive a holder from the host when no holder and no pod fact is given. */
  hostHolder?: boolean;
  /**
   * Settings the subcommand does not use: their flags are refused with a
   * line that says so (and `why`); their env variables, which a shared
   * environment may well set, are ignored with an INFO line.
   */
  unused?: {
    settings: readonly ConfigFlagName[];
    why: string;
    /** Of those, the ones whose env variable is still read (and checked). */
    envRead?: readonly ConfigFlagName[];
  };
  /** Name every missing required setting in the one message, not the first alone. */
  listMissing?: boolean;
  /**
   * Report a configuration error as the Go helper does, a log line
   * `level=ERROR msg="berth-acquire failed" error=...` (for `acquire` and
   * `renew`, whose failures operators alert on by that text), rather than
   * a plain line naming the subcommand.
   */
  goFailureLine?: boolean;
}

/** Exit status for a configuration error (the same as any failure, as upstream). */
export { EXIT_FAILURE };

/** Options for {@linkcode start}, for tests. */
export interface StartOptions {
  /** Where stderr lines go (a finished line with its newline); default stderr. */
  writeError?: (line: string) => void;
  /** Where the help text goes; default stdout. */
  writeOut?: (text: string) => void;
  /**
   * The configuration variables that are set but not valid UTF-8 (which
   * the environment record cannot hold); default
   * {@linkcode unreadableVariables} of the process.
   */
  unreadableEnv?: readonly string[];
}

/**
 * Parses the command line and the environment. Returns an exit code instead
 * of a configuration when the command is done already: `--help` (0), or a
 * configuration error (reported as one line on stderr, 1).
 *
 * @param spec The subcommand.
 * @param args Its arguments.
 * @param env The environment; default the process's.
 * @param options Output seams for tests.
 * @returns The started subcommand, or the exit code.
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
  options: StartOptions = {},
): Started | number {
  const flags = {
    help: { type: "boolean", short: "h", help: "show this help" },
    ...spec.flags,
  } as Record<string, ExtraFlag>;
  // The command line first: the log format to report even its own
  // mistakes in is on it (the last valid --log-format read before the
  // mistake), else in a valid BERTH_LOG_FORMAT, else text.
  let line: CommandLine | undefined;
  let lineProblem: ConfigError | undefined;
  let given: ConfigFlags;
  try {
    line = parseCommandLine(args, flags, {
      takesCommand: spec.command !== undefined,
      positionalHint: spec.command?.hint,
    });
    given = line.flags;
  } catch (e) {
    if (!(e instanceof CommandLineError)) throw e;
    lineProblem = e;
    given = e.given;
  }
  const format = earlyLogFormat(env, given["log-format"]);
  const writeError = options.writeError;
  const base = createLogger({ format, write: writeError });
  // A stray word is told where the command goes by the parser itself.
  const hint = line !== undefined && !line.command?.length
    ? commandHint(spec, line)
    : undefined;
  const configProblem = (problem: string, missing: MissingSetting[] = []) => {
    const message = `invalid configuration: ${problem}${
      hint === undefined ? "" : `; ${hint}`
    }`;
    const all = missing.length > 1
      ? `missing settings: ${missing.map(missingText).join(", ")}`
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
  };
  if (line === undefined) {
    warnUnknownVariables(base, env);
    configProblem(lineProblem!.problem);
    return EXIT_FAILURE;
  }
  const refused = spec.unused?.settings.find((f) =>
    line.flags[f] !== undefined
  );
  if (refused !== undefined) {
    configProblem(
      `${spec.name} does not use --${refused}: ${
        spec.unused!.why
      }; remove the flag`,
    );
    return EXIT_FAILURE;
  }
  if (line.extra.help === true) {
    const text = `${spec.usage}\nFlags:\n${formatExtraFlagsHelp(flags)}\n${
      configFlagsHelp({
        leadDefault: spec.leadDefault,
        omit: spec.hiddenSettings,
        defaults: spec.helpDefaults,
      })
    }`;
    if (options.writeOut) options.writeOut(text + "\n");
    else console.log(text);
    return 0;
  }
  warnUnknownVariables(base, env);
  const unreadable = options.unreadableEnv ?? unreadableVariables();
  if (unreadable.length > 0) {
    configProblem(
      `${
        unreadable[0]
      } is not valid UTF-8; set it to UTF-8 text (a setting that cannot be read is never taken as unset)`,
    );
    return EXIT_FAILURE;
  }
  // Settings the subcommand does not use are not read (nor validated).
  const ignored = (spec.unused?.settings ?? [])
    .filter((f) => !spec.unused?.envRead?.includes(f))
    .map((f) => settingOf(f)!.env)
    .filter((v) => env[v] !== undefined && env[v] !== "");
  const used = { ...env };
  for (const v of ignored) delete used[v];
  const resolveOptions: ResolveOptions = {
    leadDefault: spec.leadDefault,
    graceDefault: spec.graceDefault,
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
    configProblem(
      e.problem,
      spec.listMissing ? missingSettings(used, line.flags, resolveOptions) : [],
    );
    return EXIT_FAILURE;
  }
  const logger = createLogger({
    format: config.logFormat,
    level: config.logLevel,
    write: writeError,
  })
    .with({
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
 * Where the missing command goes; when a flag took the `--` as its value
 * (`run --state-dir -- CMD`... with no second `--`), that is said first.
 */
function commandHint(
  spec: CommandSpec,
  line: CommandLine,
): string | undefined {
  if (spec.command === undefined) return undefined;
  const took = Object.entries({ ...line.flags, ...line.extra })
    .find(([, v]) => v === "--")?.[0];
  return took === undefined || line.command !== undefined
    ? spec.command.hint
    : `the -- is the value of --${took} (a flag's value may be --); ${spec.command.hint}`;
}

/** One missing setting as the message names it. */
function missingText(m: MissingSetting): string {
  return `${m.env} (or --${m.flag}${m.or ? ` or ${m.or}` : ""})`;
}

function warnUnknownVariables(
  logger: Logger,
  env: Record<string, string | undefined>,
): void {
  for (const v of unknownVariables(env)) {
    logger.warn(
      `unknown environment variable ${v.name} is ignored${
        v.suggestion ? `; did you mean ${v.suggestion}?` : ""
      }`,
      { variable: v.name },
    );
  }
}

/**
 * The log format to report start-up problems in, settled before the rest of
 * the configuration: the command line's `--log-format` when it is valid,
 * else a valid `BERTH_LOG_FORMAT`, else text. A malformed value is reported
 * by the configuration itself (in this format).
 */
function earlyLogFormat(
  env: Record<string, string | undefined>,
  flag: string | undefined,
): LogFormat {
  const valid = (v: string | undefined): v is LogFormat =>
    v === "text" || v === "json";
  if (valid(flag)) return flag;
  const fromEnv = env[settingOf("log-format")!.env];
  return valid(fromEnv) ? fromEnv : "text";
}

/**
 * Turns a failure that ends `acquire` or `renew` (bad CA bundle, missing key
 * file, ...) into the Go helper's one line,
 * `level=ERROR msg="berth-acquire failed" error="<what>: <why>"`, and an
 * exit code.
 *
 * @param logger Where the line goes.
 * @param what What failed, the start of the `error` field, e.g. `cannot start`.
 * @param e The failure; its message ends the `error` field.
 * @returns {@linkcode EXIT_FAILURE}.
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
