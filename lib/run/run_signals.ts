/**
 * Where `run` hears the stop signals and what it does with them: while no
 * command runs they end the wait for the lease; while one runs they are
 * forwarded to it. Its own module so a test can deliver a signal at an exact
 * point (during the hand-over, say) without signalling the test process.
 *
 * @module
 */
import type { Logger } from "../obs/log.ts";
import { SHUTDOWN_SIGNALS, type SignalSource } from "../cmd/signals.ts";

export type { SignalSource };
import type { ProcessGroup } from "../gate/process_group.ts";

/** The signals `run` ends a wait on, or forwards to the command while it runs: the stop signals. */
export const FORWARDED_SIGNALS: readonly Deno.Signal[] = SHUTDOWN_SIGNALS;

/**
 * Routes the four stop signals: while no command runs they cancel the wait
 * (once); while one runs they are forwarded to its process group.
 */
export class SignalRouter {
  #cancel = new AbortController();
  #target: ProcessGroup | undefined;
  #stopForwarded = false;
  #handlers: [Deno.Signal, () => void][];

  /** Listens on `source` from now on; records go to `logger`. */
  constructor(private logger: Logger, private source: SignalSource) {
    this.#handlers = FORWARDED_SIGNALS.map((name) => {
      const handler = () => this.#on(name);
      source.addSignalListener(name, handler);
      return [name, handler];
    });
  }

  /** Aborts on the first signal received while no command runs. */
  get cancelled(): AbortSignal {
    return this.#cancel.signal;
  }

  /**
   * Whether SIGTERM, SIGINT or SIGQUIT was forwarded to the current command:
   * someone asked it to stop, so `run` does not restart it after a loss.
   */
  get stopForwarded(): boolean {
    return this.#stopForwarded;
  }

  /** Forwards to `target` from now on (undefined: nothing runs); a new command starts with a clean slate. */
  forwardTo(target: ProcessGroup | undefined): void {
    if (target !== this.#target && target !== undefined) {
      this.#stopForwarded = false;
    }
    this.#target = target;
  }

  /** Stops listening. */
  dispose(): void {
    for (const [n, h] of this.#handlers) this.source.removeSignalListener(n, h);
  }

  #on(name: Deno.Signal): void {
    if (this.#target) {
      if (name !== "SIGHUP") this.#stopForwarded = true;
      this.logger.info("signal received; forwarding it to the command", {
        signal: name,
        pgid: this.#target.pid,
      });
      this.#target.signal(name);
    } else if (!this.#cancel.signal.aborted) {
      this.logger.info("signal received; shutting down", { signal: name });
      this.#cancel.abort(new DOMException(`received ${name}`, "AbortError"));
    } else {
      this.logger.info("signal received again; still finishing", {
        signal: name,
      });
    }
  }
}
