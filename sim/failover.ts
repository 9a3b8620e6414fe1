/**
 * Repeated failovers on a {@linkcode Lab}: a holder pod and a standby pod
 * waiting in its init container; a fault hits the holder (or the server);
 * the round ends when a new token's workload writes. A standby that took
 * over gets a fresh standby behind it, and the old holder is stopped, as a
 * controller replacing pods would. The chaos tests and the failover
 * benchmark both drive their rounds through it.
 *
 * @module
 */
import type { Lab } from "./lab.ts";
import type { Pod } from "./pod.ts";

/**
 * The faults a round can inject:
 * - `blackhole`, `drop`, `delay`: the holder's fault proxy (see sim/proxy.ts).
 * - `sidecar-kill`: SIGKILL the holder's sidecar and keep it down.
 * - `server-500`, `server-hang`: every RPC fails / hangs until the holder's
 *   lease has expired on the server, then the server recovers.
 * - `server-restart`: the server goes down for one TTL and comes back with
 *   no leases (tokens restart at 1).
 */
export type Fault =
  | "blackhole"
  | "drop"
  | "delay"
  | "sidecar-kill"
  | "server-500"
  | "server-hang"
  | "server-restart";

/** Every fault, in the order the chaos tests run them. */
export const ALL_FAULTS: readonly Fault[] = [
  "blackhole",
  "drop",
  "delay",
  "sidecar-kill",
  "server-500",
  "server-hang",
  "server-restart",
];

/** What one round did. */
export interface RoundResult {
  /** The fault injected. */
  fault: Fault;
  /** The holder hit by it. */
  from: string;
  /** The pod whose workload holds the new token (may be `from` itself). */
  to: string;
  /** Wall-clock ms of the injection. */
  injectedAt: number;
  /** Wall-clock ms of the new holder's first journal line. */
  newStart: number;
}

/** The key of a grant: server epoch and token. */
function keyOf(e: { epoch: number; token: number }): string {
  return `${e.epoch}:${e.token}`;
}

/** See the module doc. */
export class FailoverDriver {
  #lab: Lab;
  #next = 0;
  #holder: Pod | undefined;
  #standby: Pod | undefined;
  #key = "";
  #stopping: Promise<void>[] = [];

  /** Drives `lab`, which must have no pods yet. */
  constructor(lab: Lab) {
    this.#lab = lab;
  }

  /** The pod holding the lease now. */
  get holder(): Pod {
    if (!this.#holder) throw new Error("begin() first");
    return this.#holder;
  }

  #newPod(bound: AbortSignal): Promise<Pod> {
    const name = `pod-${String.fromCharCode(97 + (this.#next % 26))}${
      this.#next >= 26 ? Math.floor(this.#next / 26) : ""
    }`;
    this.#next++;
    return this.#lab.addPod(name, bound);
  }

  /** Starts the first holder and its standby; resolves once the holder's workload writes. */
  async begin(bound: AbortSignal): Promise<void> {
    const lab = this.#lab;
    const holder = await this.#newPod(bound);
    await lab.waitForLine(
      `${holder.name}'s first line`,
      (l) => l.pod === holder.name,
      bound,
    );
    this.#holder = holder;
    this.#key = this.#latestGrantKey(holder.name) ?? "";
    this.#standby = await this.#newPod(bound);
    await this.#steady(bound);
  }

