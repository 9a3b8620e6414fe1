/**
 * The `berth-acquire dev-server` subcommand: the development lease server
 * (`lib/devserver/`) started from flags, serving until a stop signal.
 * Its own module so the server stays a library the tests and the simulator
 * start in-process, and so its errors read like the rest of the CLI's: one
 * line on stderr naming the flag, the value and what is wanted.
 *
 * @module
 */
import {
  isSet,
  parseArgv,
  UsageError as ArgvUsageError,
} from "../config/argv.ts";
import { parseApiKeys } from "../devserver/api_keys.ts";
import { type DevServer, startDevServer } from "../devserver/server.ts";
import { type HostPort, ListenError, parseHostPort } from "../net/addr.ts";
import { aborted } from "../state/clock.ts";
import { createLogger, type LogLevel, parseLogLevel } from "../obs/log.ts";
import { shutdownSignal } from "./signals.ts";
import { EXIT_USAGE } from "./exit_codes.ts";

const HELP = `berth-acquire dev-server: a DEVELOPMENT Berth lease server

This is a development server: it keeps leases in memory only, so all state
(holders, fencing tokens) is lost when it exits. It is for trying the helper,
demos and tests. It is NOT for production: use a real Berth API server there.

Usage:
  berth-acquire dev-server [flags]

Flags:
  --listen HOST:PORT       address to listen on (default 127.0.0.1:8080;
                           port 0 picks a free port)
  --tls-cert-file PATH     serve HTTPS with this PEM certificate (needs --tls-key-file)
  --tls-key-file PATH      PEM private key for --tls-cert-file
  --api-key KEY_ID:SHA256  require "Authorization: Bearer <API key>" whose SHA-256
                           (hex) is SHA256; KEY_ID is the caller's tenant, and
                           holders must be KEY_ID or start with KEY_ID/.
                           Repeatable. Hash an API key with: printf %s KEY | sha256sum
  --log-level LEVEL        lowest level logged: debug, info, warn or error
                           (env BERTH_LOG_LEVEL; default info)
  --help, -h               show this help

Flags are written --name=value or --name value (one dash works too).
On start it prints one line on stdout: "berth dev-server listening on URL".
It runs until SIGINT, SIGTERM, SIGHUP or SIGQUIT, then exits 0. A usage error
is one line on stderr and exit 78; a start-up error (the address cannot be
bound, a TLS file cannot be read) one line and exit 1.
`;

/**
 * The flags that take a value, and what the value must be (for "needs a
 * value" errors). `--api-key` takes one per use; for the others the last one
 * given wins, as in Go. `--help` (`-h`) is the one flag without a value.
 */
const VALUE_FLAGS = {
  listen: "HOST:PORT",
  "tls-cert-file": "a PEM certificate file",
  "tls-key-file": "a PEM private key file",
  "api-key": "KEY_ID:SHA256",
  "log-level": "debug, info, warn or error",
} as const;

type ValueFlag = keyof typeof VALUE_FLAGS;

/** A command-line mistake; printed as one line after the subcommand's name. */
class UsageError extends Error {}

/** The server's settings from the command line. */
interface DevServerFlags {
  /** Where to listen. */
  listen: HostPort;
  /** HTTPS files, when both were given. */
  tls?: { certFile: string; keyFile: string };
  /** The `--api-key` specs, validated. */
  apiKeys: string[];
  /** The lowest level logged. */
  logLevel: LogLevel;
}

/**
 * Parses the subcommand's arguments: syntax and flag names first (a
 * misspelt flag is reported even next to `--help`), then `--help` (which
 * works whatever the values), then the values. Addresses and file paths are
 * echoed in errors; API keys and words that may be a key typed after a
 * space are not.
 *
 * @returns `"help"`, or the validated settings.
 * @throws {UsageError} Naming the flag and what it wants.
 */
