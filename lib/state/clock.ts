/**
 * Time, behind an interface, because the lease logic is all about deadlines:
 * tests drive it with a fake clock instead of sleeping, and production uses
 * the clocks that are safe for each job.
 *
 * - `now()` is the process's monotonic clock. Lease deadlines live here: wall
 *   time can jump (NTP, a bad RTC) and the server's clock is not ours.
 * - `bootNow()` is the kernel's boot-time clock (`/proc/uptime`). It is also
 *   monotonic, and every container on the node reads the same value, so a
 *   deadline written on it by the sidecar can be checked by the probe in the
 *   main container and by a restarted sidecar.
 *
 * @module
 */

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
}

/**
 * Reads the boot-time clock from `/proc/uptime` (10 ms resolution). It exists
 * as its own function because the probe calls it once, only when the marker
 * carries a deadline, and must not pay for anything else.
 *
 * @param path The uptime file; default `/proc/uptime`.
 * @returns Milliseconds since boot.
 * @throws {Error} When the file cannot be read or parsed.
 */
export function readBootMillis(path = "/proc/uptime"): number {
  const text = Deno.readTextFileSync(path);
  const seconds = Number(text.split(" ", 1)[0]);
  if (!Number.isFinite(seconds) || seconds < 0) {
    throw new Error(
      `cannot read the boot-time clock from ${path}: ${JSON.stringify(text)}`,
    );
  }
  return Math.round(seconds * 1000);
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
 * Waits `ms` (any length, chained like {@linkcode longTimeout}) or until
 * `signal` aborts. The timer is cleared and the listener removed when the
 * wait ends either way, so a wait cut short (the gate timer is re-armed at
 * every renewal) leaves nothing behind to wake the process later.
 */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    let id: ReturnType<typeof setTimeout>;
    const done = () => {
      clearTimeout(id);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const arm = (left: number) => {
      const step = Math.min(left, MAX_TIMER_MS);
      id = setTimeout(
        () => left - step > 0 ? arm(left - step) : done(),
        step,
      );
    };
    signal?.addEventListener("abort", done, { once: true });
    arm(Math.max(0, Math.ceil(ms)));
  });
}

/** The clocks of the running process: `performance.now()`, `/proc/uptime`, timers. */
export const systemClock: Clock = {
  now: () => performance.now(),
  bootNow: () => readBootMillis(),
  wallNow: () => Date.now(),
  sleep,
  timeout: (ms) => longTimeout(ms),
};
