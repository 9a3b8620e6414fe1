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
 * lib/state/marker.ts (with lib/state/nofollow.ts), lib/state/clock.ts,
 * lib/config/duration.ts and the one-constant lib/config/defaults.ts, and
 * does no work at load.
 *
 * @module
 */
import { DEFAULT_STATE_DIR } from "../config/defaults.ts";
import { parseDurationMs } from "../config/duration.ts";
import { withTwoDashes } from "../config/flag_name.ts";
import { examineMarker } from "../state/marker.ts";

const USAGE =
  `Usage: berth-acquire check [MARKER-PATH] [--max-age DURATION] [--state-dir DIR]

Liveness probe: exit 0 when the health marker is present and fresh, else print
one line and exit 1.

  MARKER-PATH           the marker; default <state dir>/healthy
  --max-age DURATION    largest accepted age of the marker's mtime, Go syntax
                        (30s, 1m0s, 1.5s, 300ms); 0 or absent: presence only
  --state-dir DIR       state directory for the default path; env
                        BERTH_STATE_DIR; default ${DEFAULT_STATE_DIR}
  --help                show this help`;

/** The parsed arguments of `check`. */
interface CheckArgs {
  help: boolean;
  path?: string;
  maxAge?: string;
  stateDir?: string;
}

/**
 * A hand-written argv loop instead of `node:util`'s `parseArgs`: the probe
 * starts every 2 s in every guarded container, and loading `node:util` costs
 * about 12 ms and 6 MiB per start (see the project's measured facts). Accepts
 * `--flag value` and `--flag=value` (or with one dash, as Go's flag package
 * takes them), flags before or after the path, and
 * `--` before a path that starts with a dash. Throws a message naming the
 * problem.
 */
function parseCheckArgs(args: string[]): CheckArgs {
  const out: CheckArgs = { help: false };
  let positionalOnly = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (!positionalOnly && a.startsWith("-") && a !== "-") {
      if (a === "--") {
        positionalOnly = true;
        continue;
      }
      // One dash or two, as Go's flag package (and the other subcommands) take them.
      const flag = withTwoDashes(a);
      if (flag === "--help" || a === "-h") {
        out.help = true;
        continue;
      }
      const eq = flag.indexOf("=");
      const name = eq < 0 ? flag : flag.slice(0, eq);
      if (name !== "--max-age" && name !== "--state-dir") {
        const given = eq < 0 ? a : a.slice(0, a.indexOf("="));
        throw new Error(`unknown flag ${JSON.stringify(given)}`);
      }
      let value: string;
      if (eq >= 0) {
        value = flag.slice(eq + 1);
      } else if (i + 1 < args.length) {
        value = args[++i];
      } else {
        throw new Error(`flag ${name} needs a value`);
      }
      if (name === "--max-age") out.maxAge = value;
      else out.stateDir = value;
      continue;
    }
    if (out.path !== undefined) {
      throw new Error(
        `unexpected extra argument ${
          JSON.stringify(a)
        } (only one marker path is accepted)`,
      );
    }
    out.path = a;
  }
  return out;
}

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
    const parsed = parseCheckArgs(args);
    if (parsed.help) {
      console.log(USAGE);
      return Promise.resolve(0);
    }
    if (parsed.maxAge !== undefined) {
      maxAgeMs = parseDurationMs(parsed.maxAge, "--max-age");
    }
    if (parsed.path !== undefined) {
      if (parsed.path === "") throw new Error("the marker path is empty");
      path = parsed.path;
    } else {
      if (parsed.stateDir === "") throw new Error("--state-dir is empty");
      const dir = parsed.stateDir ??
        (Deno.env.get("BERTH_STATE_DIR") || DEFAULT_STATE_DIR);
      path = `${dir.replace(/\/+$/, "")}/healthy`;
    }
  } catch (e) {
    console.log(
      `berth-acquire check: ${
        (e as Error).message
      } (run "berth-acquire check --help")`,
    );
    return Promise.resolve(1);
  }
  const verdict = examineMarker(path, { maxAgeMs });
  if (verdict.kind === "OK") return Promise.resolve(0);
  console.log(verdict.reason);
  return Promise.resolve(1);
}
