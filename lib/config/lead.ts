/**
 * The enforcement lead: how long before the local lease deadline the
 * workload's permission closes, so it is stopped before the server may hand
 * the lease on. Each role passes its default (it depends on who stops the
 * workload); a lead that leaves no room to renew, or a signalled workload no
 * time to die, is refused at start-up.
 *
 * @module
 */
import { formatDurationMs } from "../state/marker.ts";

/** How a lost lease stops the workload: by failing its liveness probe, or by signals. */
export type EnforceMode = "probe" | "signal";

// The webhook's probe: every 2 s, a 1 s timeout, then 1 s of termination
// grace. A signalled process must be gone 1 s after its SIGKILL.
const PROBE_LEAD = 4;
const SIGNAL_MARGIN = 1;
// The longest default grace `run` gives its command, as `consul lock` does,
// and how long a renewal may take after one has failed.
const RUN_GRACE_CAP = 5;
const STALL = 1;

/** A role's lead when none is configured, the rule in words, whether the workload is signalled (a lead must then cover the grace), and its grace default (else 0). */
export interface LeadDefault {
  signals(enforce: EnforceMode): boolean;
  seconds(enforce: EnforceMode, graceSeconds: number): number;
  text: string;
  why(enforce: EnforceMode): string;
  grace?: { seconds(room: GraceRoom): number; text: string };
}

/**
 * The Kubernetes roles' default, in signal mode never less than the probe's:
 * when the sidecar is dead nobody signals, and the probe stops the workload.
 */
export const ENFORCER_LEAD_DEFAULT: LeadDefault = {
  signals: (enforce) => enforce === "signal",
  seconds: (enforce, grace) =>
    enforce === "signal"
      ? Math.max(grace + SIGNAL_MARGIN, PROBE_LEAD)
      : PROBE_LEAD,
  text:
    `probe: ${PROBE_LEAD}; signal: the larger of enforce grace + ${SIGNAL_MARGIN} and ${PROBE_LEAD}`,
  why: (enforce) =>
    `the ${enforce} default: ${
      enforce === "probe"
        ? "probe period 2s + timeout 1s + termination grace 1s"
        : `the larger of enforce grace + ${SIGNAL_MARGIN}s and the probe's ${PROBE_LEAD}s`
    }`,
};

/** `run`'s default: it signals its own command's process group, with no liveness probe behind it. */
export const SIGNAL_SENDER_LEAD_DEFAULT: LeadDefault = {
  signals: () => true,
  seconds: (_enforce, grace) => grace + SIGNAL_MARGIN,
  text: `enforce grace + ${SIGNAL_MARGIN}`,
  why: () =>
    `the default for a process group stopped by signals: enforce grace + ${SIGNAL_MARGIN}s`,
  grace: {
    seconds: runGraceDefaultSeconds,
    text:
      `the smaller of ${RUN_GRACE_CAP} and what the TTL leaves after two heartbeats, a ${STALL} s stall and the lead (grace + ${SIGNAL_MARGIN}): TTL 30 -> 5, TTL 10 -> 1, TTL 6 -> 0`,
  },
};

/**
 * A lead configured (by `source`) for a workload stopped by signals must be
 * at least grace + 1 s: else SIGKILL goes out after the deadline, and a
 * workload that ignores SIGTERM could still run when the next holder starts.
 */
export function leadProblem(
  source: string,
  lead: number,
  graceSeconds: number,
): string | undefined {
  const least = graceSeconds + SIGNAL_MARGIN;
  if (lead >= least) return undefined;
  return `enforce lead ${source}=${lead} is shorter than the enforce grace (${graceSeconds}s) + ${SIGNAL_MARGIN}s: ` +
    `SIGKILL goes out ${graceSeconds}s after SIGTERM, so a workload that ignores SIGTERM could still run when the next holder starts; ` +
    `the smallest lead that works is ${least}s: set ${source} to at least ${least}, or leave it unset for the default`;
}

/**
 * A renewal must get through within TTL - lead of the last one, or a healthy
 * workload is stopped every cycle; 2 * TTL > 3 * lead for the default TTL/3.
 */
export function roomProblem(
  r: GraceRoom & { lead: number; grace: number; enforce: EnforceMode },
  leadDefault: LeadDefault,
): string | undefined {
  const { ttl, heartbeatSeconds: hb, lead, enforce } = r;
  if (hb === undefined ? 2 * ttl > 3 * lead : hb + lead < ttl) return undefined;
  const minTtl = hb === undefined
    ? Math.floor(3 * lead / 2) + 1
    : hb + lead + 1;
  const heartbeat = hb === undefined
    ? `the heartbeat (${formatDurationMs(ttl * 1000 / 3)}, the default ttl/3)`
    : `the heartbeat (${hb}s)`;
  const leadText = r.leadSeconds !== undefined
    ? `the enforce lead (${lead}s)`
    : `the enforce lead (${lead}s, ${leadDefault.why(enforce)})`;
  const maxHeartbeat = ttl - lead - 1;
  // Naming the grace helps only when it is what makes the default lead long.
  const graceHelps = r.leadSeconds === undefined &&
    leadDefault.seconds(enforce, r.grace) > leadDefault.seconds(enforce, 0);
  return `no room to renew: ${heartbeat} plus ${leadText} must be less than the ttl (${ttl}s), ` +
    "or the gate closes before each renewal and a healthy workload is stopped; " +
    `the smallest workable ttl for this heartbeat and lead is ${minTtl}s: ` +
    `raise BERTH_TTL_SECONDS to at least ${minTtl}` +
    (maxHeartbeat >= 1
      ? `, set BERTH_HEARTBEAT_SECONDS to at most ${maxHeartbeat}`
      : "") +
    ", or lower BERTH_ENFORCE_LEAD_SECONDS" +
    (graceHelps ? " or BERTH_ENFORCE_GRACE_SECONDS" : "");
}

export interface GraceRoom {
  ttl: number;
  heartbeatSeconds: number | undefined;
  leadSeconds: number | undefined;
}

/**
 * `run`'s default grace: the smaller of 5 s and the longest whose lead
 * (grace + 1 s, or as configured) leaves room before the stop for one failed
 * renewal and a next one answered within a second (lead + 2 heartbeats + 1 s
 * <= TTL), never below 0. A longer grace gives the command more time to
 * clean up but stops it sooner after the server goes silent.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const free = { heartbeatSeconds: undefined, leadSeconds: undefined };
 * assert.equal(runGraceDefaultSeconds({ ttl: 30, ...free }), 5);
 * assert.equal(runGraceDefaultSeconds({ ttl: 10, ...free }), 1); // 2 + 2 * 10/3 + 1 <= 10
 * assert.equal(runGraceDefaultSeconds({ ttl: 6, ...free }), 0);
 * assert.equal(runGraceDefaultSeconds({ ...free, ttl: 8, heartbeatSeconds: 1 }), 4);
 * assert.equal(runGraceDefaultSeconds({ ...free, ttl: 8, leadSeconds: 4 }), 3);
 * ```
 */
export function runGraceDefaultSeconds(r: GraceRoom): number {
  const { ttl, heartbeatSeconds: hb } = r;
  const lead = r.leadSeconds ??
    (hb === undefined ? Math.floor(ttl / 3) : ttl - 2 * hb) - STALL;
  return Math.max(0, Math.min(RUN_GRACE_CAP, lead - SIGNAL_MARGIN));
}
