/**
 * Runs a function with exactly the given proxy variables in the process's
 * environment (fetch reads them when a client is built), putting the
 * process's own back before it returns.
 *
 * @module
 */
import {
  createHttpLeaseClient,
  type HttpLeaseClientOptions,
} from "../../lib/lease/client.ts";
import type { LeaseClient } from "../../lib/lease/rpc.ts";

/** Every proxy variable fetch reads, in both cases. */
export const PROXY_VARIABLES: readonly string[] = [
  "ALL_PROXY",
  "HTTPS_PROXY",
  "HTTP_PROXY",
  "NO_PROXY",
].flatMap((n) => [n, n.toLowerCase()]);

/**
 * @param vars The proxy variables to set (the others are unset).
 * @param fn What to run while they are.
 * @returns What `fn` returns.
 */
export function withProxyVariables<T>(
  vars: Record<string, string>,
  fn: () => T,
): T {
  const saved = PROXY_VARIABLES.map((n) => [n, Deno.env.get(n)] as const);
  try {
    for (const n of PROXY_VARIABLES) Deno.env.delete(n);
    for (const [n, v] of Object.entries(vars)) Deno.env.set(n, v);
    return fn();
  } finally {
    for (const [n, v] of saved) {
      if (v === undefined) Deno.env.delete(n);
      else Deno.env.set(n, v);
    }
  }
}

/**
 * Makes lease clients for `key`, each built while exactly the given proxy
 * variables are set.
 *
 * @param key The lease every client is for.
 * @returns `(vars, options) => client`.
 */
export function proxyClients(
  key: HttpLeaseClientOptions["key"],
): (
  vars: Record<string, string>,
  options: Partial<HttpLeaseClientOptions> & { apiServer: string },
) => LeaseClient {
  return (vars, options) =>
    withProxyVariables(vars, () => createHttpLeaseClient({ key, ...options }));
}
