/**
 * `berth-acquire status`: the operator's read-only view of a pod's lease
 * from the state volume alone. It runs where the probe runs, in the main
 * container, with the binary already on the volume: no shell, no
 * configuration, only reads (the mount is read-only), never the lease server.
 * Without a state directory it lists the running `run`s' own.
 *
 * @module
 */
import {
  DEFAULT_STATE_DIR,
  EXIT_USAGE,
  isSet,
  lastValue,
  parseArgv,
  usageLine,
} from "../config/argv.ts";
import { parseDurationMs } from "../config/duration.ts";
import {
  type Read,
  readSnapshot,
  type StateSnapshot,
  type TimeLeft,
} from "../state/snapshot.ts";
import { formatDurationMs, WEBHOOK_PROBE_MAX_AGE } from "../state/marker.ts";

const USAGE =
  `Usage: berth-acquire status [STATE_DIR | --runs] [--json] [--max-age DURATION]

Read-only view of the lease from the state volume: holder, fencing token, the
liveness probe's verdict on the health marker, and the time left before the
gate closes and before the lease deadline, on the boot-time and wall clocks.
Run it where the probe runs, e.g.

  kubectl exec POD -c MAIN -- /berth/check status /berth

  STATE_DIR             the state directory; default $BERTH_STATE_DIR or ${DEFAULT_STATE_DIR},
                        else (as with --runs) the running runs' own
  --runs                the state directory of each run of this user (any
                        user's as root) in $TMPDIR or /tmp, with its verdict
  --json                one JSON object on stdout, for scripts
  --max-age DURATION    the marker age limit the verdict uses, a Go duration
                        (30s, 1m0s) as the probe's --max-age; 0 or negative:
                        presence only; default ${WEBHOOK_PROBE_MAX_AGE} (the webhook's probe)
  --help                show this help

Exit status: 0 when the verdict is OK (the workload may run; listing runs:
at least one listed, every verdict OK), 1 when it is not, ${EXIT_USAGE} on a
usage error.`;

/** Every duration status shows, to a tenth of a second (`4.2s`, `300ms`, `1m5.1s`). */
function shown(ms: number): string {
  return formatDurationMs(Math.round(Math.abs(ms) / 100) * 100);
}

/** Why the state directory cannot hold a lease; none when it cannot be looked at (the reads say why). */
function dirProblem(dir: string): string | undefined {
  try {
    return Deno.statSync(dir).isDirectory ? undefined : "not a directory";
  } catch (e) {
    return e instanceof Deno.errors.NotFound ? "does not exist" : undefined;
  }
}

function describeLeft(left: TimeLeft | undefined, s: StateSnapshot): string {
  if (s.marker.verdict.kind === "Absent") return "unknown: no health marker";
  if (s.marker.verdict.kind === "Indeterminate" && left === undefined) {
    return "unknown: the health marker cannot be read (see marker)";
  }
  if (left === undefined) {
    const found = {
      "no-deadlines":
        "a marker of this helper without deadlines, as in startup-gate mode",
      "go-helper": "the Go helper's marker (ok)",
      empty: "an empty marker",
      unrecognised: "content this helper does not recognise as a marker",
    }[s.marker.content as string] ?? "no deadlines";
    return `not in the marker (${found}: judged by its age alone)`;
  }
  const when = (ms: number | undefined, clock: string, unknown: string) =>
    ms === undefined
      ? unknown
      : ms >= 0
      ? `in ${shown(ms)} on the ${clock}`
      : `passed ${shown(ms)} ago on the ${clock}`;
  const unreadable = `boot-time clock unreadable (${s.clocks.bootProblem})`;
  return [
    when(left.bootMs, "boot-time clock", unreadable),
    when(left.wallMs, "wall clock", "no wall-clock copy in the marker"),
  ].join(", ");
}

