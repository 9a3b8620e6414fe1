// The CLI's front door: version, help, unknown subcommands.
import assert from "node:assert/strict";
import { VERSION } from "../lib/version.ts";
import { REPO_ROOT, runCli } from "./support/cli.ts";

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
  for (const sub of ["acquire", "renew", "check", "dev-server"]) {
    assert.match(r.stdout, new RegExp(`berth-acquire ${sub}`));
  }
  assert.match(r.stdout, /DEVELOPMENT/);
});

Deno.test("an unknown or missing subcommand exits 1 with the usage on stderr", async () => {
  for (const args of [["acquier"], []]) {
    const r = await runCli(args, { signal: AbortSignal.timeout(30_000) });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /Usage:/);
  }
});

Deno.test("each subcommand answers --help without any configuration", async () => {
  for (const sub of ["acquire", "renew", "check"]) {
    const r = await runCli([sub, "--help"], {
      signal: AbortSignal.timeout(30_000),
    });
    assert.equal(r.code, 0, `${sub}: ${r.stderr}`);
    assert.match(r.stdout, /Usage: berth-acquire/);
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

Deno.test("the probe loads only what it needs: check, marker, no-follow reads, duration, clock and the default state directory, and no node: module", async () => {
  // main.ts loads the subcommand's module on demand, so what `check` pays for
  // at every start is exactly lib/cmd/check.ts and its static imports.
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", `${REPO_ROOT}/lib/cmd/check.ts`],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout));
  const modules = (info.modules as { specifier: string }[])
    .map((m) => m.specifier.replace(`file://${REPO_ROOT}/`, ""))
    .sort();
  assert.deepEqual(modules, [
    "lib/cmd/check.ts",
    "lib/config/defaults.ts",
    "lib/config/duration.ts",
    "lib/state/clock.ts",
    "lib/state/marker.ts",
    "lib/state/nofollow.ts",
  ]);
  const main = await Deno.readTextFile(`${REPO_ROOT}/main.ts`);
  assert.doesNotMatch(main, /^import /m, "main.ts imports nothing statically");
});
