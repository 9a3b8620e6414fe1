// Which proxy the environment names for the API server, by the rules Deno's
// fetch applies: the variables and their order, NO_PROXY's domains,
// addresses and ranges, credentials, and the proxies that cannot be used.
import assert from "node:assert/strict";
import { bypasses, proxyFor } from "../../lib/lease/proxy_env.ts";

const https = { secure: true, hostname: "berth.prod.example" };
const http = { secure: false, hostname: "berth.prod.example" };
const env = (vars: Record<string, string>) => (name: string) => vars[name];

Deno.test("the variable for the scheme, ALL_PROXY first, upper case before lower", () => {
  assert.deepEqual(proxyFor(https, env({})), { kind: "direct" });
  assert.deepEqual(proxyFor(https, env({ HTTP_PROXY: "p:1" })), {
    kind: "direct",
  });
  const p = (vars: Record<string, string>, target = https) => {
    const c = proxyFor(target, env(vars));
    return c.kind === "proxy" ? c.proxy.label : c.kind;
  };
  assert.equal(p({ HTTPS_PROXY: "a:1" }), "HTTPS_PROXY (a:1)");
  assert.equal(p({ https_proxy: "b:2" }), "https_proxy (b:2)");
  assert.equal(
    p({ HTTPS_PROXY: "a:1", https_proxy: "b:2" }),
    "HTTPS_PROXY (a:1)",
  );
  assert.equal(p({ HTTPS_PROXY: "", https_proxy: "b:2" }), "https_proxy (b:2)");
  assert.equal(p({ ALL_PROXY: "c:3", HTTPS_PROXY: "a:1" }), "ALL_PROXY (c:3)");
  assert.equal(p({ HTTP_PROXY: "d:4" }, http), "HTTP_PROXY (d:4)");
  assert.equal(p({ HTTPS_PROXY: "a:1" }, http), "direct");
});

Deno.test("host, port and credentials of the proxy URL; no scheme means http", () => {
  const c = proxyFor(
    https,
    env({ HTTPS_PROXY: "http://svc%40corp:p%3Ass@[fd00::1]:3128/ignored" }),
  );
  assert.equal(c.kind, "proxy");
  if (c.kind !== "proxy") return;
  assert.equal(c.proxy.hostname, "fd00::1");
  assert.equal(c.proxy.port, 3128);
  assert.equal(c.proxy.authorization, `Basic ${btoa("svc@corp:p:ss")}`);
  assert.equal(c.proxy.label, "HTTPS_PROXY ([fd00::1]:3128)");
  const bare = proxyFor(https, env({ HTTPS_PROXY: "proxy.corp" }));
  assert.equal(bare.kind === "proxy" && bare.proxy.port, 80);
  assert.equal(bare.kind === "proxy" && bare.proxy.authorization, undefined);
});

Deno.test("proxies of another kind are reported, never silently bypassed", () => {
  for (const value of ["https://p:1", "socks5://p:1", "socks5h://p:1"]) {
    const c = proxyFor(https, env({ HTTPS_PROXY: value }));
    assert.equal(c.kind, "unsupported", value);
    assert.match(
      c.kind === "unsupported" ? c.detail : "",
      /HTTPS_PROXY names a/,
    );
  }
  const c = proxyFor(https, env({ HTTPS_PROXY: "http://[::1" }));
  assert.equal(c.kind, "unsupported");
});

Deno.test("NO_PROXY: NO_PROXY when set at all, else no_proxy", () => {
  const vars = { HTTPS_PROXY: "p:1" };
  assert.equal(
    proxyFor(https, env({ ...vars, no_proxy: "example" })).kind,
    "direct",
  );
  assert.equal(
    proxyFor(https, env({ ...vars, NO_PROXY: "", no_proxy: "example" })).kind,
    "proxy",
  );
});

Deno.test("NO_PROXY domains match themselves and their subdomains, on label boundaries", () => {
  const host = "berth.prod.example";
  for (
    const list of [
      "example",
      ".example",
      "prod.example",
      "berth.prod.example",
      "*",
      "x.org, Prod.Example",
    ]
  ) {
    assert.equal(bypasses(list, host), true, list);
  }
  for (
    const list of [
      "",
      "ample",
      "rod.example",
      "other.example",
      "berth.prod.example.org",
      " , ",
    ]
  ) {
    assert.equal(bypasses(list, host), false, list);
  }
});

Deno.test("NO_PROXY addresses and CIDR ranges, IPv4 and IPv6", () => {
  assert.equal(bypasses("10.0.0.0/8", "10.96.0.1"), true);
  assert.equal(bypasses("10.0.0.0/8", "11.0.0.1"), false);
  assert.equal(bypasses("192.168.1.42", "192.168.1.42"), true);
  assert.equal(bypasses("192.168.1.0/24", "192.168.2.1"), false);
  assert.equal(bypasses("0.0.0.0/0", "8.8.8.8"), true);
  assert.equal(bypasses("fd00::/8", "fd12:3456::1"), true);
  assert.equal(bypasses("fd00::/8", "[fd12:3456::1]"), true);
  assert.equal(bypasses("fd00::/8", "fe80::1"), false);
  assert.equal(bypasses("::1", "0:0:0:0:0:0:0:1"), true);
  assert.equal(bypasses("::ffff:10.0.0.0/104", "::ffff:10.1.2.3"), true);
  // An address range never matches a name, nor a name an address.
  assert.equal(bypasses("10.0.0.0/8", "ten.example"), false);
  assert.equal(bypasses("example", "10.0.0.1"), false);
  // Not an address or a range: a domain like any other.
  assert.equal(bypasses("10.0.0.0/40", "10.0.0.1"), false);
  // As in fetch, "*" exempts every host name but no address.
  assert.equal(bypasses("*", "anything.example"), true);
  assert.equal(bypasses("*", "10.0.0.1"), false);
});

Deno.test("under CGI (REQUEST_METHOD set) HTTP_PROXY may be a client's header: ignored", () => {
  const vars = { REQUEST_METHOD: "GET", HTTP_PROXY: "evil:80" };
  assert.deepEqual(proxyFor(http, env(vars)), { kind: "direct" });
  assert.equal(proxyFor(http, env({ HTTP_PROXY: "p:80" })).kind, "proxy");
  assert.equal(
    proxyFor(https, env({ ...vars, HTTPS_PROXY: "p:1" })).kind,
    "proxy",
  );
});

Deno.test("credentials that do not parse as meant are refused, not guessed, and never echoed", () => {
  const detail = (value: string) => {
    const c = proxyFor(https, env({ HTTPS_PROXY: value }));
    return c.kind === "unsupported" ? c.detail : `${c.kind}`;
  };
  // An unencoded "/" in the password: it would parse as host "bob".
  const slash = detail("http://bob:2024/Pass@proxy.corp:8080");
  assert.match(slash, /percent-encode/);
  assert.doesNotMatch(slash, /2024|Pass|bob/);
  assert.match(
    detail("http://bob@proxy.corp:8080"),
    /a user name but no password/,
  );
  // A bare "%" is kept as written.
  const raw = proxyFor(https, env({ HTTPS_PROXY: "http://u:100%@p:1" }));
  assert.equal(
    raw.kind === "proxy" && raw.proxy.authorization,
    `Basic ${btoa("u:100%")}`,
  );
});
