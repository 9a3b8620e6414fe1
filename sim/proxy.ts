/**
 * A loopback TCP proxy the chaos tests put between one pod's helpers and
 * the lease server, to cut that pod off the way a network does while the
 * server stays healthy for everyone else. Modes, switchable at any time:
 *
 * - `pass`: bytes flow both ways.
 * - `drop`: every connection is closed at once, new ones as soon as they are
 *   accepted (a refused or reset connection).
 * - `blackhole`: connections are accepted and bytes are read but never
 *   delivered (a silent partition: requests hang until the client gives up).
 * - `delay`: every chunk is held `delayMs` before it is delivered; a
 *   connection closed by either side meanwhile is torn down and its held
 *   chunks are discarded (so a request the client abandoned never arrives).
 *
 * Changing the mode tears down the open connections, as a network change
 * breaks flows, so no connection carries a half-delivered request into the
 * next mode.
 *
 * @module
 */
import { aborted } from "../lib/state/clock.ts";

/** The proxy's behaviour; see the module doc. */
export type ProxyMode =
  | { kind: "pass" }
  | { kind: "drop" }
  | { kind: "blackhole" }
  | { kind: "delay"; delayMs: number };

interface Link {
  client: Deno.TcpConn;
  upstream?: Deno.TcpConn;
  closed: AbortController;
}

function closeQuietly(c: Deno.Conn | undefined): void {
  try {
    c?.close();
  } catch {
    // already closed
  }
}

/** See the module doc; start with {@linkcode FaultProxy.start}. */
export class FaultProxy implements AsyncDisposable {
  #listener: Deno.TcpListener;
  #upstreamPort: number;
  #mode: ProxyMode = { kind: "pass" };
  #links = new Set<Link>();
  #accepting: Promise<void>;
  #tasks = new Set<Promise<void>>();

  private constructor(listener: Deno.TcpListener, upstreamPort: number) {
    this.#listener = listener;
    this.#upstreamPort = upstreamPort;
    this.#accepting = this.#acceptLoop();
  }

  /** Listens on 127.0.0.1 (any free port) and forwards to 127.0.0.1:`upstreamPort`. */
  static start(upstreamPort: number): FaultProxy {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    return new FaultProxy(listener, upstreamPort);
  }

  /** The URL to give a pod as its API server. */
  get url(): string {
    return `http://127.0.0.1:${this.#listener.addr.port}`;
  }

  /** The current mode. */
  get mode(): ProxyMode {
    return this.#mode;
  }

  /** Switches the mode and tears down the open connections. */
  set(mode: ProxyMode): void {
    this.#mode = mode;
    for (const link of [...this.#links]) this.#teardown(link);
  }

  async #acceptLoop(): Promise<void> {
    for (;;) {
      let client: Deno.TcpConn;
      try {
        client = await this.#listener.accept();
      } catch {
        return; // listener closed
      }
      if (this.#mode.kind === "drop") {
        closeQuietly(client);
        continue;
      }
      const link: Link = { client, closed: new AbortController() };
      this.#links.add(link);
      this.#track(this.#serve(link));
    }
  }

  #track(task: Promise<void>): void {
    const t = task.catch(() => {}).finally(() => this.#tasks.delete(t));
    this.#tasks.add(t);
  }

  #teardown(link: Link): void {
    if (link.closed.signal.aborted) return;
    link.closed.abort();
    this.#links.delete(link);
    closeQuietly(link.client);
    closeQuietly(link.upstream);
  }

  async #serve(link: Link): Promise<void> {
    if (this.#mode.kind !== "blackhole") {
      try {
        link.upstream = await Deno.connect({
          hostname: "127.0.0.1",
          port: this.#upstreamPort,
        });
      } catch {
        this.#teardown(link); // server down: the client sees a reset
        return;
      }
      if (link.closed.signal.aborted) {
        closeQuietly(link.upstream);
        return;
      }
    }
    const up = this.#pump(link, link.client, () => link.upstream);
    const down = link.upstream
      ? this.#pump(link, link.upstream, () => link.client)
      : Promise.resolve();
    await Promise.all([up, down]);
  }

  /**
   * Reads `from` until it closes (then tears the link down) and delivers
   * each chunk to `to()` as the mode says, in order, from a queue of its
   * own so that a close is noticed even while chunks are held.
   */
  async #pump(
    link: Link,
    from: Deno.Conn,
    to: () => Deno.Conn | undefined,
  ): Promise<void> {
    const queue: { due: number; bytes: Uint8Array }[] = [];
    let wake: (() => void) | undefined;
    const writer = (async () => {
      while (!link.closed.signal.aborted) {
        const next = queue.shift();
        if (!next) {
          await Promise.race([
            new Promise<void>((r) => wake = r),
            aborted(link.closed.signal),
          ]);
          continue;
        }
        const wait = next.due - performance.now();
        if (wait > 0) {
          await aborted(
            AbortSignal.any([link.closed.signal, AbortSignal.timeout(wait)]),
          );
        }
        if (link.closed.signal.aborted) return;
        const dst = to();
        if (!dst) continue;
        try {
          let off = 0;
          while (off < next.bytes.length) {
            off += await dst.write(next.bytes.subarray(off));
          }
        } catch {
          this.#teardown(link);
        }
      }
    })();
    const buf = new Uint8Array(16 * 1024);
    try {
      for (;;) {
        const n = await from.read(buf);
        if (n === null) break;
        const mode = this.#mode;
        if (mode.kind === "blackhole") continue;
        if (mode.kind === "drop") break;
        queue.push({
          due: performance.now() + (mode.kind === "delay" ? mode.delayMs : 0),
          bytes: buf.slice(0, n),
        });
        wake?.();
      }
    } catch {
      // reset or closed by a teardown
    }
    this.#teardown(link);
    wake?.();
    await writer;
  }

  /** Stops listening and tears every connection down. */
  async close(): Promise<void> {
    try {
      this.#listener.close();
    } catch {
      // already closed
    }
    for (const link of [...this.#links]) this.#teardown(link);
    await this.#accepting;
    while (this.#tasks.size > 0) await Promise.all([...this.#tasks]);
  }

  /** Same as {@linkcode FaultProxy.close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
