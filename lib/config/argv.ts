/**
 * The one command-line parser every subcommand uses: `acquire`, `renew` and
 * `run` (through flags.ts, which adds the configuration flags), `check`,
 * `status`, `gate` and `dev-server`. One set of rules, so a flag is written
 * the same way everywhere and every mistake reads the same: the rules of the
 * Go helper's flag parser, which its users know. `-name` and `--name` are
 * the same, `--name=value` or `--name value` for a value (the next word is
 * taken even when it starts with `-`), a boolean takes `--flag` or
 * `--flag=false` but never a separate word, and the last of a repeated flag
 * wins (all of them are kept for the flags that collect, such as
 * `dev-server --api-key`).
 *
 * A leaf module (it imports only the "did you mean" helper), with no work at
 * load: the liveness probe loads it on every start, every 2 s.
 *
 * @module
 */
import { withTwoDashes } from "./flag_name.ts";
import { flagSuggestion } from "./nearest.ts";

/** Whether a flag takes a value (`--x=v`, `--x v`) or is a boolean (`--x`, `--x=false`). */
export type FlagKind = "value" | "boolean";

/** One flag a subcommand takes. */
export interface FlagDef {
  /** Whether it takes a value or is a boolean. */
  kind: FlagKind;
  /** One-letter alias, e.g. `h` for `-h`. */
  short?: string;
  /** What the value must be, named when it is missing (`HOST:PORT`). */
  wants?: string;
}

/** How one subcommand's arguments are shaped. */
export interface ArgvSpec {
  /** The flags it takes, by name without dashes. */
  flags: Readonly<Record<string, FlagDef>>;
  /**
   * Flags accepted and skipped (with their value), by name: the flags of the
   * other roles, which `check` takes and ignores as the Go helper does.
   */
  ignored?: Readonly<Record<string, FlagKind>>;
  /** How many positional arguments it takes; default 0. */
  positionals?: number;
  /** What a stray word is told, e.g. `check takes one marker path`. */
  positionalHint?: string;
  /**
   * What `--` means: `positionals` (every later word is positional, such as
   * a path that starts with `-`), `command` (every later word is the
   * command to run) or `end` (nothing may follow it; the default).
   */
  dashDash?: "positionals" | "command" | "end";
}

/** A parsed command line. */
export interface Argv {
  /** Each flag given, by name, with every value in order (a bare boolean is `"true"`). */
  values: Record<string, string[]>;
  /** The positional arguments, in order. */
  positionals: string[];
  /** With `dashDash: "command"`: the words after `--`; undefined when there was no `--`. */
  command?: string[];
}

