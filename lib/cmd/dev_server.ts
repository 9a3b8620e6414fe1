/**
 * `berth-acquire dev-server`: the development lease server (`lib/devserver/`,
 * a library the tests and the simulator start in-process) started from
 * flags, serving until a stop signal; its errors read like the rest of the
 * CLI's: one line on stderr naming the flag, the value and what is wanted.
 *
 * @module
 */
import {
  EXIT_USAGE,
  isSet,
  lastValue,
  parseArgv,
  UsageError,
} from "../config/argv.ts";
import { parseApiKeys } from "../devserver/api_keys.ts";
import { type DevServer, startDevServer } from "../devserver/server.ts";
import { ListenError, parseHostPort } from "../net/addr.ts";
import { createLogger, parseLogLevel } from "../obs/log.ts";
import { aborted } from "../state/clock.ts";
import { shutdownSignal } from "./signals.ts";

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

/** The flags, and what a value must be (said when one is missing). */
const FLAGS = {
  listen: { kind: "value", wants: "HOST:PORT" },
  "tls-cert-file": { kind: "value", wants: "a PEM certificate file" },
  "tls-key-file": { kind: "value", wants: "a PEM private key file" },
  "api-key": { kind: "value", wants: "KEY_ID:SHA256" },
  "log-level": { kind: "value", wants: "debug, info, warn or error" },
  help: { kind: "boolean", short: "h" },
} as const;

/**
 * The server's settings: syntax and flag names first (a misspelt flag is
 * reported even beside `--help`), then `--help`, then the values; the last
 * one wins but for `--api-key`, as in Go. API keys, and words that may be one
 * typed after a space, are never echoed.
 *
 * @throws {UsageError} Naming the flag and what it wants.
 */
function parseFlags(args: string[], env: Record<string, string | undefined>) {
  const argv = parseArgv(args, {
    flags: FLAGS,
    positionalHint:
      "dev-server takes flags only (--name=value); run with --help for the list",
  });
  const last = (name: keyof typeof FLAGS) => lastValue(argv, name);
  try {
    if (isSet(argv, "help")) return "help";
    const file = (name: "tls-cert-file" | "tls-key-file") => {
      const value = last(name);
      if (value === "") {
        throw new Error(`flag --${name} needs a value: ${FLAGS[name].wants}`);
      }
      return value;
    };
    const certFile = file("tls-cert-file");
    const keyFile = file("tls-key-file");
    if ((certFile === undefined) !== (keyFile === undefined)) {
      throw new Error(
        "--tls-cert-file and --tls-key-file go together: give both for HTTPS, or neither for plain HTTP",
      );
    }
    const apiKeys = argv.values["api-key"] ?? [];
    parseApiKeys(apiKeys, "--api-key");
    const levelFlag = last("log-level");
    const logLevel = levelFlag !== undefined
      ? parseLogLevel(levelFlag, "--log-level")
      : parseLogLevel(env.BERTH_LOG_LEVEL || "info", "BERTH_LOG_LEVEL");
    return {
      ...parseHostPort(last("listen") ?? "127.0.0.1:8080", "--listen"),
      tls: certFile && keyFile ? { certFile, keyFile } : undefined,
      apiKeys,
      logLevel,
    };
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

/** `berth-acquire dev-server`: see the help text. Returns the exit code. */
export async function main(args: string[]): Promise<number> {
  let flags: ReturnType<typeof parseFlags>;
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
  const { logLevel, ...settings } = flags;
  const logger = createLogger({ level: logLevel });
  let server: DevServer;
  try {
    server = await startDevServer({ ...settings, logger });
  } catch (e) {
    const message = e instanceof ListenError
      ? `${e.message}; choose another --listen (port 0 picks a free one)`
      : (e as Error).message;
    console.error(`berth-acquire dev-server: ${message}`);
    return 1;
  }
  using stop = shutdownSignal(logger);
  logger.warn(
    "development server: leases live in memory and are lost on exit; not for production",
    { url: server.url, api_keys: settings.apiKeys.length },
  );
  console.log(`berth dev-server listening on ${server.url}`);
  await aborted(stop.signal);
  await server.close();
  return 0;
}
