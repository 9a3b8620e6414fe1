/**
 * The HTTP lease client a resolved configuration describes, for the
 * lease-holding subcommands (`acquire`, `renew`, `run`).
 *
 * @module
 */
import type { Config } from "../config/config.ts";
import { apiKeySourceFromConfig } from "../lease/api_key.ts";
import { createHttpLeaseClient } from "../lease/client.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import type { Logger } from "../obs/log.ts";
import type { Clock } from "../state/clock.ts";

/**
 * Builds the HTTP lease client for `config` (key source, TLS options, the
 * lease key).
 *
 * @param config The resolved configuration.
 * @param logger Where the client and the key source report.
 * @param clock Paces the key file's re-reads.
 * @returns The client.
 * @throws {Error} When the key file, the CA bundle or the URL cannot be used.
 */
export async function clientFor(
  config: Config,
  logger: Logger,
  clock: Clock,
): Promise<LeaseClient> {
  const auth = await apiKeySourceFromConfig(config, { clock, logger });
  return createHttpLeaseClient({
    apiServer: config.apiServer,
    key: { namespace: config.leaseNamespace, name: config.leaseName },
    auth,
    caBundleFile: config.caBundleFile,
    serverName: config.serverName,
    insecureSkipTlsVerify: config.insecureSkipTlsVerify,
    logger,
  });
}
