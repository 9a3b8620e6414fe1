/**
 * The configuration variables that are set but cannot be read as text.
 *
 * @module
 */
import { CONFIG_SETTINGS } from "./settings.ts";

/**
 * The configuration variables (`BERTH_*`, `POD_*`) that are set but are not
 * valid UTF-8. `Deno.env.toObject()` leaves such a variable out, so without
 * this check a `BERTH_HOLDER_IDENTITY` with a stray byte would silently count
 * as unset (and another holder be derived), where the Go helper uses it.
 *
 * @param get Reads one variable; throws when it is not valid UTF-8.
 * Default `Deno.env.get`.
 * @returns The names, in the settings table's order.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const get = (name: string) => {
 *   if (name === "BERTH_HOLDER_IDENTITY") throw new TypeError("not valid unicode");
 *   return undefined;
 * };
 * assert.deepEqual(unreadableVariables(get), ["BERTH_HOLDER_IDENTITY"]);
 * ```
 */
export function unreadableVariables(
  get: (name: string) => string | undefined = (n) => Deno.env.get(n),
): string[] {
  return CONFIG_SETTINGS.map((s) => s.env).filter((name) => {
    try {
      get(name);
      return false;
    } catch {
      return true;
    }
  });
}
