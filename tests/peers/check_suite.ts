/**
 * Part (c) of the peer tier: `check` on marker states through both helpers.
 * Each state is prepared afresh right before each helper runs (so a marker's
 * age is the same for both), then the exit codes and the verdict lines are
 * compared. The age in a `stale` line is replaced by `<age>`: the two
 * helpers start at different speeds, so the age they see differs by a
 * fraction of a second.
 *
 * @module
 */
import { formatMarker } from "../../lib/state/marker.ts";
import { bootNowMs, tempDir } from "../support/lease_env.ts";
import { type HelperKind, runHelper } from "./helpers.ts";

/** One marker state and how `check` is asked about it. */
export interface MarkerState {
  /** What it is, the test step's name. */
  name: string;
  /**
   * Prepares the state in `dir` (called right before each helper runs) and
   * returns the arguments after `check` (`{{dir}}` is replaced by `dir`).
   */
  setup: (dir: string) => Promise<void> | void;
  /** Arguments after `check`. */
  args: string[];
  /** Environment of `check` (`{{dir}}` is replaced). */
  env?: Record<string, string>;
  /** A documented difference this state may show. */
  allowed?: string;
}

const write = (path: string, text: string, ageSeconds = 0) => {
  Deno.writeTextFileSync(path, text);
  const t = (Date.now() - ageSeconds * 1000) / 1000;
  Deno.utimeSync(path, t, t);
};
const goMarker = (ageSeconds = 0) => (dir: string) =>
  write(`${dir}/healthy`, "ok\n", ageSeconds);
const ourMarker = (gateInMs: number, ageSeconds = 0) => (dir: string) => {
  const boot = bootNowMs(), wall = Date.now();
  write(
    `${dir}/healthy`,
    formatMarker({
      gateClosesBootMs: boot + gateInMs,
      leaseDeadlineBootMs: boot + gateInMs + 4_000,
      gateClosesWallMs: wall + gateInMs,
      leaseDeadlineWallMs: wall + gateInMs + 4_000,
    }),
    ageSeconds,
  );
};
const nothing = () => {};
const M = "{{dir}}/healthy";

const STRICTER =
  "this probe also fails at the deadline written in its own marker, and fails closed on content that claims to be its own but is malformed";
const HARDENED =
  "this probe does not follow symlinks and does not take a directory or an oversized file for a marker (helper contract, State directory)";
const USAGE_ON_STDOUT =
  "a usage error is explained on stdout, where the kubelet shows it; the Go helper logs it on stderr only (both exit 1)";
const OS_ERROR_TEXT =
  "the detail of an indeterminate verdict is the runtime's own error text";

