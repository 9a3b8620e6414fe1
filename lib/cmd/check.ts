/**
 * `berth-acquire check`: the exec liveness probe the webhook puts on every
 * main container (`/berth/check check /berth/healthy --max-age 30s`, every
 * 2 s, 1 s timeout, failure threshold 1). Exit 0 and print nothing when the
 * marker is present and fresh; otherwise print one line on stdout (the
 * kubelet shows it in the pod's events) and exit 1. Usage errors exit 1 too:
 * a probe that cannot understand its arguments fails closed.
 *
 * It needs no configuration besides its arguments (and `BERTH_STATE_DIR` for
 * the default path), so it never fails because `BERTH_LEASE_NAME` or other
 * settings of the other roles are missing in the main container.
 *
 * Cost matters more here than anywhere else: it runs inside the workload's
 * container and memory budget, started every 2 s. It imports only
 * lib/state/marker.ts, lib/config/duration.ts and the one argument parser
 * (lib/config/argv.ts, a leaf, with the configuration flag names it skips
 * and the default state directory), and does no work at load.
 *
 * @module
 */
import {
  CONFIG_FLAG_KINDS,
  DEFAULT_STATE_DIR,
  type FlagKind,
  isSet,
  lastValue,
  parseArgv,
  usageLine,
} from "../config/argv.ts";
import { parseDurationMs } from "../config/duration.ts";
import { examineMarker } from "../state/marker.ts";

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

/** The configuration flags check skips: every one but its own --state-dir. */
const IGNORED: Record<string, FlagKind> = Object.fromEntries(
  Object.entries(CONFIG_FLAG_KINDS).filter(([name]) => name !== "state-dir"),
);

/** check's own flags. */
const FLAGS = {
  "max-age": { kind: "value", wants: "a duration such as 30s" },
  "state-dir": { kind: "value", wants: "a directory" },
  help: { kind: "boolean", short: "h" },
} as const;

/**
 * Runs the probe; see the module doc. Returns the exit code.
 *
 * @param args The arguments after `check`.
 * @returns 0 when healthy, else 1.
 */
export function main(args: string[]): Promise<number> {
  let path: string;
  let maxAgeMs = 0;
  try {
    const argv = parseArgv(args, {
      flags: FLAGS,
      ignored: IGNORED,
      positionals: 1,
      positionalHint: "check takes one marker path",
      dashDash: "positionals",
    });
    if (isSet(argv, "help")) {
      console.log(USAGE);
      return Promise.resolve(0);
    }
    const maxAge = lastValue(argv, "max-age");
    if (maxAge !== undefined) {
      maxAgeMs = parseDurationMs(maxAge, "--max-age", { negative: "zero" });
    }
    // An empty path or state directory falls back as an absent one, as in
    // the Go helper.
    const given = argv.positionals[0];
    if (given !== undefined && given !== "") {
      path = given;
    } else {
      const dir = lastValue(argv, "state-dir") ||
        Deno.env.get("BERTH_STATE_DIR") || DEFAULT_STATE_DIR;
      path = `${dir.replace(/\/+$/, "")}/healthy`;
    }
  } catch (e) {
    console.log(
      usageLine("check", (e as Error).message),
    );
    return Promise.resolve(1);
  }
  const verdict = examineMarker(path, { maxAgeMs });
  if (verdict.kind === "OK") return Promise.resolve(0);
  console.log(verdict.reason);
  return Promise.resolve(1);
}
