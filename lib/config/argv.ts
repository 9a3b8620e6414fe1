/**
 * The one command-line parser, by Go's flag rules, how a usage error reads
 * and exits, and what the probe needs of the configuration: the flags it
 * skips, the default state directory. The probe loads it at every start: it
 * imports nothing.
 *
 * @module
 */

/** A value flag (`--x=v`, `--x v`) or a boolean (`--x`, `--x=false`); `short` is a one-letter alias, `wants` is named when the value is missing. */
export interface FlagDef {
  kind: "value" | "boolean";
  short?: string;
  wants?: string;
}

/**
 * A subcommand's arguments: its flags, flags skipped with their value (the
 * other roles', in `check`), how many positionals (default 0), what a stray
 * word is told, what follows `--` (by default nothing).
 */
export interface ArgvSpec {
  flags: Readonly<Record<string, FlagDef>>;
  ignored?: Readonly<Record<string, FlagDef["kind"]>>;
  positionals?: number;
  positionalHint?: string;
  dashDash?: "positionals" | "command" | "end";
}

/** A parsed command line: each flag's values in order (a bare boolean is `"true"`), and with `dashDash: "command"` the words after `--`. */
export interface Argv {
  values: Record<string, string[]>;
  positionals: string[];
  command?: string[];
}

/** A command-line mistake, with the flags read before it (the log format among them). */
export class UsageError extends Error {
  given: Record<string, string[]> = {};
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/**
 * A configuration the helper must not start with (the pod spec is to fix,
 * not a bug); the message never holds the API key.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(new ConfigError("no name").message, "invalid configuration: no name");
 * ```
 */
export class ConfigError extends Error {
  constructor(readonly problem: string) {
    super(`invalid configuration: ${problem}`);
    this.name = "ConfigError";
  }
}

/** The state directory the webhook mounts when nothing else is configured. */
export const DEFAULT_STATE_DIR = "/berth";

/** The exit status of a usage error in the subcommands Go's helper lacks (docs/exit-codes.md). */
export const EXIT_USAGE = 78;

/** The configuration flags (a test keeps them the settings table's): the probe skips them without loading it. */
// deno-fmt-ignore
export const CONFIG_FLAG_KINDS = {
  "lease-name": "value", "lease-namespace": "value", mode: "value",
  enforce: "value", "signal-target": "value", "ttl-seconds": "value",
  "heartbeat-seconds": "value", "enforce-grace-seconds": "value",
  "enforce-lead-seconds": "value", "release-on-shutdown": "boolean",
  "holder-identity": "value", "cluster-id": "value", "workload-kind": "value",
  "workload-name": "value", "state-dir": "value", "api-server": "value",
  "api-key": "value", "api-key-file": "value", "ca-bundle-file": "value",
  "server-name": "value", "insecure-skip-tls-verify": "boolean",
  "acquire-timeout": "value", "log-format": "value", "log-level": "value",
  "pod-namespace": "value", "pod-name": "value", "pod-uid": "value",
} as const satisfies Record<string, FlagDef["kind"]>;

// A flag or a stray word is echoed only when shaped like one (or a path), and
// not right after a flag given an empty value or after the key's value: it
// may be a key, or the rest of one that held a space.
const FLAG_SHAPE = /^-+[a-z][a-z0-9-]{0,63}$/;
const WORD_SHAPE = /^[A-Za-z0-9./][A-Za-z0-9._\/-]{0,63}$/;
const SEE_HELP = "; run with --help for the list";

function shownFlag(written: string, index: number): string {
  return FLAG_SHAPE.test(written)
    ? ` ${written}`
    : ` in argument ${index + 1} (not shown: it may hold a secret)`;
}

// Optimal string alignment: a swap of two adjacent characters is one edit.
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const swap = a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1];
      d[i][j] = Math.min(
        d[i - 1][j] + 1,
        d[i][j - 1] + 1,
        d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1),
        swap ? d[i - 2][j - 2] + 1 : Infinity,
      );
    }
  }
  return d[a.length][b.length];
}

/**
 * The known name `given` most likely misspells: the only one it begins, else
 * the closest (case ignored) within a third of its length, else none.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(nearest("lease-nmae", ["lease-name", "lease-namespace"]), "lease-name");
 * assert.equal(nearest("colour", ["lease-name"]), undefined);
 * ```
 */
