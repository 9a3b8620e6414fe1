/**
 * Which HTTP proxy, if any, the environment names for the API server, by the
 * rules Deno's `fetch` applies (so the default stream transport and `fetch`,
 * used for the proxies only it can use, agree): `ALL_PROXY`, then
 * `HTTPS_PROXY` for an `https:` server or `HTTP_PROXY` for an `http:` one,
 * each in upper case before lower case; `NO_PROXY` (or `no_proxy`) lists
 * what bypasses them: `*` (every host name), IP addresses and CIDR ranges,
 * and domains, each matching itself and its subdomains (`example.com` and
 * `.example.com` alike). Under CGI (`REQUEST_METHOD` set) `HTTP_PROXY` is
 * ignored.
 * An `http:` proxy (or one written without a scheme) is supported; `https:`
 * and `socks5:` proxies are reported as unsupported rather than bypassed.
 * Credentials in the proxy URL (`http://user:pass@proxy:3128`) become a
 * `Proxy-Authorization: Basic` header and never appear in a message.
 *
 * Pure: the environment is passed in.
 *
 * @module
 */

/** A proxy to go through. */
export interface HttpProxy {
  /** The proxy's host (IPv6 without brackets). */
  hostname: string;
  /** The proxy's port (default 80). */
  port: number;
  /** The `Proxy-Authorization` header value, when the URL carries credentials. */
  authorization?: string;
  /** Where it came from and where it goes, for messages: `HTTPS_PROXY (proxy.corp:3128)`, no credentials. */
  label: string;
}

/** What the environment says for one API server. */
export type ProxyChoice =
  | { kind: "direct" }
  | { kind: "proxy"; proxy: HttpProxy }
  | { kind: "unsupported"; detail: string };

/**
 * The proxy the environment names for a server.
 *
 * @param target The API server: its scheme and host.
 * @param env Reads an environment variable; `Deno.env.get` in production.
 * @returns Direct, a proxy, or why the named proxy cannot be used.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const env = (n: string) => ({ HTTPS_PROXY: "proxy.corp:3128" } as Record<string, string>)[n];
 * const choice = proxyFor({ secure: true, hostname: "berth.example" }, env);
 * assert.equal(choice.kind, "proxy");
 * if (choice.kind === "proxy") {
 *   assert.equal(choice.proxy.hostname, "proxy.corp");
 *   assert.equal(choice.proxy.port, 3128);
 * }
 * ```
 */
export function proxyFor(
  target: { secure: boolean; hostname: string },
  env: (name: string) => string | undefined,
): ProxyChoice {
  const named = (upper: string): [string, string] | undefined => {
    for (const name of [upper, upper.toLowerCase()]) {
      const value = env(name);
      if (value !== undefined && value !== "") return [name, value];
    }
    return undefined;
  };
  // Under CGI a request's "Proxy:" header arrives as HTTP_PROXY: never
  // trusted there (Deno's rule too).
  const cgi = env("REQUEST_METHOD") !== undefined;
  const chosen = named("ALL_PROXY") ??
    (target.secure
      ? named("HTTPS_PROXY")
      : cgi
      ? undefined
      : named("HTTP_PROXY"));
  if (chosen === undefined) return { kind: "direct" };
  // As Deno reads it: NO_PROXY when set at all (even empty), else no_proxy.
  const noProxy = env("NO_PROXY") ?? env("no_proxy") ?? "";
  if (bypasses(noProxy, target.hostname)) return { kind: "direct" };
  return parseProxyUrl(chosen[0], chosen[1]);
}

