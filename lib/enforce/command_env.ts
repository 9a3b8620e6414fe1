/**
 * What a supervised command is told about the lease, in its environment.
 * `run` and `gate` both start commands, and they must say the same thing in
 * the same words, so the mapping lives here, in a module small enough for
 * `gate` (which runs in the main container) to load.
 *
 * @module
 */

/** What the command is told about the lease. */
export interface CommandLease {
  /** The holder identity. */
  holder: string;
  /** The fencing token to pass to the systems it writes to. */
  token: number;
  /** The local lease deadline as wall-clock ms since the epoch; undefined: not known. */
  expiresAtMs?: number;
}

/**
 * The command's environment: `base` plus `BERTH_FENCING_TOKEN`,
 * `BERTH_HOLDER` and, when known, `BERTH_LEASE_EXPIRES_AT` (RFC 3339, UTC,
 * milliseconds rounded down: stop before it). `BERTH_API_KEY` is removed:
 * the command needs the token, not the credential that can take the lease.
 *
 * @param base The environment to start from (not modified).
 * @param lease The lease to describe.
 * @returns A new environment object.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const env = commandEnv(
 *   { PATH: "/usr/bin", BERTH_API_KEY: "s3cret" },
 *   { holder: "prod/a", token: 7, expiresAtMs: 1_500 },
 * );
 * assert.deepEqual(env, {
 *   PATH: "/usr/bin",
 *   BERTH_FENCING_TOKEN: "7",
 *   BERTH_HOLDER: "prod/a",
 *   BERTH_LEASE_EXPIRES_AT: "1970-01-01T00:00:01.500Z",
 * });
 * ```
 */
export function commandEnv(
  base: Record<string, string>,
  lease: CommandLease,
): Record<string, string> {
  const env = { ...base };
  delete env.BERTH_API_KEY;
  env.BERTH_FENCING_TOKEN = String(lease.token);
  env.BERTH_HOLDER = lease.holder;
  if (lease.expiresAtMs !== undefined) {
    env.BERTH_LEASE_EXPIRES_AT = new Date(Math.floor(lease.expiresAtMs))
      .toISOString();
  } else {
    delete env.BERTH_LEASE_EXPIRES_AT;
  }
  return env;
}
