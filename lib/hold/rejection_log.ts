/**
 * A rejection that goes on, logged at ERROR without flooding the log: a 400,
 * 401, 403 or 404 from the server (a wrong key, holder, namespace or URL)
 * does not heal by waiting, so it is retried (a rotated key or a fixed
 * server heals it) but said loudly, with what to do: the first one (or the
 * first with a different reason) at once, then one line a minute on the
 * injected clock, counting the attempts in between. Used by the acquire
 * loop and by the renewer's reacquire, so `acquire`, `renew` and `run` say
 * it the same way.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { isPersistentFailure } from "../lease/rpc.ts";
 * import { createLogger } from "../obs/log.ts";
 * import { systemClock } from "../state/clock.ts";
 * const lines: string[] = [];
 * const logger = createLogger({ format: "json", write: (l) => lines.push(l) });
 * let now = 0;
 * const rejections = new RejectionLog(logger, { ...systemClock, now: () => now });
 * const f = { kind: "server-error" as const, status: 403, message: "forbidden" };
 * for (const at of [0, 1_000, 2_000, 61_000]) {
 *   now = at;
 *   if (isPersistentFailure(f)) rejections.report(f, 1_000);
 *   else rejections.reset();
 * }
 * // The first at once, the next two counted, then one line a minute later.
 * assert.equal(lines.length, 2);
 * assert.equal(JSON.parse(lines[1]).rejected_since_last_line, 2);
 * ```
 *
 * @module
 */
import type { Clock } from "../state/clock.ts";
import { configFix, describeFailure, type LeaseFailure } from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";

/** How often a rejection that goes on is logged again at ERROR, ms. */
export const REJECTION_LOG_INTERVAL_MS = 60_000;

/** The one ERROR line of a rejection, whichever command meets it. */
export const REJECTION_MESSAGE =
  "the API server rejects the acquire request; retrying, but this does not heal by waiting: fix what the error names";

/**
 * The ERROR line of a failure that names its fix (a URL scheme that does not
 * match the server, an untrusted certificate, a server that is not a Berth
 * API server), beside the retry line each attempt logs; `fix` says what to
 * change.
 */
export const UNUSABLE_SERVER_MESSAGE =
  "the API server cannot be used as configured; retrying, but this does not heal by waiting: apply the fix";

/** Logs the rejections of one retry loop; see the module doc. */
export class RejectionLog {
  #logger: Logger;
  #clock: Clock;
  /** What the last line said, without its request id (every request has its own). */
  #said: string | undefined;
  #loggedAt = 0;
  #unlogged = 0;

  /**
   * @param logger Where the ERROR lines go.
   * @param clock Times the minute between lines.
   */
  constructor(logger: Logger, clock: Clock) {
    this.#logger = logger;
    this.#clock = clock;
  }

  /**
   * Logs one rejection, or counts it when the same one was logged less
   * than a minute ago.
   *
   * @param failure The server's answer: a persistent failure.
   * @param retryInMs When the next attempt goes, for the line.
   */
  report(failure: LeaseFailure, retryInMs: number): void {
    const now = this.#clock.now();
    const said = describeFailure(withoutRequestId(failure));
    if (
      said === this.#said && now - this.#loggedAt < REJECTION_LOG_INTERVAL_MS
    ) {
      this.#unlogged++;
      return;
    }
    const fix = configFix(failure);
    this.#logger.error(fix ? UNUSABLE_SERVER_MESSAGE : REJECTION_MESSAGE, {
      error: describeFailure(failure),
      ...(fix ? { fix } : {}),
      retry_in_ms: retryInMs,
      ...(this.#unlogged > 0
        ? { rejected_since_last_line: this.#unlogged }
        : {}),
    });
    this.#said = said;
    this.#loggedAt = now;
    this.#unlogged = 0;
  }

  /** Forgets the last rejection: any answer that is not one makes the next news. */
  reset(): void {
    this.#said = undefined;
    this.#unlogged = 0;
  }
}

/** The same failure as every other request would meet it: without its own request id. */
function withoutRequestId(f: LeaseFailure): LeaseFailure {
  if (!("requestId" in f)) return f;
  const { requestId: _, ...rest } = f;
  return rest;
}
