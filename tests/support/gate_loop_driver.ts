/**
 * Runs `gate`'s loop (lib/gate/gate_loop.ts `runGate`) in a process of its own
 * for `tests/gate/gate_loop_process_test.ts`: the gate is a child subreaper that signals
 * and reaps every descendant of its process, so it must not share the test
 * runner's. The first argument is the options as JSON (`badClock: true`
 * gives it a boot clock that throws); every log record is printed as one
 * JSON line on stdout, then `{"exit": CODE}`.
 *
 * @module
 */
import { runGate } from "../../lib/gate/gate_loop.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { systemClock } from "../../lib/state/clock.ts";

const o = JSON.parse(Deno.args[0]);
const logger = createLogger({
  format: "json",
  level: "DEBUG",
  write: (line) => console.log(line),
});
const code = await runGate({
  help: false,
  maxAgeMs: 0,
  ...o,
  logger,
  ...(o.badClock
    ? {
      clock: {
        ...systemClock,
        bootNow: () => {
          throw new Error("cannot read /proc/uptime: permission denied");
        },
      },
    }
    : {}),
});
console.log(JSON.stringify({ exit: code }));
// Pending timers (bounds of waits that ended) would keep the process alive.
Deno.exit(0);
