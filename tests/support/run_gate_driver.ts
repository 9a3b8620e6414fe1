/**
 * Runs `run` (lib/run/run.ts `runWith`) in a process of its own with a
 * stand-in for its command's gate, for `tests/run/run_process_test.ts`: `run` makes
 * itself a child subreaper, which must not be the test runner. The first
 * argument is the configuration's environment as JSON, the second the stand-in
 * gate's shell script (it gets `run`'s gate arguments as `$@`); records go to
 * stderr as text, and the process exits with `run`'s status.
 *
 * @module
 */
import { runWith } from "../../lib/run/run.ts";
import { gatedLauncher } from "../../lib/run/launcher.ts";
import { resolveConfig } from "../../lib/config/config.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { systemClock } from "../../lib/state/clock.ts";

const env = JSON.parse(Deno.args[0]) as Record<string, string>;
const gateScript = Deno.args[1];
const code = await runWith({
  config: resolveConfig(env, {}),
  command: ["sleep", "1000"],
  restart: false,
  healthAddr: undefined,
  state: undefined,
  logger: createLogger({}),
  clock: systemClock,
  launcher: gatedLauncher((args) => ["sh", "-c", gateScript, "gate", ...args]),
});
// Pending timers (bounds of waits that ended) would keep the process alive.
Deno.exit(code);
