/**
 * A {@linkcode CommandLauncher} for in-process tests of `run`: starts the
 * command directly, without its gate, because a separate gate process
 * cannot share the test's fake clock. The command gets the environment the
 * gate would give it; nothing is prepared (the test runner must not become
 * a child subreaper), and processes the command leaves behind are its own
 * doing, not a failed gate's.
 *
 * @module
 */
import type { CommandLauncher } from "../../lib/run/run_supervise.ts";
import { ProcessGroup } from "../../lib/gate/process_group.ts";
import { commandEnv } from "../../lib/gate/gate_loop.ts";

/** Starts the command directly; see the module doc. */
export const directLauncher: CommandLauncher = {
  prepare: () => undefined,
  deathReason: () => undefined,
  start: (c) => {
    const st = c.renewer.status();
    return ProcessGroup.spawn({
      argv: c.command,
      env: commandEnv(c.env, {
        holder: c.config.holder,
        token: st.token,
        expiresAtMs: c.clock.wallNow() + ((st.deadline ?? 0) - c.clock.now()),
      }),
      graceMs: c.config.enforceGraceSeconds * 1000,
      clock: c.clock,
      logger: c.logger,
    });
  },
};
