/**
 * Writes the marker, the token and the holder three times each, and installs
 * the probe once, through a real {@linkcode StateDir}, so
 * `state_dir_process_test.ts` can count, under strace, the syscalls a state write
 * costs.
 *
 * @module
 */
import { StateDir } from "../../lib/state/state_dir.ts";
import { installProbe } from "../../lib/cmd/install_check.ts";
import { discardLogger } from "../../lib/obs/log.ts";

const s = new StateDir(Deno.args[0]);
for (let i = 1; i <= 3; i++) {
  await s.writeMarker({ gateClosesBootMs: i, leaseDeadlineBootMs: i + 1 });
  await s.writeToken(i);
  await s.writeHolder("prod/pod:web-0:uid:1");
}
await installProbe(s, discardLogger);
