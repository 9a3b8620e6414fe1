/**
 * A {@linkcode MarkerStore} in memory that journals each write and removal,
 * so a test sees them in order with what else an enforcer did.
 *
 * @module
 */
import type { MarkerStore } from "../../lib/enforce/enforcer.ts";
import type { MarkerDeadlines } from "../../lib/state/marker.ts";

/** See the module doc; `failRemove` makes removals reject. */
export class FakeMarker implements MarkerStore {
  present = true;
  written: MarkerDeadlines[] = [];
  failRemove = false;
  constructor(private journal: string[] = []) {}
  writeMarker(d: MarkerDeadlines): Promise<void> {
    this.journal.push("marker write");
    this.present = true;
    this.written.push(d);
    return Promise.resolve();
  }
  removeMarker(): Promise<void> {
    this.journal.push("marker remove");
    if (this.failRemove) return Promise.reject(new Error("read-only volume"));
    this.present = false;
    return Promise.resolve();
  }
}
