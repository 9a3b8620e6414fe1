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
 * An `AbortSignal` that aborts, with an `AbortError` naming it, on the first
 * stop signal. The listeners stay until `dispose()`, so a second signal does
 * not kill the process by default action while it finishes (a release, say):
 * it is logged and otherwise ignored.
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
): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const handlers = SHUTDOWN_SIGNALS.map((name) => {
    const handler = () => {
      if (controller.signal.aborted) {
        logger.info("signal received again; still finishing", { signal: name });
        return;
      }
      logger.info("signal received; shutting down", { signal: name });
      controller.abort(new DOMException(`received ${name}`, "AbortError"));
    };
    source.addSignalListener(name, handler);
    return [name, handler] as const;
  });
  return {
    signal: controller.signal,
    dispose: () =>
      handlers.forEach(([n, h]) => source.removeSignalListener(n, h)),
  };
}
