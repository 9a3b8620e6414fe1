/**
 * The development server against the real Berth API server, row by row:
 * what it answers as the real one does (bearer tokens, lease key messages,
 * times, `OPTIONS *`, probe headers, connections kept after errors), and
 * what it deliberately answers otherwise because `Deno.serve` decides it
 * before any handler runs (duplicate headers, a missing Host, a
 * Transfer-Encoding with a Content-Length, an oversized header). The names
 * of the "deliberate:" tests are cited in docs/dev-server.md.
 */
import assert from "node:assert/strict";
import { type DevServer, startDevServer } from "../../lib/devserver/server.ts";
import { grantOutcome } from "../../lib/lease/wire.ts";

const T0 = Date.UTC(2026, 4, 7); // 2026-05-07T00:00:00Z
const LEASE = "/v1alpha1/namespaces/prod/leases/checkout";
// SHA-256 of "test"; the key id "team" is the tenant.
const KEY =
  "team:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
const BODY = '{"holder":"team","ttlSeconds":10}';

/**
 * Writes raw bytes on one connection and reads until the server closes it
 * (the last request should say `Connection: close`). A reset ends the read
 * like a close; what was read so far is returned.
 */
async function rawExchange(
  server: DevServer,
  bytes: string,
): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
  let out = "";
  try {
    try {
      await conn.write(new TextEncoder().encode(bytes));
    } catch {
      // The server may reset before reading everything; read its answer.
    }
    const buf = new Uint8Array(65536);
    for (;;) {
      let n: number | null;
      try {
        n = await conn.read(buf);
      } catch {
        return out;
      }
      if (n === null) return out;
      out += new TextDecoder().decode(buf.subarray(0, n));
    }
  } finally {
    conn.close();
  }
}

