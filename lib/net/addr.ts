/**
 * Listen addresses as users write them (`HOST:PORT`, `[IPV6]:PORT`, `:PORT`),
 * the URL of a bound listener, and a bind failure that names the address. Pure
 * and shared, so every listener of the CLI reads and reports addresses the
 * same way and a typo is a start-up error that names the value and where it
 * came from.
 *
 * @module
 */

/** Where a listener binds. */
export interface HostPort {
  /** Interface address or host name; `0.0.0.0` for `:PORT`. IPv6 without brackets. */
  hostname: string;
  /** TCP port, 0-65535; 0 picks a free one. */
  port: number;
}

/**
 * A malformed listen address. The message names the source and the value
 * (addresses are not secret) and says what is wanted; {@linkcode problem}
 * holds only what was wrong, for callers that word the rest themselves.
 */
export class HostPortError extends RangeError {
  /** What was wrong, e.g. `no port`. */
  readonly problem: string;

  /**
   * Builds the message from its three parts.
   *
   * @param source Where the value came from: a flag (`--listen`) or an env variable.
   * @param value The value as given.
   * @param problem What was wrong with it.
   */
  constructor(source: string, value: string, problem: string) {
    super(
      `${source}=${
        JSON.stringify(value)
      }: ${problem}; want HOST:PORT, [IPV6]:PORT or :PORT (all interfaces) with a port 0-65535, e.g. 127.0.0.1:8080`,
    );
    this.name = "HostPortError";
    this.problem = problem;
  }
}

/**
 * Parses `HOST:PORT`, `[IPV6]:PORT` or `:PORT` (all interfaces, as Go reads
 * it). The host is not resolved: binding tells whether it is one of this
 * host's addresses.
 *
 * @param value The address as the user wrote it.
 * @param source Where it came from, for the error: a flag or an env variable name.
 * @returns The host (brackets removed; `0.0.0.0` when empty) and the port.
 * @throws {HostPortError} When the value is not one of the three forms or the port is out of range.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.deepEqual(parseHostPort("[::1]:8080", "--listen"), { hostname: "::1", port: 8080 });
 * assert.deepEqual(parseHostPort(":0", "--listen"), { hostname: "0.0.0.0", port: 0 });
 * ```
 */
export function parseHostPort(value: string, source: string): HostPort {
  const colon = value.lastIndexOf(":");
  if (colon < 0) throw new HostPortError(source, value, "no port");
  let host = value.slice(0, colon);
  const port = value.slice(colon + 1);
  if (host.startsWith("[") || host.endsWith("]")) {
    if (!/^\[[^\[\]]+\]$/.test(host)) {
      throw new HostPortError(source, value, "unbalanced brackets");
    }
    host = host.slice(1, -1);
  } else if (/[\[\]]/.test(host)) {
    throw new HostPortError(source, value, "brackets inside the host");
  } else if (host.includes(":")) {
    throw new HostPortError(
      source,
      value,
      "an IPv6 host needs brackets, as in [::1]:8080",
    );
  }
  if (!/^\d{1,5}$/.test(port) || Number(port) > 65535) {
    throw new HostPortError(
      source,
      value,
      port === "" ? "no port" : "the port is not a number 0-65535",
    );
  }
  return { hostname: host === "" ? "0.0.0.0" : host, port: Number(port) };
}

/**
 * Writes an address back as `HOST:PORT`, with brackets around an IPv6 host.
 *
 * @param addr The host and port.
 * @returns E.g. `127.0.0.1:8080` or `[::1]:8080`.
 */
function formatHostPort(addr: HostPort): string {
  const host = addr.hostname.includes(":")
    ? `[${addr.hostname}]`
    : addr.hostname;
  return `${host}:${addr.port}`;
}

/**
 * The base URL of a bound listener, from the address it actually bound
 * (so a port 0 request shows the port chosen).
 *
 * @param addr The listener's address, e.g. `Deno.HttpServer.addr`.
 * @param scheme `http` or `https`.
 * @returns E.g. `http://127.0.0.1:41234` or `https://[::1]:8443`.
 */
export function listenerUrl(
  addr: Deno.NetAddr,
  scheme: "http" | "https",
): string {
  return `${scheme}://${formatHostPort(addr)}`;
}

/**
 * A listener that could not bind. The message names the address and says
 * why in words a user acts on (`address already in use`, `not an address of
 * this host`, ...); the runtime's error is the `cause`. Callers add what to
 * change (the flag or variable that set the address).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
 * const address = { hostname: "127.0.0.1", port: taken.addr.port };
 * try {
 *   Deno.listen(address).close();
 *   assert.fail("the port is taken");
 * } catch (e) {
 *   if (e instanceof Deno.errors.AddrInUse) {
 *     const error = new ListenError(address, e);
 *     assert.match(error.message, /^cannot listen on 127\.0\.0\.1:\d+: address already in use$/);
 *   } else throw e;
 * } finally {
 *   taken.close();
 * }
 * ```
 */
export class ListenError extends Error {
  /** The address that could not be bound. */
  readonly address: HostPort;

  /**
   * Names the address and words the cause.
   *
   * @param address The address asked for.
   * @param cause What `Deno.serve` or `Deno.listen` threw.
   */
  constructor(address: HostPort, cause: unknown) {
    super(
      `cannot listen on ${formatHostPort(address)}: ${
        listenFailureReason(cause)
      }`,
      { cause },
    );
    this.name = "ListenError";
    this.address = address;
  }
}

// The common OS errors named plainly, anything else as the runtime wrote it.
function listenFailureReason(error: unknown): string {
  if (error instanceof Deno.errors.AddrInUse) return "address already in use";
  if (error instanceof Deno.errors.AddrNotAvailable) {
    return "not an address of this host";
  }
  if (error instanceof Deno.errors.PermissionDenied) {
    return "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)";
  }
  return error instanceof Error ? error.message : String(error);
}
