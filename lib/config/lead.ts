/**
 * The enforcement lead: how long before the local lease deadline the
 * workload's permission to run closes, so that the workload is already
 * stopped when the server may hand the lease to someone else. What it must be
 * depends on who stops the workload (the kubelet's liveness probe, or signals),
 * so each role passes the default it needs as a {@linkcode LeadDefault} instead
 * of the configuration guessing it; and a lead that leaves no room to renew is
 * refused at start-up.
 *
 * @module
 */
import { formatDurationMs } from "./duration.ts";
import type { EnforceMode } from "./modes.ts";

/**
 * The lead the probe enforcer needs by default, in seconds: the webhook's
 * liveness probe runs every 2 s with a 1 s timeout, and the kubelet then
 * allows 1 s of termination grace, so the workload is surely stopped 4 s
 * after its permission closes.
 */
const PROBE_ENFORCE_LEAD_SECONDS = 4;

/**
 * The margin added to the enforce grace for the signal enforcer's default
 * lead: SIGKILL goes out `grace` seconds after SIGTERM, and the process must
 * be gone before the server may hand the lease over.
 */
const SIGNAL_ENFORCE_LEAD_MARGIN_SECONDS = 1;

/**
 * The lead a signal sender needs on its own: SIGKILL goes out `grace`
 * seconds after SIGTERM, plus a margin.
 *
 * @param graceSeconds The SIGTERM -> SIGKILL grace.
 * @returns The lead in seconds.
 */
function signalLeadSeconds(graceSeconds: number): number {
  return graceSeconds + SIGNAL_ENFORCE_LEAD_MARGIN_SECONDS;
}

/**
 * The enforce lead used when none is configured, in seconds, so that the
 * permission closes early enough for the chosen enforcer to have stopped the
 * workload by the lease deadline. In signal mode it is never shorter than the
 * probe's lead: when the sidecar itself is dead nobody sends signals, and the
 * liveness probe, reading the deadline in the marker, is what stops the
 * workload.
 *
 * @param enforce The enforcer.
 * @param graceSeconds The SIGTERM -> SIGKILL grace.
 * @returns The lead in seconds.
 */
function defaultEnforceLeadSeconds(
  enforce: EnforceMode,
  graceSeconds: number,
): number {
  return enforce === "signal"
    ? Math.max(signalLeadSeconds(graceSeconds), PROBE_ENFORCE_LEAD_SECONDS)
    : PROBE_ENFORCE_LEAD_SECONDS;
}

/** The enforce lead a role uses when none is configured, and how its help text and messages state it. */
export interface LeadDefault {
  /**
   * The lead in seconds.
   *
   * @param enforce The configured enforcer.
   * @param graceSeconds The configured SIGTERM -> SIGKILL grace.
   */
  seconds(enforce: EnforceMode, graceSeconds: number): number;
  /** The rule in words, for the help text's `default:`. */
  text: string;
  /** Why, for the "no room to renew" message, given the enforcer. */
  why(enforce: EnforceMode): string;
}

