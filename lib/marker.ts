/**
 * The health marker: the file whose presence and freshness tell the main
 * container's liveness probe that its pod holds the lease.
 *
 * The marker's mtime is what upstream's probe checks. This project also
 * writes, inside the marker, the moment the gate closes on the node's
 * boot-time clock (which the probe in the main container reads the same way,
 * through `/proc/uptime`), so the probe fails on time even when the sidecar is
 * dead or wedged and nobody removes the marker. The content can only make the
 * verdict stricter: a marker without it (for example one written by the Go
 * helper) is judged by its mtime alone.
 *
 * This module is loaded by `check` on every probe: it imports nothing heavy.
 *
 * @module
 */

/** The deadlines a marker carries, on the boot-time clock (milliseconds since boot). */
export interface MarkerDeadlines {
  /** When the workload must be stopped: the local lease deadline minus the enforcement lead. */
  gateClosesBootMs: number;
  /** The local lease deadline itself (last confirmed send + TTL). */
  leaseDeadlineBootMs: number;
}

const HEADER = "berth-acquire health marker v1";

/** The marker's file content for `d`; small, line-oriented, readable with `cat`. */
export function formatMarker(d: MarkerDeadlines): string {
  return `${HEADER}\ngate_closes_boottime_ms=${
    Math.floor(d.gateClosesBootMs)
  }\n` +
    `lease_deadline_boottime_ms=${Math.floor(d.leaseDeadlineBootMs)}\n`;
}

/**
 * Reads the deadlines back. Returns `undefined` for content that is not ours
 * (an empty marker, or one written by the Go helper): such a marker is judged
 * by its mtime only. Throws when the content claims to be ours but is
 * malformed, so the probe fails closed.
 */
export function parseMarker(text: string): MarkerDeadlines | undefined {
  if (!text.startsWith(HEADER + "\n")) return undefined;
  const fields = new Map<string, string>();
  for (const line of text.slice(HEADER.length + 1).split("\n")) {
    if (line === "") continue;
    const eq = line.indexOf("=");
    if (eq <= 0) {
      throw new Error(`malformed marker line ${JSON.stringify(line)}`);
    }
    fields.set(line.slice(0, eq), line.slice(eq + 1));
  }
  const num = (k: string): number => {
    const v = fields.get(k);
    if (v === undefined || !/^\d{1,16}$/.test(v)) {
      throw new Error(
        `marker field ${k} is missing or not a whole number of milliseconds`,
      );
    }
    return Number(v);
  };
  return {
    gateClosesBootMs: num("gate_closes_boottime_ms"),
    leaseDeadlineBootMs: num("lease_deadline_boottime_ms"),
  };
}
