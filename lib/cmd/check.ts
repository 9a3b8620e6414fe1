/**
 * `berth-acquire check` with any arguments but the webhook's own
 * (`PATH --max-age 30s`, which main.ts answers without this module): the one
 * argument parser, the state directory's default path, `--help`.
 *
 * @module
 */
import {
  CONFIG_FLAG_KINDS,
  DEFAULT_STATE_DIR,
  isSet,
  lastValue,
  parseArgv,
  usageLine,
} from "../config/argv.ts";
import { parseDurationMs } from "../config/duration.ts";
import { probe } from "../state/marker.ts";

const USAGE =
  `Usage: berth-acquire check [MARKER-PATH] [--max-age DURATION] [--state-dir DIR]

Liveness probe: exit 0 when the health marker is present and fresh, else print
one line and exit 1 (a usage error exits 1 too: the probe fails closed).

  MARKER-PATH           the marker file; absent or empty: <state dir>/healthy
  --max-age DURATION    largest accepted age of the marker's mtime, a Go
                        duration (30s, 1m0s, 1.5s, 300ms); 0, negative or
                        absent: presence only
  --state-dir DIR       state directory for the default path; env
                        BERTH_STATE_DIR; default ${DEFAULT_STATE_DIR}
  --help                show this help

The other roles' flags (--lease-name, --ttl-seconds, ...) are accepted and
ignored, as the Go helper accepts them.`;

/**
 * `check`: see the usage text. It reads no setting but `BERTH_STATE_DIR`, so
 * the other roles' settings, missing in the main container, never fail it.
 */
export function main(args: string[]): number {
  let path: string;
  let maxAgeMs = 0;
  try {
    const argv = parseArgv(args, {
      flags: {
        "max-age": { kind: "value", wants: "a duration such as 30s" },
        "state-dir": { kind: "value", wants: "a directory" },
        help: { kind: "boolean", short: "h" },
      },
      // The other roles' flags are skipped with their values (renew's
      // --health-addr too); its own --state-dir comes first.
      ignored: { ...CONFIG_FLAG_KINDS, "health-addr": "value" },
      positionals: 1,
      positionalHint: "check takes one marker path",
      dashDash: "positionals",
    });
    if (isSet(argv, "help")) {
      console.log(USAGE);
      return 0;
    }
    const maxAge = lastValue(argv, "max-age");
    if (maxAge !== undefined) {
      maxAgeMs = parseDurationMs(maxAge, "--max-age", { negative: "zero" });
    }
    // An empty path or state directory counts as absent, as in Go.
    path = argv.positionals[0] ||
      `${
        (lastValue(argv, "state-dir") || Deno.env.get("BERTH_STATE_DIR") ||
          DEFAULT_STATE_DIR).replace(/\/+$/, "")
      }/healthy`;
  } catch (e) {
    console.log(usageLine("check", (e as Error).message));
    return 1;
  }
  return probe(path, maxAgeMs);
}
