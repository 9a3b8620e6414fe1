/**
 * The start-up every lease-holding subcommand shares, in-process: how a
 * configuration error, an unknown variable and `--help` are reported.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  type CommandSpec,
  start,
  type Started,
} from "../../lib/cmd/startup.ts";
import { RUN_ROLE } from "../../lib/run/run.ts";

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
  // run's default grace (5 s at TTL 30) and its lead, grace + 1.
  assert.equal(
    (run([], BASE, spec).result as Started).config.enforceLeadMs,
    6000,
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

const RUN_SPEC: CommandSpec = {
  name: "run",
  usage: "Usage: run\n",
  ...RUN_ROLE,
};

Deno.test("start run: the default grace lets the command exit cleanly, bounded by the room the TTL leaves; the rule is in --help", () => {
  const grace = (
    env: Record<string, string | undefined>,
    args: string[] = [],
  ) =>
    (run(args, { ...BASE, ...env }, RUN_SPEC).result as Started).config
      .enforceGraceSeconds;
  // lead (grace + 1) + 2 heartbeats + a 1 s stall <= TTL, at most 5 s.
  assert.equal(grace({}), 5, "TTL 30: the 5 s cap");
  for (
    const [ttl, hb, want] of [
      ["21", "", 5], // 6 + 14 + 1 = 21
      ["20", "", 4],
      ["10", "", 1], // 2 + 6.67 + 1 <= 10 < 3 + 6.67 + 1
      ["8", "", 0],
      ["6", "", 0],
      ["3", "", 0],
      ["8", "1", 4], // 5 + 2 + 1 = 8
      ["10", "6", 0],
    ] as const
  ) {
    const e = { BERTH_TTL_SECONDS: ttl, BERTH_HEARTBEAT_SECONDS: hb || "0" };
    assert.equal(grace(e), want, `TTL ${ttl}, heartbeat ${hb || "TTL/3"}`);
  }
  assert.equal(grace({}, ["--enforce-grace-seconds=1"]), 1, "given: kept");
  assert.equal(
    grace({ BERTH_TTL_SECONDS: "10" }, ["--enforce-grace-seconds=5"]),
    5,
    "given: kept where the default is 1",
  );
  // A given lead leaves its grace: lead - 1 s, at most 5 s.
  assert.equal(grace({ BERTH_ENFORCE_LEAD_SECONDS: "4" }), 3);
  assert.equal(grace({ BERTH_ENFORCE_LEAD_SECONDS: "9" }), 5);
  // acquire and renew keep the spec's 0.
  assert.equal(
    (run([], BASE).result as Started).config.enforceGraceSeconds,
    0,
  );
  assert.match(
    run(["--help"], {}, RUN_SPEC).out,
    /BERTH_ENFORCE_GRACE_SECONDS; default: the smaller of 5 and what the TTL leaves/,
  );
});

Deno.test("start run: with no holder and no POD_*, the holder is the host's, new for every start; POD_* keep the pod rules", () => {
  const env = {
    ...BASE,
    POD_NAMESPACE: undefined,
    POD_UID: undefined,
    BERTH_LEASE_NAMESPACE: "dev",
  };
  const a = (run([], env, RUN_SPEC).result as Started).config.holder;
  const b = (run([], env, RUN_SPEC).result as Started).config.holder;
  const host = Deno.hostname();
  assert.match(a, new RegExp(`^${host}/pid:${Deno.pid}:uid:[0-9a-f-]{36}$`));
  assert.notEqual(a, b, "two starts never share a holder");
  assert.match(
    (run([], { ...env, BERTH_CLUSTER_ID: "east" }, RUN_SPEC).result as Started)
      .config.holder,
    new RegExp(`^east/${host}:pid:`),
  );
  // In a pod (POD_* set) the pod rules hold: POD_UID is required.
  const pod = run([], { ...env, POD_NAME: "web-0" }, RUN_SPEC);
  assert.equal(pod.result, 1);
  assert.match(pod.err.join(""), /POD_UID is required/);
  // acquire keeps the spec's rule.
  assert.equal(run([], env).result, 1);
});

Deno.test("start run: --help shows only the flags run uses; the others are refused with a line that says run does not use them", () => {
  const help = run(["--help"], {}, RUN_SPEC).out;
  assert.doesNotMatch(help, /--enforce |--signal-target|--mode/);
  assert.match(help, /--enforce-grace-seconds/);
  for (
    const flag of [
      "--enforce=signal",
      "--signal-target=nginx",
      "--mode=runtime-singleton",
    ]
  ) {
    const r = run([flag], BASE, RUN_SPEC);
    assert.equal(r.result, 1);
    assert.equal(r.err.length, 1);
    assert.match(
      r.err[0],
      new RegExp(
        `^berth-acquire run: invalid configuration: run does not use ${
          flag.split("=")[0]
        }: .*; remove the flag\n$`,
      ),
    );
  }
  // The same settings in the environment (a shared env file) are not read:
  // a value run would have refused is ignored, with an INFO line.
  const env = run([], { ...BASE, BERTH_ENFORCE: "sigal" }, RUN_SPEC);
  assert.equal(typeof env.result, "object");
  assert.match(
    env.err.join(""),
    /BERTH_ENFORCE is set, but run does not use it/,
  );
});

Deno.test("start run: a bare run names every missing setting in one message, the first line the spec's message for the first", () => {
  const r = run([], {}, RUN_SPEC);
  assert.equal(r.result, 1);
  assert.equal(r.err.length, 1);
  const lines = r.err[0].split("\n");
  assert.equal(
    lines[0],
    "berth-acquire run: invalid configuration: lease name is required (set BERTH_LEASE_NAME or --lease-name)",
  );
  assert.equal(
    lines[1],
    "  missing settings: BERTH_LEASE_NAME (or --lease-name), BERTH_LEASE_NAMESPACE (or --lease-namespace or POD_NAMESPACE), BERTH_TTL_SECONDS (or --ttl-seconds), BERTH_API_SERVER (or --api-server)",
  );
  const json = run([], { BERTH_LOG_FORMAT: "json" }, RUN_SPEC);
  assert.equal(
    JSON.parse(json.err[0]).missing,
    "BERTH_LEASE_NAME,BERTH_LEASE_NAMESPACE,BERTH_TTL_SECONDS,BERTH_API_SERVER",
  );
  // One missing setting: the one line, as before.
  assert.equal(
    run([], { ...BASE, BERTH_LEASE_NAME: undefined }, RUN_SPEC).err[0].split(
      "\n",
    ).length,
    2,
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

Deno.test("start: a configuration variable that is not valid UTF-8 is refused, never taken as unset", () => {
  // The record cannot hold it: the explicit holder is missing from it.
  for (const unreadable of ["BERTH_HOLDER_IDENTITY", "POD_UID"]) {
    const err: string[] = [];
    const result = start(SPEC, [], BASE, {
      writeError: (l) => err.push(l),
      getEnv: (name) => {
        if (name === unreadable) throw new TypeError("not valid unicode");
        return name === "BERTH_LEASE_NAME" ? "web" : undefined;
      },
    });
    assert.equal(result, 1);
    assert.equal(
      err.join(""),
      `berth-acquire acquire: invalid configuration: ${unreadable} is not valid UTF-8; set it to UTF-8 text (a setting that cannot be read is never taken as unset)\n`,
    );
  }
});

Deno.test("start: with a command spec, the words after -- are the command, and the hint is said once, only while the command is missing", () => {
  const spec: CommandSpec = {
    name: "run",
    usage: "Usage: run\n",
    ...RUN_ROLE,
    command: { hint: "put the command after --" },
  };
  const ok = run(["--state-dir=/tmp/x", "--", "sleep", "--", "1"], BASE, spec);
  assert.deepEqual((ok.result as Started).command, ["sleep", "--", "1"]);
  // Without --, the command is empty (run says "no command to run").
  assert.deepEqual((run([], BASE, spec).result as Started).command, []);
  // A configuration error while the command is missing gets the hint.
  const missing = run(["--"], { ...BASE, BERTH_LEASE_NAME: undefined }, spec);
  assert.deepEqual(missing.err, [
    "berth-acquire run: invalid configuration: lease name is required (set BERTH_LEASE_NAME or --lease-name); put the command after --\n",
  ]);
  // With the command given, it does not.
  const given = run(
    ["--", "true"],
    { ...BASE, BERTH_LEASE_NAME: undefined },
    spec,
  );
  assert.doesNotMatch(given.err.join(""), /put the command after/);
  // A stray word is told by the parser, once.
  const stray = run(["true"], BASE, spec);
  assert.deepEqual(stray.err, [
    'berth-acquire run: invalid configuration: unexpected argument "true": put the command after --\n',
  ]);
  // A mistake in the command line itself is said without it.
  const typo = run(["--lease-nmae=x"], BASE, spec);
  assert.deepEqual(typo.err, [
    "berth-acquire run: invalid configuration: unknown flag --lease-nmae: did you mean --lease-name?\n",
  ]);
  // A -- a flag took as its value, with no second --: said first.
  const took = run(["--state-dir", "--"], BASE, spec);
  assert.deepEqual(took.err, []);
  assert.deepEqual((took.result as Started).command, []);
  const took2 = run(
    ["--state-dir", "--"],
    { ...BASE, BERTH_LEASE_NAME: undefined },
    spec,
  );
  assert.deepEqual(took2.err, [
    "berth-acquire run: invalid configuration: lease name is required (set BERTH_LEASE_NAME or --lease-name); the -- is the value of --state-dir (a flag's value may be --); put the command after --\n",
  ]);
  // acquire takes no command: a word after -- is a stray word.
  const acquire = run(["--", "true"], BASE);
  assert.deepEqual(acquire.err, [
    'berth-acquire acquire: invalid configuration: unexpected argument "true": this subcommand takes flags only (--name=value)\n',
  ]);
});
