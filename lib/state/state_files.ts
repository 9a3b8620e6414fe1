/**
 * The file names in the state directory, fixed by the webhook and the probe
 * argv: one list for the state directory's reads and writes, the probe's
 * install (the executable goes in as `check`) and the names a copied
 * library may not take.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { STATE_FILES } from "./state_files.ts";
 * assert.equal(STATE_FILES.marker, "healthy");
 * ```
 *
 * @module
 */

/** Each state file's name, by what it holds. */
export const STATE_FILES = {
  holder: "holder",
  token: "token",
  marker: "healthy",
  check: "check",
} as const;
