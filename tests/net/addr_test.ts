// Listen addresses: the three forms, the errors that name the value, the
// listener URL and bind failures that name the address.
import assert from "node:assert/strict";
import {
  HostPortError,
  ListenError,
  listenerUrl,
  parseHostPort,
} from "../../lib/net/addr.ts";

Deno.test("parseHostPort reads HOST:PORT, [IPV6]:PORT and :PORT", () => {
  assert.deepEqual(parseHostPort("127.0.0.1:8080", "--listen"), {
    hostname: "127.0.0.1",
    port: 8080,
  });
  assert.deepEqual(parseHostPort("localhost:0", "--listen"), {
    hostname: "localhost",
    port: 0,
  });
  assert.deepEqual(parseHostPort("[::1]:65535", "--listen"), {
    hostname: "::1",
    port: 65535,
  });
  assert.deepEqual(parseHostPort(":8471", "BERTH_HEALTH_ADDR"), {
    hostname: "0.0.0.0",
    port: 8471,
  });
});

Deno.test("parseHostPort names the source, the value and the problem", () => {
  const cases: [string, RegExp][] = [
    ["localhost", /no port/],
    ["localhost:", /no port/],
    ["127.0.0.1:65536", /the port is not a number 0-65535/],
    ["127.0.0.1:http", /the port is not a number 0-65535/],
    ["127.0.0.1:123456", /the port is not a number 0-65535/],
    ["::1:8080", /an IPv6 host needs brackets, as in \[::1\]:8080/],
    ["[::1:8080", /unbalanced brackets/],
    ["[]:8080", /unbalanced brackets/],
    ["a[b]c:8080", /brackets inside the host/],
  ];
  for (const [value, problem] of cases) {
    assert.throws(() => parseHostPort(value, "--listen"), (e) => {
      assert.ok(e instanceof HostPortError && e instanceof RangeError);
      assert.ok(
        e.message.startsWith(`--listen=${JSON.stringify(value)}: `),
        e.message,
      );
      assert.match(e.problem, problem);
      assert.match(e.message, /want HOST:PORT, \[IPV6\]:PORT or :PORT/);
      return true;
    });
  }
});

Deno.test("listenerUrl brackets IPv6 hosts", () => {
  const v4: Deno.NetAddr = {
    transport: "tcp",
    hostname: "127.0.0.1",
    port: 41234,
  };
  const v6: Deno.NetAddr = { transport: "tcp", hostname: "::1", port: 8443 };
  assert.equal(listenerUrl(v4, "http"), "http://127.0.0.1:41234");
  assert.equal(listenerUrl(v6, "https"), "https://[::1]:8443");
});

Deno.test("ListenError names the address and words the common bind errors", () => {
  const v4 = { hostname: "127.0.0.1", port: 8080 };
  const cases: [unknown, string][] = [
    [
      new Deno.errors.AddrInUse("Address already in use (os error 98)"),
      "address already in use",
    ],
    [
      new Deno.errors.AddrNotAvailable("os error 99"),
      "not an address of this host",
    ],
    [
      new Deno.errors.PermissionDenied("os error 13"),
      "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)",
    ],
    [
      new Error("failed to lookup address information"),
      "failed to lookup address information",
    ],
  ];
  for (const [cause, reason] of cases) {
    const e = new ListenError(v4, cause);
    assert.equal(e.message, `cannot listen on 127.0.0.1:8080: ${reason}`);
    assert.equal(e.cause, cause);
    assert.deepEqual(e.address, v4);
  }
  assert.equal(
    new ListenError({ hostname: "::1", port: 80 }, new Error("x")).message,
    "cannot listen on [::1]:80: x",
  );
});

Deno.test("ListenError on a real bind: a port already bound", () => {
  using first = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const addr = { hostname: "127.0.0.1", port: first.addr.port };
  let error: unknown;
  try {
    Deno.listen(addr).close();
  } catch (e) {
    error = new ListenError(addr, e);
  }
  assert.ok(error instanceof ListenError);
  assert.equal(
    error.message,
    `cannot listen on 127.0.0.1:${addr.port}: address already in use`,
  );
});
