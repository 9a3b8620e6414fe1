/**
 * The HTTP lease client against a real loopback server that records the raw
 * bytes it receives and answers scripted responses: what goes on the wire,
 * how every answer (or none) maps to an outcome, over both transports
 * (`fetch`; `node:https`, which the server-name override uses).
 */
import assert from "node:assert/strict";
import * as net from "node:net";
import { ApiKeySource } from "../../lib/lease/api_key.ts";
import {
  createHttpLeaseClient,
  type HttpLeaseClientOptions,
} from "../../lib/lease/client.ts";
import { MAX_RESPONSE_BYTES } from "../../lib/lease/transport.ts";
import {
  configFix,
  describeFailure,
  FIXES,
  type LeaseFailure,
} from "../../lib/lease/rpc.ts";
import { Secret } from "../../lib/obs/log.ts";
import { VERSION } from "../../lib/version.ts";
import { timersOf } from "../support/timers.ts";
import { FakeClock } from "../support/fake_clock.ts";
import { opensslMissing } from "../support/tls.ts";
import {
  both,
  client,
  GRANT,
  header,
  HOLDER,
  json,
  KEY,
  never,
  node,
  NODE_NAME,
  nodePki,
  rawServer,
  type Reply,
  startServer,
  ZERO,
} from "./client_fixture.ts";

// ---------------------------------------------------------------------------
// Requests on the wire

both(
  "acquire sends exactly the spec's request and reads the grant",
  async () => {
    await using srv = await startServer(() =>
      json(200, GRANT, { "X-Request-Id": "srv-echo-1" })
    );
    const c = client(srv.url, {
      auth: ApiKeySource.fromSecret(new Secret("tenant:s3cret")),
    });
    const out = await c.acquire(HOLDER, 30, never());
    assert.deepEqual(out, {
      kind: "acquired",
      lease: {
        holder: HOLDER,
        fencingToken: 4,
        expiresAt: GRANT.expiresAt,
        acquiredAt: GRANT.acquiredAt,
      },
      requestId: "srv-echo-1",
    });
    const [r] = srv.requests;
    assert.equal(r.method, "POST");
    assert.equal(r.path, "/v1alpha1/namespaces/prod/leases/checkout/acquire");
    assert.equal(r.body, `{"holder":"${HOLDER}","ttlSeconds":30}`);
    assert.equal(header(r, "Content-Type"), "application/json");
    assert.equal(header(r, "Accept"), "application/json");
    assert.equal(header(r, "Authorization"), "Bearer tenant:s3cret");
    assert.equal(header(r, "User-Agent"), `berth-acquire/${VERSION}`);
    assert.equal(header(r, "Content-Length"), String(r.body.length));
    assert.match(header(r, "X-Request-Id") ?? "", /^[A-Za-z0-9_-]{1,64}$/);
    assert.ok(!r.raw.includes("//v1alpha1"));
  },
);

both(
  "renew and release send exactly their fields, keys sorted as the Go helper's",
  async () => {
    await using srv = await startServer((r) =>
      r.path.endsWith("/release") ? { status: 204 } : json(200, GRANT)
    );
    const c = client(srv.url);
    assert.equal((await c.renew(HOLDER, 4, 30, never())).kind, "acquired");
    assert.equal((await c.release(HOLDER, 4, never())).kind, "released");
    const [renew, release] = srv.requests;
    assert.equal(renew.path, "/v1alpha1/namespaces/prod/leases/checkout/renew");
    assert.equal(
      renew.body,
      `{"fencingToken":4,"holder":"${HOLDER}","ttlSeconds":30}`,
    );
    assert.equal(
      release.path,
      "/v1alpha1/namespaces/prod/leases/checkout/release",
    );
    assert.equal(release.body, `{"fencingToken":4,"holder":"${HOLDER}"}`);
    // Each request carries its own id, so server logs can be correlated.
    assert.notEqual(
      header(renew, "X-Request-Id"),
      header(release, "X-Request-Id"),
    );
  },
);

