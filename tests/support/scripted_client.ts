/**
 * A lease client whose answers the test gives one call at a time, so the
 * renewer and the acquire loop can be driven through every outcome with a
 * fake clock. A call that is never answered behaves like a hung server: it
 * ends only when its signal aborts.
 *
 * @module
 */
import type {
  GrantOutcome,
  LeaseClient,
  LeaseRecord,
  ReleaseOutcome,
} from "../../lib/lease/rpc.ts";

/** One RPC the code under test made. */
export interface ScriptedCall {
  rpc: "acquire" | "renew" | "release";
  holder: string;
  token?: number;
  ttlSeconds?: number;
  signal: AbortSignal;
  /** Clock reading when the call was made, if the test gave a clock. */
  at?: number;
  /** True once answered or aborted. */
  done: boolean;
  /** Answers the call (ignored when it already ended). */
  answer(outcome: GrantOutcome | ReleaseOutcome): void;
}

/** A lease record for answers; fields default to a fresh 10 s grant to `holder`. */
export function record(
  holder: string,
  fencingToken: number,
  over: Partial<LeaseRecord> = {},
): LeaseRecord {
  return {
    holder,
    fencingToken,
    // A fresh 10 s grant: acquiredAt is the renewal time (expiresAt - TTL).
    expiresAt: "2026-05-07T00:00:10Z",
    acquiredAt: "2026-05-07T00:00:00Z",
    ...over,
  };
}

/** See the module doc. */
export class ScriptedClient implements LeaseClient {
  readonly calls: ScriptedCall[] = [];
  #now?: () => number;
  /** Answers given automatically, in order, before a call is left pending. */
  readonly queue: Array<GrantOutcome | ReleaseOutcome> = [];

  constructor(now?: () => number) {
    this.#now = now;
  }

  /** The most recent call still waiting for an answer. */
  pending(): ScriptedCall | undefined {
    return this.calls.findLast((c) => !c.done);
  }

  /** All calls of one kind. */
  of(rpc: ScriptedCall["rpc"]): ScriptedCall[] {
    return this.calls.filter((c) => c.rpc === rpc);
  }

  #call<T>(c: Omit<ScriptedCall, "done" | "answer" | "at">): Promise<T> {
    return new Promise<T>((resolve) => {
      const call: ScriptedCall = {
        ...c,
        at: this.#now?.(),
        done: false,
        answer: (o) => {
          if (call.done) return;
          call.done = true;
          resolve(o as T);
        },
      };
      this.calls.push(call);
      const abort = () => {
        const timeout =
          (c.signal.reason as Error | undefined)?.name === "TimeoutError";
        call.answer(
          timeout
            ? { kind: "timeout", message: "bound reached" }
            : { kind: "aborted", message: "cancelled" },
        );
      };
      if (c.signal.aborted) abort();
      else c.signal.addEventListener("abort", abort, { once: true });
      const next = this.queue.shift();
      if (next) call.answer(next);
    });
  }

  acquire(
    holder: string,
    ttlSeconds: number,
    signal: AbortSignal,
  ): Promise<GrantOutcome> {
    return this.#call({ rpc: "acquire", holder, ttlSeconds, signal });
  }

  renew(
    holder: string,
    token: number,
    ttlSeconds: number,
    signal: AbortSignal,
  ): Promise<GrantOutcome> {
    return this.#call({ rpc: "renew", holder, token, ttlSeconds, signal });
  }

  release(
    holder: string,
    token: number,
    signal: AbortSignal,
  ): Promise<ReleaseOutcome> {
    return this.#call({ rpc: "release", holder, token, signal });
  }
}
