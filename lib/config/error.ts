/**
 * The error type of a configuration the helper must not start with, in a
 * module of its own so that every module that reports a configuration
 * problem (the health endpoint's address, say) can throw it without loading
 * the configuration itself.
 *
 * @module
 */

/**
 * A configuration the helper must not start with. Its own class so that a
 * subcommand can tell "the operator must fix the pod spec" (print the message,
 * exit 1) from a bug. The message never contains the API key.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.throws(
 *   () => {
 *     throw new ConfigError("lease name is required");
 *   },
 *   { message: "invalid configuration: lease name is required" },
 * );
 * ```
 */
export class ConfigError extends Error {
  /** The problem alone, without the `invalid configuration: ` prefix. */
  readonly problem: string;
  /**
   * Wraps `problem` as `invalid configuration: <problem>`.
   *
   * @param problem What is wrong, with which input, and what to do.
   */
  constructor(problem: string) {
    super(`invalid configuration: ${problem}`);
    this.name = "ConfigError";
    this.problem = problem;
  }
}
