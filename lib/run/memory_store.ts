/**
 * `run`'s renewer store: the handoff from `run`'s own acquisition to its
 * renewer, in memory, so the renewer adopts it exactly as the sidecar adopts
 * the init container's (lib/hold/renewer_store.ts).
 *
 * @module
 */
import type { RenewerStore } from "../hold/handoff.ts";
import type { MarkerDeadlines } from "../state/marker.ts";
import type { StateDir } from "../state/state_dir.ts";

/**
 * The handoff from `run`'s own acquisition to its renewer, in memory: the
 * renewer adopts it as the sidecar adopts the init container's. Writes go
 * to the gate's private directory and to the state directory, when one is
 * configured.
 */
export class MemoryRenewerStore implements RenewerStore {
  /** Starts from `run`'s own acquisition; writes go to every one of `dirs`. */
  constructor(
    private holder: string,
    private token: number,
    private marker: MarkerDeadlines | undefined,
    private dirs: StateDir[],
  ) {}
  readHolder(): string | undefined {
    return this.holder;
  }
  readToken(): number | undefined {
    return this.token;
  }
  readMarkerDeadlines(): MarkerDeadlines | undefined {
    return this.marker;
  }
  async writeHolder(holder: string): Promise<void> {
    for (const d of this.dirs) await d.writeHolder(holder);
    this.holder = holder;
  }
  async writeToken(token: number): Promise<void> {
    for (const d of this.dirs) await d.writeToken(token);
    this.token = token;
  }
}