function parseFlags(
  args: string[],
  env: Record<string, string | undefined>,
): DevServerFlags | "help" {
  let argv;
  try {
    argv = parseArgv(args, {
      flags: {
        listen: { kind: "value", wants: VALUE_FLAGS.listen },
        "tls-cert-file": { kind: "value", wants: VALUE_FLAGS["tls-cert-file"] },
        "tls-key-file": { kind: "value", wants: VALUE_FLAGS["tls-key-file"] },
        "api-key": { kind: "value", wants: VALUE_FLAGS["api-key"] },
        "log-level": { kind: "value", wants: VALUE_FLAGS["log-level"] },
        help: { kind: "boolean", short: "h" },
      },
      positionalHint:
        "dev-server takes flags only (--name=value); run with --help for the list",
    });
  } catch (e) {
    if (e instanceof ArgvUsageError) throw new UsageError(e.message);
    throw e;
  }
  const given = argv.values as Partial<Record<ValueFlag, string[]>>;
  let help: boolean;
  try {
    help = isSet(argv, "help");
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (help) return "help";

  const one = (name: "tls-cert-file" | "tls-key-file") => {
    const value = given[name]?.at(-1);
    if (value === "") {
      throw new UsageError(
        `flag --${name} needs a value: ${VALUE_FLAGS[name]}`,
      );
    }
    return value;
  };
  const certFile = one("tls-cert-file");
  const keyFile = one("tls-key-file");
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new UsageError(
      "--tls-cert-file and --tls-key-file go together: give both for HTTPS, or neither for plain HTTP",
    );
  }
  const apiKeys = given["api-key"] ?? [];
  try {
    parseApiKeys(apiKeys, "--api-key");
    const levelFlag = given["log-level"]?.at(-1);
    const levelEnv = env.BERTH_LOG_LEVEL || undefined;
    const logLevel = levelFlag !== undefined
      ? parseLogLevel(levelFlag, "--log-level")
      : levelEnv !== undefined
      ? parseLogLevel(levelEnv, "BERTH_LOG_LEVEL")
      : "INFO";
    return {
      listen: parseHostPort(
        given.listen?.at(-1) ?? "127.0.0.1:8080",
        "--listen",
      ),
      tls: certFile && keyFile ? { certFile, keyFile } : undefined,
      apiKeys,
      logLevel,
    };
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

/**
 * Runs `berth-acquire dev-server`: starts the server from flags, prints
 * `berth dev-server listening on URL` on stdout and serves until a stop
 * signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT).
 *
 * @param args The arguments after `dev-server`.
 * @returns The exit code: 0 after `--help` or a signal, 78 on a usage
 * error, 1 on a start-up error (one line on stderr: the address that cannot be bound, the
 * flag and what it wants).
 */
export async function main(args: string[]): Promise<number> {
  let flags: DevServerFlags | "help";
  try {
    flags = parseFlags(args, Deno.env.toObject());
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    console.error(`berth-acquire dev-server: ${e.message}`);
    return EXIT_USAGE;
  }
  if (flags === "help") {
    console.log(HELP);
    return 0;
  }
  const logger = createLogger({ level: flags.logLevel });
  let server: DevServer;
  try {
    server = await startDevServer({
      ...flags.listen,
      tls: flags.tls,
      apiKeys: flags.apiKeys,
      logger,
    });
  } catch (e) {
    const message = e instanceof ListenError
      ? `${e.message}; choose another --listen (port 0 picks a free one)`
      : (e as Error).message;
    console.error(`berth-acquire dev-server: ${message}`);
    return 1;
  }
  const stop = shutdownSignal(logger);
  try {
    logger.warn(
      "development server: leases live in memory and are lost on exit; not for production",
      { url: server.url, api_keys: flags.apiKeys.length },
    );
    console.log(`berth dev-server listening on ${server.url}`);
    await aborted(stop.signal);
    await server.close();
    return 0;
  } finally {
    stop.dispose();
  }
}
