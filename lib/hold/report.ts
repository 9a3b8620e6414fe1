/**
 * The renewer's words for a renewal that did not confirm the lease and a
 * marker it could not write: the Go helper's message where it has one
 * (operators alert on those), details in other fields.
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { Logger } from "../obs/log.ts";
import { configFix, type RenewVerdict } from "../lease/rpc.ts";
import type { Attempts } from "./attempts.ts";
import type { Enforcer } from "../enforce/enforcer.ts";
import type { MarkerDeadlines } from "../state/marker.ts";

/**
 * Logs a Renew of `token` that lost the lease (the server's message at WARN
 * when it gave one, else an ERROR), failed past the local deadline, or
 * failed before it, saying whether the workload keeps running and how long.
 *
 * @param c Whether the deadline has passed, how long the open permission
 * has left (undefined: closed), and who says a failure naming its fix.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { createLogger } from "../obs/log.ts";
 * const lines: string[] = [];
 * const logger = createLogger({ format: "json", write: (l) => lines.push(l) });
 * const failure = { kind: "timeout" as const, message: "no answer" };
 * const v = { kind: "unconfirmed" as const, reason: "timed out", failure };
 * const c = { past: false, closesInMs: 2_400, rejections: { rejected() {} } };
 * reportRenewal(logger, v, 7, { ...c, heartbeatMs: 1_000 });
 * assert.equal(JSON.parse(lines[0]).gate_closes_in_ms, 2_400);
 * ```
 */
export function reportRenewal(
  logger: Logger,
  v: Extract<RenewVerdict, { kind: "lost" | "unconfirmed" }>,
  token: number,
  c: {
    past: boolean;
    closesInMs: number | undefined;
    rejections: Pick<Attempts, "rejected">;
    heartbeatMs: number;
  },
): void {
  const fencing_token = token;
  if (v.kind === "lost" && v.message === undefined) {
    logger.error("lease lost; stopping the workload", {
      reason: v.reason,
      fencing_token,
    });
  } else if (v.kind === "lost") {
    logger.warn(v.message!, {
      reason: v.reason,
      current_holder: v.holder,
      detail: "stopping the workload",
      fencing_token,
    });
  } else if (c.past) {
    logger.warn(GO_MESSAGES.renewPastExpiry, {
      error: v.reason,
      detail:
        "the lease was not confirmed by its local deadline: the workload stays stopped until the lease is acquired again",
      fencing_token,
    });
  } else {
    const fix = configFix(v.failure);
    if (fix !== undefined) c.rejections.rejected(v.failure, c.heartbeatMs);
    const open = c.closesInMs !== undefined;
    logger.warn(GO_MESSAGES.renewFailed, {
      error: v.reason,
      detail: open
        ? "the workload keeps running until the gate closes"
        : "the gate is closed and the workload stays stopped until a renewal succeeds",
      fencing_token,
      gate_closes_in_ms: open
        ? Math.max(0, Math.round(c.closesInMs!))
        : undefined,
      fix,
    });
  }
}

/**
 * Writes the marker through the enforcer, saying a refused write once per
 * run of them (`state`), and the recovery: meanwhile the probe reports the
 * marker absent or stale as if the lease were lost, so the operator must
 * find this line. The permission's decision stands either way.
 */
export async function openMarker(
  e: Enforcer,
  marker: MarkerDeadlines,
  logger: Logger,
  state: { failing: boolean },
): Promise<void> {
  try {
    await e.open(marker);
  } catch (error) {
    if (!state.failing) {
      logger.warn(GO_MESSAGES.enforcerReleaseFailed, {
        detail:
          "the lease is confirmed, but the health marker cannot be written; its readers (the liveness probe, run's gate) see it absent or stale (make the state volume writable: it is read-only or full)",
        write: "health marker",
        error,
      });
    }
    state.failing = true;
    return;
  }
  if (state.failing) logger.info("the health marker is written again");
  state.failing = false;
}