/** The status lines in a raw exchange, in order. */
function statuses(raw: string): number[] {
  return [...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
}

async function post(
  server: DevServer,
  path: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(server.url + path, {
    method: "POST",
    headers,
    body,
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

Deno.test("parity: a Bearer token is trimmed of spaces; the scheme is case-sensitive", async () => {
  await using server = await startDevServer({ apiKeys: [KEY] });
  const spaced = await rawExchange(
    server,
    `POST ${LEASE}/acquire HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer   test  \r\nContent-Length: ${BODY.length}\r\nConnection: close\r\n\r\n${BODY}`,
  );
  assert.deepEqual(statuses(spaced), [200], spaced);
  // A Unicode space (U+00A0, sent as UTF-8) is trimmed as Go trims it.
  const nbsp = await post(server, `${LEASE}/renew`, "{}", {
    authorization: "Bearer \xc2\xa0test\xc2\xa0",
  });
  assert.equal(nbsp.status, 400, "authenticated; the body is what is wrong");
  for (
    const [header, message] of [
      ["bearer test", "missing or malformed Authorization header"],
      ["Bearer", "missing or malformed Authorization header"],
      ["Bearer    ", "missing or malformed Authorization header"],
      ["Bearer\ttest", "missing or malformed Authorization header"],
      ["Bearer  tes t", "unauthorized"],
    ]
  ) {
    const r = await post(server, `${LEASE}/acquire`, BODY, {
      authorization: header,
    });
    assert.equal(r.status, 401, header);
    assert.equal(r.text, JSON.stringify({ error: message }) + "\n", header);
  }
});

Deno.test("deliberate: two Authorization headers arrive joined and are refused 401 unauthorized", async () => {
  // The real server reads the first header and would accept this request.
  await using server = await startDevServer({ apiKeys: [KEY] });
  const raw = await rawExchange(
    server,
    `POST ${LEASE}/acquire HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer test\r\nAuthorization: Bearer other\r\nContent-Length: ${BODY.length}\r\nConnection: close\r\n\r\n${BODY}`,
  );
  assert.deepEqual(statuses(raw), [401], raw);
  assert.ok(raw.endsWith('{"error":"unauthorized"}\n'), raw);
});

Deno.test("deliberate: two X-Request-Id headers arrive joined, so the traceparent or a random id decides", async () => {
  // The real server would echo "first".
  await using server = await startDevServer();
  const trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  const withTrace = await rawExchange(
    server,
    `GET /healthz HTTP/1.1\r\nHost: t\r\nX-Request-Id: first\r\nX-Request-Id: second\r\ntraceparent: 00-${trace}-00f067aa0ba902b7-01\r\nConnection: close\r\n\r\n`,
  );
  assert.match(withTrace, new RegExp(`\r\nx-request-id: ${trace}\r\n`, "i"));
  const without = await rawExchange(
    server,
    `GET /healthz HTTP/1.1\r\nHost: t\r\nX-Request-Id: first\r\nX-Request-Id: second\r\nConnection: close\r\n\r\n`,
  );
  assert.match(without, /\r\nx-request-id: [0-9a-f]{32}\r\n/i);
});

Deno.test("parity: a bad lease key is 400 with the server's own message", async () => {
  await using server = await startDevServer();
  const dots = await post(
    server,
    "/v1alpha1/namespaces/a.b/leases/web/acquire",
    '{"holder":"h","ttlSeconds":10}',
  );
  assert.equal(dots.status, 400);
  assert.equal(
    dots.text,
    JSON.stringify({
      error:
        `invalid namespace "a.b": must be an RFC 1123 DNS label (lowercase alphanumerics and '-', at most 63 characters): must not contain dots`,
    }) + "\n",
  );
  const long = await post(
    server,
    `/v1alpha1/namespaces/${"n".repeat(60)}/leases/${"a".repeat(200)}/renew`,
    '{"holder":"h","fencingToken":1,"ttlSeconds":10}',
  );
  assert.equal(long.status, 400);
  assert.equal(
    long.text,
    JSON.stringify({
      error: `invalid key ${"n".repeat(60)}/${
        "a".repeat(200)
      }: namespace and name joined with '.' must be at most 253 characters, got 261`,
    }) + "\n",
  );
});

Deno.test("parity: times carry up to nine fractional digits, trailing zeros dropped, and the client parses them", async () => {
  // 0.5 ms + 2^-10 ms is exact in a double at this magnitude.
  let t = T0 + 0.5 + 2 ** -10;
  await using server = await startDevServer({ now: () => t });
  const a = await post(server, `${LEASE}/acquire`, BODY);
  assert.equal(
    a.text,
    '{"acquired":true,"holder":"team","fencingToken":1,"expiresAt":"2026-05-07T00:00:10.000500977Z","acquiredAt":"2026-05-07T00:00:00.000500977Z"}\n',
  );
  t = T0 + 1500;
  const r = await post(
    server,
    `${LEASE}/renew`,
    '{"holder":"team","fencingToken":1,"ttlSeconds":10}',
  );
  assert.match(r.text, /"expiresAt":"2026-05-07T00:00:11\.5Z"/);
  for (const answer of [a, r]) {
    const outcome = grantOutcome({ status: 200, body: answer.text }, {
      holder: "team",
      url: server.url,
    });
    assert.equal(outcome.kind, "acquired", answer.text);
  }
  // The default clock carries sub-millisecond digits too; the client takes them.
  await using live = await startDevServer();
  const now = await post(live, `${LEASE}/acquire`, BODY);
  const times = JSON.parse(now.text) as {
    expiresAt: string;
    acquiredAt: string;
  };
  for (const time of [times.expiresAt, times.acquiredAt]) {
    assert.match(time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/);
  }
  // The TTL is whole seconds, so both times share their fraction exactly.
  assert.equal(times.expiresAt.slice(19), times.acquiredAt.slice(19));
  const outcome = grantOutcome({ status: 200, body: now.text }, {
    holder: "team",
    url: live.url,
  });
  assert.equal(outcome.kind, "acquired", now.text);
});

Deno.test("parity: OPTIONS * is 200 with an empty body", async () => {
  await using server = await startDevServer();
  const raw = await rawExchange(
    server,
    "OPTIONS * HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
  );
  assert.deepEqual(statuses(raw), [200], raw);
  assert.match(raw, /\r\ncontent-length: 0\r\n/i);
  assert.ok(raw.endsWith("\r\n\r\n"), raw);
});

Deno.test("parity: the probes carry no nosniff header; net/http's 404 and 405 do", async () => {
  await using server = await startDevServer();
  for (const path of ["/healthz", "/readyz"]) {
    const r = await fetch(server.url + path);
    await r.body?.cancel();
    assert.equal(r.headers.get("x-content-type-options"), null, path);
  }
  server.setReady(false);
  const notReady = await fetch(server.url + "/readyz");
  await notReady.body?.cancel();
  assert.equal(notReady.status, 503);
  assert.equal(notReady.headers.get("x-content-type-options"), null);
  for (const [path, status] of [["/nope", 404], [`${LEASE}/acquire`, 405]]) {
    const r = await fetch(server.url + path);
    await r.body?.cancel();
    assert.equal(r.status, status);
    assert.equal(r.headers.get("x-content-type-options"), "nosniff");
  }
});

Deno.test("parity: the connection stays open after 401, 404, 405 and 413", async () => {
  await using server = await startDevServer({ apiKeys: [KEY] });
  const next = "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  const big = "x".repeat(5000);
  const cases: [number, string][] = [
    [
      401,
      `POST ${LEASE}/acquire HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}`,
    ],
    [404, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n"],
    [405, `GET ${LEASE}/acquire HTTP/1.1\r\nHost: t\r\n\r\n`],
    [
      413,
      `POST ${LEASE}/acquire HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer test\r\nContent-Length: ${big.length}\r\n\r\n${big}`,
    ],
    [
      413,
      `POST ${LEASE}/acquire HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer test\r\nTransfer-Encoding: chunked\r\n\r\n${
        big.length.toString(16)
      }\r\n${big}\r\n0\r\n\r\n`,
    ],
  ];
  for (const [status, first] of cases) {
    const raw = await rawExchange(server, first + next);
    assert.deepEqual(statuses(raw), [status, 200], raw);
  }
});

Deno.test("deliberate: a request without Host is served (the real server answers 400)", async () => {
  // Go: "400 Bad Request: missing required Host header" for HTTP/1.1.
  // Deno.serve does not tell HTTP/1.0 (where Host is optional) from 1.1.
  await using server = await startDevServer();
  const raw = await rawExchange(
    server,
    "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
  );
  assert.deepEqual(statuses(raw), [200], raw);
  assert.ok(raw.endsWith("\r\n\r\nok\n"), raw);
});

Deno.test("deliberate: Transfer-Encoding with Content-Length is refused 400 before the handler (the real server answers 200)", async () => {
  await using server = await startDevServer();
  const body = `${BODY.length.toString(16)}\r\n${BODY}\r\n0\r\n\r\n`;
  const raw = await rawExchange(
    server,
    `POST ${LEASE}/acquire HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\nConnection: close\r\n\r\n${body}`,
  );
  assert.deepEqual(statuses(raw), [400], raw);
  assert.equal(server.rpcCount("acquire"), 0, "the handler never ran");
});

Deno.test("deliberate: a 2 MiB header is refused 400 before the handler (the real server answers 431)", async () => {
  await using server = await startDevServer();
  const raw = await rawExchange(
    server,
    `GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: ${
      "a".repeat(2 << 20)
    }\r\nConnection: close\r\n\r\n`,
  );
  assert.deepEqual(statuses(raw), [400], raw.slice(0, 200));
});

Deno.test("parity: a malformed percent-escape anywhere in the path is a bare 400", async () => {
  await using server = await startDevServer();
  for (const path of ["/x/%zz", `${LEASE.replace("prod", "%g0")}/acquire`]) {
    const raw = await rawExchange(
      server,
      `POST ${path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
    );
    assert.deepEqual(statuses(raw), [400], raw);
    assert.ok(raw.endsWith("\r\n\r\n400 Bad Request"), raw);
    assert.doesNotMatch(raw, /x-request-id/i, "answered before any handler");
  }
  // A path that is not a valid encoding is decoded and escaped again, as Go
  // does before cleaning it: "%41" is "A" there, '"' is escaped twice.
  const raw = await rawExchange(
    server,
    `GET /x/../%41" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n`,
  );
  assert.match(raw, /\r\nlocation: \/A%2522\r\n/i);
});

Deno.test("deliberate: the connection stays open after a malformed percent-escape (the real server closes it)", async () => {
  await using server = await startDevServer();
  const raw = await rawExchange(
    server,
    "GET /x/%zz HTTP/1.1\r\nHost: t\r\n\r\nGET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
  );
  assert.deepEqual(statuses(raw), [400, 200], raw);
});

Deno.test("deliberate: OPTIONS /* is taken for OPTIONS * (200; the real server answers 404)", async () => {
  // Deno.serve gives both as the path "/*".
  await using server = await startDevServer();
  const raw = await rawExchange(
    server,
    "OPTIONS /* HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
  );
  assert.deepEqual(statuses(raw), [200], raw);
});

Deno.test("deliberate: a lease key byte that is not UTF-8 is quoted as U+FFFD (the real server writes \\xff)", async () => {
  await using server = await startDevServer();
  const r = await post(
    server,
    "/v1alpha1/namespaces/%ff/leases/web/acquire",
    '{"holder":"h","ttlSeconds":10}',
  );
  assert.equal(r.status, 400);
  assert.match(r.text, /^\{"error":"invalid namespace \\"\ufffd\\": must be/);
});

Deno.test("deliberate: the 413 reason phrase and the header-name case are Deno's (Payload Too Large, lower case)", async () => {
  // The real server writes "413 Request Entity Too Large" and "Content-Type".
  await using server = await startDevServer();
  const big = "x".repeat(5000);
  const raw = await rawExchange(
    server,
    `POST ${LEASE}/acquire HTTP/1.1\r\nHost: t\r\nContent-Length: ${big.length}\r\nConnection: close\r\n\r\n${big}`,
  );
  assert.match(raw, /^HTTP\/1\.1 413 Payload Too Large\r\n/);
  assert.match(raw, /\r\ncontent-type: application\/json\r\n/);
});