/** A command-line mistake: what was wrong and how to write it. */
export class UsageError extends Error {
  /**
   * The flags read before the mistake (filled in by {@linkcode parseArgv}),
   * for what must be known even then: the log format to report it in.
   */
  given: Record<string, string[]> = {};
  /**
   * @param message The mistake, e.g. `unknown flag --lisen: did you mean --listen?`.
   */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

// A flag name is echoed only when it looks like one: a word that is not (a
// key typed after `--api-key=` followed by a space, say) is not.
const FLAG_SHAPE = /^-+[a-z][a-z0-9-]{0,63}$/;
// A stray word is named when it cannot be a secret: not right after a flag
// given an empty value (`--api-key= SECRET`), and shaped like a word or a path.
const WORD_SHAPE = /^[A-Za-z0-9./][A-Za-z0-9._\/-]{0,63}$/;

function shownFlag(written: string, index: number): string {
  return FLAG_SHAPE.test(written)
    ? ` ${written}`
    : ` in argument ${index + 1} (not shown: it may hold a secret)`;
}

/**
 * The message for an unknown flag, the one format of every subcommand: its
 * name when it looks like one (else its position, since it may be a key typed
 * after a space), and the nearest known flag when one is close.
 *
 * @param written The flag as written, dashes included, without the value.
 * @param index Its position among the arguments (0-based).
 * @param known The flag names the command takes, without dashes.
 * @returns E.g. `unknown flag --lisen: did you mean --listen?`, or
 * `unknown flag -x; run with --help for the list`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(
 *   unknownFlagMessage("--lisen", 0, ["listen"]),
 *   "unknown flag --lisen: did you mean --listen?",
 * );
 * ```
 */
export function unknownFlagMessage(
  written: string,
  index: number,
  known: readonly string[],
): string {
  const suggestion = FLAG_SHAPE.test(written)
    ? flagSuggestion(written, known)
    : "";
  return `unknown flag${shownFlag(written, index)}${
    suggestion === "" ? SEE_HELP : suggestion
  }`;
}

/** What {@linkcode unknownFlagMessage} ends with when no flag is near. */
const SEE_HELP = "; run with --help for the list";

/**
 * The one usage line of a subcommand that names its `--help`: the message,
 * then where the flags are listed, unless the message says that already (an
 * unknown flag with no near one).
 *
 * @param subcommand The subcommand, e.g. `gate`.
 * @param message What was wrong.
 * @returns The line to print.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(
 *   usageLine("gate", "flag --grace needs a value"),
 *   'berth-acquire gate: flag --grace needs a value (run "berth-acquire gate --help")',
 * );
 * assert.equal(
 *   usageLine("gate", "unknown flag --bogus; run with --help for the list"),
 *   "berth-acquire gate: unknown flag --bogus; run with --help for the list",
 * );
 * ```
 */
export function usageLine(subcommand: string, message: string): string {
  const line = `berth-acquire ${subcommand}: ${message}`;
  return message.endsWith(SEE_HELP)
    ? line
    : `${line} (run "berth-acquire ${subcommand} --help")`;
}

/**
 * Parses a subcommand's arguments by {@linkcode ArgvSpec} (see the module
 * doc for the rules). Booleans are kept as text: read them with
 * {@linkcode flagBoolean}.
 *
 * @param args The arguments after the subcommand's name.
 * @param spec The subcommand's flags and shape.
 * @returns The flags and positional arguments given.
 * @throws {UsageError} For an unknown flag (naming the nearest known one), a
 * missing value, a bad flag syntax or an unexpected argument; it never
 * echoes what may be a secret.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const argv = parseArgv(["/berth/healthy", "-max-age=30s"], {
 *   flags: { "max-age": { kind: "value" } },
 *   positionals: 1,
 * });
 * assert.deepEqual(argv.values, { "max-age": ["30s"] });
 * assert.deepEqual(argv.positionals, ["/berth/healthy"]);
 * ```
 */
export function parseArgv(args: readonly string[], spec: ArgvSpec): Argv {
  const out: Argv = { values: {}, positionals: [] };
  try {
    return parseInto(out, args, spec);
  } catch (e) {
    if (e instanceof UsageError) e.given = out.values;
    throw e;
  }
}

function parseInto(out: Argv, args: readonly string[], spec: ArgvSpec): Argv {
  const shorts = new Map<string, string>();
  for (const [name, def] of Object.entries(spec.flags)) {
    if (def.short !== undefined) shorts.set(def.short, name);
  }
  const max = spec.positionals ?? 0;
  let positionalOnly = false;
  let previous: Previous = NO_FLAG;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (positionalOnly || !arg.startsWith("-") || arg === "-") {
      if (out.positionals.length >= max) {
        throw unexpectedArgument(arg, i, previous, spec);
      }
      out.positionals.push(arg);
      previous = NO_FLAG;
      continue;
    }
    if (arg === "--") {
      const mode = spec.dashDash ?? "end";
      if (mode === "command") {
        out.command = args.slice(i + 1);
        return out;
      }
      if (mode === "positionals") {
        positionalOnly = true;
        continue;
      }
      if (i + 1 < args.length) {
        // The word follows `--`, not the flag before it.
        throw unexpectedArgument(args[i + 1], i + 1, {
          ...previous,
          name: "",
        }, spec);
      }
      break;
    }
    const body = withTwoDashes(arg).slice(2);
    const eq = body.indexOf("=");
    const given = eq < 0 ? body : body.slice(0, eq);
    const written = arg.slice(0, arg.length - body.length) + given;
    if (given === "" || given.startsWith("-")) {
      throw new UsageError(
        `bad flag syntax${
          shownFlag(written, i)
        } (write --name=value or --name value)`,
      );
    }
    let value = eq < 0 ? undefined : body.slice(eq + 1);
    const name = Object.hasOwn(spec.flags, given) ? given : shorts.get(given);
    const kind = name !== undefined
      ? spec.flags[name].kind
      : spec.ignored !== undefined && Object.hasOwn(spec.ignored, given)
      ? spec.ignored[given]
      : undefined;
    if (kind === undefined) {
      throw new UsageError(
        unknownFlagMessage(written, i, Object.keys(spec.flags)),
      );
    }
    if (kind === "boolean") {
      value ??= "true";
    } else if (value === undefined) {
      if (i + 1 >= args.length) {
        const wants = name === undefined ? undefined : spec.flags[name].wants;
        throw new UsageError(
          `flag --${name ?? given} needs a value${wants ? `: ${wants}` : ""}`,
        );
      }
      value = args[++i];
    }
    if (name !== undefined) (out.values[name] ??= []).push(value);
    previous = {
      name: eq < 0 ? name ?? given : "",
      boolean: kind === "boolean",
      emptyValue: value === "",
      dashValue: eq < 0 && value === "--",
    };
  }
  return out;
}

