/**
 * The one way tests wait: poll a condition until it holds, with a bound that
 * turns a condition that never comes into a failure instead of a hang. The
 * bound is a failure limit, not a timing assertion: keep it generous.
 *
 * @module
 */

/** Options for {@linkcode waitFor}. */
export interface WaitForOptions {
  /** Fail after this many ms; a failure limit, not a timing assertion. */
  timeoutMs: number;
  /** What is being waited for, for the failure message. */
  what: string;
  /** Pause between polls; default 25 ms. */
  intervalMs?: number;
}

/**
 * Polls `cond` until it returns something other than `undefined`, `false`
 * or `null`, and returns that value.
 *
 * @param cond The condition; may be async.
 * @param o The bound and what is awaited.
 * @returns The first truthy-enough value `cond` returned.
 * @throws {Error} Naming `o.what` once `o.timeoutMs` has passed.
 *
 * @example
 * ```ts
 * await waitFor(() => existsSync(path), { timeoutMs: 10_000, what: "the marker" });
 * ```
 */
export async function waitFor<T>(
  cond: () =>
    | T
    | undefined
    | null
    | false
    | Promise<T | undefined | null | false>,
  o: WaitForOptions,
): Promise<T> {
  const limit = AbortSignal.timeout(o.timeoutMs);
  const interval = o.intervalMs ?? 25;
  for (;;) {
    const v = await cond();
    if (v !== undefined && v !== null && v !== false) return v;
    if (limit.aborted) {
      throw new Error(
        `timed out after ${o.timeoutMs} ms waiting for ${o.what}`,
      );
    }
    await new Promise<void>((resolve) => {
      const t = AbortSignal.any([AbortSignal.timeout(interval), limit]);
      t.addEventListener("abort", () => resolve(), { once: true });
    });
  }
}
