/**
 * What `run` differs in at start-up from `acquire` and `renew`, as the
 * {@linkcode CommandSpec} fields it passes to `start` (lib/cmd/startup.ts):
 * its lead default (the signal sender's), its grace default
 * (`runGraceDefaultSeconds`), a holder derived from the host when no pod
 * fact is set, the settings it does not use (`--mode`, `--enforce`,
 * `--signal-target`: refused as flags, their env variables ignored with an
 * INFO line, `BERTH_MODE` still read), the defaults its help text states,
 * and one message naming every missing setting.
 *
 * @module
 */
import type { CommandSpec } from "../cmd/startup.ts";
import {
  RUN_GRACE_DEFAULT_TEXT,
  runGraceDefaultSeconds,
  SIGNAL_SENDER_LEAD_DEFAULT,
} from "../config/lead.ts";

/**
 * What `run` differs in: it stops its own command's process group, so its
 * lead default is the signal sender's, and it has runtime-singleton
 * semantics only, so its help offers no `--mode` and releases by default.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(RUN_ROLE.hostHolder, true);
 * assert.deepEqual(RUN_ROLE.unused?.envRead, ["mode"]);
 * ```
 */
export const RUN_ROLE: Pick<
  CommandSpec,
  | "leadDefault"
  | "hiddenSettings"
  | "helpDefaults"
  | "graceDefault"
  | "hostHolder"
  | "unused"
  | "listMissing"
> = {
  leadDefault: SIGNAL_SENDER_LEAD_DEFAULT,
  hiddenSettings: ["mode", "enforce", "signal-target"],
  helpDefaults: {
    "release-on-shutdown": "true",
    // Without it run keeps its state private and writes nothing shared.
    "state-dir": "none (nothing is written)",
    "enforce-grace-seconds": RUN_GRACE_DEFAULT_TEXT,
    "holder-identity":
      "from the pod when POD_* is set, else from the host: HOST/pid:PID:uid:RANDOM (CLUSTER/HOST:pid:PID:uid:RANDOM with --cluster-id), new for every start",
  },
  graceDefault: runGraceDefaultSeconds,
  hostHolder: true,
  unused: {
    settings: ["mode", "enforce", "signal-target"],
    why:
      "run keeps the lease while its command runs and stops the command's own process group itself",
    // BERTH_MODE=startup-gate asks for what run does not do: refused (78).
    envRead: ["mode"],
  },
  listMissing: true,
};