both("no API key: no Authorization header at all", async () => {
  await using srv = await startServer(() => json(200, GRANT));
  await client(srv.url).acquire(HOLDER, 1, never());
  assert.equal(header(srv.requests[0], "Authorization"), undefined);
});

both("a rotated key file is picked up by the next request", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/key`;
    await Deno.writeTextFile(file, "k1\n");
    const clock = new FakeClock();
    const auth = await ApiKeySource.fromFile(file, { clock });
    await using srv = await startServer(() => json(200, GRANT));
    const c = client(srv.url, { auth });
    await c.acquire(HOLDER, 1, never());
    await Deno.writeTextFile(file, "k2\n");
    await clock.advance(1000);
    await c.acquire(HOLDER, 1, never());
    assert.deepEqual(
      srv.requests.map((r) => header(r, "Authorization")),
      ["Bearer k1", "Bearer k2"],
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

both(
  "a base path prefix is kept and trailing slashes never make //",
  async () => {
    await using srv = await startServer(() => json(200, GRANT));
    for (const base of ["/berth", "/berth/", "/berth//", "/"]) {
      await client(srv.url + base).acquire(HOLDER, 1, never());
    }
    assert.deepEqual(srv.requests.map((r) => r.path), [
      "/berth/v1alpha1/namespaces/prod/leases/checkout/acquire",
      "/berth/v1alpha1/namespaces/prod/leases/checkout/acquire",
      "/berth/v1alpha1/namespaces/prod/leases/checkout/acquire",
      "/v1alpha1/namespaces/prod/leases/checkout/acquire",
    ]);
  },
);

both("key segments are escaped as single path segments", async () => {
  await using srv = await startServer(() => json(200, GRANT));
  await createHttpLeaseClient({
    apiServer: srv.url,
    key: { namespace: "a/b", name: "c d?" },
    ...node(),
  }).acquire(HOLDER, 1, never());
  assert.equal(
    srv.requests[0].path,
    "/v1alpha1/namespaces/a%2Fb/leases/c%20d%3F/acquire",
  );
});

both(
  "out-of-range ttl or token is a RangeError and nothing is sent",
  async () => {
    await using srv = await startServer(() => json(200, GRANT));
    const c = client(srv.url);
    for (const ttl of [0, -1, 1.5, 2147483648, NaN, Infinity]) {
      await assert.rejects(c.acquire(HOLDER, ttl, never()), RangeError);
      await assert.rejects(c.renew(HOLDER, 1, ttl, never()), RangeError);
    }
    for (const token of [0, -1, 2.5, 2147483648]) {
      await assert.rejects(c.renew(HOLDER, token, 10, never()), RangeError);
      await assert.rejects(c.release(HOLDER, token, never()), RangeError);
    }
    // The limits themselves are valid.
    await c.renew(HOLDER, 2147483647, 2147483647, never());
    assert.equal(srv.requests.length, 1);
  },
);

Deno.test("options that cannot work are rejected at construction", () => {
  const bad: [Partial<HttpLeaseClientOptions>, RegExp][] = [
    [{ apiServer: "not a url" }, /not a valid URL/],
    [{ apiServer: "ftp://h" }, /scheme ftp/],
    [{ apiServer: "https://u:p@h" }, /credentials/],
    [{ apiServer: "https://h/?x=1" }, /query/],
    [{ apiServer: "https://h/a//b" }, /empty path segment/],
    [{ key: { namespace: "", name: "x" } }, /non-empty/],
    [{ serverName: "" }, /server name override is empty/],
  ];
  for (const [opts, re] of bad) {
    assert.throws(
      () =>
        createHttpLeaseClient({ apiServer: "https://h", key: KEY, ...opts }),
      re,
    );
  }
});

// ---------------------------------------------------------------------------
// Answers

both(
  "acquired:false is not-acquired, with the other holder's record",
  async () => {
    await using srv = await startServer(() =>
      json(200, { ...GRANT, acquired: false, holder: "someone/else" })
    );
    const out = await client(srv.url).acquire(HOLDER, 10, never());
    assert.equal(out.kind, "not-acquired");
    assert.equal(
      out.kind === "not-acquired" && out.lease.holder,
      "someone/else",
    );
  },
);

both("acquired:false with no record normalises holder and token", async () => {
  await using srv = await startServer(() =>
    json(200, { acquired: false, expiresAt: ZERO, acquiredAt: ZERO })
  );
  const out = await client(srv.url).renew(HOLDER, 3, 10, never());
  assert.deepEqual(out, {
    kind: "not-acquired",
    lease: { holder: "", fencingToken: 0, expiresAt: ZERO, acquiredAt: ZERO },
    requestId: undefined,
  });
});

both(
  "release: 204 and 200 are released, 409 is a conflict with the server's message",
  async () => {
    const replies: Reply[] = [
      { status: 204 },
      json(200, {}),
      json(409, { error: "lease held by another identity or token" }, {
        "X-Request-Id": "rid-409",
      }),
    ];
    await using srv = await startServer(() => replies.shift()!);
    const c = client(srv.url);
    assert.equal((await c.release(HOLDER, 1, never())).kind, "released");
    assert.equal((await c.release(HOLDER, 1, never())).kind, "released");
    assert.deepEqual(await c.release(HOLDER, 1, never()), {
      kind: "conflict",
      message: "lease held by another identity or token",
      requestId: "rid-409",
    });
  },
);

both(
  "error statuses are server-errors with the message and request id",
  async () => {
    const replies: Reply[] = [
      json(500, { error: "internal error", requestId: "abc123" }),
      json(401, { error: "unauthorized" }, { "X-Request-Id": "hdr-id" }),
      {
        status: 404,
        body: "404 page not found\n",
        headers: { "X-Request-Id": "r404" },
      },
      { status: 502, body: "" },
    ];
    await using srv = await startServer(() => replies.shift()!);
    const c = client(srv.url);
    const url = (rpc: string) =>
      `${srv.url}/v1alpha1/namespaces/prod/leases/checkout/${rpc}`;
    assert.deepEqual(await c.acquire(HOLDER, 1, never()), {
      kind: "server-error",
      status: 500,
      message: "internal error",
      requestId: "abc123",
      url: url("acquire"),
    });
    assert.deepEqual(await c.renew(HOLDER, 1, 1, never()), {
      kind: "server-error",
      status: 401,
      message: "unauthorized",
      requestId: "hdr-id",
      url: url("renew"),
    });
    assert.deepEqual(await c.release(HOLDER, 1, never()), {
      kind: "server-error",
      status: 404,
      message: "404 page not found",
      requestId: "r404",
      url: url("release"),
    });
    const empty = await c.acquire(HOLDER, 1, never());
    assert.equal(empty.kind, "server-error");
    assert.equal(empty.kind === "server-error" && empty.status, 502);
  },
);

both("bodies that break the API's promises are bad-response", async () => {
  const bad: [string, unknown][] = [
    ["not JSON", "{acquired: true"],
    ["array", [GRANT]],
    ["acquired missing", { ...GRANT, acquired: undefined }],
    ["acquired as string", { ...GRANT, acquired: "true" }],
    ["holder as number", { ...GRANT, holder: 5 }],
    ["token fractional", { ...GRANT, fencingToken: 1.5 }],
    ["token as string", { ...GRANT, fencingToken: "4" }],
    ["token above int32", { ...GRANT, fencingToken: 2147483648 }],
    ["token below int32", {
      ...GRANT,
      acquired: false,
      fencingToken: -2147483649,
    }],
    ["acquired without token", { ...GRANT, fencingToken: undefined }],
    ["acquired with token 0", { ...GRANT, fencingToken: 0 }],
    ["acquired with negative token", { ...GRANT, fencingToken: -1 }],
    ["expiresAt missing", { ...GRANT, expiresAt: undefined }],
    ["10 fractional digits", {
      ...GRANT,
      expiresAt: "2026-05-07T00:00:30.1234567891Z",
    }],
    ["no offset", { ...GRANT, expiresAt: "2026-05-07T00:00:30" }],
    ["space separator", { ...GRANT, acquiredAt: "2026-05-07 00:00:00Z" }],
    ["month 13", { ...GRANT, acquiredAt: "2026-13-07T00:00:00Z" }],
    ["Feb 30", { ...GRANT, acquiredAt: "2026-02-30T00:00:00Z" }],
    ["offset hour 24", { ...GRANT, acquiredAt: "2026-05-07T00:00:00+24:00" }],
    ["timestamp as number", { ...GRANT, acquiredAt: 0 }],
  ];
  let i = 0;
  await using srv = await startServer(() => {
    const body = bad[i++][1];
    return {
      status: 200,
      body: typeof body === "string" ? body : JSON.stringify(body),
    };
  });
  const c = client(srv.url);
  for (const [label] of bad) {
    const out = await c.acquire(HOLDER, 1, never());
    assert.equal(out.kind, "bad-response", `${label}: ${JSON.stringify(out)}`);
  }
});

both(
  "valid variants are accepted: offsets, 9 digits, extra fields, 0001 zero time",
  async () => {
    const good: Record<string, unknown>[] = [
      { ...GRANT, expiresAt: "2026-05-07T05:30:30.123456789+05:30" },
      { ...GRANT, expiresAt: "2026-05-06T19:00:00-05:00", acquiredAt: ZERO },
      { ...GRANT, expiresAt: "2024-02-29T23:59:60.5Z", somethingNew: [1] },
      { ...GRANT, fencingToken: 2147483647 },
    ];
    let i = 0;
    await using srv = await startServer(() => json(200, good[i++]));
    const c = client(srv.url);
    for (const body of good) {
      const out = await c.acquire(HOLDER, 1, never());
      assert.equal(out.kind, "acquired", JSON.stringify(body));
      assert.equal(
        out.kind === "acquired" && out.lease.expiresAt,
        body.expiresAt,
      );
    }
  },
);

both("a 2xx other than the promised one is bad-response", async () => {
  await using srv = await startServer(() => ({ status: 204 }));
  const out = await client(srv.url).acquire(HOLDER, 1, never());
  assert.equal(out.kind, "bad-response");
});

both("a body over the cap stops the read and is bad-response", async () => {
  const huge = `{"acquired":true,"pad":"${
    "x".repeat(4 * MAX_RESPONSE_BYTES)
  }"}`;
  await using srv = await startServer(() => ({ status: 200, body: huge }));
  const out = await client(srv.url).acquire(HOLDER, 1, never());
  assert.equal(out.kind, "bad-response");
  assert.match(out.kind === "bad-response" ? out.message : "", /64 KiB/);
});

