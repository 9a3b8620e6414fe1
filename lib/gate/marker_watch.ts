/**
 * When `gate` stops a running command and how long the stop may take: a
 * watch of the verdict every interval and at the marker's gate deadline,
 * and a grace cut so that the command is gone before the lease deadline.
 * The loop (gate_loop.ts) decides what a stop means.
 *
 * @module
 */
import type { ChildExit, ProcessGroup } from "./process_group.ts";
import type { Logger } from "../obs/log.ts";
import type { Clock } from "../state/clock.ts";
import type { MarkerDeadlines, Verdict } from "../state/marker.ts";
import type { StateDir } from "../state/state_dir.ts";

/** A stop that fails the verdict sends SIGKILL this long before the lease deadline at the latest, whatever `--grace`. */
export const LEASE_MARGIN_MS = 250;

/** Ms until the sooner of the two clocks' deadlines (negative once passed); throws when the boot clock cannot be read. */
function until(bootMs: number, wallMs: number | undefined, clock: Clock) {
  const left = bootMs - clock.bootNow();
  return wallMs === undefined ? left : Math.min(left, wallMs - Date.now());
}

/**
 * The grace a stop may give COMMAND so that it is gone
 * {@linkcode LEASE_MARGIN_MS} before the lease deadline (whole ms, never
 * below 0), or `undefined` when `--grace` ends in time.
 */
export function shortenedGraceMs(
  graceMs: number,
  leaseLeftMs: number,
): number | undefined {
  const left = leaseLeftMs - LEASE_MARGIN_MS;
  return left < graceMs ? Math.max(0, Math.floor(left)) : undefined;
}

type Timing = { graceMs: number; clock: Clock; logger: Logger };

/**
 * Stops `child` for `reason`, its grace cut (with a WARN) to end in time
 * for the lease deadline of `known`, the last marker that passed. Without
 * a boot clock that deadline is its wall-clock copy, or now when there is
 * none.
 */
export function stopInTime(
  child: ProcessGroup,
  reason: string,
  { graceMs, clock, logger }: Timing,
  known: MarkerDeadlines | undefined,
): void {
  if (child.stopReason !== undefined) return;
  let grace = graceMs;
  if (known !== undefined) {
    const wall = known.leaseDeadlineWallMs;
    let left: number;
    try {
      left = until(known.leaseDeadlineBootMs, wall, clock);
    } catch {
      left = wall === undefined ? 0 : wall - Date.now();
    }
    const shortened = shortenedGraceMs(graceMs, left);
    if (shortened !== undefined) {
      grace = shortened;
      logger.warn(
        "shortening the grace so that the command is gone before the lease deadline",
        { grace_ms: grace, configured_grace_ms: graceMs },
      );
    }
  }
  child.stop(reason, grace);
}

/** The marker's deadlines; `undefined` when it has none, or cannot be read (the next look decides). */
export function readDeadlines(state: StateDir): MarkerDeadlines | undefined {
  try {
    return state.readMarkerDeadlines();
  } catch {
    return undefined;
  }
}

/**
 * Watches a running COMMAND: looks at the verdict (`verdict`, which never
 * throws) every interval and at the marker's gate deadline (a timer
 * re-armed at every look), calls `stop` the moment it fails and `failed`
 * when a look cannot be completed, tells `seen` the deadlines of each
 * marker that passed, and returns the exit once its tree is gone.
 */
export async function watchCommand(
  child: ProcessGroup,
  intervalMs: number,
  h: {
    state: StateDir;
    clock: Clock;
    verdict: () => Verdict;
    stop: (reason: string) => void;
    seen: (d: MarkerDeadlines | undefined) => void;
    failed: (e: unknown) => void;
  },
): Promise<ChildExit> {
  let deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  const look = () => {
    if (child.stopReason !== undefined) return;
    try {
      const v = h.verdict();
      if (v.kind !== "OK") return h.stop(v.reason);
      clearTimeout(deadlineTimer);
      const d = readDeadlines(h.state);
      h.seen(d);
      const left = d && until(d.gateClosesBootMs, d.gateClosesWallMs, h.clock);
      if (left !== undefined && left < intervalMs) {
        // The boot clock ticks in 10 ms: look again just after the deadline.
        deadlineTimer = setTimeout(look, Math.max(0, left) + 10);
      }
    } catch (e) {
      h.failed(e);
    }
  };
  const every = setInterval(look, intervalMs);
  look();
  try {
    return await child.finished();
  } finally {
    clearInterval(every);
    clearTimeout(deadlineTimer);
  }
}
