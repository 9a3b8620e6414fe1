/**
 * How every subcommand reads a flag: with one dash or two, as Go's flag
 * package (and so the Go helper) reads it. Its own module, a leaf, for the one
 * argument parser (argv.ts), which the probe loads on every start.
 *
 * @module
 */

/**
 * The argument with two leading dashes when it has one.
 *
 * @param arg One command-line argument.
 * @returns `--max-age=5s` for `-max-age=5s`; `arg` itself when it has two
 * dashes already, none, or is a lone `-`.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(withTwoDashes("-max-age"), "--max-age");
 * assert.equal(withTwoDashes("--json"), "--json");
 * assert.equal(withTwoDashes("-"), "-");
 * ```
 */
export function withTwoDashes(arg: string): string {
  return arg.length > 1 && arg[0] === "-" && arg[1] !== "-" ? `-${arg}` : arg;
}
