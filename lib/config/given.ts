/**
 * Which settings were given explicitly, by a non-empty env variable or by a
 * flag (even an empty one): the rule `resolveConfig` applies when
 * it chooses between env, flags and defaults (`config.ts`, "Rules worth
 * knowing"), as a set. For the roles whose behaviour depends on whether a
 * setting was given at all: `run` writes a state directory only when one is
 * configured, and the list of missing settings (`missing.ts`) names only
 * those not given.
 *
 * @module
 */
import {
  CONFIG_SETTINGS,
  type ConfigFlagName,
  type ConfigFlags,
} from "./settings.ts";

/**
 * The settings given explicitly: by a non-empty env variable or by a flag
 * (even an empty one), the same rule `resolveConfig` (`config.ts`) applies. For a
 * role whose behaviour depends on whether a setting was given at all (`run`
 * writes a state directory only when one is configured).
 *
 * @param env The environment.
 * @param flags The configuration flags given.
 * @returns The flag names of the settings given.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const given = givenSettings(
 *   { BERTH_TTL_SECONDS: "30", BERTH_LEASE_NAME: "" },
 *   { "state-dir": "" },
 * );
 * assert.deepEqual([...given].sort(), ["state-dir", "ttl-seconds"]);
 * ```
 */
export function givenSettings(
  env: Record<string, string | undefined>,
  flags: ConfigFlags,
): Set<ConfigFlagName> {
  const out = new Set<ConfigFlagName>();
  for (const s of CONFIG_SETTINGS) {
    const v = env[s.env];
    if ((v !== undefined && v !== "") || flags[s.flag] !== undefined) {
      out.add(s.flag);
    }
  }
  return out;
}