/** Every marker state. */
export const STATES: readonly MarkerState[] = [
  { name: "absent", setup: nothing, args: [M] },
  {
    name: "absent, --max-age 30s",
    setup: nothing,
    args: [M, "--max-age", "30s"],
  },
  { name: "fresh", setup: goMarker(), args: [M] },
  {
    name: "fresh, --max-age 30s",
    setup: goMarker(),
    args: [M, "--max-age", "30s"],
  },
  {
    name: "fresh, --max-age=30s",
    setup: goMarker(),
    args: [M, "--max-age=30s"],
  },
  {
    name: "flags before the path",
    setup: goMarker(),
    args: ["--max-age", "30s", M],
  },
  {
    name: "stale, --max-age 30s",
    setup: goMarker(60),
    args: [M, "--max-age", "30s"],
  },
  { name: "stale, no --max-age", setup: goMarker(600), args: [M] },
  {
    name: "stale, --max-age 0",
    setup: goMarker(600),
    args: [M, "--max-age", "0"],
  },
  {
    name: "stale, --max-age 0s",
    setup: goMarker(600),
    args: [M, "--max-age", "0s"],
  },
  {
    name: "stale, --max-age -1s",
    setup: goMarker(600),
    args: [M, "--max-age", "-1s"],
  },
  {
    name: "fresh, --max-age -5m",
    setup: goMarker(),
    args: [M, "--max-age", "-5m"],
  },
  {
    name: "two seconds inside the limit",
    setup: goMarker(28),
    args: [M, "--max-age", "30s"],
  },
  {
    name: "two seconds past the limit",
    setup: goMarker(32),
    args: [M, "--max-age", "30s"],
  },
  {
    name: "exactly at the limit",
    setup: goMarker(30),
    args: [M, "--max-age", "30s"],
  },
  {
    name: "stale, --max-age 1m30s",
    setup: goMarker(120),
    args: [M, "--max-age", "1m30s"],
  },
  {
    name: "stale, --max-age 1.5s",
    setup: goMarker(5),
    args: [M, "--max-age", "1.5s"],
  },
  {
    name: "stale, --max-age 300ms",
    setup: goMarker(3),
    args: [M, "--max-age", "300ms"],
  },
  {
    name: "fresh, --max-age 1h0m0s",
    setup: goMarker(5),
    args: [M, "--max-age", "1h0m0s"],
  },
  {
    name: "a --max-age without a unit",
    setup: goMarker(),
    args: [M, "--max-age", "30"],
    allowed: USAGE_ON_STDOUT,
  },
  {
    name: "an empty file",
    setup: (d) => write(`${d}/healthy`, ""),
    args: [M, "--max-age", "30s"],
  },
  {
    name: "a directory named healthy",
    setup: (d) => Deno.mkdirSync(`${d}/healthy`, { recursive: true }),
    args: [M, "--max-age", "30s"],
    allowed: HARDENED,
  },
  {
    name: "a symlink to a fresh marker",
    setup: (d) => {
      write(`${d}/real`, "ok\n");
      Deno.symlinkSync(`${d}/real`, `${d}/healthy`);
    },
    args: [M, "--max-age", "30s"],
    allowed: HARDENED,
  },
  {
    name: "a dangling symlink",
    setup: (d) => Deno.symlinkSync(`${d}/nowhere`, `${d}/healthy`),
    args: [M, "--max-age", "30s"],
    allowed: HARDENED,
  },
  {
    name: "an unreadable file (mode 000)",
    setup: (d) => {
      goMarker()(d);
      Deno.chmodSync(`${d}/healthy`, 0o000);
    },
    args: [M, "--max-age", "30s"],
  },
  {
    name: "an oversized file (1 MiB)",
    setup: (d) => write(`${d}/healthy`, "x".repeat(1 << 20)),
    args: [M, "--max-age", "30s"],
    allowed: HARDENED,
  },
  {
    name: "a path through a regular file",
    setup: (d) => write(`${d}/file`, "x"),
    args: ["{{dir}}/file/healthy", "--max-age", "30s"],
    allowed: OS_ERROR_TEXT,
  },
  {
    name: "a marker in a missing directory",
    setup: nothing,
    args: ["{{dir}}/gone/healthy"],
  },
  {
    name: "this helper's marker, deadline ahead",
    setup: ourMarker(60_000),
    args: [M, "--max-age", "30s"],
  },
  {
    name: "this helper's marker, deadline passed",
    setup: ourMarker(-5_000),
    args: [M, "--max-age", "30s"],
    allowed: STRICTER,
  },
  {
    name: "this helper's header without deadlines (startup-gate)",
    setup: (d) => write(`${d}/healthy`, formatMarker(undefined)),
    args: [M, "--max-age", "30s"],
  },
  {
    name: "this helper's header with malformed fields",
    setup: (d) =>
      write(
        `${d}/healthy`,
        "berth-acquire health marker v1\ngate_closes_boottime_ms=soon\n",
      ),
    args: [M, "--max-age", "30s"],
    allowed: STRICTER,
  },
  {
    name: "an empty path with BERTH_STATE_DIR and a marker",
    setup: goMarker(),
    args: ["", "--max-age", "30s"],
    env: { BERTH_STATE_DIR: "{{dir}}" },
  },
  {
    name: "an empty path with BERTH_STATE_DIR and no marker",
    setup: nothing,
    args: ["", "--max-age", "30s"],
    env: { BERTH_STATE_DIR: "{{dir}}" },
  },
  {
    name: "no path, BERTH_STATE_DIR",
    setup: goMarker(60),
    args: ["--max-age", "30s"],
    env: { BERTH_STATE_DIR: "{{dir}}" },
  },
  {
    name: "no path, --state-dir",
    setup: goMarker(),
    args: ["--state-dir", "{{dir}}", "--max-age", "30s"],
  },
  {
    name: "another role's flag (--lease-name)",
    setup: goMarker(),
    args: [M, "--lease-name", "x", "--max-age", "30s"],
  },
  {
    name: "another role's flag (--ttl-seconds=30)",
    setup: goMarker(),
    args: [M, "--ttl-seconds=30"],
  },
  {
    name: "two paths",
    setup: goMarker(),
    args: [M, M],
    allowed: USAGE_ON_STDOUT,
  },
];