/** The text view: one aligned `label  value` line per fact, each ending in a newline. */
export function formatStatusText(s: StateSnapshot): string {
  const v = s.marker.verdict;
  const age = s.marker.ageMs === undefined
    ? ""
    : ` (written ${shown(Math.max(0, s.marker.ageMs))} ago)`;
  const missing = dirProblem(s.dir);
  const read = <T>(r: Read<T>, file: string) =>
    !r.ok
      ? `unreadable: ${r.problem}`
      : r.value !== undefined
      ? String(r.value)
      : missing === undefined
      ? `none (no ${file} file)`
      : `none (the state directory ${missing})`;
  const rows: [string, string][] = [
    ["state directory", missing ? `${s.dir} (${missing})` : s.dir],
    ["holder", read(s.holder, "holder")],
    ["fencing token", read(s.token, "token")],
    ["marker", v.kind === "OK" ? `OK${age}` : `${v.kind}: ${v.reason}${age}`],
    ["gate closes", describeLeft(s.gateCloses, s)],
    ["lease deadline", describeLeft(s.leaseDeadline, s)],
  ];
  return rows.map(([k, val]) => `${k.padEnd(17)}${val}\n`).join("");
}

/** The `--json` view: every field always present (null when unknown), so a script can rely on its shape. */
function statusJson(s: StateSnapshot): Record<string, unknown> {
  const v = s.marker.verdict;
  const d = s.marker.deadlines;
  // Whole milliseconds, as every field gives them.
  const wholeMs = (ms?: number) => ms === undefined ? null : Math.round(ms);
  const left = (t: TimeLeft | undefined) => ({
    boottime: wholeMs(t?.bootMs),
    wall: wholeMs(t?.wallMs),
  });
  const problems: string[] = [];
  if (!s.holder.ok) problems.push(s.holder.problem);
  if (!s.token.ok) problems.push(s.token.problem);
  if (s.clocks.bootProblem) problems.push(s.clocks.bootProblem);
  const missing = dirProblem(s.dir);
  if (missing) problems.push(`the state directory ${s.dir} ${missing}`);
  return {
    stateDir: s.dir,
    // null when absent or unreadable: the problem is in `problems`.
    holder: s.holder.ok ? s.holder.value ?? null : null,
    fencingToken: s.token.ok ? s.token.value ?? null : null,
    marker: {
      path: s.marker.path,
      verdict: v.kind,
      reason: v.kind === "OK" ? null : v.reason,
      ageMs: wholeMs(s.marker.ageMs),
      content: s.marker.content ?? null,
    },
    gateClosesInMs: left(s.gateCloses),
    leaseDeadlineInMs: left(s.leaseDeadline),
    deadlines: d
      ? {
        gateClosesBoottimeMs: d.gateClosesBootMs,
        leaseDeadlineBoottimeMs: d.leaseDeadlineBootMs,
        gateClosesWallMs: d.gateClosesWallMs ?? null,
        leaseDeadlineWallMs: d.leaseDeadlineWallMs ?? null,
      }
      : null,
    clocks: {
      boottimeMs: wholeMs(s.clocks.bootMs),
      wallMs: s.clocks.wallMs,
    },
    problems,
  };
}

const RUN_TOP = /^berth-run-([0-9]+)-[0-9a-f]+$/;

/**
 * The state directories of the `run`s in `tmp`, `<top>/<NAMESPACE>.<NAME>`,
 * by pid. A top directory counts only when it is a directory (not a link) of
 * mode 0700 owned by this user (as root: anyone's): any other may be
 * another user's decoy. A pid that is gone is only a hint, and one that is
 * there no proof: the marker's verdict is what to trust.
 */
