/**
 * The development lease server as the simulator runs it: restartable on the
 * same port (a restart loses every lease, as the in-memory server does), and
 * recording every grant, renewal and release with the wall-clock time and
 * the server incarnation ("epoch") that made it. The journal analysis needs
 * those records to know which token a pod held when, and in which epoch,
 * because tokens restart at 1 after a restart.
 *
 * @module
 */
import { createLogger } from "../lib/obs/log.ts";
import { type DevServer, startDevServer } from "../lib/devserver/server.ts";

/** What the server did for a holder. */
export interface LeaseEvent {
  /** Wall-clock ms. */
  at: number;
  /** The server incarnation (0 for the first start, +1 per restart). */
  epoch: number;
  /** A grant (new token or same-holder re-acquire), a renewal, or a release. */
  kind: "acquired" | "renewed" | "released";
  /** The holder it was for. */
  holder: string;
  /** The fencing token involved. */
  token: number;
}

const KINDS: Record<string, LeaseEvent["kind"]> = {
  "lease acquired": "acquired",
  "lease renewed": "renewed",
  "lease released": "released",
};

/** See the module doc. Start with {@linkcode SimServer.start}. */
export class SimServer {
  /** Every grant, renewal and release, in order, across restarts. */
  readonly events: LeaseEvent[] = [];
  /** Wall-clock ms at which each epoch after the first began (epoch i+1 began at `epochStarts[i]`). */
  readonly epochStarts: number[] = [];
  #server: DevServer | undefined;
  #port = 0;
  #epoch = -1;

  private constructor() {}

  /** Starts the server on 127.0.0.1 (`port` 0: any free port). */
  static async start(port = 0): Promise<SimServer> {
    const s = new SimServer();
    s.#port = port;
    await s.up();
    return s;
  }

  /** The base URL (stable across restarts). */
  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  /** The port (stable across restarts). */
  get port(): number {
    return this.#port;
  }

  /** The current incarnation; see {@linkcode LeaseEvent.epoch}. */
  get epoch(): number {
    return this.#epoch;
  }

  /** The running server, for its fault switch and store; throws while it is down. */
  get server(): DevServer {
    if (!this.#server) throw new Error("the lease server is down");
    return this.#server;
  }

  /** True while the server is up. */
  get isUp(): boolean {
    return this.#server !== undefined;
  }

  /** Starts a new incarnation with no leases, on the same port. */
  async up(): Promise<void> {
    if (this.#server) return;
    const epoch = ++this.#epoch;
    if (epoch > 0) this.epochStarts.push(Date.now());
    const logger = createLogger({
      format: "json",
      level: "INFO",
      write: (line) => {
        const r = JSON.parse(line);
        const kind = KINDS[r.msg];
        if (kind === undefined) return;
        this.events.push({
          at: Date.now(),
          epoch,
          kind,
          holder: r.holder,
          token: r.fencing_token,
        });
      },
    });
    this.#server = await startDevServer({
      hostname: "127.0.0.1",
      port: this.#port,
      logger,
    });
    this.#port = this.#server.port;
  }

  /** Stops the server; its leases are gone for good. */
  async down(): Promise<void> {
    const s = this.#server;
    this.#server = undefined;
    // No faults.clear(): that would let hanging requests through; closing
    // answers them 500 instead.
    if (s) await s.close();
  }

  /** Stops the server for good. */
  close(): Promise<void> {
    return this.down();
  }

  /** Same as {@linkcode SimServer.close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
