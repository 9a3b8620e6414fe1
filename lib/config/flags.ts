/**
 * Flag parsing for the lease-holding subcommands: one command line, the
 * configuration flags and a subcommand's own flags, parsed once by the one
 * parser every subcommand uses (argv.ts, whose rules are the Go helper's). A
 * mistake is named (the nearest flag for a misspelled one, the unexpected
 * word for a stray argument) without ever echoing what may be a secret.
 *
 * @module
 */
import { type FlagDef, lastValue, parseArgv, UsageError } from "./argv.ts";
import { CONFIG_FLAG_KINDS } from "./config_flags.ts";
import { ConfigError } from "./error.ts";
import {
  type ConfigFlagName,
  type ConfigFlags,
  settingOf,
} from "./settings.ts";
import { parseBoolean } from "./values.ts";

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

/** A mistake on the command line, with the configuration flags read before it. */
export class CommandLineError extends ConfigError {
  /** The configuration flags given before the mistake (the log format among them). */
  readonly given: ConfigFlags;
  /**
   * @param problem What is wrong (see {@linkcode ConfigError}).
   * @param given The configuration flags read before it.
   */
  constructor(problem: string, given: ConfigFlags) {
    super(problem);
    this.given = given;
  }
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
  /**
   * With `takesCommand`: the words after the first `--` that is not a
   * flag's value (the command to run); undefined when there was no `--`.
   */
  command?: string[];
}

/** Options for {@linkcode parseCommandLine}. */
export interface CommandLineOptions {
  /** Words after `--` are a command to run (`run`); default: nothing may follow `--`. */
  takesCommand?: boolean;
  /** What a stray word is told, e.g. where the command goes. */
  positionalHint?: string;
}

/**
 * Splits a subcommand's arguments into configuration flags and the
 * subcommand's `extraOptions`, with Go `flag` package syntax (see the module
 * doc). Positional arguments are refused; with `takesCommand` the words
 * after `--` are the command (a flag's value may itself be `--`). Use this and then `resolveConfig`
 * (config.ts) when the subcommand has flags of its own (such as `--help`,
 * which must work without a valid configuration); otherwise `loadConfig`
 * does both.
 *
 * @param args The subcommand's arguments (after the subcommand's name).
 * @param extraOptions The subcommand's own flags, by name.
 * @param options Whether a command follows `--`, and the hint for a stray word.
 * @returns The configuration flags, the extra flags given and the command.
 * @throws {CommandLineError} For an unknown flag (naming the nearest known one), a
 * missing value, a malformed boolean or an unexpected argument; it never
 * echoes a flag's value.
 * @throws {Error} When an extra flag collides with a configuration flag (a bug).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const line = parseCommandLine(["--ttl-seconds", "30", "-h"], {
 *   help: { type: "boolean", short: "h" },
 * });
 * assert.deepEqual(line.flags, { "ttl-seconds": "30" });
 * assert.deepEqual(line.extra, { help: true });
 * // A command after --; the first -- here is --holder-identity's value.
 * const run = parseCommandLine(["--holder-identity", "--", "--", "sleep"], {}, {
 *   takesCommand: true,
 * });
 * assert.deepEqual(run.flags, { "holder-identity": "--" });
 * assert.deepEqual(run.command, ["sleep"]);
 * ```
 */
export function parseCommandLine(
  args: string[],
  extraOptions: Record<string, ExtraFlag> = {},
  options: CommandLineOptions = {},
): CommandLine {
  const defs: Record<string, FlagDef> = {};
  for (const [name, kind] of Object.entries(CONFIG_FLAG_KINDS)) {
    defs[name] = { kind };
  }
  for (const [name, spec] of Object.entries(extraOptions)) {
    if (Object.hasOwn(defs, name)) {
      throw new Error(
        `extra flag --${name} collides with a configuration flag`,
      );
    }
    defs[name] = {
      kind: spec.type === "boolean" ? "boolean" : "value",
      short: spec.short,
    };
  }
  let argv;
  try {
    argv = parseArgv(args, {
      flags: defs,
      dashDash: options.takesCommand ? "command" : "end",
      positionalHint: options.positionalHint,
    });
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    const given: ConfigFlags = {};
    for (const [name, values] of Object.entries(e.given)) {
      if (settingOf(name) !== undefined) {
        given[name as ConfigFlagName] = values.at(-1);
      }
    }
    throw new CommandLineError(e.message, given);
  }
  const flags: ConfigFlags = {};
  const extra: Record<string, string | boolean | undefined> = {};
  for (const name of Object.keys(argv.values)) {
    const value = lastValue(argv, name)!;
    if (settingOf(name) !== undefined) {
      flags[name as ConfigFlagName] = value;
    } else if (extraOptions[name].type === "boolean") {
      extra[name] = parseBoolean(value, `--${name}`);
    } else {
      extra[name] = value;
    }
  }
  return argv.command === undefined
    ? { flags, extra }
    : { flags, extra, command: argv.command };
}
