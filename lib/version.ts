/**
 * The version `--version` prints. Kept in code (and checked against
 * `deno.json` by a test) so that printing it costs no file read.
 *
 * @module
 */

/** This build's version; must equal `version` in `deno.json`. */
export const VERSION = "0.1.0";