/**
 * The flag before the current word: its name when it took no `=value`, its
 * kind, whether its value was empty, whether its value was the word `--`.
 */
interface Previous {
  name: string;
  boolean: boolean;
  emptyValue: boolean;
  dashValue: boolean;
}

const NO_FLAG: Previous = {
  name: "",
  boolean: false,
  emptyValue: false,
  dashValue: false,
};

function unexpectedArgument(
  word: string,
  index: number,
  previous: Previous,
  spec: ArgvSpec,
): UsageError {
  const shown = !previous.emptyValue && WORD_SHAPE.test(word)
    ? ` ${JSON.stringify(word)}`
    : ` ${index + 1} (not shown: it may hold a secret)`;
  const after = previous.name ? ` after --${previous.name}` : "";
  if (previous.name !== "" && previous.dashValue) {
    // `run --state-dir -- CMD`: as in Go, a flag's value may be `--`, so
    // that `--` is not where the command (or nothing) begins.
    return new UsageError(
      `unexpected argument${shown}: the -- before it is the value of --${previous.name} (a flag's value may be --); give --${previous.name} its value before --, as --${previous.name}=VALUE`,
    );
  }
  if (previous.name !== "" && previous.boolean) {
    return new UsageError(
      `unexpected argument${shown}${after}: a boolean flag takes its value as --${previous.name}=false, not as a separate word`,
    );
  }
  return new UsageError(
    `unexpected argument${shown}${after}: ${
      spec.positionalHint ?? "this subcommand takes flags only (--name=value)"
    }`,
  );
}

/**
 * The last value given for a flag (the one that counts, as in Go).
 *
 * @param argv The parsed command line.
 * @param name The flag's name without dashes.
 * @returns Its last value, or undefined when it was not given.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(lastValue({ values: { x: ["1", "2"] }, positionals: [] }, "x"), "2");
 * ```
 */
export function lastValue(argv: Argv, name: string): string | undefined {
  return argv.values[name]?.at(-1);
}

const TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const FALSE = new Set(["0", "f", "F", "FALSE", "false", "False"]);

/**
 * Reads a boolean exactly as Go's `strconv.ParseBool` does (the Go helper's
 * parser for env and flags), so values that worked there work here.
 *
 * @param value The text as given.
 * @param source Where it came from, for the message (`BERTH_X` or `--x`).
 * @returns The boolean.
 * @throws {UsageError} For any other spelling, listing the accepted ones.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(flagBoolean("F", "--json"), false);
 * ```
 */
export function flagBoolean(value: string, source: string): boolean {
  if (TRUE.has(value)) return true;
  if (FALSE.has(value)) return false;
  throw new UsageError(
    `${source}=${
      JSON.stringify(value)
    }: must be a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false or False)`,
  );
}

/**
 * Whether a boolean flag was given true (the last time it was given).
 *
 * @param argv The parsed command line.
 * @param name The flag's name without dashes.
 * @returns True when its last value reads true.
 * @throws {UsageError} When that value is not a boolean.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(isSet({ values: { json: ["true"] }, positionals: [] }, "json"), true);
 * ```
 */
export function isSet(argv: Argv, name: string): boolean {
  const v = lastValue(argv, name);
  return v !== undefined && flagBoolean(v, `--${name}`);
}
