/**
 * What the renewer says about a Renew that did not confirm the lease, one
 * line each, with the fencing token:
 * - lost (409 or `acquired:false`): ERROR `lease lost; stopping the
 *   workload`, or the server's own message at WARN with the current holder
 *   when it names one;
 * - unconfirmed (any other failure): the Go helper's `renew failed` at
 *   WARN, saying whether the workload keeps running (and how long until its
 *   permission closes, `gate_closes_in_ms`) or stays stopped, with the fix when
 *   the failure names one; such a failure is also said at ERROR, at most once a
 *   minute (`rejection_log.ts`);
 * - past the local deadline (any failure once it has passed): the Go
 *   helper's `renew failing past lease expiry` at WARN, saying the workload
 *   stays stopped until the lease is acquired again.
 *
 * The renewer (`renewer.ts`) decides what happens; this module only words
 * it.
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { Logger } from "../obs/log.ts";
import { configFix, type LeaseFailure } from "../lease/rpc.ts";
import type { RenewVerdict } from "./deadline.ts";
import type { RejectionLog } from "./rejection_log.ts";

/**
 * Logs a lost lease: the server's message at WARN when it gave one, else
 * `lease lost; stopping the workload` at ERROR.
 *
 * @param logger Where the line goes.
 * @param verdict The Renew's verdict.
 * @param token The fencing token that was renewed.
 */
export function reportLost(
  logger: Logger,
  verdict: Extract<RenewVerdict, { kind: "lost" }>,
  token: number,
): void {
  if (verdict.message === undefined) {
    logger.error("lease lost; stopping the workload", {
      reason: verdict.reason,
      fencing_token: token,
    });
  } else {
    logger.warn(verdict.message, {
      reason: verdict.reason,
      ...(verdict.holder ? { current_holder: verdict.holder } : {}),
      detail: "stopping the workload",
      fencing_token: token,
    });
  }
}

/**
 * Logs a Renew that failed at (or after) the local deadline: the Go
 * helper's line for a renewal failing past expiry, at WARN. The workload is
 * stopped already; the next tick reacquires.
 *
 * @param logger Where the line goes.
 * @param reason The verdict's reason, the `error` field.
 * @param token The fencing token that was renewed.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { createLogger } from "../obs/log.ts";
 * const lines: string[] = [];
 * const logger = createLogger({ format: "json", write: (l) => lines.push(l) });
 * reportPastDeadline(logger, "connection refused", 7);
 * const record = JSON.parse(lines[0]);
 * assert.equal(record.level, "WARN");
 * assert.equal(record.msg, "renew failing past lease expiry; enforcing");
 * assert.equal(record.fencing_token, 7);
 * ```
 */
export function reportPastDeadline(
  logger: Logger,
  reason: string,
  token: number,
): void {
  logger.warn(GO_MESSAGES.renewPastExpiry, {
    error: reason,
    detail:
      "the lease was not confirmed by its local deadline: the workload stays stopped until the lease is acquired again",
    fencing_token: token,
  });
}

/** What {@linkcode reportUnconfirmed} words. */
export interface UnconfirmedRenew {
  /** Where the lines go. */
  logger: Logger;
  /** Says a failure that names its fix at ERROR, once a minute. */
  fixes: RejectionLog;
  /** The Renew's answer. */
  failure: LeaseFailure;
  /** The verdict's reason, the `error` field. */
  reason: string;
  /** When the next Renew comes (ms), for the ERROR line. */
  heartbeatMs: number;
  /** The fencing token that was renewed. */
  token: number;
  /**
   * Whether the permission is open (the workload runs), and if so in how many ms
   * it closes (undefined when unknown).
   */
  permission: { open: false } | { open: true; closesInMs: number | undefined };
}

/**
 * The permission as an {@linkcode UnconfirmedRenew} states it: closed, or
 * open with the time left until it closes.
 *
 * @param open Whether the permission is open (the workload runs).
 * @param closesAt Monotonic ms at which the open permission closes;
 * undefined when unknown. Not looked at while closed.
 * @param now Monotonic ms now.
 * @returns The {@linkcode UnconfirmedRenew.permission} field.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.deepEqual(permissionLeft(true, 9_000, 5_000), {
 *   open: true,
 *   closesInMs: 4_000,
 * });
 * assert.deepEqual(permissionLeft(true, undefined, 5_000), {
 *   open: true,
 *   closesInMs: undefined,
 * });
 * assert.deepEqual(permissionLeft(false, 9_000, 5_000), { open: false });
 * ```
 */
export function permissionLeft(
  open: boolean,
  closesAt: number | undefined,
  now: number,
): UnconfirmedRenew["permission"] {
  if (!open) return { open: false };
  return {
    open: true,
    closesInMs: closesAt === undefined ? undefined : closesAt - now,
  };
}

/**
 * Logs a Renew that neither confirmed nor lost the lease: `renew failed`
 * at WARN, and, when the failure names its fix, at ERROR once a minute.
 *
 * @param r The failure and what to say with it.
 */
export function reportUnconfirmed(r: UnconfirmedRenew): void {
  const { logger, failure, token } = r;
  const fix = configFix(failure);
  if (fix !== undefined) r.fixes.report(failure, r.heartbeatMs);
  if (!r.permission.open) {
    // In the lead before the deadline: the workload is stopped already.
    logger.warn(GO_MESSAGES.renewFailed, {
      error: r.reason,
      detail:
        "the gate is closed and the workload stays stopped until a renewal succeeds",
      fencing_token: token,
      fix,
    });
    return;
  }
  const closesIn = r.permission.closesInMs;
  logger.warn(
    GO_MESSAGES.renewFailed,
    {
      error: r.reason,
      detail: "the workload keeps running until the gate closes",
      fencing_token: token,
      gate_closes_in_ms: closesIn === undefined
        ? undefined
        : Math.max(0, Math.round(closesIn)),
      fix,
    },
  );
}
