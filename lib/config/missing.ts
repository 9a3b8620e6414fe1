/**
 * The required settings that are not given, all of them, so one message can
 * name every one (a bare `run -- true` would otherwise take one attempt per
 * setting). Values given but wrong are left to `resolveConfig`, whose first
 * problem stays the message's first line.
 *
 * @module
 */
import type { ResolveOptions } from "./config.ts";
import { givenSettings } from "./given.ts";
import {
  type ConfigFlagName,
  type ConfigFlags,
  settingOf,
} from "./settings.ts";

/** A required setting that is not given. */
export interface MissingSetting {
  /** Its env variable, e.g. `BERTH_LEASE_NAME`. */
  env: string;
  /** Its flag without dashes, e.g. `lease-name`. */
  flag: string;
  /** Another way to give it, when there is one (`POD_NAMESPACE`). */
  or?: string;
}

/**
 * Every required setting that is not given, in the spec's validation order,
 * so that one message can name them all (a bare `run -- true` would
 * otherwise take one attempt per setting). Values that are given but wrong
 * are left to {@linkcode resolveConfig}.
 *
 * @param env The environment.
 * @param flags The configuration flags given.
 * @param options The role's options (a host holder needs no `POD_UID`).
 * @returns The missing settings; empty when none is.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.deepEqual(
 *   missingSettings({ BERTH_LEASE_NAME: "db" }, {}, {}).map((m) => m.env),
 *   ["BERTH_LEASE_NAMESPACE", "POD_UID", "BERTH_TTL_SECONDS", "BERTH_API_SERVER"],
 * );
 * ```
 */
export function missingSettings(
  env: Record<string, string | undefined>,
  flags: ConfigFlags,
  options: ResolveOptions = {},
): MissingSetting[] {
  const given = givenSettings(env, flags);
  const out: MissingSetting[] = [];
  const need = (flag: ConfigFlagName, or?: string) => {
    if (!given.has(flag)) {
      out.push({ env: settingOf(flag)!.env, flag, ...(or ? { or } : {}) });
    }
  };
  need("lease-name");
  if (!given.has("pod-namespace")) need("lease-namespace", "POD_NAMESPACE");
  const mode = flags.mode ?? (env.BERTH_MODE || "runtime-singleton");
  const podFacts = given.has("pod-name") || given.has("pod-namespace");
  if (
    mode === "runtime-singleton" && !given.has("holder-identity") &&
    (options.hostHolder === undefined || podFacts)
  ) {
    need("pod-uid", "BERTH_HOLDER_IDENTITY");
  }
  need("ttl-seconds");
  need("api-server");
  return out;
}
