/**
 * The health marker: the file whose presence and freshness tell the main
 * container's liveness probe that its pod holds the lease.
 *
 * The marker's mtime is what upstream's probe checks. This project also
 * writes, inside the marker, the moment the workload's permission to run
 * closes (`gate_closes_boottime_ms`) on the node's boot-time clock (which the
 * probe in the main container reads the same way, through `/proc/uptime`), so
 * the probe fails on time even when the sidecar is dead or wedged and nobody
 * removes the marker. The content can only make the verdict stricter: a marker
 * without it (for example one written by the Go helper) is judged by its mtime
 * alone.
 *
 * This module holds everything the probe needs, so that `check` loads it and
 * nothing else heavy: the content format and the verdict
 * ({@linkcode judgeMarker}, pure; {@linkcode examineMarker}, its I/O, through
 * the hardened small-file read of `nofollow.ts`).
 *
 * @module
 */
import { readBootMillis } from "./boot_clock.ts";
import { formatDurationMs } from "../config/duration.ts";
import {
  decodeSmallText,
  describeNonRegular,
  type FileKind,
  readSmallFileNoFollow,
  StateFileError,
} from "./nofollow.ts";

/**
 * The deadlines a marker carries. The boot-time clock is the one to trust (it
 * never jumps); the wall-clock copies guard against a boot clock that is not
 * shared after all (LXCFS gives each container its own `/proc/uptime`). The
 * probe fails when either has passed.
 */
export interface MarkerDeadlines {
  /** When the workload must be stopped (the lease deadline minus the enforcement lead), ms since boot. */
  gateClosesBootMs: number;
  /** The local lease deadline itself (last confirmed send + TTL), ms since boot. */
  leaseDeadlineBootMs: number;
  /** The same moment as `gateClosesBootMs` on the wall clock (ms since the epoch), when written. */
  gateClosesWallMs?: number;
  /** The same moment as `leaseDeadlineBootMs` on the wall clock, when written. */
  leaseDeadlineWallMs?: number;
}

const HEADER = "berth-acquire health marker v1";

/**
 * The marker's file content for `d`; small, line-oriented, readable with
 * `cat`. Without deadlines (startup-gate mode, where nobody renews and the
 * workload may run for good) it is the header alone.
 *
 * @param d The deadlines, or `undefined` for the header alone.
 * @returns The file's content.
 */
export function formatMarker(d: MarkerDeadlines | undefined): string {
  if (d === undefined) return `${HEADER}\n`;
  let out =
    `${HEADER}\ngate_closes_boottime_ms=${Math.floor(d.gateClosesBootMs)}\n` +
    `lease_deadline_boottime_ms=${Math.floor(d.leaseDeadlineBootMs)}\n`;
  if (d.gateClosesWallMs !== undefined) {
    out += `gate_closes_wall_ms=${Math.floor(d.gateClosesWallMs)}\n`;
  }
  if (d.leaseDeadlineWallMs !== undefined) {
    out += `lease_deadline_wall_ms=${Math.floor(d.leaseDeadlineWallMs)}\n`;
  }
  return out;
}

/**
 * Reads the deadlines back. Returns `undefined` for content that is not ours
 * (an empty marker, or one written by the Go helper) and for our header
 * without fields (startup-gate): such a marker is judged by its mtime only. Throws when the content claims to be ours but is
 * malformed, so the probe fails closed.
 *
 * @param text The file's content.
 * @returns The deadlines, or `undefined` for content that carries none.
 * @throws {Error} When content that claims to be ours is malformed.
 */
export function parseMarker(text: string): MarkerDeadlines | undefined {
  if (!text.startsWith(HEADER + "\n")) return undefined;
  const fields = new Map<string, string>();
  for (const line of text.slice(HEADER.length + 1).split("\n")) {
    if (line === "") continue;
    const eq = line.indexOf("=");
    if (eq <= 0) {
      throw new Error(`malformed marker line ${JSON.stringify(line)}`);
    }
    fields.set(line.slice(0, eq), line.slice(eq + 1));
  }
  if (fields.size === 0) return undefined;
  const num = (k: string): number => {
    const v = fields.get(k);
    if (v === undefined || !/^\d{1,16}$/.test(v)) {
      throw new Error(
        `marker field ${k} is missing or not a whole number of milliseconds`,
      );
    }
    return Number(v);
  };
  const d: MarkerDeadlines = {
    gateClosesBootMs: num("gate_closes_boottime_ms"),
    leaseDeadlineBootMs: num("lease_deadline_boottime_ms"),
  };
  if (fields.has("gate_closes_wall_ms")) {
    d.gateClosesWallMs = num("gate_closes_wall_ms");
  }
  if (fields.has("lease_deadline_wall_ms")) {
    d.leaseDeadlineWallMs = num("lease_deadline_wall_ms");
  }
  return d;
}