export function nearest(
  given: string,
  known: readonly string[],
): string | undefined {
  const g = given.toLowerCase();
  const extending = known.filter((k) => k.toLowerCase().startsWith(g));
  if (g !== "" && extending.length === 1) return extending[0];
  let best: string | undefined;
  let bestDistance = Math.max(1, Math.floor(g.length / 3)) + 1;
  for (const k of known) {
    const d = editDistance(g, k.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best;
}

function unknownFlagMessage(
  written: string,
  index: number,
  known: readonly string[],
): string {
  const near = FLAG_SHAPE.test(written)
    ? nearest(written.replace(/^--?/, ""), known)
    : undefined;
  return `unknown flag${shownFlag(written, index)}${
    near === undefined ? SEE_HELP : `: did you mean --${near}?`
  }`;
}

/**
 * A subcommand's usage line: the message, then where the flags are listed,
 * unless the message says that already.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(usageLine("gate", "bad"), 'berth-acquire gate: bad (run "berth-acquire gate --help")');
 * ```
 */
export function usageLine(subcommand: string, message: string): string {
  const line = `berth-acquire ${subcommand}: ${message}`;
  return message.endsWith(SEE_HELP)
    ? line
    : `${line} (run "berth-acquire ${subcommand} --help")`;
}

// What the word before was, for the message about a stray word.
const NO_FLAG = {
  name: "",
  boolean: false,
  empty: false,
  dash: false,
  secret: false,
};

/**
 * Parses a subcommand's arguments (booleans as text: read them with
 * {@linkcode isSet}).
 * @throws {UsageError} For any mistake, never echoing what may be a secret.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const spec = { flags: { "max-age": { kind: "value" } }, positionals: 1 } as const;
 * const argv = parseArgv(["/berth/healthy", "-max-age=30s"], spec);
 * assert.deepEqual(argv, { values: { "max-age": ["30s"] }, positionals: ["/berth/healthy"] });
 * ```
 */
export function parseArgv(args: readonly string[], spec: ArgvSpec): Argv {
  const out: Argv = { values: {}, positionals: [] };
  try {
    const shorts = new Map<string, string>();
    for (const [name, def] of Object.entries(spec.flags)) {
      if (def.short !== undefined) shorts.set(def.short, name);
    }
    let positionalOnly = false;
    let previous = NO_FLAG;
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      if (positionalOnly || !arg.startsWith("-") || arg === "-") {
        if (out.positionals.length >= (spec.positionals ?? 0)) {
          throw unexpectedArgument(arg, i, previous, spec);
        }
        out.positionals.push(arg);
        previous = NO_FLAG;
        continue;
      }
      if (arg === "--") {
        if (spec.dashDash === "command") {
          out.command = args.slice(i + 1);
          return out;
        }
        if (spec.dashDash === "positionals") {
          positionalOnly = true;
          continue;
        }
        if (i + 1 < args.length) {
          throw unexpectedArgument(args[i + 1], i + 1, {
            ...previous,
            name: "",
          }, spec);
        }
        break;
      }
      const body = arg.replace(/^--?/, "");
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
        : spec.ignored && Object.hasOwn(spec.ignored, given)
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
        empty: value === "",
        dash: eq < 0 && value === "--",
        secret: (name ?? given) === "api-key",
      };
    }
    return out;
  } catch (e) {
    if (e instanceof UsageError) e.given = out.values;
    throw e;
  }
}

function unexpectedArgument(
  word: string,
  index: number,
  previous: typeof NO_FLAG,
  spec: ArgvSpec,
): UsageError {
  const shown = !previous.empty && !previous.secret && WORD_SHAPE.test(word)
    ? ` ${JSON.stringify(word)}`
    : ` ${index + 1} (not shown: it may hold a secret)`;
  const flag = previous.name;
  if (flag !== "" && previous.dash) {
    // `run --state-dir -- CMD`: as in Go, a flag's value may be `--`, so
    // that `--` is not where the command begins.
    return new UsageError(
      `unexpected argument${shown}: the -- before it is the value of --${flag} (a flag's value may be --); give --${flag} its value before --, as --${flag}=VALUE`,
    );
  }
  const after = flag ? ` after --${flag}` : "";
  return new UsageError(
    `unexpected argument${shown}${after}: ${
      flag !== "" && previous.boolean
        ? `a boolean flag takes its value as --${flag}=false, not as a separate word`
        : spec.positionalHint ??
          "this subcommand takes flags only (--name=value)"
    }`,
  );
}

/**
 * The last value given for a flag, the one that counts.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(lastValue({ values: { x: ["1", "2"] }, positionals: [] }, "x"), "2");
 * ```
 */
export function lastValue(argv: Argv, name: string): string | undefined {
  return argv.values[name]?.at(-1);
}

/**
 * Reads a boolean as Go's `strconv.ParseBool` does, naming `source` in the error.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(flagBoolean("F", "--json"), false);
 * ```
 */
export function flagBoolean(value: string, source: string): boolean {
  if (/^(1|t|T|TRUE|true|True)$/.test(value)) return true;
  if (/^(0|f|F|FALSE|false|False)$/.test(value)) return false;
  throw new UsageError(
    `${source}=${
      JSON.stringify(value)
    }: must be a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false or False)`,
  );
}

/**
 * Whether a boolean flag was last given true.
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
