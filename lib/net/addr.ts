/**
 * Listen addresses as users write them (`HOST:PORT`, `[IPV6]:PORT`, `:PORT`), listener URLs, and bind failures that name the address.
 * @module
 */

/** Where a listener binds: the host (IPv6 without brackets) and a port 0-65535 (0 picks a free one). */
export interface HostPort {
  hostname: string;
  port: number;
}

/** A malformed listen address; {@linkcode problem} holds only what was wrong, for callers that word the rest. */
export class HostPortError extends RangeError {
  constructor(source: string, value: string, readonly problem: string) {
    super(
      `${source}=${
        JSON.stringify(value)
      }: ${problem}; want HOST:PORT, [IPV6]:PORT or :PORT (all interfaces) with a port 0-65535, e.g. 127.0.0.1:8080`,
    );
    this.name = "HostPortError";
  }
}

/**
 * Parses `HOST:PORT`, `[IPV6]:PORT` or `:PORT` (`:PORT`: `0.0.0.0`, all interfaces, as Go reads it); `source` names the value in the error.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.deepEqual(parseHostPort("[::1]:8080", "--listen"), { hostname: "::1", port: 8080 });
 * ```
 */
export function parseHostPort(value: string, source: string): HostPort {
  const fail = (problem: string) => new HostPortError(source, value, problem);
  const colon = value.lastIndexOf(":");
  if (colon < 0) throw fail("no port");
  let host = value.slice(0, colon);
  const port = value.slice(colon + 1);
  if (host.startsWith("[") || host.endsWith("]")) {
    if (!/^\[[^\[\]]+\]$/.test(host)) throw fail("unbalanced brackets");
    host = host.slice(1, -1);
  } else if (/[\[\]]/.test(host)) {
    throw fail("brackets inside the host");
  } else if (host.includes(":")) {
    throw fail("an IPv6 host needs brackets, as in [::1]:8080");
  }
  if (port === "") throw fail("no port");
  if (!/^\d{1,5}$/.test(port) || Number(port) > 65535) {
    throw fail("the port is not a number 0-65535");
  }
  return { hostname: host === "" ? "0.0.0.0" : host, port: Number(port) };
}

function formatHostPort({ hostname, port }: HostPort): string {
  return `${hostname.includes(":") ? `[${hostname}]` : hostname}:${port}`;
}

/** The base URL of a bound listener, e.g. `https://[::1]:8443`, from the address it bound (port 0 shows the port chosen). */
export function listenerUrl(
  addr: Deno.NetAddr,
  scheme: "http" | "https",
): string {
  return `${scheme}://${formatHostPort(addr)}`;
}

const LISTEN_FAILURES: [new (...args: never[]) => Error, string][] = [
  [Deno.errors.AddrInUse, "address already in use"],
  [Deno.errors.AddrNotAvailable, "not an address of this host"],
  [
    Deno.errors.PermissionDenied,
    "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)",
  ],
];

/** A listener that could not bind (`cannot listen on 127.0.0.1:80: address already in use`); the `cause` is the runtime's error. */
export class ListenError extends Error {
  constructor(readonly address: HostPort, cause: unknown) {
    const reason =
      LISTEN_FAILURES.find(([type]) => cause instanceof type)?.[1] ??
        (cause instanceof Error ? cause.message : String(cause));
    super(`cannot listen on ${formatHostPort(address)}: ${reason}`, { cause });
    this.name = "ListenError";
  }
}