// ---------------------------------------------------------------------------
// No answer

both(
  "a server that never answers: the caller's timeout gives timeout",
  async () => {
    await using srv = await startServer(() => "hang");
    const out = await client(srv.url).acquire(
      HOLDER,
      1,
      AbortSignal.timeout(100),
    );
    assert.equal(out.kind, "timeout");
  },
);

Deno.test("a server that never answers: the client's own bound (DEFAULT_REQUEST_TIMEOUT_MS) ends the call by itself", async () => {
  await using srv = await startServer(() => "hang");
  const out = await client(srv.url).renew(HOLDER, 1, 1, never());
  assert.deepEqual(out, {
    kind: "timeout",
    message: "no answer within the request's time bound",
  });
});

both("a caller abort gives aborted, before or during the request", async () => {
  await using srv = await startServer(() => "hang");
  const c = client(srv.url);
  const pre = new AbortController();
  pre.abort();
  assert.equal((await c.acquire(HOLDER, 1, pre.signal)).kind, "aborted");
  assert.equal(srv.requests.length, 0);
  const during = new AbortController();
  const pending = c.release(HOLDER, 1, during.signal);
  await srv.received(1);
  during.abort();
  assert.equal((await pending).kind, "aborted");
});

both("a closed port is a transport-error that says so", async () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  const out = await client(`http://127.0.0.1:${port}`).acquire(
    HOLDER,
    1,
    never(),
  );
  assert.equal(out.kind, "transport-error");
  assert.match(out.kind === "transport-error" ? out.message : "", /refused/);
});