// ---------------------------------------------------------------------------
// The probe's verdict.

/** The largest marker the probe reads; ours is under 100 bytes. */
export const MARKER_MAX_BYTES = 4096;

/**
 * The four outcomes of the probe, kept apart because each means something
 * different to the operator reading the pod's events: `Absent` is an expected
 * failover (the sidecar removed the marker), `Stale` is an incident (nobody
 * refreshed it), `Indeterminate` means the marker could not be examined (the
 * probe fails closed).
 */
export type VerdictKind = "OK" | "Absent" | "Stale" | "Indeterminate";

/** A verdict and, unless it is `OK`, the one line the probe prints. */
export type Verdict =
  | { kind: "OK" }
  | { kind: Exclude<VerdictKind, "OK">; reason: string };

/** The lstat-like facts about the marker that {@linkcode judgeMarker} needs. */
export interface MarkerStat extends FileKind {
  /** Last modification time; `null` where the platform cannot say (judged Indeterminate). */
  mtime: Date | null;
}

/** What examining the marker found: the input of {@linkcode judgeMarker}. */
export interface MarkerObservation {
  /** The lstat-like result for the path, or why it could not be examined (`NotFound`: absent). */
  stat: MarkerStat | Error;
  /** The content of a regular file; `null` when it was not read (not a regular file). */
  content: string | null;
}

/** The clocks and the limit {@linkcode judgeMarker} judges by. */
export interface JudgeOptions {
  /** The marker path, as printed in the reason line. */
  path: string;
  /** The wall clock now, ms since the epoch (the same kernel clock that stamped the mtime). */
  wallNowMs: number;
  /** The boot-time clock in ms; called only when the marker carries a deadline. May throw. */
  bootNowMs: () => number;
  /** The largest accepted age in ms; 0 means presence only (no mtime limit). */
  maxAgeMs: number;
}

/**
 * An age as reason lines show it (the probe's and `/healthz`'s): from one
 * second on, rounded to the nearest whole second as the Go helper rounds it
 * (`16.4s` and `15.6s` both print as `16s`, `16.5s` as `17s`), so that the
 * probe's own start-up time rarely changes the line; below a second the
 * whole milliseconds, so that a short limit never prints a misleading `0s`.
 * Given the limit the age is over, an age that would round down to it or
 * below is shown rounded up to 100 ms instead (`15.1s (limit 15s)`, never
 * `15s (limit 15s)`: an age equal to the limit passes).
 *
 * @param ms The age in milliseconds; negative counts as 0.
 * @param overLimitMs The limit `ms` exceeds, when it is one.
 * @returns Go duration syntax, e.g. `16s` or `2m30s`.
 */
export function shownMs(ms: number, overLimitMs?: number): string {
  const whole = Math.max(0, Math.floor(ms));
  if (whole < 1000) return formatDurationMs(whole);
  const rounded = Math.round(ms / 1000) * 1000;
  if (overLimitMs !== undefined && rounded <= overLimitMs) {
    return formatDurationMs(Math.ceil(ms / 100) * 100);
  }
  return formatDurationMs(rounded);
}

/**
 * Decides the probe's verdict from what was observed, with no I/O of its own
 * (the boot-time clock is a getter, read only when the marker carries a
 * deadline), so every case is testable without files or sleeping.
 *
 * The order of the checks: absent; cannot be examined or not a regular file
 * (Indeterminate); the mtime bound (Stale); malformed content that claims to
 * be ours (Indeterminate); the permission's closing time in the content, on
 * the boot-time clock and then, when the marker has it, on the wall clock
 * (Stale). The
 * content can only make the verdict stricter: content that is not ours is
 * judged by the mtime alone. When the mtime bound already fails, the verdict
 * reports only that (the line upstream printed) and the boot-time clock is
 * not read. The deadline applies with or without `--max-age`. Age equal to
 * the limit passes, and so does the boot clock equal to the deadline; a
 * marker with an mtime in the future counts as fresh.
 *
 * @param obs What examining the marker found.
 * @param opts The path and the clocks.
 * @returns The verdict and its reason line.
 */
