/**
 * Time behind an interface, so tests drive a fake clock instead of sleeping.
 * Lease deadlines live on `now()`, the process's monotonic clock (wall time
 * can jump); `bootNow()`, monotonic too and the same in every container of
 * the node, carries them to the probe and to a restarted sidecar.
 *
 * @module
 */
import { readBootMillis } from "./marker.ts";

/** The clocks and waits the lease logic needs. */
export interface Clock {
  now(): number;
  bootNow(): number;
  /** Never a deadline alone (it jumps): the marker's copy. */
  wallNow(): number;
  /** Resolves after `ms`, or as soon as `signal` aborts; never rejects. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Aborts with a `TimeoutError` after `ms`. */
  timeout(ms: number): AbortSignal;
  /** Calls `fn` once after `ms` (any length); the function returned cancels it, leaving nothing to wake the process. */
  after(ms: number, fn: () => void): () => void;
}

/** Resolves (never rejects) when `signal` aborts. */
export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener("abort", () => resolve(), { once: true })
  );
}

/**
 * A signal for one call: it aborts with one of `signals`, or after `ms` of
 * `clock.timeout` (not `setTimeout`, whose first use loads Deno's Node timers
 * at `acquire`'s start). Disposing it removes its listeners, which
 * `AbortSignal.any` keeps until collected: one a renewal, for the pod's life.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const shutdown = new AbortController();
 * {
 *   using call = bounded(systemClock, 5_000, shutdown.signal);
 *   shutdown.abort(new Error("received SIGTERM"));
 *   assert.equal(call.signal.aborted, true);
 *   assert.equal(call.signal.reason.message, "received SIGTERM");
 * }
 * ```
 */
export function bounded(
  clock: Clock,
  ms: number,
  ...signals: AbortSignal[]
): { signal: AbortSignal } & Disposable {
  const call = new AbortController();
  const all = signals.find((s) => s.aborted)
    ? signals
    : [...signals, clock.timeout(ms)];
  const listeners = all.map((s) => {
    const onAbort = () => {
      if (!call.signal.aborted) call.abort(s.reason);
    };
    if (s.aborted) onAbort();
    else s.addEventListener("abort", onAbort, { once: true });
    return () => s.removeEventListener("abort", onAbort);
  });
  return {
    signal: call.signal,
    [Symbol.dispose]() {
      for (const remove of listeners) remove();
    },
  };
}

/** A timer takes at most 2^31-1 ms (24.8 days) and fires at once beyond, which would make a TTL of months a busy loop: longer waits are chained. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function longTimeout(ms: number): AbortSignal {
  const wait = Math.max(0, Math.ceil(ms));
  if (wait <= MAX_TIMER_MS) return AbortSignal.timeout(wait);
  const controller = new AbortController();
  AbortSignal.timeout(MAX_TIMER_MS).addEventListener("abort", () => {
    const rest = longTimeout(wait - MAX_TIMER_MS);
    rest.addEventListener("abort", () => controller.abort(rest.reason), {
      once: true,
    });
  }, { once: true });
  return controller.signal;
}

function after(ms: number, fn: () => void): () => void {
  let id: ReturnType<typeof setTimeout> | undefined;
  const arm = (left: number) => {
    const step = Math.min(left, MAX_TIMER_MS);
    id = setTimeout(() => {
      if (left - step > 0) arm(left - step);
      else {
        id = undefined;
        fn();
      }
    }, step);
  };
  arm(Math.max(0, Math.ceil(ms)));
  return () => {
    if (id !== undefined) clearTimeout(id);
    id = undefined;
  };
}

/** Waits `ms` on `clock` or until `signal` aborts, then clears its timer and listener, so a wait cut short leaves nothing to wake the process. */
export function sleepOn(
  clock: Pick<Clock, "after">,
  ms: number,
  signal?: AbortSignal,
): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      cancel();
      signal?.removeEventListener("abort", done);
      resolve();
    };
    signal?.addEventListener("abort", done, { once: true });
    const cancel = clock.after(ms, done);
  });
}

/** The process's clocks: `performance.now()`, `/proc/uptime`, `Date.now()`, timers. */
export const systemClock: Clock = {
  now: () => performance.now(),
  bootNow: readBootMillis,
  wallNow: () => Date.now(),
  sleep: (ms, signal) => sleepOn(systemClock, ms, signal),
  timeout: longTimeout,
  after,
};
