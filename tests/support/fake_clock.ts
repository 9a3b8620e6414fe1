/**
 * A clock that moves only when a test says so, so timing logic (deadlines,
 * heartbeats, TERM-to-KILL grace) is tested exactly and without sleeping.
 *
 * @module
 */
import { type Clock, sleepOn } from "../../lib/state/clock.ts";

interface Waiter {
  at: number;
  fire: () => void;
}

/** Lets pending promise chains run after the clock fired something. */
export async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    await new Promise((r) => setTimeout(r, 0));
  }
}

/** A {@linkcode Clock} whose time is advanced by the test. */
export class FakeClock implements Clock {
  #now: number;
  #bootOffset: number;
  #waiters: Waiter[] = [];

  /** Starts at monotonic `start` ms; the boot clock reads `start + bootOffset`. */
  constructor(start = 1_000_000, bootOffset = 50_000_000) {
    this.#now = start;
    this.#bootOffset = bootOffset;
  }

  now(): number {
    return this.#now;
  }

  bootNow(): number {
    return this.#now + this.#bootOffset;
  }

  /** The wall clock moves with the monotonic one, from a fixed epoch offset. */
  wallNow(): number {
    return this.#now + 1_700_000_000_000;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  after(ms: number, fn: () => void): () => void {
    const w: Waiter = {
      at: this.#now + Math.max(0, ms),
      fire: () => {
        cancel();
        fn();
      },
    };
    const cancel = () => {
      this.#waiters = this.#waiters.filter((x) => x !== w);
    };
    this.#waiters.push(w);
    return cancel;
  }

  timeout(ms: number): AbortSignal {
    const c = new AbortController();
    const w: Waiter = {
      at: this.#now + Math.max(0, ms),
      fire: () => {
        this.#waiters = this.#waiters.filter((x) => x !== w);
        c.abort(new DOMException("timed out", "TimeoutError"));
      },
    };
    this.#waiters.push(w);
    return c.signal;
  }

  /** The earliest pending wake-up, if any. */
  nextWake(): number | undefined {
    return this.#waiters.reduce<number | undefined>(
      (m, w) => m === undefined || w.at < m ? w.at : m,
      undefined,
    );
  }

  /**
   * Moves time to `target`, firing every wait due on the way in order and
   * letting the code under test run after each one.
   */
  async advanceTo(target: number): Promise<void> {
    await settle();
    for (;;) {
      const due = this.#waiters
        .filter((w) => w.at <= target)
        .sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.#now = Math.max(this.#now, due.at);
      due.fire();
      await settle();
    }
    this.#now = Math.max(this.#now, target);
    await settle();
  }

  /**
   * Moves time to `target` without firing anything on the way, as a frozen
   * (SIGSTOPped) process finds it: what was due fires at the next
   * {@linkcode FakeClock.advanceTo}, late.
   */
  jumpTo(target: number): void {
    this.#now = Math.max(this.#now, target);
  }

  /** Moves time forward by `ms`; see {@linkcode FakeClock.advanceTo}. */
  advance(ms: number): Promise<void> {
    return this.advanceTo(this.#now + ms);
  }
}