both("a connection dropped before an answer is a transport-error", async () => {
  await using srv = await startServer(() => ({ raw: "" }));
  const out = await client(srv.url).acquire(HOLDER, 1, never());
  assert.equal(out.kind, "transport-error");
});

both("a CLI-like script exits as soon as its call is done", async () => {
  // The server keeps the connection open after answering and the client's
  // own bound is 10 s: only a leaked socket or timer could keep the child
  // alive, and then it would outlive the bound below.
  await using srv = await startServer(() => ({
    raw: `HTTP/1.1 200 OK\r\nContent-Length: ${
      JSON.stringify(GRANT).length
    }\r\nConnection: keep-alive\r\n\r\n${JSON.stringify(GRANT)}`,
  }));
  const clientUrl = new URL("../../lib/lease/client.ts", import.meta.url).href;
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { createHttpLeaseClient } from ${JSON.stringify(clientUrl)};
       const c = createHttpLeaseClient({ apiServer: ${JSON.stringify(srv.url)},
         key: { namespace: "a", name: "b" },
         ...${JSON.stringify(node())} });
       console.log((await c.acquire(${
        JSON.stringify(HOLDER)
      }, 10, new AbortController().signal)).kind);`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const bound = AbortSignal.timeout(8_000);
  const onBound = () => child.kill("SIGKILL");
  bound.addEventListener("abort", onBound);
  const out = await child.output();
  bound.removeEventListener("abort", onBound);
  assert.ok(!bound.aborted, "the script did not exit after its call");
  assert.equal(new TextDecoder().decode(out.stdout).trim(), "acquired");
  assert.equal(out.code, 0);
});

both(
  "HTTPS against a plain-HTTP server says it may not speak TLS",
  async () => {
    // What a plain-HTTP server answers to a TLS hello: a plain-text 400.
    const server = net.createServer((socket) => {
      socket.on("error", () => {});
      socket.once("data", () =>
        socket.end(
          "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as net.AddressInfo).port;
    const out = await client(`https://127.0.0.1:${port}`).acquire(
      HOLDER,
      1,
      AbortSignal.timeout(5_000),
    );
    await new Promise<void>((r) => server.close(() => r()));
    assert.equal(out.kind, "transport-error", JSON.stringify(out));
    assert.match(
      out.kind === "transport-error" ? out.message : "",
      /may not speak TLS.*scheme/,
    );
    assert.equal(configFix(out as LeaseFailure), FIXES.useHttp);
  },
);

