/**
 * When `gate` stops a running command and how long the stop may take: a
 * watch of the verdict every interval and at the marker's gate deadline,
 * and the arithmetic that ends the command before the lease deadline,
 * whatever its grace. The loop (gate_loop.ts) decides what a stop means.
 *
 * @module
 */
import { formatDurationMs } from "../config/duration.ts";
import type { ChildExit, ProcessGroup } from "./process_group.ts";
import type { Logger } from "../obs/log.ts";
import type { Clock } from "../state/clock.ts";
import type { MarkerDeadlines, Verdict } from "../state/marker.ts";
import type { StateDir } from "../state/state_dir.ts";

/**
 * How long before the lease deadline COMMAND must be gone: a stop that
 * fails the verdict sends SIGKILL by then at the latest, whatever `--grace`.
 */
export const LEASE_MARGIN_MS = 250;

/**
 * Ms until the lease deadline of `d` on the sooner of its two clocks
 * (negative once passed); 0 when the boot clock cannot be read and no
 * wall-clock copy is written.
 */
export function untilLeaseDeadline(d: MarkerDeadlines, clock: Clock): number {
  let left = Infinity;
  try {
    left = d.leaseDeadlineBootMs - clock.bootNow();
  } catch {
    if (d.leaseDeadlineWallMs === undefined) return 0;
  }
  if (d.leaseDeadlineWallMs !== undefined) {
    left = Math.min(left, d.leaseDeadlineWallMs - Date.now());
  }
  return left;
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

/** Ms until the gate deadline of `d`, on the sooner of its two clocks; throws when the boot clock cannot be read. */
function untilGateCloses(d: MarkerDeadlines, clock: Clock): number {
  let left = d.gateClosesBootMs - clock.bootNow();
  if (d.gateClosesWallMs !== undefined) {
    left = Math.min(left, d.gateClosesWallMs - Date.now());
  }
  return left;
}

/** The marker's deadlines; `undefined` when it has none, or cannot be read (the next look decides). */
export function readDeadlines(
  state: StateDir,
): MarkerDeadlines | undefined {
  try {
    return state.readMarkerDeadlines();
  } catch {
    return undefined;
  }
}

/** The settings {@linkcode warnLongGrace} checks against a marker's lead. */
export interface StopTiming {
  graceMs: number;
  intervalMs: number;
  logger: Logger;
}

/**
 * WARN when `--grace` plus `--interval` exceed the marker's lead (lease
 * deadline minus gate deadline): a stop noticed at the next look would then
 * have its grace cut short ({@linkcode shortenedGraceMs}).
 */
export function warnLongGrace(
  o: StopTiming,
  d: MarkerDeadlines | undefined,
): void {
  if (d === undefined) return;
  const leadMs = d.leaseDeadlineBootMs - d.gateClosesBootMs;
  if (o.graceMs + o.intervalMs <= leadMs) return;
  o.logger.warn(
    "--grace plus --interval exceed the marker's enforcement lead: a stopped command gets SIGKILL early, before the lease deadline; lower --grace or --interval, or raise the sidecar's BERTH_ENFORCE_LEAD_SECONDS",
    {
      grace: formatDurationMs(o.graceMs),
      interval: formatDurationMs(o.intervalMs),
      lead: formatDurationMs(leadMs),
    },
  );
}

/** What {@linkcode watchCommand} needs from the loop that started COMMAND. */
export interface WatchHooks {
  state: StateDir;
  clock: Clock;
  /** Never throws. */
  verdict: () => Verdict;
  /** Stops COMMAND for `reason`, keeping to the lease deadline. */
  stop: (reason: string) => void;
  /** Told the deadlines of each marker that passed. */
  seen: (d: MarkerDeadlines | undefined) => void;
  /** Told what a look that could not be completed threw; stops COMMAND. */
  failed: (e: unknown) => void;
}

/**
 * Watches a running COMMAND: looks at the verdict every interval and at the
 * marker's gate deadline (a timer re-armed at every look), stops it the
 * moment the verdict fails or a look cannot be completed, and returns its
 * exit once its tree is gone.
 */
export async function watchCommand(
  child: ProcessGroup,
  intervalMs: number,
  h: WatchHooks,
): Promise<ChildExit> {
  const { state } = h;
  let deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  const look = () => {
    if (child.stopReason !== undefined) return;
    try {
      const v = h.verdict();
      if (v.kind !== "OK") {
        h.stop(v.reason);
        return;
      }
      clearTimeout(deadlineTimer);
      const d = readDeadlines(state);
      h.seen(d);
      const left = d === undefined ? undefined : untilGateCloses(d, h.clock);
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
