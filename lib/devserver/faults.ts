/**
 * Fault injection for chaos tests of the helper: the development server can
 * answer lease RPCs with 500 or hold them unanswered, on demand. Faults act
 * right after routing, before authentication: they model a server that is
 * broken as a whole, not one bad request. They never apply to `/healthz` or
 * `/readyz`.
 *
 * @module
 */
import { aborted } from "../state/clock.ts";

/**
 * Switches that make the server misbehave on purpose, for chaos tests of
 * the helper: answer lease RPCs with 500, or hold them unanswered. Faults
 * apply to the three lease RPCs only (never to `/healthz` or `/readyz`) and
 * act right after routing, before authentication.
 */
export interface DevServerFaults {
  /** The next `count` lease RPCs answer `500 internal error` (default 1). */
  failNext(count?: number): void;
  /** Every lease RPC answers `500 internal error` until {@linkcode clear}. */
  failAll(): void;
  /**
   * The next `count` lease RPCs are not answered (default 1) until the
   * fault is cleared (then they are served normally, even when their client
   * has given up meanwhile, as a slow real server would still apply them)
   * or the server closes (then they answer 500, as a real server does when
   * a stuck store call is cancelled at shutdown).
   */
  hangNext(count?: number): void;
  /** Every lease RPC hangs as in {@linkcode hangNext} until {@linkcode clear}. */
  hangAll(): void;
  /** Removes any fault and lets every hanging request proceed. */
  clear(): void;
  /** How many requests are hanging right now, so tests can wait for one. */
  readonly hanging: number;
}

/**
 * What a lease RPC does once its fault, if any, has acted: `serve` it,
 * answer 500 for an injected `fail`, or answer 500 because the server is
 * `closing` while it hung.
 */
export type FaultOutcome = "serve" | "fail" | "closing";

/** The server's {@linkcode DevServerFaults}, with the hook the request path calls. */
export class FaultSwitch implements DevServerFaults {
  #kind: "error" | "hang" | null = null;
  #remaining = 0;
  #released = new AbortController();
  #hanging = 0;

  /** How many requests are hanging right now. */
  get hanging(): number {
    return this.#hanging;
  }

  /** See {@linkcode DevServerFaults.failNext}. */
  failNext(count = 1): void {
    this.#set("error", count);
  }
  /** See {@linkcode DevServerFaults.failAll}. */
  failAll(): void {
    this.#set("error", Infinity);
  }
  /** See {@linkcode DevServerFaults.hangNext}. */
  hangNext(count = 1): void {
    this.#set("hang", count);
  }
  /** See {@linkcode DevServerFaults.hangAll}. */
  hangAll(): void {
    this.#set("hang", Infinity);
  }
  /** See {@linkcode DevServerFaults.clear}. */
  clear(): void {
    this.#kind = null;
    this.#remaining = 0;
    this.#released.abort();
    this.#released = new AbortController();
  }

  /**
   * Applies the fault that is set for the lease RPC arriving now, if any:
   * an injected error at once, a hang until {@linkcode clear} or `closing`.
   *
   * @param closing Aborts when the server shuts down.
   * @returns What the request does next.
   */
  async apply(closing: AbortSignal): Promise<FaultOutcome> {
    const kind = this.#kind;
    if (kind === null) return "serve";
    if (--this.#remaining <= 0) this.#kind = null;
    if (kind === "error") return "fail";
    const released = this.#released.signal;
    this.#hanging++;
    try {
      await aborted(AbortSignal.any([released, closing]));
    } finally {
      this.#hanging--;
    }
    return released.aborted ? "serve" : "closing";
  }

  #set(kind: "error" | "hang", count: number): void {
    if (!(count >= 1)) {
      throw new RangeError(`fault count must be at least 1, got ${count}`);
    }
    this.#kind = kind;
    this.#remaining = count;
  }
}
