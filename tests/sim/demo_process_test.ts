/**
 * The demo's output is text a user may pipe or redirect: colour goes only to
 * a terminal and never when NO_COLOR is set. The terminal is a real
 * pseudo-terminal (`script` from util-linux) where one can be had.
 *
 * @module
 */
import assert from "node:assert/strict";
import { useColour } from "../../sim/demo.ts";
import { shellQuote } from "../../lib/state/state_dir.ts";
import { REPO_ROOT } from "../support/cli.ts";

Deno.test("colour only to a terminal, and never with NO_COLOR set", () => {
  assert.equal(useColour({ isTerminal: true, noColor: undefined }), true);
  assert.equal(useColour({ isTerminal: false, noColor: undefined }), false);
  assert.equal(useColour({ isTerminal: true, noColor: "1" }), false);
  // no-color.org: an empty NO_COLOR does not count.
  assert.equal(useColour({ isTerminal: true, noColor: "" }), true);
});

/** A program that prints the demo's styled text, as the demo's own lines are. */
const PRINT = `import { bold, dim } from "${REPO_ROOT}/sim/demo.ts";
console.log(JSON.stringify(bold("b") + dim("d")));`;

async function printStyled(
  viaTerminal: boolean,
  env: Record<string, string>,
): Promise<string> {
  const deno = [Deno.execPath(), "eval", "-q", PRINT];
  const argv = viaTerminal
    ? [
      "script",
      "-qec",
      deno.map(shellQuote).join(" "),
      "/dev/null",
    ]
    : deno;
  const out = await new Deno.Command(argv[0], {
    args: argv.slice(1),
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", ...env },
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(30_000),
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr) + text);
  return JSON.parse(text.trim().split("\n").at(-1)!);
}

function scriptMissing(): boolean {
  try {
    new Deno.Command("script", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    })
      .outputSync();
    return false;
  } catch {
    console.log("skipped: the terminal case needs script (util-linux)");
    return true;
  }
}

Deno.test("piped: plain text", async () => {
  assert.equal(await printStyled(false, {}), "bd");
});

Deno.test({
  name: "on a terminal: bold and dim; with NO_COLOR=1: plain",
  ignore: scriptMissing(),
  async fn() {
    assert.equal(await printStyled(true, {}), "\x1b[1mb\x1b[0m\x1b[2md\x1b[0m");
    assert.equal(await printStyled(true, { NO_COLOR: "1" }), "bd");
  },
});