both(
  "a kept-alive connection the server closed is retried once on a fresh one",
  async () => {
    // Each connection answers its first request and drops its second unanswered.
    await using srv = await rawServer((socket, n) => {
      if (n === 2) return socket.destroy();
      socket.write(grantText("Connection: keep-alive\r\n"));
    });
    const c = client(srv.url);
    for (let i = 0; i < 3; i++) {
      const out = await c.renew(HOLDER, 4, 1, AbortSignal.timeout(5_000));
      assert.equal(out.kind, "acquired", `call ${i}: ${JSON.stringify(out)}`);
    }
    assert.equal(srv.connections(), 3);
  },
);

both(
  "an interim 1xx answer before the real one is read past",
  async () => {
    const body = JSON.stringify(GRANT);
    await using srv = await startServer(() => ({
      raw:
        `HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    }));
    const out = await client(srv.url).acquire(HOLDER, 1, never());
    assert.equal(out.kind, "acquired", JSON.stringify(out));
  },
);

both(
  "a body framed by chunks, or ended by the close, is read whole",
  async () => {
    const body = JSON.stringify(GRANT);
    const half = Math.floor(body.length / 2);
    await using chunked = await startServer(() => ({
      raw: `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${
        half.toString(16)
      }\r\n${body.slice(0, half)}\r\n${
        (body.length - half).toString(16)
      };ext=1\r\n${body.slice(half)}\r\n0\r\n\r\n`,
    }));
    const a = await client(chunked.url).acquire(HOLDER, 1, never());
    assert.equal(a.kind, "acquired", JSON.stringify(a));
    await using untilClose = await startServer(() => ({
      raw: `HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n${body}`,
    }));
    const b = await client(untilClose.url).acquire(HOLDER, 1, never());
    assert.equal(b.kind, "acquired", JSON.stringify(b));
  },
);

both(
  "a chunked body over the cap stops the read and is bad-response",
  async () => {
    const chunk = "x".repeat(16 * 1024);
    const chunks = Math.ceil(MAX_RESPONSE_BYTES / chunk.length) + 1;
    await using srv = await startServer(() => ({
      raw: `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${
        `${chunk.length.toString(16)}\r\n${chunk}\r\n`.repeat(chunks)
      }0\r\n\r\n`,
    }));
    const out = await client(srv.url).acquire(HOLDER, 1, never());
    assert.equal(out.kind, "bad-response", JSON.stringify(out));
  },
);

both("a redirect names its Location, not an empty body", async () => {
  await using srv = await startServer(() => ({
    status: 301,
    headers: { Location: "/v1alpha1/namespaces/prod/leases/checkout/acquire" },
  }));
  const out = await client(srv.url).acquire(HOLDER, 1, never());
  assert.equal(out.kind, "server-error");
  assert.match(
    out.kind === "server-error" ? describeFailure(out) : "",
    /server answered 301: redirect to \/v1alpha1\/.*redirects are not followed/,
  );
});

Deno.test({
  name: "both transports word a refused connection and a non-TLS server alike",
  ignore: opensslMissing() !== undefined,
  fn: async () => {
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (l.addr as Deno.NetAddr).port;
    l.close();
    const server = net.createServer((socket) => {
      socket.on("error", () => {});
      socket.once("data", () => socket.end("HTTP/1.1 400 Bad Request\r\n\r\n"));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const plain = (server.address() as net.AddressInfo).port;
    const pki = await nodePki();
    try {
      for (
        const url of [`https://127.0.0.1:${port}`, `https://127.0.0.1:${plain}`]
      ) {
        const [a, b] = await Promise.all(
          [{}, { serverName: NODE_NAME, caBundleFile: pki.caCert }].map((o) =>
            createHttpLeaseClient({ apiServer: url, key: KEY, ...o })
              .acquire(HOLDER, 1, AbortSignal.timeout(5_000))
          ),
        );
        assert.equal(a.kind, "transport-error", JSON.stringify(a));
        assert.deepEqual(a, b);
      }
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  },
});

both(
  "a grant naming another holder is never held, on Acquire nor Renew",
  async () => {
    await using srv = await startServer(() =>
      json(200, { ...GRANT, holder: "prod/someone-else" })
    );
    const c = client(srv.url);
    for (
      const out of [
        await c.acquire(HOLDER, 10, never()),
        await c.renew(HOLDER, 4, 10, never()),
      ]
    ) {
      assert.equal(out.kind, "bad-response", JSON.stringify(out));
      assert.match(
        out.kind === "bad-response" ? out.message : "",
        /"holder" is "prod\/someone-else", not the holder requested/,
      );
    }
  },
);

both(
  "a finished request keeps nothing of its bound: no setTimeout timer, no listener on the caller's signal, nothing that holds the process",
  async () => {
    await using srv = await startServer(() => json(200, GRANT));
    const c = client(srv.url);
    const caller = new AbortController();
    let out: unknown;
    const timers = await timersOf(async () => {
      out = await c.acquire(HOLDER, 30, caller.signal);
    });
    assert.equal((out as { kind: string }).kind, "acquired");
    // The bound is AbortSignal.timeout's (no setTimeout: the first one loads
    // Deno's Node timers, about 6 ms of every acquire's start).
    assert.equal(timers.pending, 0);
    // Aborting the caller after the call must not reach into it.
    caller.abort();
    const again = await c.acquire(HOLDER, 30, never());
    assert.equal(again.kind, "acquired");
  },
);

const grantText = (extra = "") =>
  `HTTP/1.1 200 OK\r\nContent-Length: ${
    JSON.stringify(GRANT).length
  }\r\n${extra}\r\n${JSON.stringify(GRANT)}`;

both(
  "a 408 the server left on an idle kept connection is retried on a fresh one, not reported",
  async () => {
    // Each connection answers its first request; the test then times the
    // first one out as idle, once the client holds it as kept.
    const answered: net.Socket[] = [];
    await using srv = await rawServer((socket, n) => {
      if (n > 1) return;
      answered.push(socket);
      socket.write(grantText());
    });
    const c = client(srv.url);
    const first = await c.renew(HOLDER, 4, 1, AbortSignal.timeout(5_000));
    assert.equal(first.kind, "acquired", JSON.stringify(first));
    // The 408 is written and the socket closed before the next request.
    await new Promise<void>((r) =>
      answered[0].end(
        "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n",
        () => r(),
      )
    );
    const second = await c.renew(HOLDER, 4, 1, AbortSignal.timeout(5_000));
    assert.equal(second.kind, "acquired", JSON.stringify(second));
    assert.equal(srv.connections(), 2, "the second went on a fresh connection");
  },
);

// node:https (skip-verify, the server-name override) refuses a repeated length.
Deno.test("[fetch] a Content-Length repeated with the same value is one length", async () => {
  const n = JSON.stringify(GRANT).length;
  await using srv = await rawServer((socket) => {
    socket.end(
      `HTTP/1.1 200 OK\r\nContent-Length: ${n}\r\nContent-Length: ${n}\r\nConnection: close\r\n\r\n${
        JSON.stringify(GRANT)
      }`,
    );
  });
  const out = await client(srv.url).acquire(HOLDER, 1, never());
  assert.equal(out.kind, "acquired", JSON.stringify(out));
});

Deno.test("[fetch] a gzip-compressed answer is read as the server meant it, and its decoded size counts against the cap", async () => {
  // The declared length is the compressed one: a small one may decode to any size.
  const huge = `{"acquired":true,"pad":"${
    "x".repeat(4 * MAX_RESPONSE_BYTES)
  }"}`;
  for (
    const [text, kind] of [[JSON.stringify(GRANT), "acquired"], [
      huge,
      "bad-response",
    ]]
  ) {
    const body = new Uint8Array(
      await new Response(
        new Blob([text]).stream().pipeThrough(new CompressionStream("gzip")),
      ).arrayBuffer(),
    );
    assert.ok(body.length < MAX_RESPONSE_BYTES);
    await using srv = await rawServer((socket) => {
      socket.write(
        `HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
      );
      socket.end(body);
    });
    const out = await client(srv.url).acquire(HOLDER, 1, never());
    assert.equal(out.kind, kind, JSON.stringify(out));
  }
});

both("a 101 is a final answer, not an interim one to wait past", async () => {
  await using srv = await rawServer((socket) => {
    socket.end("HTTP/1.1 101 Switching Protocols\r\nConnection: close\r\n\r\n");
  });
  const out = await client(srv.url).acquire(
    HOLDER,
    1,
    AbortSignal.timeout(5_000),
  );
  assert.notEqual(out.kind, "timeout", JSON.stringify(out));
  assert.notEqual(out.kind, "aborted", JSON.stringify(out));
});

Deno.test("[fetch] http:// on a TLS port: the Go server's plain-text 400 names use https://", async () => {
  // What Go's net/http TLS server answers a request in plain HTTP.
  await using srv = await rawServer((socket) => {
    const body = "Client sent an HTTP request to an HTTPS server.\n";
    socket.end(
      `HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  const out = await client(srv.url).acquire(HOLDER, 1, never());
  assert.equal(out.kind, "server-error", JSON.stringify(out));
  assert.equal(configFix(out as LeaseFailure), FIXES.useHttps);
});
