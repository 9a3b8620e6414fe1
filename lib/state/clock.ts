/**
 * Time, behind an interface, because the lease logic is all about deadlines:
 * tests drive it with a fake clock instead of sleeping, and production uses
 * the clocks that are safe for each job.
 *
 * - `now()` is the process's monotonic clock. Lease deadlines live here: wall
 *   time can jump (NTP, a bad RTC) and the server's clock is not ours.
 * - `bootNow()` is the kernel's boot-time clock (`/proc/uptime`, read in
 *   lib/state/boot_clock.ts). It is also monotonic, and every container on
 *   the node reads the same value, so a deadline written on it by the sidecar
 *   can be checked by the probe in the main container and by a restarted
 *   sidecar.
 *
 * @module
 */

import { readBootMillis } from "./boot_clock.ts";

/** The clocks and waits the lease logic needs; see the module doc for which is which. */
export interface Clock {
  /** Monotonic milliseconds, local to this process. */
  now(): number;
  /** Milliseconds since the node booted, the same in every container of the node. */
  bootNow(): number;
  /**
   * Wall-clock milliseconds since the epoch. Never used alone for a
   * deadline (it can jump); the marker carries it as a second copy, in case
   * the boot-time clock is not shared after all.
   */
  wallNow(): number;
  /**
   * Resolves after `ms` milliseconds, or as soon as `signal` aborts (check
   * `signal.aborted` afterwards). Never rejects.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** A signal that aborts with a `TimeoutError` after `ms` milliseconds of this clock. */
  timeout(ms: number): AbortSignal;
  /**
   * Calls `fn` once after `ms` milliseconds (any length). The returned
   * function cancels the call if it has not happened yet; nothing is left
   * to wake the process after that.
   */
  after(ms: number, fn: () => void): () => void;
}

/**
 * Resolves when `signal` aborts; the one place a wait turns into a promise.
 *
 * @param signal The signal to wait for.
 * @returns Resolves (never rejects) once it aborted.
 */
export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener("abort", () => resolve(), { once: true })
  );
}

/**
 * A signal for one bounded call: it aborts when any of `signals` does, or
 * with a `TimeoutError` after `ms` milliseconds of `clock`. Dispose it when
 * the call is over: its listeners go, so nothing keeps the call's signal
 * (unlike `AbortSignal.any`, whose dependent signals live until collected,
 * which the renewer would pile up once per renewal for the pod's whole
 * life). The bound is the clock's `timeout`, not `setTimeout`: the first
 * `setTimeout` of a process loads Deno's Node-compatible timers (about 6 ms
 * of start-up, which `acquire` would pay on every start); a bound that
 * outlives its call only wakes the process once, to no listener.
 *
 * @param clock The clock whose `timeout` times the bound.
 * @param ms The bound in milliseconds (any length).
 * @param signals Signals that end the call sooner.
 * @returns The signal, and its disposal.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const shutdown = new AbortController();
 * {
 *   using call = bounded(systemClock, 5_000, shutdown.signal);
 *   shutdown.abort(new Error("received SIGTERM"));
 *   // e.g. await fetch(url, { signal: call.signal });
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

/** The longest delay a single timer takes; longer ones would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * `AbortSignal.timeout` for any length: timers take at most 2^31-1 ms (about
 * 24.8 days) and fire at once beyond it, which would turn a TTL of months
 * into a busy loop; longer waits are chained from shorter ones.
 */
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

/**
 * Calls `fn` after `ms` (any length: longer waits are chained from timers
 * of at most 2^31-1 ms); the returned function clears the pending timer.
 */
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

/**
 * Waits `ms` on `clock` or until `signal` aborts. The timer is cleared and
 * the listener removed when the wait ends either way, so a wait cut short
 * leaves nothing behind to wake the process later.
 *
 * @param clock Whose {@linkcode Clock.after} times the wait.
 * @param ms How long.
 * @param signal Ends the wait sooner.
 * @returns Resolves (never rejects) when the wait ends.
 */
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

/** The clocks of the running process: `performance.now()`, `/proc/uptime`, timers. */
export const systemClock: Clock = {
  now: () => performance.now(),
  bootNow: () => readBootMillis(),
  wallNow: () => Date.now(),
  sleep: (ms, signal) => sleepOn(systemClock, ms, signal),
  timeout: (ms) => longTimeout(ms),
  after,
};