/** What `check` did. */
interface Verdict {
  code: number;
  line: string;
}

async function judge(
  kind: HelperKind,
  state: MarkerState,
  dir: string,
): Promise<Verdict> {
  for (const e of Deno.readDirSync(dir)) {
    const p = `${dir}/${e.name}`;
    try {
      Deno.chmodSync(p, 0o755);
    } catch { /* a dangling symlink */ }
    Deno.removeSync(p, { recursive: true });
  }
  await state.setup(dir);
  const sub = (s: string) => s.replaceAll("{{dir}}", dir);
  const env = Object.fromEntries(
    Object.entries(state.env ?? {}).map(([k, v]) => [k, sub(v)]),
  );
  const r = await runHelper(kind, ["check", ...state.args.map(sub)], env);
  const line = (r.stdout.split("\n")[0] ?? "").replaceAll(dir, "{{dir}}")
    .replace(/not refreshed for [^ ]+ /, "not refreshed for <age> ");
  return { code: r.code, line };
}

/**
 * Registers the marker-state test.
 *
 * @param ignore Skip it (the tier cannot run here).
 */
export function registerCheckSuite(ignore: boolean): void {
  Deno.test({
    name:
      "peers: both helpers' check give the same verdict on each marker state",
    ignore,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async (t) => {
      const results: string[][] = new Array(STATES.length);
      let next = 0;
      await Promise.all(Array.from({ length: 4 }, async () => {
        while (next < STATES.length) {
          const i = next++;
          await using dir = await tempDir("berth-peer-check-");
          const go = await judge("go", STATES[i], dir.path);
          const ours = await judge("ours", STATES[i], dir.path);
          const diffs: string[] = [];
          if (go.code !== ours.code) {
            diffs.push(`exit code: go ${go.code}, ours ${ours.code}`);
          }
          if (go.line !== ours.line) {
            diffs.push(
              `verdict line: go ${JSON.stringify(go.line)}, ours ${
                JSON.stringify(ours.line)
              }`,
            );
          }
          results[i] = diffs;
        }
      }));
      let same = 0, differ = 0, allowed = 0;
      for (const [i, state] of STATES.entries()) {
        const diffs = results[i];
        await t.step(state.name, () => {
          if (diffs.length === 0) return;
          if (state.allowed) {
            console.log(
              `allowed difference (${state.allowed}):\n${diffs.join("\n")}`,
            );
            return;
          }
          throw new Error(`the helpers differ:\n${diffs.join("\n")}`);
        });
        if (diffs.length === 0) same++;
        else if (state.allowed) allowed++;
        else differ++;
      }
      console.log(
        `peer marker states: ${STATES.length} through check: ${same} same, ${differ} differ, ${allowed} allowed differences`,
      );
    },
  });
}
