/**
 * The stop signals as the `AbortSignal` every wait of a role honours. They
 * come from a {@linkcode SignalSource}, `Deno` in production, so a test
 * delivers one at an exact point without signalling the test process.
 *
 * @module
 */
import type { Logger } from "../obs/log.ts";

/** Where a role hears the stop signals. */
export type SignalSource = Pick<
  typeof Deno,
  "addSignalListener" | "removeSignalListener"
>;

/** The signals that ask a role to stop (`run` forwards them to its command); SIGHUP and SIGQUIT too, so that none ends a process by its default action without a word. */
export const SHUTDOWN_SIGNALS: readonly Deno.Signal[] = [
  "SIGTERM",
  "SIGINT",
  "SIGHUP",
  "SIGQUIT",
];

/**
 * One Ctrl-C is one press: under `deno task` it arrives twice (the terminal
 * signals the foreground process group, and the task runner forwards it to
 * its child) a moment apart, so a SIGINT this soon after the last one heard
 * is the same press.
 */
export const PRESS_MS = 250;

/**
 * Calls `on` for each of `names` that `source` delivers, but once per Ctrl-C
 * press ({@linkcode PRESS_MS}); returns the function that stops listening.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const handlers = new Map<Deno.Signal, () => void>(); // production: `Deno`
 * const heard: Deno.Signal[] = [];
 * const stop = onSignals(["SIGINT", "SIGTERM"], (s) => heard.push(s), {
 *   addSignalListener: (s, h) => handlers.set(s, h),
 *   removeSignalListener: (s) => handlers.delete(s),
 * });
 * for (const s of ["SIGINT", "SIGINT", "SIGTERM", "SIGTERM"] as const) handlers.get(s)?.();
 * assert.deepEqual(heard, ["SIGINT", "SIGTERM", "SIGTERM"]);
 * stop();
 * assert.equal(handlers.size, 0);
 * ```
 */
export function onSignals(
  names: readonly Deno.Signal[],
  on: (name: Deno.Signal) => void,
  source: SignalSource = Deno,
): () => void {
  let pressed = -Infinity;
  const handlers = names.map((name) => {
    const handler = () => {
      if (name === "SIGINT") {
        if (performance.now() - pressed < PRESS_MS) return;
        pressed = performance.now();
      }
      on(name);
    };
    source.addSignalListener(name, handler);
    return [name, handler] as const;
  });
  return () => handlers.forEach(([n, h]) => source.removeSignalListener(n, h));
}

/**
 * An `AbortSignal` that aborts, with an `AbortError` naming it, on the first
 * stop signal. The listeners stay until it is disposed (`dispose()`, or the
 * end of its `using` scope), so a later one does not kill the process by
 * default action while it finishes (a release, say): it is logged and
 * otherwise ignored.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { discardLogger } from "../obs/log.ts";
 * const handlers = new Map<Deno.Signal, () => void>(); // production: `Deno`
 * const shutdown = shutdownSignal(discardLogger, {
 *   addSignalListener: (s, h) => handlers.set(s, h),
 *   removeSignalListener: (s) => handlers.delete(s),
 * });
 * handlers.get("SIGTERM")?.();
 * assert.equal(shutdown.signal.reason.message, "received SIGTERM");
 * shutdown.dispose();
 * assert.equal(handlers.size, 0);
 * ```
 */
export function shutdownSignal(
  logger: Logger,
  source: SignalSource = Deno,
): { signal: AbortSignal; dispose(): void } & Disposable {
  const controller = new AbortController();
  const dispose = onSignals(SHUTDOWN_SIGNALS, (name) => {
    if (controller.signal.aborted) {
      logger.info("signal received again; still finishing", { signal: name });
      return;
    }
    logger.info("signal received; shutting down", { signal: name });
    controller.abort(new DOMException(`received ${name}`, "AbortError"));
  }, source);
  return { signal: controller.signal, dispose, [Symbol.dispose]: dispose };
}
