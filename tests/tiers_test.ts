/**
 * The test tiers in deno.json: `test` runs every file; `test:unit` and
 * `test:proc` split them so that each file is in exactly one, and the unit
 * tier, which runs as many files at once as there are CPUs, holds no file
 * that starts the CLI, a pod simulator or a PID namespace (those are the
 * timing-sensitive ones, run two at a time in `test:proc`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { REPO_ROOT } from "./support/cli.ts";

const tasks: Record<string, string> = JSON.parse(
  await Deno.readTextFile(`${REPO_ROOT}/deno.json`),
).tasks;

/** The test files under `dir` (relative to the checkout), recursively, sorted. */
function testFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(`${REPO_ROOT}/${dir}`)) {
    const path = `${dir.replace(/\/$/, "")}/${e.name}`;
    if (e.isDirectory) out.push(...testFiles(path));
    else if (/_test\.ts$/.test(e.name)) out.push(path);
  }
  return out.sort();
}

/** The test files a `deno test ... PATHS` task runs: its path arguments, directories expanded. */
function taskFiles(name: string): string[] {
  const task = tasks[name];
  assert.ok(task, `deno.json has no task ${name}`);
  const paths = task.split(/\s+/).filter((w) => w.startsWith("tests/"));
  return [
    ...new Set(paths.flatMap((p) => p.endsWith(".ts") ? [p] : testFiles(p))),
  ].sort();
}

Deno.test("`deno task test` runs every test file", () => {
  assert.deepEqual(taskFiles("test"), testFiles("tests"));
});

Deno.test("every test file is in exactly one of test:unit and test:proc", () => {
  const unit = taskFiles("test:unit");
  const proc = taskFiles("test:proc");
  assert.deepEqual(unit.filter((f) => proc.includes(f)), [], "in both tiers");
  assert.deepEqual(
    testFiles("tests").filter((f) => !unit.includes(f) && !proc.includes(f)),
    [],
    "in neither tier: add each to test:unit or test:proc in deno.json",
  );
});

Deno.test("test:unit starts no CLI, pod simulator or PID namespace", async () => {
  const spawns =
    /\b(runCli|spawnCli|runExecutable|cliArgv|berthArgv|denoRunArgv|Lab\.start|unshare)\b/;
  const self = "tests/tiers_test.ts"; // names them to look for them
  for (const f of taskFiles("test:unit").filter((f) => f !== self)) {
    const text = await Deno.readTextFile(`${REPO_ROOT}/${f}`);
    assert.doesNotMatch(text, spawns, `${f} belongs in test:proc`);
  }
});
