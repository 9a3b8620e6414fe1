/**
 * Periodic full garbage collections for the processes that live as long as
 * the pod or its workload (`renew` and `run` through `lease_keeper.ts`, and
 * `gate`).
 *
 * A renewal leaves a little garbage behind, and V8 runs a full collection
 * only when its old generation reaches a limit it raises as it goes: over
 * thousands of renewals the heap's pages grew (by about 2 MiB in 10,000)
 * while what they held after a full collection stayed the same. One full
 * collection every {@linkcode FULL_COLLECTION_EVERY_MS} keeps the heap at
 * what it holds, for a few milliseconds of CPU each.
 *
 * The collector is V8's `gc()`, which exists only with `--expose-gc` among
 * the V8 flags (`V8_FLAGS` in `self_argv.ts`); without it nothing runs.
 *
 * @module
 */

/** How often a long-lived process collects its garbage in full. */
export const FULL_COLLECTION_EVERY_MS = 60_000;

/** Options for {@linkcode startFullCollections}. */
export interface FullCollectionOptions {
  /** Time between collections; default {@linkcode FULL_COLLECTION_EVERY_MS}. */
  everyMs?: number;
  /** The collector; default V8's `gc()` when exposed. Tests pass their own. */
  collect?: () => void;
  /**
   * Calls `fn` every `ms` until the returned handle is disposed; default an
   * interval timer that does not keep the process alive.
   */
  every?: (fn: () => void, ms: number) => Disposable;
}

/**
 * Starts collecting garbage in full at a fixed interval, on a timer that
 * does not keep the process alive.
 *
 * @param o When and how to collect.
 * @returns A handle whose disposal stops the collections; a no-op when no
 * collector is there.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * let collections = 0;
 * let tick = () => {};
 * {
 *   using _collections = startFullCollections({
 *     collect: () => collections++,
 *     every: (fn) => {
 *       tick = fn;
 *       return { [Symbol.dispose]: () => (tick = () => {}) };
 *     },
 *   });
 *   tick();
 *   assert.equal(collections, 1);
 * }
 * tick(); // disposed: no more collections
 * assert.equal(collections, 1);
 * ```
 */
export function startFullCollections(
  o: FullCollectionOptions = {},
): Disposable {
  const collect = o.collect ?? v8Collector();
  if (collect === undefined) return { [Symbol.dispose]() {} };
  return (o.every ?? unrefInterval)(
    collect,
    o.everyMs ?? FULL_COLLECTION_EVERY_MS,
  );
}

function unrefInterval(fn: () => void, ms: number): Disposable {
  const id = setInterval(fn, ms);
  Deno.unrefTimer(id);
  return { [Symbol.dispose]: () => clearInterval(id) };
}

/** V8's `gc()`, when `--expose-gc` put it on the global object. */
function v8Collector(): (() => void) | undefined {
  const gc = (globalThis as { gc?: unknown }).gc;
  return typeof gc === "function" ? () => gc() : undefined;
}
