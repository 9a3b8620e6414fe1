/**
 * `run`'s stop signals: they end the wait for the lease, or are forwarded to
 * the running command; a test delivers them through its `SignalSource`.
 *
 * @module
 */
import type { Logger } from "../obs/log.ts";
import { SHUTDOWN_SIGNALS, type SignalSource } from "../cmd/signals.ts";

export type { SignalSource };
import type { ProcessGroup } from "../gate/process_group.ts";

/** The signals `run` ends a wait on, or forwards to its command. */
export const FORWARDED_SIGNALS: readonly Deno.Signal[] = SHUTDOWN_SIGNALS;

/** Routes the stop signals; see the module doc. */
export class SignalRouter {
  #cancel = new AbortController();
  #target: ProcessGroup | undefined;
  #stopForwarded = false;
  #handlers: [Deno.Signal, () => void][];

  constructor(private logger: Logger, private source: SignalSource) {
    this.#handlers = FORWARDED_SIGNALS.map((name) => {
      const handler = () => this.#on(name);
      source.addSignalListener(name, handler);
      return [name, handler];
    });
  }

  get cancelled(): AbortSignal {
    return this.#cancel.signal;
  }

  /** SIGTERM, SIGINT or SIGQUIT reached the current command: `run` does not restart it after a loss. */
  get stopForwarded(): boolean {
    return this.#stopForwarded;
  }

  /** Undefined: nothing runs. */
  forwardTo(target: ProcessGroup | undefined): void {
    if (target !== this.#target && target !== undefined) {
      this.#stopForwarded = false;
    }
    this.#target = target;
  }

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
