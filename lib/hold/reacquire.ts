/**
 * The sidecar's reacquire: one Acquire per tick while the lease is not
 * held, and what its answer means, apart from the permission and the state
 * volume (the renewer does those with the grant this returns).
 *
 * - A grant that extends a live lease of this holder identity which is not
 *   ours (see `shared_holder.ts`) is another process's: no Acquire is sent
 *   for one TTL, since each would extend that lease for it.
 * - A rejection that waiting does not heal (401, say) is logged at ERROR,
 *   at once and then once a minute (`rejection_log.ts`).
 * - Anything else is logged and retried at the next tick; for `run`
 *   (quiet) with how long the server has not answered usably
 *   (`failing_for`), and past a minute an ERROR line once a minute, as its
 *   first acquire says it (`acquire_loop.ts`).
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";
import { bounded, type Clock } from "../state/clock.ts";
import { classifyAcquire } from "./deadline.ts";
import {
  mayHaveBeenGranted,
  PossibleGrant,
  sharedHolderQuietMs,
} from "./shared_holder.ts";
import {
  configFix,
  isPersistentFailure,
  type LeaseClient,
} from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";
import { REJECTION_LOG_INTERVAL_MS, RejectionLog } from "./rejection_log.ts";
import { OUTAGE_MESSAGE } from "./acquire_loop.ts";
import { formatDurationMs } from "../config/duration.ts";

/** Options for {@linkcode Reacquirer}. */
export interface ReacquirerOptions {
  /** The lease RPCs. */
  client: LeaseClient;
  /** The holder identity to acquire for. */
  holder: string;
  /** TTL sent with every Acquire, whole seconds. */
  ttlSeconds: number;
  /** Bound on each Acquire (ms): the renewer's heartbeat. */
  heartbeatMs: number;
  /** Monotonic clock; a fake one in tests. */
  clock: Clock;
  /** Where the answers are said. */
  logger: Logger;
  /**
   * Say "waiting to reacquire" once per holder and token,
   * the rest at DEBUG (`run`); default false: at every attempt.
   */
  quiet?: boolean;
}

/** A grant this process may use: its token, and when its Acquire was sent. */
export interface Reacquired {
  /** The fencing token granted. */
  token: number;
  /** Monotonic ms when the Acquire was sent (the deadline's start). */
  sentAt: number;
}

/**
 * Sends the renewer's Acquires while the lease is not held and keeps what
 * one answer says about the next: a grant that may have been given unseen,
 * another process under the same identity, a rejection already reported.
 */
export class Reacquirer {
  #o: ReacquirerOptions;
  /**
   * Set when another process holds the lease under this same holder
   * identity: until then no Acquire is sent, because each one would extend
   * that process's lease for it.
   */
  #quietUntil: number | undefined;
  /** Acquires that may have been granted without our learning the token. */
  #possible: PossibleGrant;
  /** Says a reacquire the server keeps rejecting (401, say) at ERROR, once a minute. */
  #rejections: RejectionLog;
  /** The holder and token the last "held" line named (quiet mode). */
  #saidHeld: string | undefined;
  /** When the first of the failures in a row was sent; undefined after an answer. */
  #failingSince: number | undefined;
  /** When the outage's last ERROR line was logged (quiet mode). */
  #outageSaidAt: number | undefined;

  /** @param options See {@linkcode ReacquirerOptions}. */
  constructor(options: ReacquirerOptions) {
    this.#o = options;
    this.#possible = new PossibleGrant(options.ttlSeconds);
    this.#rejections = new RejectionLog(options.logger, options.clock);
  }

  /**
   * Sends one Acquire, unless another process under this identity holds
   * the lease and its quiet period runs. A shutdown does not cut the
   * request short (it ends within its bound, the heartbeat): the server may
   * grant it all the same, and a grant whose answer was never read would
   * be held by no one until it expired, its token lost; read, the renewer
   * can release it.
   *
   * @param token The token this process holds or last held (0: none); a
   *   grant of it again is ours, never another process's.
   * @returns The grant to use, or undefined when there is none this tick.
   */
  async attempt(token: number): Promise<Reacquired | undefined> {
    const { client, holder, ttlSeconds, heartbeatMs, clock, logger } = this.#o;
    if (this.#quietUntil !== undefined && clock.now() < this.#quietUntil) {
      return undefined;
    }
    const sentAt = clock.now();
    using call = bounded(clock, heartbeatMs);
    const outcome = await client.acquire(holder, ttlSeconds, call.signal);
    const verdict = classifyAcquire(outcome);
    if (verdict.kind === "failed" && mayHaveBeenGranted(verdict.failure)) {
      this.#possible.asked(sentAt, heartbeatMs);
    } else if (verdict.kind === "held") this.#possible.clear();
    const fix = verdict.kind === "failed"
      ? configFix(verdict.failure)
      : undefined;
    if (verdict.kind === "failed") this.#failingSince ??= sentAt;
    else if (verdict.kind !== "cancelled") {
      this.#failingSince = this.#outageSaidAt = undefined;
    }
    if (
      verdict.kind === "failed" &&
      (fix !== undefined || isPersistentFailure(verdict.failure))
    ) {
      // Go's line on every attempt (with the fix when there is one), and
      // the ERROR line at most once a minute.
      logger.warn(GO_MESSAGES.reacquireFailed, {
        error: verdict.reason,
        ...(fix !== undefined ? { fix } : {}),
      });
      this.#rejections.report(verdict.failure, heartbeatMs);
      return undefined;
    }
    this.#rejections.reset();
    switch (verdict.kind) {
      case "acquired": {
        if (
          verdict.token !== token &&
          this.#possible.another(verdict.lease, sentAt, clock.now(), logger)
        ) {
          this.#quietUntil = clock.now() + sharedHolderQuietMs(ttlSeconds);
          return undefined;
        }
        this.#possible.clear();
        return { token: verdict.token, sentAt };
      }
      case "held": {
        const who = `${verdict.holder}\u0000${verdict.token}`;
        const quiet = this.#o.quiet && who === this.#saidHeld;
        this.#saidHeld = who;
        (quiet ? logger.debug : logger.info)(GO_MESSAGES.waitingToReacquire, {
          current_holder: verdict.holder,
          current_fencing_token: verdict.token,
          // run says when the current lease would expire, as its standby does.
          ...(this.#o.quiet && outcome.kind === "not-acquired"
            ? { expires_at: outcome.lease.expiresAt }
            : {}),
        });
        return undefined;
      }
      case "failed": {
        const failingMs = clock.now() - (this.#failingSince ?? sentAt);
        logger.warn(GO_MESSAGES.reacquireFailed, {
          error: verdict.reason,
          ...(this.#o.quiet
            ? { failing_for: formatDurationMs(failingMs) }
            : {}),
        });
        if (
          this.#o.quiet && failingMs >= REJECTION_LOG_INTERVAL_MS &&
          (this.#outageSaidAt === undefined ||
            clock.now() - this.#outageSaidAt >= REJECTION_LOG_INTERVAL_MS)
        ) {
          this.#outageSaidAt = clock.now();
          logger.error(OUTAGE_MESSAGE, {
            error: verdict.reason,
            failing_for: formatDurationMs(failingMs),
          });
        }
        return undefined;
      }
      case "cancelled":
        return undefined;
    }
  }
}
