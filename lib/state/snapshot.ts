/**
 * The state volume as `status` shows it, read as the probe and the sidecar
 * read it. Every figure comes from one reading of the clocks, so the verdict
 * and the times left never disagree.
 *
 * @module
 */
import {
  HEADER,
  judgeMarker,
  type MarkerDeadlines,
  observeMarker,
  parseMarker,
  readBootMillis,
  type Verdict,
} from "./marker.ts";
import { StateDir } from "./state_dir.ts";

/** A value read from the state volume, or why it could not be read. */
export type Read<T> =
  | { ok: true; value: T | undefined }
  | { ok: false; problem: string };

/** The marker, its verdict, its age (from its mtime), what it holds, and its deadlines when it has them. */
export interface MarkerSnapshot {
  path: string;
  verdict: Verdict;
  ageMs?: number;
  /** Ours with deadlines, ours malformed, ours without (startup-gate), the Go helper's (`ok`), empty, or anything else. */
  content?:
    | "deadlines"
    | "malformed"
    | "no-deadlines"
    | "go-helper"
    | "empty"
    | "unrecognised";
  deadlines?: MarkerDeadlines;
}

/** Ms until a deadline on each clock, negative once passed; `bootMs` unknown when that clock is unreadable. */
export interface TimeLeft {
  bootMs?: number;
  wallMs?: number;
}

/** Everything `status` shows; `gateCloses` (when the permission closes) and `leaseDeadline` when the marker has deadlines. */
export interface StateSnapshot {
  dir: string;
  holder: Read<string>;
  token: Read<number>;
  marker: MarkerSnapshot;
  clocks: { wallMs: number; bootMs?: number; bootProblem?: string };
  gateCloses?: TimeLeft;
  leaseDeadline?: TimeLeft;
}

function read<T>(f: () => T | undefined): Read<T> {
  try {
    return { ok: true, value: f() };
  } catch (e) {
    return { ok: false, problem: (e as Error).message };
  }
}

/**
 * The snapshot of `dir` at `clocks` (default: now), the marker judged with
 * the probe's `maxAgeMs`; never throws.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir(); // `/berth` in a pod; nothing written yet
 * const s = readSnapshot(dir, { maxAgeMs: 30_000 });
 * assert.equal(s.marker.verdict.kind, "Absent");
 * assert.deepEqual(s.token, { ok: true, value: undefined });
 * await Deno.remove(dir);
 * ```
 */
export function readSnapshot(
  dir: string,
  opts: { maxAgeMs: number; clocks?: StateSnapshot["clocks"] },
): StateSnapshot {
  const state = new StateDir(dir);
  let clocks = opts.clocks;
  if (!clocks) {
    clocks = { wallMs: Date.now() };
    try {
      clocks.bootMs = readBootMillis();
    } catch (e) {
      clocks.bootProblem = (e as Error).message;
    }
  }
  const { bootMs, bootProblem, wallMs } = clocks;
  const path = state.markerPath;
  const obs = observeMarker(path);
  const verdict = judgeMarker(obs, {
    path,
    wallNowMs: wallMs,
    bootNowMs: () => {
      if (bootMs === undefined) throw new Error(bootProblem);
      return bootMs;
    },
    maxAgeMs: opts.maxAgeMs,
  });
  const marker: MarkerSnapshot = { path, verdict };
  if (verdict.kind !== "Absent") {
    try {
      const mtime = Deno.lstatSync(path).mtime;
      if (mtime) marker.ageMs = wallMs - mtime.getTime();
    } catch {
      // Removed since: the age is unknown.
    }
    const text = obs.content;
    if (text !== null) {
      try {
        marker.deadlines = parseMarker(text);
        marker.content = marker.deadlines
          ? "deadlines"
          : text.startsWith(HEADER + "\n")
          ? "no-deadlines"
          : text === "ok\n"
          ? "go-helper"
          : text === ""
          ? "empty"
          : "unrecognised";
      } catch {
        // The verdict (Indeterminate) says what is wrong with it.
        marker.content = "malformed";
      }
    }
  }
  const d = marker.deadlines;
  const left = (boot: number, wall?: number): TimeLeft => ({
    bootMs: bootMs === undefined ? undefined : boot - bootMs,
    wallMs: wall === undefined ? undefined : wall - wallMs,
  });
  return {
    dir,
    holder: read(() => state.readHolder()),
    token: read(() => state.readToken()),
    marker,
    clocks,
    ...d && {
      gateCloses: left(d.gateClosesBootMs, d.gateClosesWallMs),
      leaseDeadline: left(d.leaseDeadlineBootMs, d.leaseDeadlineWallMs),
    },
  };
}
