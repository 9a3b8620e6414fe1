/**
 * The test tiers in deno.json are chosen by file name: `*_process_test.ts`
 * files are process-level (`test:proc`, two at a time), every other
 * `*_test.ts` file is a unit test (`test:unit`, as many at once as there are
 * CPUs). A unit file must start no CLI, pod simulator or PID namespace:
 * those are the timing-sensitive ones.
 *
 * @module
 */
import assert from "node:assert/strict";
import { REPO_ROOT } from "./support/cli.ts";

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

const PROCESS_TEST = /_process_test\.ts$/;

Deno.test("the tiers select by the _process_test.ts suffix, not by lists", async () => {
  const tasks: Record<string, string> = JSON.parse(
    await Deno.readTextFile(`${REPO_ROOT}/deno.json`),
  ).tasks;
  assert.match(
    tasks["test:unit"],
    /--ignore='tests\/\*\*\/\*_process_test\.ts' tests\//,
  );
  assert.match(tasks["test:proc"], /'tests\/\*\*\/\*_process_test\.ts'/);
  assert.match(tasks["test"], / tests\/$/);
});

Deno.test("a unit test file starts no CLI, pod simulator or PID namespace", async () => {
  const spawns =
    /\b(runCli|spawnCli|runExecutable|cliArgv|berthArgv|denoRunArgv|Lab\.start|unshare)\b/;
  const self = "tests/tiers_test.ts"; // names them to look for them
  const unit = testFiles("tests").filter((f) =>
    !PROCESS_TEST.test(f) && f !== self
  );
  assert.ok(unit.length > 10, "found the unit files");
  for (const f of unit) {
    const text = await Deno.readTextFile(`${REPO_ROOT}/${f}`);
    assert.doesNotMatch(
      text,
      spawns,
      `${f} starts a process: name it *_process_test.ts`,
    );
  }
});
