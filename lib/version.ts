/**
 * The version `--version` prints, kept in code (and checked against
 * `deno.json` by a test) so that printing it costs no file read.
 *
 * @module
 */

/** This build's version. */
export const VERSION = "0.1.0";
