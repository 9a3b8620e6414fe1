/**
 * Summary figures over a sample of measurements, shared by the chaos tests'
 * report and the benchmarks. Kept apart from the journal analysis
 * (sim/journal.ts), which judges what the workloads wrote and needs none of
 * them.
 *
 * @module
 */

/** The middle value (the mean of the two middle ones for an even count); NaN for none. */
export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
