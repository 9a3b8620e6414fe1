/**
 * The HTTP/1.1 framing of lib/lease/http1.ts on its own: the request as
 * written, and one response read back from an in-memory connection. The
 * transports' behaviour against real servers is in client_test.ts.
 */
import assert from "node:assert/strict";
import { exchange, requestText } from "../../lib/lease/http1.ts";
import { parseApiServer } from "../../lib/lease/wire.ts";

const request = {
  path: "/v1alpha1/namespaces/prod/leases/web/acquire",
  headers: { "Content-Type": "application/json", "X-Request-Id": "r1" },
  body: '{"holder":"é","ttlSeconds":1}',
};

Deno.test("requestText: one POST with Host as fetch sends it and the body's byte length", () => {
  const text = requestText(
    parseApiServer("https://berth.example:443"),
    request,
  )!;
  const [head, body] = text.split("\r\n\r\n");
  assert.deepEqual(head.split("\r\n"), [
    "POST /v1alpha1/namespaces/prod/leases/web/acquire HTTP/1.1",
    "Host: berth.example",
    "Content-Type: application/json",
    "X-Request-Id: r1",
    "Content-Length: 30", // "é" is two bytes
  ]);
  assert.equal(body, request.body);
  const other = requestText(parseApiServer("http://127.0.0.1:8080"), request)!;
  assert.match(other, /\r\nHost: 127\.0\.0\.1:8080\r\n/);
});

Deno.test("requestText: framing headers are its own, and a header that would break the framing refuses the request", () => {
  const target = parseApiServer("https://berth.example");
  const text = requestText(target, {
    ...request,
    headers: { Host: "evil", "Content-Length": "1", Connection: "close" },
  })!;
  assert.doesNotMatch(text, /evil|Content-Length: 1\r|Connection/);
  assert.equal(
    requestText(target, { ...request, headers: { "X-A": "1\r\nX-B: 2" } }),
    undefined,
  );
});

Deno.test("requestText: through a proxy, plain HTTP goes in absolute form with the proxy's credentials; HTTPS does not", () => {
  const proxy = {
    hostname: "proxy.corp",
    port: 3128,
    authorization: "Basic dTpw",
    label: "HTTP_PROXY (proxy.corp:3128)",
  };
  const plain = requestText(
    parseApiServer("http://berth.example"),
    request,
    proxy,
  )!;
  assert.match(
    plain,
    /^POST http:\/\/berth\.example\/v1alpha1\/namespaces\/prod\/leases\/web\/acquire HTTP\/1\.1\r\n/,
  );
  assert.match(plain, /\r\nProxy-Authorization: Basic dTpw\r\n/);
  const tls = requestText(
    parseApiServer("https://berth.example"),
    request,
    proxy,
  )!;
  assert.match(tls, /^POST \/v1alpha1\//);
  assert.doesNotMatch(tls, /Proxy-Authorization/);
});

/** A connection that gives back `reply` in pieces and records what is written. */
function fakeConn(reply: string, piece = 7): Deno.Conn & { written: string } {
  const bytes = new TextEncoder().encode(reply);
  let at = 0;
  const conn = {
    written: "",
    write(b: Uint8Array) {
      conn.written += new TextDecoder().decode(b);
      return Promise.resolve(b.length);
    },
    read(into: Uint8Array) {
      if (at >= bytes.length) return Promise.resolve(null);
      const n = Math.min(piece, into.length, bytes.length - at);
      into.set(bytes.subarray(at, at + n));
      at += n;
      return Promise.resolve(n);
    },
  };
  return conn as unknown as Deno.Conn & { written: string };
}

Deno.test("exchange: an interim 100 is read past; a chunked body is joined; the connection is kept", async () => {
  const conn = fakeConn(
    "HTTP/1.1 100 Continue\r\n\r\n" +
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Request-Id: abc\r\n\r\n" +
      '5\r\n{"a":\r\n2\r\n1}\r\n0\r\n\r\n',
  );
  const { answer, keepAlive } = await exchange(
    conn,
    new TextEncoder().encode("POST / HTTP/1.1\r\n\r\n"),
  );
  assert.equal(conn.written, "POST / HTTP/1.1\r\n\r\n");
  assert.deepEqual(answer, {
    status: 200,
    body: '{"a":1}',
    requestId: "abc",
    location: undefined,
  });
  assert.equal(keepAlive, true);
});

Deno.test("exchange: Connection close, HTTP/1.0 or a body until close end the kept connection", async () => {
  for (
    const reply of [
      "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n",
      "HTTP/1.0 204 No Content\r\n\r\n",
      "HTTP/1.1 200 OK\r\n\r\n{}",
    ]
  ) {
    const { keepAlive } = await exchange(fakeConn(reply), new Uint8Array());
    assert.equal(keepAlive, false, JSON.stringify(reply));
  }
});
