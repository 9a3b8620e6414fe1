/**
 * A full garbage collection once a minute in the processes that live as long
 * as the pod or its workload (`renew` and `run` through `lease_keeper.ts`,
 * and `gate`): V8 collects in full only when its old generation reaches a
 * limit it raises as it goes, so what each renewal leaves behind spread over
 * more of the heap's pages (docs/development.md). The collector is V8's
 * `gc()`, there only with `--expose-gc` among the V8 flags (`self_argv.ts`).
 *
 * @module
 */

/** How often a long-lived process collects its garbage in full. */
export const FULL_COLLECTION_EVERY_MS = 60_000;

/**
 * Collects in full every `everyMs` with V8's `gc()`, on a timer that does not
 * keep the process alive, until the handle is disposed; without `gc()`
 * nothing is scheduled.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * let runs = 0;
 * (globalThis as { gc?: () => void }).gc = () => runs++;
 * const hold = setTimeout(() => {}, 10_000); // the interval keeps nothing alive
 * {
 *   using _collections = startFullCollections(1);
 *   while (runs < 2) await new Promise((r) => setTimeout(r, 1));
 * }
 * clearTimeout(hold);
 * assert.equal(runs, 2);
 * ```
 */
export function startFullCollections(
  everyMs: number = FULL_COLLECTION_EVERY_MS,
): Disposable {
  const gc = (globalThis as { gc?: unknown }).gc;
  if (typeof gc !== "function") return { [Symbol.dispose]() {} };
  const id = setInterval(() => gc(), everyMs);
  Deno.unrefTimer(id);
  return { [Symbol.dispose]: () => clearInterval(id) };
}