/** The Kubernetes roles' default: what the configured enforcer needs. */
export const ENFORCER_LEAD_DEFAULT: LeadDefault = {
  seconds: defaultEnforceLeadSeconds,
  text:
    `probe: ${PROBE_ENFORCE_LEAD_SECONDS}; signal: the larger of enforce grace + ${SIGNAL_ENFORCE_LEAD_MARGIN_SECONDS} and ${PROBE_ENFORCE_LEAD_SECONDS}`,
  why: (enforce) =>
    `the ${enforce} default: ${
      enforce === "probe"
        ? "probe period 2s + timeout 1s + termination grace 1s"
        : `the larger of enforce grace + ${SIGNAL_ENFORCE_LEAD_MARGIN_SECONDS}s and the probe's ${PROBE_ENFORCE_LEAD_SECONDS}s`
    }`,
};

/**
 * `run`'s default: it signals its own command's process group and has no
 * liveness probe behind it, so it needs exactly the signal sender's lead.
 */
export const SIGNAL_SENDER_LEAD_DEFAULT: LeadDefault = {
  seconds: (_enforce, graceSeconds) => signalLeadSeconds(graceSeconds),
  text: `enforce grace + ${SIGNAL_ENFORCE_LEAD_MARGIN_SECONDS}`,
  why: () =>
    `the default for a process group stopped by signals: enforce grace + ${SIGNAL_ENFORCE_LEAD_MARGIN_SECONDS}s`,
};

/** What {@linkcode roomProblem} checks. */
export interface RoomInput {
  /** The TTL, whole seconds. */
  ttl: number;
  /** The configured heartbeat; undefined: the default TTL/3. */
  heartbeatSeconds: number | undefined;
  /** The heartbeat in effect, ms. */
  heartbeatMs: number;
  /** The lead in effect, seconds. */
  lead: number;
  /** The SIGTERM -> SIGKILL grace, seconds. */
  graceSeconds: number;
  /** Whether the lead was configured (else it is `leadDefault`'s). */
  leadExplicit: boolean;
  /** The configured enforcer. */
  enforce: EnforceMode;
  /** Where the default lead came from. */
  leadDefault: LeadDefault;
}

/**
 * The renewer must get a renewal through before the permission closes, i.e.
 * within TTL - lead of the last one; a heartbeat that long or longer would
 * stop a healthy workload every cycle. The comparisons are on whole seconds
 * (the default heartbeat TTL/3 as 2 * TTL > 3 * lead), so no rounding decides.
 *
 * @param r The TTL, heartbeat and lead.
 * @returns The problem with the smallest workable TTL and what to change, or
 * undefined when there is room.
 */
export function roomProblem(r: RoomInput): string | undefined {
  const { ttl, heartbeatSeconds, lead, leadExplicit, enforce } = r;
  const fits = heartbeatSeconds === undefined
    // ttl - ttl/3 > lead  <=>  2 * ttl > 3 * lead
    ? 2 * ttl > 3 * lead
    : heartbeatSeconds + lead < ttl;
  if (fits) return undefined;
  const minTtl = heartbeatSeconds === undefined
    ? Math.floor((3 * lead) / 2) + 1
    : heartbeatSeconds + lead + 1;
  const hb = heartbeatSeconds === undefined
    ? `the heartbeat (${formatDurationMs(r.heartbeatMs)}, the default ttl/3)`
    : `the heartbeat (${heartbeatSeconds}s)`;
  const leadText = leadExplicit
    ? `the enforce lead (${lead}s)`
    : `the enforce lead (${lead}s, ${r.leadDefault.why(enforce)})`;
  const maxHeartbeat = ttl - lead - 1;
  // Naming the grace helps only when it is what makes the default lead long.
  const graceHelps = !leadExplicit &&
    r.leadDefault.seconds(enforce, r.graceSeconds) >
      r.leadDefault.seconds(enforce, 0);
  return `no room to renew: ${hb} plus ${leadText} must be less than the ttl (${ttl}s), ` +
    "or the gate closes before each renewal and a healthy workload is stopped; " +
    `the smallest workable ttl for this heartbeat and lead is ${minTtl}s: ` +
    `raise BERTH_TTL_SECONDS to at least ${minTtl}` +
    (maxHeartbeat >= 1
      ? `, set BERTH_HEARTBEAT_SECONDS to at most ${maxHeartbeat}`
      : "") +
    ", or lower BERTH_ENFORCE_LEAD_SECONDS" +
    (graceHelps ? " or BERTH_ENFORCE_GRACE_SECONDS" : "");
}

/** The longest default grace `run` gives its command, in seconds (as `consul lock` does). */
export const RUN_GRACE_CAP_SECONDS = 5;

/** What {@linkcode runGraceDefaultSeconds} fits the grace into. */
export interface GraceRoom {
  /** The TTL, whole seconds. */
  ttl: number;
  /** The configured heartbeat; undefined: the default TTL/3. */
  heartbeatSeconds: number | undefined;
  /** The configured enforce lead; undefined: `run`'s default, grace + 1. */
  leadSeconds: number | undefined;
}

/**
 * `run`'s default SIGTERM -> SIGKILL grace: the smaller of
 * {@linkcode RUN_GRACE_CAP_SECONDS} and the longest grace whose lead still
 * leaves room to renew (heartbeat + lead < TTL, the lead being grace + 1 s
 * unless it is configured; a configured lead holds the grace and its 1 s
 * margin). Never below 0; a TTL with no room at all is then refused by
 * {@linkcode roomProblem} as before.
 *
 * @param r The TTL, heartbeat and lead as configured.
 * @returns The grace in whole seconds.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const free = { heartbeatSeconds: undefined, leadSeconds: undefined };
 * assert.equal(runGraceDefaultSeconds({ ttl: 30, ...free }), 5);
 * assert.equal(runGraceDefaultSeconds({ ttl: 8, ...free }), 4); // lead 5 < 8 - 8/3
 * assert.equal(runGraceDefaultSeconds({ ttl: 3, ...free }), 0);
 * assert.equal(
 *   runGraceDefaultSeconds({ ttl: 10, heartbeatSeconds: 6, leadSeconds: undefined }),
 *   2,
 * );
 * ```
 */
export function runGraceDefaultSeconds(r: GraceRoom): number {
  const margin = SIGNAL_ENFORCE_LEAD_MARGIN_SECONDS;
  let room: number;
  if (r.leadSeconds !== undefined) {
    room = r.leadSeconds - margin;
  } else if (r.heartbeatSeconds === undefined) {
    // The largest g with 3 * (g + margin) < 2 * ttl (see roomProblem).
    room = Math.floor((2 * r.ttl - 1) / 3) - margin;
  } else {
    // heartbeat + g + margin < ttl.
    room = r.ttl - r.heartbeatSeconds - margin - 1;
  }
  return Math.max(0, Math.min(RUN_GRACE_CAP_SECONDS, room));
}

/** {@linkcode runGraceDefaultSeconds} in words, for `run --help` and the docs. */
export const RUN_GRACE_DEFAULT_TEXT =
  `the smaller of ${RUN_GRACE_CAP_SECONDS} and what the TTL leaves after the heartbeat and the lead (grace + ${SIGNAL_ENFORCE_LEAD_MARGIN_SECONDS}): TTL 10 -> 5, TTL 6 -> 2, TTL 3 -> 0`;
