/**
 * A look at the timers code arms, for tests of waits that must clean up.
 *
 * @module
 */
/**
 * Counts the timers armed through `setTimeout` while `fn` runs and how many
 * of them are still pending (neither fired nor cleared) when it ends: a wait
 * that ends early must not leave a timer to wake the process later.
 *
 * @param fn The code under test; nothing else should arm timers meanwhile.
 * @returns Timers armed, and those still pending after `fn`.
 */
export async function timersOf(fn: () => Promise<void>): Promise<
  { armed: number; pending: number }
> {
  const real = { set: globalThis.setTimeout, clear: globalThis.clearTimeout };
  const live = new Set<unknown>();
  let armed = 0;
  globalThis.setTimeout = ((cb: () => void, ms?: number) => {
    armed++;
    const id = real.set(() => {
      live.delete(id);
      cb();
    }, ms);
    live.add(id);
    return id;
  }) as typeof setTimeout;
  globalThis.clearTimeout = ((id?: unknown) => {
    if (id !== undefined) live.delete(id);
    real.clear(id as number);
  }) as typeof clearTimeout;
  try {
    await fn();
  } finally {
    globalThis.setTimeout = real.set;
    globalThis.clearTimeout = real.clear;
  }
  return { armed, pending: live.size };
}
