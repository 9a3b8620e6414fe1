/**
 * Stop signals, in one place: SIGTERM, SIGINT, SIGHUP and SIGQUIT become an `AbortSignal`
 * that every wait of a role honours. Where the signals come from is a
 * {@linkcode SignalSource}, the process itself (`Deno`) in production, so a
 * test can deliver a signal at an exact point without signalling the test
 * process.
 *
 * @module
 */
import type { Logger } from "../obs/log.ts";

/**
 * Where a role hears the stop signals: `Deno` itself in production, or a
 * fake in tests.
 */
export interface SignalSource {
  /** Calls `handler` whenever `signal` arrives. */
  addSignalListener(signal: Deno.Signal, handler: () => void): void;
  /** Stops calling `handler` for `signal`. */
  removeSignalListener(signal: Deno.Signal, handler: () => void): void;
}

/**
 * The signals that ask a role to stop: `acquire` and `renew` shut down on
 * them, `run` ends its wait on them or forwards them to its command. SIGHUP
 * and SIGQUIT are among them so that none of them ends a process by its
 * default action without a word.
 */
export const SHUTDOWN_SIGNALS: readonly Deno.Signal[] = [
  "SIGTERM",
  "SIGINT",
  "SIGHUP",
  "SIGQUIT",
];

/** Options for {@linkcode shutdownSignal}. */
export interface ShutdownOptions {
  /** Where the signals come from; default `Deno` (the process's own). */
  source?: SignalSource;
  /** Which signals shut down; default {@linkcode SHUTDOWN_SIGNALS}. */
  signals?: readonly Deno.Signal[];
}

/** A shutdown request as an `AbortSignal`, and how to stop listening. */
export interface Shutdown {
  /** Aborts, with an `AbortError` naming the signal, on the first signal. */
  signal: AbortSignal;
  /** Removes the listeners. */
  dispose(): void;
}

/**
 * An `AbortSignal` that aborts on the first of the stop signals. The listeners
 * stay installed until `dispose()`, so a second signal does not kill the
 * process by default action while it finishes (for example a release); it is
 * logged and otherwise ignored.
 *
 * @param logger Where each signal is reported.
 * @param options The signal source and the signals.
 * @returns The signal and its `dispose`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { discardLogger } from "../obs/log.ts";
 * // A fake source (production uses `Deno`), so the example signals nothing real.
 * const handlers = new Map<Deno.Signal, () => void>();
 * const source = {
 *   addSignalListener: (s: Deno.Signal, h: () => void) => handlers.set(s, h),
 *   removeSignalListener: (s: Deno.Signal) => handlers.delete(s),
 * };
 * const shutdown = shutdownSignal(discardLogger, { source });
 * try {
 *   handlers.get("SIGTERM")?.();
 *   assert.equal(shutdown.signal.aborted, true);
 *   assert.equal(shutdown.signal.reason.message, "received SIGTERM");
 * } finally {
 *   shutdown.dispose();
 * }
 * assert.equal(handlers.size, 0);
 * ```
 */
export function shutdownSignal(
  logger: Logger,
  options: ShutdownOptions = {},
): Shutdown {
  const source = options.source ?? Deno;
  const controller = new AbortController();
  const handlers = (options.signals ?? SHUTDOWN_SIGNALS).map((name) => {
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
