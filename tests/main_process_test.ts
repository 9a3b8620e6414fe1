// The CLI's front door: version, help, unknown subcommands.
import assert from "node:assert/strict";
import { VERSION } from "../lib/version.ts";
import { WEBHOOK_PROBE_MAX_AGE } from "../lib/state/marker.ts";
import { COMMANDS, ON_DEMAND_MODULES } from "../main.ts";

/** Every subcommand main.ts dispatches to. */
const SUBCOMMANDS = Object.keys(COMMANDS);
import { REPO_ROOT, runCli } from "./support/cli.ts";
import { tempDir } from "./support/lease_env.ts";

Deno.test("--version prints the version deno.json declares", async () => {
  const config = JSON.parse(await Deno.readTextFile(`${REPO_ROOT}/deno.json`));
  assert.equal(VERSION, config.version);
  const r = await runCli(["--version"], {
    signal: AbortSignal.timeout(30_000),
  });
  assert.equal(r.code, 0);
  assert.equal(r.stdout, `berth-acquire ${config.version}\n`);
});

Deno.test("--help lists every subcommand and names the development server as such", async () => {
  const r = await runCli(["--help"], { signal: AbortSignal.timeout(30_000) });
  assert.equal(r.code, 0);
  // Every subcommand main.ts dispatches to is in the usage text.
  for (const sub of SUBCOMMANDS) {
    assert.match(r.stdout, new RegExp(`berth-acquire ${sub} `));
  }
  assert.match(r.stdout, /DEVELOPMENT/);
});

Deno.test("an unknown or missing subcommand exits 1 with the usage on stderr", async () => {
  // Names an object has by inheritance are no subcommands either.
  for (const args of [["colour"], [], ["constructor"], ["__proto__"]]) {
    const r = await runCli(args, { signal: AbortSignal.timeout(30_000) });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /Usage:/);
  }
});

Deno.test("a misspelt subcommand exits 1 with one line naming the nearest one", async () => {
  for (
    const [typo, near] of [
      ["aquire", "acquire"],
      ["acquier", "acquire"],
      [
        "stauts",
        "status",
      ],
      ["dev-sever", "dev-server"],
      ["chek", "check"],
    ]
  ) {
    const r = await runCli([typo, "--lease-name", "x"], {
      signal: AbortSignal.timeout(30_000),
    });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, "");
    assert.equal(
      r.stderr,
      `berth-acquire: unknown subcommand "${typo}": did you mean ${near}? (run "berth-acquire --help" for the list)\n`,
    );
  }
});

Deno.test("each subcommand answers --help without any configuration", async () => {
  for (const sub of SUBCOMMANDS) {
    const r = await runCli([sub, "--help"], {
      signal: AbortSignal.timeout(30_000),
    });
    assert.equal(r.code, 0, `${sub}: ${r.stderr}`);
    assert.match(r.stdout, /Usage:\s+berth-acquire/);
  }
});

Deno.test("run --help has its own text: run's lead default, no --mode", async () => {
  const r = await runCli(["run", "--help"], {
    signal: AbortSignal.timeout(30_000),
  });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /Usage: berth-acquire run/);
  assert.match(r.stdout, /default: enforce grace \+ 1\]/);
  assert.doesNotMatch(r.stdout, /--mode|startup-gate/);
});

Deno.test("acquire and renew name the first configuration problem and exit 1", async () => {
  for (const sub of ["acquire", "renew"]) {
    const r = await runCli([sub], {
      env: {},
      signal: AbortSignal.timeout(30_000),
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /lease name is required/);
  }
});

/** The modules in `deno info --json` of `path`, relative to the checkout, sorted. */
async function moduleGraph(path: string): Promise<string[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", path],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout));
  return (info.modules as { specifier: string }[])
    .map((m) => m.specifier.replace(`file://${REPO_ROOT}/`, ""))
    .sort();
}

/** The probe's graph: main.ts (the probe is its own) and its static imports. */
const PROBE_GRAPH = ["lib/state/marker.ts", "main.ts"];

Deno.test("main.ts's module graph is the webhook probe's: the marker, its no-follow reads and the boot-time clock; no argument parser, no duration parser, no other subcommand and no node: module is loaded at start", async () => {
  // Deno builds the graph of the entry module (static imports and
  // string-literal dynamic imports) at every start, reading and hashing each
  // module in it; any other subcommand's module must join only when it runs.
  assert.deepEqual(await moduleGraph(`${REPO_ROOT}/main.ts`), PROBE_GRAPH);
  const main = await Deno.readTextFile(`${REPO_ROOT}/main.ts`);
  assert.deepEqual(
    [...main.matchAll(/^} from "(.*)";$|^import .* from "(.*)";$/gm)].map((
      m,
    ) => m[1] ?? m[2]),
    ["./lib/state/marker.ts"],
    "main.ts imports only what the probe needs statically",
  );
});

Deno.test("the webhook's `main.ts check PATH --max-age 30s` reads main.ts and the probe's modules, and no other module", async () => {
  await using dir = await tempDir();
  const marker = `${dir.path}/healthy`;
  await Deno.writeTextFile(marker, "");
  // Deno's debug log names every module file it fetches.
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--log-level=debug",
      "--no-prompt",
      "-P=berth-acquire",
      "--config",
      `${REPO_ROOT}/deno.json`,
      `${REPO_ROOT}/main.ts`,
      "check",
      marker,
      "--max-age",
      WEBHOOK_PROBE_MAX_AGE,
    ],
    clearEnv: true,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(30_000),
  }).output();
  const log = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, log);
  const fetched = [
    ...new Set(
      [...log.matchAll(/fetch\w* - specifier: (file:\S+)/g)].map((m) =>
        m[1].replace(`file://${REPO_ROOT}/`, "")
      ),
    ),
  ].sort();
  assert.ok(
    fetched.includes("main.ts"),
    "deno's debug log names no fetched module (has its format changed?)",
  );
  assert.deepEqual(fetched, PROBE_GRAPH);
});

Deno.test("every module main.ts loads on demand exists and exports what main.ts uses", async () => {
  for (const [sub, path] of Object.entries(COMMANDS)) {
    const m = await import(new URL(path, `file://${REPO_ROOT}/main.ts`).href);
    assert.equal(typeof m.main, "function", `${sub}: ${path} exports no main`);
  }
  assert.ok(ON_DEMAND_MODULES.includes("./lib/version.ts"));
  for (const path of Object.values(COMMANDS)) {
    assert.ok(ON_DEMAND_MODULES.includes(path), path);
  }
});
