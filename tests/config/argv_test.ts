import assert from "node:assert/strict";
import {
  CONFIG_FLAG_KINDS,
  isSet,
  lastValue,
  parseArgv,
  UsageError,
  usageLine,
} from "../../lib/config/argv.ts";
import { CONFIG_SETTINGS } from "../../lib/config/settings.ts";

Deno.test("the configuration flag list the probe skips agrees with the settings table, flag for flag and kind for kind", () => {
  assert.deepEqual(
    CONFIG_FLAG_KINDS,
    Object.fromEntries(
      CONFIG_SETTINGS.map((s) => [
        s.flag,
        s.kind === "boolean" ? "boolean" : "value",
      ]),
    ),
  );
});

function usage(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof UsageError, String(e));
    return e.message;
  }
  assert.fail("no usage error");
}

Deno.test("parseArgv: Go's rules, one dash or two, values by = or the next word, booleans by = only", () => {
  const spec = {
    flags: {
      "max-age": { kind: "value" },
      json: { kind: "boolean" },
      help: { kind: "boolean", short: "h" },
    },
    positionals: 1,
    dashDash: "positionals",
  } as const;
  // One dash or two, as Go's flag package reads them; "-" is a word.
  assert.deepEqual(parseArgv(["-max-age=5s", "-"], spec).values, {
    "max-age": ["5s"],
  });
  assert.deepEqual(parseArgv(["-"], spec).positionals, ["-"]);
  assert.deepEqual(parseArgv([""], spec).positionals, [""]);
  const a = parseArgv(["-max-age", "-5s", "/x", "--json", "-h"], spec);
  assert.deepEqual(a.values, {
    "max-age": ["-5s"],
    json: ["true"],
    help: ["true"],
  });
  assert.deepEqual(a.positionals, ["/x"]);
  assert.equal(isSet(parseArgv(["--json=false"], spec), "json"), false);
  assert.equal(
    lastValue(parseArgv(["--max-age=1s", "--max-age=2s"], spec), "max-age"),
    "2s",
  );
  assert.deepEqual(parseArgv(["--", "-odd"], spec).positionals, ["-odd"]);
  assert.match(
    usage(() => parseArgv(["--json", "false"], { ...spec, positionals: 0 })),
    /^unexpected argument "false" after --json: a boolean flag takes its value as --json=false/,
  );
  assert.throws(
    () => isSet(parseArgv(["--json=maybe"], spec), "json"),
    /must be a boolean/,
  );
});

Deno.test("parseArgv: ignored flags are skipped with their value; unknown ones are named the one way every subcommand names them", () => {
  const spec = {
    flags: { "max-age": { kind: "value" } },
    ignored: { "lease-name": "value", "release-on-shutdown": "boolean" },
    positionals: 1,
  } as const;
  const a = parseArgv(
    ["--lease-name", "x", "--release-on-shutdown", "/p"],
    spec,
  );
  assert.deepEqual(a.values, {});
  assert.deepEqual(a.positionals, ["/p"]);
  assert.equal(
    usage(() => parseArgv(["--max-agee=1s"], spec)),
    "unknown flag --max-agee: did you mean --max-age?",
  );
  assert.equal(
    usage(() => parseArgv(["-zz"], spec)),
    "unknown flag -zz; run with --help for the list",
  );
  assert.equal(
    usage(() => parseArgv(["--max-age=1s", "/p", "--S3CRET:x"], spec)),
    "unknown flag in argument 3 (not shown: it may hold a secret); run with --help for the list",
  );
});

Deno.test("parseArgv: after -- a command, or nothing", () => {
  const spec = {
    flags: { grace: { kind: "value" } },
    dashDash: "command",
    positionalHint: "put the command after --",
  } as const;
  assert.deepEqual(parseArgv(["--grace=1s", "--", "sleep", "--grace"], spec), {
    values: { grace: ["1s"] },
    positionals: [],
    command: ["sleep", "--grace"],
  });
  assert.equal(
    usage(() => parseArgv(["sleep"], spec)),
    'unexpected argument "sleep": put the command after --',
  );
  assert.match(
    usage(() => parseArgv(["--", "x"], { flags: {} })),
    /^unexpected argument "x": this subcommand takes flags only/,
  );
  assert.equal(
    usage(() => parseArgv(["--grace"], spec)),
    "flag --grace needs a value",
  );
});

Deno.test("parseArgv: a -- taken as a flag's value is named as such when a stray word follows it", () => {
  const spec = {
    flags: { "state-dir": { kind: "value" } },
    dashDash: "command",
    positionalHint: "put the command after --",
  } as const;
  // As in Go, the value may be --; the next -- starts the command.
  assert.deepEqual(parseArgv(["--state-dir", "--", "--", "true"], spec), {
    values: { "state-dir": ["--"] },
    positionals: [],
    command: ["true"],
  });
  // The command looks put after --, but that -- is --state-dir's value.
  assert.equal(
    usage(() => parseArgv(["--state-dir", "--", "true"], spec)),
    'unexpected argument "true": the -- before it is the value of --state-dir (a flag\'s value may be --); give --state-dir its value before --, as --state-dir=VALUE',
  );
  // Written --state-dir=--, the value is meant: the usual hint.
  assert.equal(
    usage(() => parseArgv(["--state-dir=--", "true"], spec)),
    'unexpected argument "true": put the command after --',
  );
});

Deno.test("parseArgv: a word after a final -- follows the --, not the flag before it", () => {
  const spec = { flags: { "lease-name": { kind: "value" } } } as const;
  assert.deepEqual(parseArgv(["--lease-name", "y", "--"], spec).values, {
    "lease-name": ["y"],
  });
  assert.equal(
    usage(() => parseArgv(["--lease-name", "y", "--", "x"], spec)),
    'unexpected argument "x": this subcommand takes flags only (--name=value)',
  );
});

Deno.test("a usage line points to --help once: after the message, unless the message already does", () => {
  const status = { flags: { json: { kind: "boolean" } } } as const;
  assert.equal(
    usageLine("status", usage(() => parseArgv(["--bogus"], status))),
    "berth-acquire status: unknown flag --bogus; run with --help for the list",
  );
  assert.equal(
    usageLine("status", usage(() => parseArgv(["-jsn"], status))),
    'berth-acquire status: unknown flag -jsn: did you mean --json? (run "berth-acquire status --help")',
  );
  assert.equal(
    usageLine("gate", "flag --grace needs a value"),
    'berth-acquire gate: flag --grace needs a value (run "berth-acquire gate --help")',
  );
});
