/**
 * Start-up shared by the lease-holding subcommands (`acquire`, `renew`,
 * `run`): parse and validate the configuration, build the logger and the
 * client, and turn SIGTERM/SIGINT into an `AbortSignal`. One place, so the
 * three roles cannot disagree on how they start or stop.
 *
 * @module
 */
import { apiKeySourceFromConfig } from "../lease/api_key.ts";
import { createHttpLeaseClient } from "../lease/client.ts";
import type { Clock } from "../state/clock.ts";
import {
  type Config,
  CONFIG_FLAGS_HELP,
  ConfigError,
  type ExtraFlag,
  formatExtraFlagsHelp,
  parseCommandLine,
  resolveConfig,
} from "../config/config.ts";
import type { LeaseClient } from "../lease/rpc.ts";
import { createLogger, type Logger } from "../obs/log.ts";

/** A started subcommand: its configuration, its own flags and a logger carrying the lease fields. */
export interface Started {
  /** The validated configuration. */
  config: Config;
  /** The subcommand's own flags (see {@linkcode ExtraFlag}). */
  extra: Record<string, string | boolean | undefined>;
  /** Logs with `lease`, `namespace` and `holder` on every line. */
  logger: Logger;
}

/** What a subcommand tells {@linkcode start} about itself. */
export interface CommandSpec {
  /** The subcommand's name, for messages. */
  name: string;
  /** The usage line(s) and a paragraph on what it does. */
  usage: string;
  /** Flags of its own, beyond the configuration flags. */
  flags?: Record<string, ExtraFlag>;
}

/** Exit status for a configuration error (the same as any failure, as upstream). */
export const EXIT_FAILURE = 1;

/**
 * Parses the command line and the environment. Returns an exit code instead
 * of a configuration when the command is done already: `--help` (0), or a
 * configuration error (printed as one line on stderr, 1).
 */
export function start(
  spec: CommandSpec,
  args: string[],
  env: Record<string, string | undefined> = Deno.env.toObject(),
): Started | number {
  const flags = {
    help: { type: "boolean", short: "h", help: "show this help" },
    ...spec.flags,
  } as Record<
    string,
    ExtraFlag
  >;
  try {
    const line = parseCommandLine(args, flags);
    if (line.extra.help === true) {
      console.log(
        `${spec.usage}\nFlags:\n${
          formatExtraFlagsHelp(flags)
        }\n${CONFIG_FLAGS_HELP}`,
      );
      return 0;
    }
    const config = resolveConfig(env, line.flags);
    const logger = createLogger({ format: config.logFormat }).with({
      lease: config.leaseName,
      namespace: config.leaseNamespace,
      holder: config.holder,
    });
    return { config, extra: line.extra, logger };
  } catch (e) {
    if (!(e instanceof ConfigError || e instanceof RangeError)) throw e;
    console.error(`berth-acquire ${spec.name}: ${e.message}`);
    return EXIT_FAILURE;
  }
}

/** Builds the HTTP lease client for `config` (key source, TLS options, the lease key). */
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

/**
 * An `AbortSignal` that aborts on the first SIGTERM or SIGINT. The listeners
 * stay installed until `dispose()`, so a second signal does not kill the
 * process by default action while it finishes (for example a release).
 */
export function shutdownSignal(
  logger: Logger,
): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const names: Deno.Signal[] = ["SIGTERM", "SIGINT"];
  const handlers = names.map((name) => {
    const handler = () => {
      if (controller.signal.aborted) {
        logger.info("signal received again; still finishing", { signal: name });
        return;
      }
      logger.info("signal received; shutting down", { signal: name });
      controller.abort(new DOMException(`received ${name}`, "AbortError"));
    };
    Deno.addSignalListener(name, handler);
    return [name, handler] as const;
  });
  return {
    signal: controller.signal,
    dispose: () =>
      handlers.forEach(([n, h]) => Deno.removeSignalListener(n, h)),
  };
}

/** Turns a start-up failure (bad CA bundle, missing key file, ...) into one log line and an exit code. */
export function startupFailure(
  logger: Logger,
  what: string,
  e: unknown,
): number {
  logger.error(what, { error: e instanceof Error ? e.message : String(e) });
  return EXIT_FAILURE;
}