export function judgeMarker(
  obs: MarkerObservation,
  opts: JudgeOptions,
): Verdict {
  const { path } = opts;
  const indeterminate = (detail: string): Verdict => ({
    kind: "Indeterminate",
    reason: `health marker indeterminate: ${path}: ${detail}`,
  });
  const stat = obs.stat;
  if (stat instanceof Error) {
    if (stat instanceof Deno.errors.NotFound) {
      return { kind: "Absent", reason: `health marker absent: ${path}` };
    }
    return indeterminate(
      stat instanceof StateFileError && stat.path === path
        ? stat.detail
        : stat.message,
    );
  }
  if (stat.isDirectory && !/(^|\/)healthy\/*$/.test(path)) {
    // A natural slip (status takes the directory, check the file): name
    // the file that was likely meant, and never advise removing anything.
    return indeterminate(
      `is a directory, not the health marker file: did you mean ${
        path.replace(/\/+$/, "")
      }/healthy?`,
    );
  }
  if (!stat.isFile || stat.isSymlink || stat.isDirectory) {
    return indeterminate(describeNonRegular(stat));
  }
  if (stat.mtime === null) {
    return indeterminate("the file system reports no modification time");
  }
  if (opts.maxAgeMs > 0) {
    const age = opts.wallNowMs - stat.mtime.getTime();
    if (age > opts.maxAgeMs) {
      return {
        kind: "Stale",
        reason: `health marker stale: ${path} not refreshed for ${
          shownMs(age, opts.maxAgeMs)
        } (limit ${
          formatDurationMs(opts.maxAgeMs)
        }); the lease sidecar is not renewing`,
      };
    }
  }
  if (obs.content === null) {
    return indeterminate("its content was not read");
  }
  let deadlines: MarkerDeadlines | undefined;
  try {
    deadlines = parseMarker(obs.content);
  } catch (e) {
    return indeterminate(
      `${(e as Error).message} (the content claims to be berth-acquire's ` +
        "but is malformed; remove the file and let the lease sidecar rewrite it)",
    );
  }
  if (deadlines === undefined) return { kind: "OK" };
  const stale = (late: number, field: string): Verdict => ({
    kind: "Stale",
    reason: `health marker stale: ${path} gate deadline passed ${
      shownMs(late)
    } ago (${field} in the marker); the lease sidecar has not confirmed the lease or cannot write the marker (its log says which)`,
  });
  let boot: number;
  try {
    boot = opts.bootNowMs();
  } catch (e) {
    return indeterminate((e as Error).message);
  }
  const late = boot - deadlines.gateClosesBootMs;
  if (late > 0) return stale(late, "gate_closes_boottime_ms");
  if (deadlines.gateClosesWallMs !== undefined) {
    const lateWall = opts.wallNowMs - deadlines.gateClosesWallMs;
    // The two copies of one moment differ by the clocks' read skew and
    // /proc/uptime's 10 ms steps: only a second or more left on the boot
    // clock means the two clocks disagree.
    if (lateWall > 0 && -late < CLOCKS_AGREE_MS) {
      return stale(lateWall, "gate_closes_wall_ms");
    }
    if (lateWall > 0) {
      // Passed on the wall clock only: say so, and what can do that.
      return {
        kind: "Stale",
        reason: `health marker stale: ${path} gate deadline passed ${
          shownMs(lateWall)
        } ago on the wall clock (gate_closes_wall_ms in the marker) with ${
          shownMs(-late)
        } left on the boot-time clock: either this container's boot-time clock is not the sidecar's (LXCFS) and the sidecar has not confirmed the lease (its log says why), or this node's wall clock stepped forward (the next renewal writes a new marker)`,
      };
    }
  }
  return { kind: "OK" };
}

/**
 * Time left on the boot-time clock below which a wall-clock deadline that
 * passed is the same moment seen a little early, not a disagreement.
 */
const CLOCKS_AGREE_MS = 1000;

/** Options for {@linkcode examineMarker}; the defaults are the real clocks. */
export interface ExamineOptions {
  /** The largest accepted age in ms; 0 means presence only. */
  maxAgeMs: number;
  /** The wall clock in ms since the epoch; default `Date.now`. */
  wallNowMs?: () => number;
  /** The boot-time clock in ms; default `readBootMillis` (lib/state/boot_clock.ts). */
  bootNowMs?: () => number;
}

/**
 * The probe's I/O: examines the marker at `path` (without following
 * symlinks, reading at most {@linkcode MARKER_MAX_BYTES}) and hands what it
 * found to {@linkcode judgeMarker}. Never throws: whatever goes wrong is an
 * `Indeterminate` verdict, because a probe must fail closed.
 *
 * @param path The marker's path.
 * @param opts The age limit and, for tests, the clocks.
 * @returns The verdict; never throws.
 */
export function examineMarker(path: string, opts: ExamineOptions): Verdict {
  let obs: MarkerObservation;
  try {
    const r = readSmallFileNoFollow(path, MARKER_MAX_BYTES, "health marker");
    if (r.kind === "absent") {
      obs = { stat: new Deno.errors.NotFound(path), content: null };
    } else if (r.kind === "not-regular") {
      obs = { stat: r.info, content: null };
    } else {
      obs = { stat: r.info, content: decodeSmallText(r.bytes) };
    }
  } catch (e) {
    obs = {
      stat: e instanceof Error ? e : new Error(String(e)),
      content: null,
    };
  }
  return judgeMarker(obs, {
    path,
    wallNowMs: (opts.wallNowMs ?? Date.now)(),
    bootNowMs: opts.bootNowMs ?? (() => readBootMillis()),
    maxAgeMs: opts.maxAgeMs,
  });
}
