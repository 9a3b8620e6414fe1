/**
 * Flag parsing: one command line, the configuration flags and a
 * subcommand's own flags, parsed once by one set of rules. The rules are Go's
 * `flag` package, which the webhook's users know: `-name` and `--name` are
 * the same, `--name=value` or `--name value` for values, and a boolean takes
 * `--flag` or `--flag=false` but never a separate word. A mistake is named
 * (the nearest flag for a misspelled one, the unexpected word for a stray
 * argument) without ever echoing what may be a secret.
 *
 * @module
 */
import { ConfigError } from "./error.ts";
import { withTwoDashes } from "./flag_name.ts";
import { flagSuggestion } from "./nearest.ts";
import {
  CONFIG_SETTINGS,
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

/**
 * Splits a subcommand's arguments into configuration flags and the
 * subcommand's `extraOptions`, with Go `flag` package syntax (see the module
 * doc). Positional arguments are refused. Use this and then `resolveConfig`
 * (config.ts) when the subcommand has flags of its own (such as `--help`,
 * which must work without a valid configuration); otherwise `loadConfig`
 * does both.
 *
 * @param args The subcommand's arguments (after the subcommand's name).
 * @param extraOptions The subcommand's own flags, by name.
 * @returns The configuration flags and the extra flags given.
 * @throws {ConfigError} For an unknown flag (naming the nearest known one), a
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
 * ```
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

  // Go's rules: a string flag consumes the next word as its value even when
  // it starts with "-", a bare boolean flag means "true", and the last of a
  // repeated flag wins.
  const values = new Map<string, string>();
  let previous: Previous = { name: "", emptyValue: false };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--") {
      if (i + 1 < args.length) {
        throw unexpectedArgument(args[i + 1], previous, types);
      }
      break;
    }
    if (!arg.startsWith("-") || arg === "-") {
      throw unexpectedArgument(arg, previous, types);
    }
    const body = withTwoDashes(arg).slice(2);
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
    if (name === undefined) throw unknownFlag(given, written, i, types);
    let value = eq < 0 ? undefined : body.slice(eq + 1);
    if (types.get(name) === "boolean") {
      value ??= "true";
    } else if (value === undefined) {
      if (i + 1 >= args.length) {
        throw new ConfigError(`flag --${name} needs a value`);
      }
      value = args[++i];
    }
    values.set(name, value);
    previous = { name: eq < 0 ? name : "", emptyValue: value === "" };
  }

  const flags: ConfigFlags = {};
  const extra: Record<string, string | boolean | undefined> = {};
  for (const [name, value] of values) {
    if (settingOf(name) !== undefined) {
      flags[name as ConfigFlagName] = value;
    } else if (extraOptions[name].type === "boolean") {
      extra[name] = parseBoolean(value, `--${name}`);
    } else {
      extra[name] = value;
    }
  }
  return { flags, extra };
}

/** The flag before the current word: its name when it took no `=value`, and whether its value was empty. */
interface Previous {
  name: string;
  emptyValue: boolean;
}

// A flag name is echoed only when it looks like one: a word that is not (a
// key typed after `--api-key=` followed by a space, say) is not.
const FLAG_SHAPE = /^-+[a-z][a-z0-9-]{0,63}$/;

function showName(written: string, index: number): string {
  return FLAG_SHAPE.test(written)
    ? ` ${written}`
    : ` in argument ${index + 1} (not shown: it may hold a secret)`;
}

/**
 * The message for an unknown flag: its name when it looks like one (else its
 * position, since it may be a key typed after a space), and the nearest
 * known flag when one is close.
 *
 * @param given The flag's name without dashes or value.
 * @param written The flag as written, dashes included, without the value.
 * @param index Its position among the arguments (0-based).
 * @param known The flag names the command takes.
 * @returns E.g. `unknown flag --lisen: did you mean --listen?`.
 */
export function unknownFlagMessage(
  given: string,
  written: string,
  index: number,
  known: readonly string[],
): string {
  const shown = showName(written, index);
  const suggestion = FLAG_SHAPE.test(written)
    ? flagSuggestion(given, known)
    : "";
  return suggestion === ""
    ? `unknown flag${shown}; run with --help for the list`
    : `unknown flag${shown}${suggestion}`;
}

function unknownFlag(
  given: string,
  written: string,
  index: number,
  types: Map<string, "string" | "boolean">,
): ConfigError {
  return new ConfigError(
    unknownFlagMessage(given, written, index, [...types.keys()]),
  );
}

// A stray word is named when it cannot be a secret: not right after a flag
// given an empty value (`--api-key= SECRET`), and shaped like a word.
const WORD_SHAPE = /^[A-Za-z0-9][A-Za-z0-9._\/-]{0,63}$/;

function unexpectedArgument(
  word: string,
  previous: Previous,
  types: Map<string, "string" | "boolean">,
): ConfigError {
  const shown = !previous.emptyValue && WORD_SHAPE.test(word)
    ? ` ${JSON.stringify(word)}`
    : " (not shown: it may hold a secret)";
  const after = previous.name ? ` after --${previous.name}` : "";
  if (previous.name !== "" && types.get(previous.name) === "boolean") {
    return new ConfigError(
      `unexpected argument${shown}${after}: a boolean flag takes its value as --${previous.name}=false, not as a separate word`,
    );
  }
  return new ConfigError(
    `unexpected argument${shown}${after}: this subcommand takes flags only (--name=value)`,
  );
}