  #latestGrantKey(pod: string): string | undefined {
    const holder = this.#lab.pod(pod).holder;
    const g = this.#lab.server.events.findLast((e) =>
      e.kind === "acquired" && e.holder === holder
    );
    return g && keyOf(g);
  }

  /**
   * Waits for the steady state a fault should hit: the holder renewed since
   * its workload started and the standby is waiting in its init container.
   */
  async #steady(bound: AbortSignal): Promise<void> {
    const lab = this.#lab;
    const holder = this.holder;
    const standby = this.#standby!;
    const since = Date.now();
    await lab.waitFor(
      `${holder.name} to renew`,
      () =>
        lab.server.events.some((e) =>
          e.at >= since && e.holder === holder.holder && e.kind === "renewed"
        ),
      bound,
    );
    await lab.waitFor(
      `${standby.name} to wait for the lease`,
      () =>
        standby.events.some((e) =>
          e.kind === "log" &&
          e.record.msg === "lease held by another, waiting"
        ),
      bound,
    );
  }

  /**
   * Injects `fault` on the holder, waits for a new token's workload to
   * write, heals the fault and replaces pods as needed. `bound` limits the
   * whole round. With `keepOldMs`, the old holder is stopped only that long
   * after the round (in the background), so its kubelet restarts its main
   * container again after a crash-loop back-off step, beside the new holder;
   * its fault stays until then, so its sidecar cannot win the lease back.
   */
  async round(
    fault: Fault,
    bound: AbortSignal,
    o: { keepOldMs?: number } = {},
  ): Promise<RoundResult> {
    const lab = this.#lab;
    const holder = this.holder;
    const proxy = lab.proxies.get(holder.name)!;
    const ttlMs = lab.options.ttlSeconds * 1000;
    const injectedAt = Date.now();
    switch (fault) {
      case "blackhole":
      case "drop":
        proxy.set({ kind: fault });
        break;
      case "delay":
        // Longer than any RPC's bound (one heartbeat): nothing gets through in time.
        proxy.set({
          kind: "delay",
          delayMs:
            (lab.options.heartbeatSeconds ?? lab.options.ttlSeconds / 3) *
              1000 + 500,
        });
        break;
      case "sidecar-kill":
        holder.killSidecar({ holdRestart: true });
        break;
      case "server-500":
      case "server-hang": {
        const s = lab.server.server;
        if (fault === "server-500") s.faults.failAll();
        else s.faults.hangAll();
        // Recover once the holder's lease has expired on the server.
        const expiry = lab.serverExpiry(holder.name) ?? injectedAt + ttlMs;
        await lab.waitFor(
          "the holder's lease to expire on the server",
          () => Date.now() > expiry + 200,
          bound,
        );
        s.faults.clear();
        break;
      }
      case "server-restart":
        await lab.server.down();
        await lab.waitFor(
          "one TTL of server downtime",
          () => Date.now() >= injectedAt + ttlMs + 500,
          bound,
        );
        await lab.server.up();
        break;
    }
    // The round ends when a token granted after the injection is in use.
    const before = this.#key;
    const standby = this.#standby?.name;
    let grant: { pod: string; token: number; at: number } | undefined;
    await lab.waitFor(
      `a new token to be granted (fault on ${holder.name}, standby ${standby})`,
      () => {
        const g = lab.server.events.find((e) =>
          e.at >= injectedAt && e.kind === "acquired" && keyOf(e) !== before
        );
        if (!g) return false;
        const pod = lab.pods.find((p) => p.holder === g.holder);
        if (!pod) return false;
        grant = { pod: pod.name, token: g.token, at: g.at };
        this.#key = keyOf(g);
        return true;
      },
      bound,
    );
    const g = grant!;
    const first = await lab.waitForLine(
      `${g.pod}'s workload to write token ${g.token} (fault on ${holder.name}, standby ${standby})`,
      (l) => l.pod === g.pod && l.token === g.token && l.at >= g.at,
      bound,
    );
    // Heal, unless the old holder lost the lease and lingers: its fault
    // stays until it is stopped, as a replaced pod cut off stays cut off.
    // Healed, its sidecar would compete for the lease again (it reacquires
    // after a loss, as the Go helper's does) and could win the next round
    // with a pod that is about to stop, whose workload never writes.
    const lingers = g.pod !== holder.name && (o.keepOldMs ?? 0) > 0;
    if (!lingers) {
      proxy.set({ kind: "pass" });
      holder.releaseSidecar();
    }
    const result: RoundResult = {
      fault,
      from: holder.name,
      to: g.pod,
      injectedAt,
      newStart: first.at,
    };
    if (g.pod !== holder.name) {
      // The standby took over: retire the old holder, queue a new standby.
      this.#holder = lab.pod(g.pod);
      const keep = o.keepOldMs ?? 0;
      this.#stopping.push(
        new Promise((r) => setTimeout(r, keep)).then(() => holder.stop()),
      );
      this.#standby = await this.#newPod(bound);
    }
    await this.#steady(bound);
    return result;
  }

  /**
   * A fault that must not cost the lease: the holder's workload crashes
   * (`main-crash`: the kubelet restarts it at once and it runs on with the
   * lease) or its sidecar is killed and restarted at once
   * (`sidecar-restart`: the new sidecar adopts the lease from the state
   * volume). Resolves when the holder is back to normal.
   */
  async blip(
    kind: "main-crash" | "sidecar-restart",
    bound: AbortSignal,
  ): Promise<void> {
    const lab = this.#lab;
    const holder = this.holder;
    const container = kind === "main-crash" ? "main" : "renew";
    const starts = () =>
      holder.events.filter((e) =>
        e.kind === "start" && e.container === container
      ).length;
    const before = starts();
    if (kind === "main-crash") holder.crashMain();
    else holder.killSidecar({ holdRestart: false });
    await lab.waitFor(
      `${holder.name}'s ${container} container to restart`,
      () => starts() > before,
      bound,
    );
    if (kind === "main-crash") {
      await lab.waitForLine(
        `${holder.name}'s restarted workload`,
        (l) => l.pod === holder.name && l.restart >= before,
        bound,
      );
    }
    await this.#steady(bound);
  }

  /** Waits for the retired pods to finish stopping. */
  async settle(): Promise<void> {
    await Promise.all(this.#stopping);
  }
}
