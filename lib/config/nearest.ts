/**
 * "Did you mean ...?" for misspelled names: a variable or a flag that is not
 * known is almost always a typo of one that is, and naming that one is what
 * turns a silent fallback to a default into a one-line fix.
 *
 * @module
 */
import { withTwoDashes } from "./flag_name.ts";

/**
 * The optimal-string-alignment distance between `a` and `b`: insertions,
 * deletions, substitutions and transpositions of two adjacent characters each
 * count 1 (`LEASE_NAEM` is one step from `LEASE_NAME`).
 *
 * @param a One string.
 * @param b The other.
 * @returns The number of edits that turn `a` into `b`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(editDistance("ttl-secnods", "ttl-seconds"), 1);
 * ```
 */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    rows.push([i, ...new Array<number>(b.length).fill(0)]);
  }
  for (let j = 0; j <= b.length; j++) rows[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(
        rows[i - 1][j] + 1,
        rows[i][j - 1] + 1,
        rows[i - 1][j - 1] + cost,
      );
      if (
        i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]
      ) {
        d = Math.min(d, rows[i - 2][j - 2] + 1);
      }
      rows[i][j] = d;
    }
  }
  return rows[a.length][b.length];
}

/**
 * The known name `given` most likely misspells: the only known name that
 * `given` is a prefix of (`ttl` for `ttl-seconds`), or else the closest by
 * {@linkcode editDistance} (case ignored) within a third of its length (at
 * least 1 edit). Undefined when nothing is that close, so an unrelated name
 * gets no misleading suggestion.
 *
 * @param given The unknown name as written.
 * @param known The names that exist.
 * @returns The suggestion, or undefined.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(nearest("lease-nmae", ["lease-name", "lease-namespace"]), "lease-name");
 * assert.equal(nearest("colour", ["lease-name"]), undefined);
 * ```
 */
export function nearest(
  given: string,
  known: readonly string[],
): string | undefined {
  const g = given.toLowerCase();
  const extending = known.filter((k) => k.toLowerCase().startsWith(g));
  if (g !== "" && extending.length === 1) return extending[0];
  const limit = Math.max(1, Math.floor(g.length / 3));
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(g, k.toLowerCase());
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return bestDistance <= limit ? best : undefined;
}

/**
 * The tail of an unknown-flag message (argv.ts, the one argument parser):
 * the nearest known flag, if one is.
 *
 * @param written The flag as written (dashes included, or none), without its
 * value.
 * @param known The flags the subcommand takes, without dashes.
 * @returns `: did you mean --interval?`, or `""` when none is near.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(flagSuggestion("--intervl", ["interval", "grace"]), ": did you mean --interval?");
 * ```
 */
export function flagSuggestion(
  written: string,
  known: readonly string[],
): string {
  const name = written.startsWith("-")
    ? withTwoDashes(written).slice(2)
    : written;
  const suggestion = nearest(name, known);
  return suggestion === undefined ? "" : `: did you mean --${suggestion}?`;
}
