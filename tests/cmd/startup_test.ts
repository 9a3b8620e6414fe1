/**
 * The start-up every lease-holding subcommand shares, in-process: how a
 * configuration error, an unknown variable and `--help` are reported.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  type CommandSpec,
  RUN_ROLE,
  start,
  type Started,
} from "../../lib/cmd/startup.ts";

const BASE = {
  BERTH_LEASE_NAME: "web",
  BERTH_TTL_SECONDS: "30",
  BERTH_API_SERVER: "http://127.0.0.1:9",
  POD_NAMESPACE: "prod",
  POD_UID: "uid-1",
};

const SPEC: CommandSpec = { name: "acquire", usage: "Usage: test\n" };

function run(
  args: string[],
  env: Record<string, string | undefined>,
  spec: CommandSpec = SPEC,
): { result: Started | number; err: string[]; out: string } {
  const err: string[] = [];
  let out = "";
  const result = start(spec, args, env, {
    writeError: (l) => err.push(l),
    writeOut: (t) => out += t,
  });
  return { result, err, out };
}

Deno.test("start: a configuration error is one line naming the subcommand, or one JSON record with BERTH_LOG_FORMAT=json", () => {
  const text = run([], { ...BASE, BERTH_LEASE_NAME: undefined });
  assert.equal(text.result, 1);
  assert.deepEqual(text.err, [
    "berth-acquire acquire: invalid configuration: lease name is required (set BERTH_LEASE_NAME or --lease-name)\n",
  ]);
  const json = run([], {
    ...BASE,
    BERTH_LEASE_NAME: undefined,
    BERTH_LOG_FORMAT: "json",
  });
  assert.equal(json.result, 1);
  assert.equal(json.err.length, 1);
  const rec = JSON.parse(json.err[0]);
  assert.equal(rec.level, "ERROR");
  assert.equal(
    rec.msg,
    "invalid configuration: lease name is required (set BERTH_LEASE_NAME or --lease-name)",
  );
  assert.equal(rec.subcommand, "acquire");
});

Deno.test("start: the log format is settled before anything else, from the flag or the env", () => {
  // A flag error with --log-format=json on the same line.
  const flag = run(["--log-format=json", "--nope"], BASE);
  assert.equal(flag.result, 1);
  assert.match(JSON.parse(flag.err[0]).msg, /unknown flag --nope/);
  const separate = run(["--log-format", "json", "stray"], BASE);
  assert.match(JSON.parse(separate.err[0]).msg, /unexpected argument "stray"/);
  // The flag overrides the env, as for every setting.
  const text = run(["--log-format=text", "--nope"], {
    ...BASE,
    BERTH_LOG_FORMAT: "json",
  });
  assert.match(text.err[0], /^berth-acquire acquire: invalid configuration/);
  // A malformed format is itself reported, in text.
  const bad = run([], { ...BASE, BERTH_LOG_FORMAT: "yaml" });
  assert.equal(bad.result, 1);
  assert.match(bad.err[0], /BERTH_LOG_FORMAT="yaml": want "text" or "json"/);
});

Deno.test("start: unknown BERTH_* variables are warned about with the nearest name, before a configuration error", () => {
  const r = run([], {
    ...BASE,
    BERTH_LEASE_NAME: undefined,
    BERTH_LEASE_NAEM: "web",
  });
  assert.equal(r.result, 1);
  assert.equal(r.err.length, 2);
  assert.match(
    r.err[0],
    /level=WARN msg="unknown environment variable BERTH_LEASE_NAEM is ignored; did you mean BERTH_LEASE_NAME\?" variable=BERTH_LEASE_NAEM/,
  );
  assert.match(r.err[1], /lease name is required/);
  // A valid configuration starts, warning all the same.
  const ok = run([], { ...BASE, BERTH_COLOUR: "blue" });
  assert.equal(typeof ok.result, "object");
  assert.equal(ok.err.length, 1);
  assert.match(ok.err[0], /BERTH_COLOUR is ignored"/);
  // Nothing is warned about on --help.
  assert.deepEqual(run(["--help"], { BERTH_COLOUR: "x" }).err, []);
});

Deno.test("start: the settings given explicitly are known, by env or flag", () => {
  const r = run(["--state-dir", "/tmp/x"], { ...BASE, BERTH_MODE: "" });
  const started = r.result as Started;
  assert.ok(started.given.has("state-dir"));
  assert.ok(started.given.has("lease-name"));
  assert.ok(!started.given.has("mode"), "an empty env value is not given");
  assert.equal(started.config.stateDir, "/tmp/x");
});

Deno.test("start: run's lead default is a parameter, and its help states it and offers no --mode", () => {
  const spec: CommandSpec = { name: "run", usage: "Usage: run\n", ...RUN_ROLE };
  const r = run(["--enforce-grace-seconds=3"], BASE, spec);
  assert.equal((r.result as Started).config.enforceLeadMs, 4000);
  assert.equal(
    (run([], BASE, SPEC).result as Started).config.enforceLeadMs,
    4000,
  );
  assert.equal(
    (run([], BASE, spec).result as Started).config.enforceLeadMs,
    1000,
  );
  const help = run(["--help"], {}, spec);
  assert.equal(help.result, 0);
  assert.match(
    help.out,
    /BERTH_ENFORCE_LEAD_SECONDS; default: enforce grace \+ 1\]/,
  );
  assert.doesNotMatch(help.out, /--mode|startup-gate/);
  assert.match(run(["--help"], {}).out, /--mode MODE/);
});

Deno.test("start: a problem the subcommand finds later is reported the same way", () => {
  const json = run([], { ...BASE, BERTH_LOG_FORMAT: "json" });
  const started = json.result as Started;
  started.configProblem("no command to run");
  assert.equal(
    JSON.parse(json.err.at(-1)!).msg,
    "invalid configuration: no command to run",
  );
  const text = run([], BASE);
  (text.result as Started).configProblem("no command to run");
  assert.equal(
    text.err.at(-1),
    "berth-acquire acquire: invalid configuration: no command to run\n",
  );
});

Deno.test('start: acquire and renew report a configuration error as the Go helper does: level=ERROR msg="berth-acquire failed" error=...', () => {
  const spec = { ...SPEC, goFailureLine: true };
  const text = run(["--ttl-seconds=030"], BASE, spec);
  assert.equal(text.result, 1);
  assert.equal(text.err.length, 1, text.err.join(""));
  assert.match(
    text.err[0],
    /^time=\S+ level=ERROR msg="berth-acquire failed" error="invalid configuration: --ttl-seconds=\\"030\\": the Go helper reads a leading zero as octal \(24, not 30\)/,
  );
  const json = run(["--nope"], { ...BASE, BERTH_LOG_FORMAT: "json" }, spec);
  assert.equal(json.result, 1);
  const rec = JSON.parse(json.err[0]);
  assert.equal(rec.level, "ERROR");
  assert.equal(rec.msg, "berth-acquire failed");
  assert.equal(
    rec.error,
    "invalid configuration: unknown flag --nope; run with --help for the list",
  );
});