function parseProxyUrl(name: string, value: string): ProxyChoice {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value)
    ? value
    : `http://${value}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    return {
      kind: "unsupported",
      detail: `${name} is not a URL (expected http://host:port)`,
    };
  }
  if (url.protocol !== "http:") {
    return {
      kind: "unsupported",
      detail: `${name} names a ${
        url.protocol.slice(0, -1)
      } proxy; only http:// proxies are supported here`,
    };
  }
  // "user:pa/ss@host" parses as host "user"; say so without echoing it.
  if (/@/.test(url.pathname + url.search + url.hash)) {
    return {
      kind: "unsupported",
      detail:
        `${name} has an "@" after a "/", "?" or "#": percent-encode those characters in the proxy's user name and password`,
    };
  }
  if (url.username !== "" && url.password === "") {
    return {
      kind: "unsupported",
      detail:
        `${name} has a user name but no password (expected http://user:password@host:port)`,
    };
  }
  const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = url.port === "" ? 80 : Number(url.port);
  const proxy: HttpProxy = {
    hostname,
    port,
    label: `${name} (${url.host})`,
  };
  if (url.username !== "" || url.password !== "") {
    const user = decodeOrRaw(url.username);
    const pass = decodeOrRaw(url.password);
    const bytes = new TextEncoder().encode(`${user}:${pass}`);
    proxy.authorization = `Basic ${btoa(String.fromCharCode(...bytes))}`;
  }
  return { kind: "proxy", proxy };
}

/** Percent-decoded, or as written when it is not valid percent-encoding (a bare `%`). */
function decodeOrRaw(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * Whether a `NO_PROXY` list exempts `host`. As in Deno, `*` exempts every
 * host name but no IP address.
 *
 * @param list The list, comma-separated.
 * @param host A host name or address (IPv6 with or without brackets).
 * @returns True when the host is to be reached directly.
 */
export function bypasses(list: string, host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  const ip = parseIp(h);
  for (const raw of list.split(",")) {
    const entry = raw.trim().toLowerCase();
    if (entry === "") continue;
    if (entry === "*") {
      if (ip === undefined) return true;
      continue;
    }
    const net = parseNet(entry);
    if (net !== undefined) {
      if (ip !== undefined && inNet(ip, net)) return true;
      continue;
    }
    if (ip !== undefined) continue;
    const domain = entry.startsWith(".") ? entry.slice(1) : entry;
    if (h === domain || h.endsWith(`.${domain}`)) return true;
  }
  return false;
}

/** An address as 16-bit groups: 2 for IPv4, 8 for IPv6. */
type Ip = number[];

function parseIp(s: string): Ip | undefined {
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (v4) {
    const b = v4.slice(1).map(Number);
    if (b.some((x) => x > 255)) return undefined;
    return [b[0] * 256 + b[1], b[2] * 256 + b[3]];
  }
  if (!s.includes(":")) return undefined;
  let text = s;
  // An IPv4 tail (::ffff:10.0.0.1) becomes two groups.
  const tail = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (tail) {
    const g = parseIp(tail[0]);
    if (g === undefined) return undefined;
    text = `${text.slice(0, tail.index)}${g[0].toString(16)}:${
      g[1].toString(16)
    }`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const groups = (part: string) => part === "" ? [] : part.split(":");
  const head = groups(halves[0]);
  const rest = halves.length === 2 ? groups(halves[1]) : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [
    ...head,
    ...Array(halves.length === 2 ? missing : 0).fill("0"),
    ...rest,
  ];
  const out: Ip = [];
  for (const g of all) {
    if (!/^[0-9a-f]{1,4}$/.test(g)) return undefined;
    out.push(parseInt(g, 16));
  }
  return out;
}

function parseNet(entry: string): { ip: Ip; bits: number } | undefined {
  const slash = entry.indexOf("/");
  const ip = parseIp(slash < 0 ? entry : entry.slice(0, slash));
  if (ip === undefined) return undefined;
  const max = ip.length * 16;
  if (slash < 0) return { ip, bits: max };
  const bitsText = entry.slice(slash + 1);
  if (!/^\d{1,3}$/.test(bitsText)) return undefined;
  const bits = Number(bitsText);
  return bits > max ? undefined : { ip, bits };
}

function inNet(ip: Ip, net: { ip: Ip; bits: number }): boolean {
  if (ip.length !== net.ip.length) return false;
  let left = net.bits;
  for (let i = 0; i < ip.length && left > 0; i++, left -= 16) {
    const take = Math.min(16, left);
    const mask = (0xffff << (16 - take)) & 0xffff;
    if ((ip[i] & mask) !== (net.ip[i] & mask)) return false;
  }
  return true;
}