function runDirs(tmp: string, maxAgeMs: number) {
  const me = Deno.uid();
  const list = (dir: string) => {
    try {
      return [...Deno.readDirSync(dir)];
    } catch {
      return [];
    }
  };
  const out = [];
  for (const top of list(tmp)) {
    const pid = Number(RUN_TOP.exec(top.name)?.[1]);
    const path = `${tmp}/${top.name}`;
    let info: Deno.FileInfo | undefined;
    try {
      info = pid ? Deno.lstatSync(path) : undefined;
    } catch {
      // Gone since the listing.
    }
    if (
      !info?.isDirectory || (info.mode! & 0o7777) !== 0o700 ||
      (me !== 0 && info.uid !== me)
    ) continue;
    const gone = dirProblem(`/proc/${pid}`) === "does not exist";
    for (const lease of list(path)) {
      if (!lease.isDirectory || !/^[a-z0-9-]{1,63}\./.test(lease.name)) {
        continue;
      }
      const snapshot = readSnapshot(`${path}/${lease.name}`, { maxAgeMs });
      out.push({ run: { pid, uid: info.uid!, gone }, snapshot });
    }
  }
  return out.sort((a, b) => a.run.pid - b.run.pid);
}

/** `berth-acquire status`: see the usage text. Returns the exit code. */
export function main(args: string[]): number {
  let json: boolean;
  let dir: string | undefined;
  let maxAgeMs: number;
  try {
    const argv = parseArgv(args, {
      flags: {
        json: { kind: "boolean" },
        runs: { kind: "boolean" },
        "max-age": { kind: "value", wants: "a duration such as 30s" },
        help: { kind: "boolean", short: "h" },
      },
      positionals: 1,
      positionalHint: "status takes one state directory",
      dashDash: "positionals",
    });
    const help = isSet(argv, "help");
    json = isSet(argv, "json");
    if (help) {
      console.log(USAGE);
      return 0;
    }
    maxAgeMs = parseDurationMs(
      lastValue(argv, "max-age") ?? WEBHOOK_PROBE_MAX_AGE,
      "--max-age",
      { negative: "zero" },
    );
    dir = argv.positionals[0];
    if (dir === "") throw new Error("the state directory is empty");
    if (!isSet(argv, "runs")) {
      // Nothing configured and no /berth: the runs' own.
      dir ??= Deno.env.get("BERTH_STATE_DIR") ||
        (dirProblem(DEFAULT_STATE_DIR) === "does not exist"
          ? undefined
          : DEFAULT_STATE_DIR);
    } else if (dir !== undefined) {
      throw new Error("--runs lists the runs' own: give it no STATE_DIR");
    }
  } catch (e) {
    console.error(usageLine("status", (e as Error).message));
    return EXIT_USAGE;
  }
  if (dir !== undefined) {
    const snapshot = readSnapshot(dir, { maxAgeMs });
    if (json) console.log(JSON.stringify(statusJson(snapshot)));
    else console.log(formatStatusText(snapshot).trimEnd());
    return snapshot.marker.verdict.kind === "OK" ? 0 : 1;
  }
  const tmp = Deno.env.get("TMPDIR") || "/tmp";
  const runs = runDirs(tmp, maxAgeMs);
  const root = Deno.uid() === 0;
  if (json) {
    console.log(JSON.stringify({
      runsIn: tmp,
      runs: runs.map((r) => ({ run: r.run, ...statusJson(r.snapshot) })),
    }));
  } else {
    console.log(
      runs.map(({ run, snapshot }) =>
        `run              pid ${run.pid}${
          root ? `, owner uid ${run.uid}` : ""
        }${run.gone ? " (gone: the run that left this has exited)" : ""}\n${
          formatStatusText(snapshot)
        }`
      ).join("\n").trimEnd() ||
        `no run's state directory in ${tmp} (berth-run-<PID>-<RANDOM>, ${
          root ? "anyone's" : "this user's"
        })${
          dirProblem(DEFAULT_STATE_DIR) === "does not exist"
            ? `, and no state directory given (${DEFAULT_STATE_DIR} does not exist)`
            : ""
        }`,
    );
  }
  const ok = runs.every((r) => r.snapshot.marker.verdict.kind === "OK");
  return runs.length > 0 && ok ? 0 : 1;
}
