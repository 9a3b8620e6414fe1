/**
 * A read-only picture of the state volume at one moment: who holds the
 * lease, with which token, what the probe would say about the marker, and
 * how long the workload stays permitted to run and the lease runs, on both
 * clocks the marker carries. It exists for the operator's `status` view, so
 * that what an operator reads is computed the way the probe and the sidecar
 * compute it: the verdict is the probe's own ({@linkcode examineMarker}), the
 * files are read through {@linkcode StateDir}'s hardened reads, and nothing is
 * written.
 *
 * The clocks are read once and every figure is computed from that one
 * reading, so the verdict and the times left never disagree.
 *
 * @module
 */
import { readBootMillis } from "./boot_clock.ts";
import { examineMarker, type MarkerDeadlines, type Verdict } from "./marker.ts";
import { StateDir } from "./state_dir.ts";

/** A value read from the state volume, or why it could not be read. */
export type Read<T> =
  | { ok: true; value: T | undefined }
  | { ok: false; problem: string };

/** The marker as {@linkcode readSnapshot} found it. */
export interface MarkerSnapshot {
  /** Its path. */
  path: string;
  /** The probe's verdict for it, with the same `maxAgeMs`. */
  verdict: Verdict;
  /** How long ago it was last written (its mtime), when it exists. */
  ageMs?: number;
  /** The deadlines written into it; undefined when it carries none or is absent. */
  deadlines?: MarkerDeadlines;
}

/** Milliseconds from now until a deadline on each clock; negative once passed. */
export interface TimeLeft {
  /** On the boot-time clock; undefined when the clock could not be read. */
  bootMs?: number;
  /** On the wall clock; undefined when the marker has no wall-clock copy. */
  wallMs?: number;
}

/** Everything the status view shows. */
export interface StateSnapshot {
  /** The state directory. */
  dir: string;
  /** The holder the lease was acquired for. */
  holder: Read<string>;
  /** The fencing token handed to the workload. */
  token: Read<number>;
  /** The health marker. */
  marker: MarkerSnapshot;
  /** The clocks as read for this snapshot. */
  clocks: { wallMs: number; bootMs?: number; bootProblem?: string };
  /** Until the permission closes (the workload must be stopped; `status` says "gate closes"); undefined without deadlines. */
  gateCloses?: TimeLeft;
  /** Until the local lease deadline; undefined without deadlines. */
  leaseDeadline?: TimeLeft;
}

/** Options of {@linkcode readSnapshot}; the clocks default to the real ones. */
export interface SnapshotOptions {
  /** The largest accepted marker age in ms (the probe's `--max-age`); 0: presence only. */
  maxAgeMs: number;
  /** The wall clock in ms since the epoch; default `Date.now`. */
  wallNowMs?: () => number;
  /** The boot-time clock in ms; default `readBootMillis`. May throw. */
  bootNowMs?: () => number;
}

function read<T>(f: () => T | undefined): Read<T> {
  try {
    return { ok: true, value: f() };
  } catch (e) {
    return { ok: false, problem: (e as Error).message };
  }
}

/** How long until `boot` / `wall`, from the clocks read for the snapshot. */
function timeLeft(
  boot: number,
  wall: number | undefined,
  clocks: StateSnapshot["clocks"],
): TimeLeft {
  return {
    bootMs: clocks.bootMs === undefined ? undefined : boot - clocks.bootMs,
    wallMs: wall === undefined ? undefined : wall - clocks.wallMs,
  };
}

/**
 * Reads the state directory without changing anything in it.
 *
 * @param dir The state directory (`/berth` in a pod).
 * @param opts The probe's age limit and, for tests, the clocks.
 * @returns The snapshot; never throws: what cannot be read is a `problem`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir(); // `/berth` in a pod; nothing written yet
 * const s = readSnapshot(dir, { maxAgeMs: 30_000 });
 * const verdict = s.marker.verdict;
 * assert.ok(verdict.kind === "Absent");
 * assert.match(verdict.reason, /marker/); // the line the probe prints
 * assert.deepEqual(s.token, { ok: true, value: undefined });
 * await Deno.remove(dir);
 * ```
 */
export function readSnapshot(
  dir: string,
  opts: SnapshotOptions,
): StateSnapshot {
  const state = new StateDir(dir);
  const wallMs = (opts.wallNowMs ?? Date.now)();
  const clocks: StateSnapshot["clocks"] = { wallMs };
  try {
    clocks.bootMs = (opts.bootNowMs ?? (() => readBootMillis()))();
  } catch (e) {
    clocks.bootProblem = (e as Error).message;
  }
  const path = state.markerPath;
  const verdict = examineMarker(path, {
    maxAgeMs: opts.maxAgeMs,
    wallNowMs: () => wallMs,
    bootNowMs: () => {
      if (clocks.bootMs === undefined) throw new Error(clocks.bootProblem);
      return clocks.bootMs;
    },
  });
  const marker: MarkerSnapshot = { path, verdict };
  if (verdict.kind !== "Absent") {
    try {
      const mtime = Deno.lstatSync(path).mtime;
      if (mtime) marker.ageMs = wallMs - mtime.getTime();
    } catch {
      // Removed since the verdict: the verdict stands, the age is unknown.
    }
    try {
      marker.deadlines = state.readMarkerDeadlines();
    } catch {
      // Unreadable or malformed: the verdict (Indeterminate) already says so.
    }
  }
  const snapshot: StateSnapshot = {
    dir,
    holder: read(() => state.readHolder()),
    token: read(() => state.readToken()),
    marker,
    clocks,
  };
  const d = marker.deadlines;
  if (d) {
    snapshot.gateCloses = timeLeft(
      d.gateClosesBootMs,
      d.gateClosesWallMs,
      clocks,
    );
    snapshot.leaseDeadline = timeLeft(
      d.leaseDeadlineBootMs,
      d.leaseDeadlineWallMs,
      clocks,
    );
  }
  return snapshot;
}
