/**
 * The wire as pure functions. The request side: bodies byte for byte the Go
 * helper's (sorted keys, Go's escapes), headers, and the API server URL's
 * checks. The answer side: status, headers and body text in, outcome out,
 * with no socket, covering what JSON.parse alone would let through (a token
 * written as 1.0 or 1e0) and what would be a held lease that is not ours (a
 * grant naming another holder).
 */
import assert from "node:assert/strict";
import {
  type AnswerContext,
  goJsonString,
  grantOutcome,
  parseApiServer,
  releaseOutcome,
  requestBody,
  requestHeaders,
} from "../../lib/lease/wire.ts";
import {
  configFix,
  describeFailure,
  FIXES,
  isPersistentFailure,
  type LeaseFailure,
} from "../../lib/lease/rpc.ts";
import { redactor } from "../../lib/lease/api_key.ts";
import { VERSION } from "../../lib/version.ts";

/** The UTF-8 bytes of a body, as they go on the wire. */
const bytes = (text: string) => [...new TextEncoder().encode(text)];

Deno.test("bodies are the Go helper's bytes: keys sorted as Go marshals a map, no space, no newline", () => {
  assert.deepEqual(
    bytes(requestBody({ holder: "a/b", ttlSeconds: 30 })),
    bytes('{"holder":"a/b","ttlSeconds":30}'),
  );
  assert.deepEqual(
    bytes(requestBody({ holder: 'a"b', fencingToken: 4, ttlSeconds: 30 })),
    bytes('{"fencingToken":4,"holder":"a\\"b","ttlSeconds":30}'),
  );
  assert.deepEqual(
    bytes(requestBody({ holder: "é", fencingToken: 2147483647 })),
    // "é" as its two UTF-8 bytes, unescaped, as Go writes it.
    [
      ...bytes('{"fencingToken":2147483647,"holder":"'),
      0xc3,
      0xa9,
      ...bytes('"}'),
    ],
  );
  assert.throws(
    () => requestBody({ holder: "h", fencingToken: 1.5, ttlSeconds: 1 }),
    /fencingToken must be an integer in 1\.\.2147483647, got 1\.5/,
  );
  assert.throws(
    () => requestBody({ holder: "h", ttlSeconds: 0 }),
    /ttlSeconds must be an integer in 1\.\.2147483647, got 0/,
  );
});

Deno.test("holder strings are escaped as Go's encoding/json escapes them", () => {
  // Each: the string, and the JSON text Go's json.Marshal gives for it.
  const cases: [string, string][] = [
    ["<script>&", '"\\u003cscript\\u003e\\u0026"'],
    ["line\u2028para\u2029", '"line\\u2028para\\u2029"'],
    ['q"b\\s/', '"q\\"b\\\\s/"'],
    ["\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'],
    ["\x00\x01\x1f\x7f", '"\\u0000\\u0001\\u001f\x7f"'],
    ["é😀", '"é😀"'],
    // A lone surrogate (invalid UTF-8 for Go) is the replacement character.
    ["a\ud800b\udfffc", '"a\\ufffdb\\ufffdc"'],
    ["\\ud800", '"\\\\ud800"'],
  ];
  for (const [s, want] of cases) {
    assert.equal(goJsonString(s), want, JSON.stringify(s));
  }
  assert.deepEqual(
    bytes(requestBody({ holder: "east/<a>&b", ttlSeconds: 1 })),
    bytes('{"holder":"east/\\u003ca\\u003e\\u0026b","ttlSeconds":1}'),
  );
});

Deno.test("the base path loses its trailing slashes; an IPv6 host its brackets; the port defaults to the scheme's", () => {
  assert.equal(parseApiServer("https://gw:8443/berth//").basePath, "/berth");
  const t = parseApiServer("https://[::1]");
  assert.deepEqual([t.hostname, t.port, t.secure], ["::1", 443, true]);
});

Deno.test("headers: JSON, the version, the id, the byte length, the bearer only with a key", () => {
  const h = requestHeaders(`{"holder":"é"}`, "rid", "tok");
  assert.deepEqual(h, {
    "Content-Type": "application/json",
    Accept: "application/json",
    "User-Agent": `berth-acquire/${VERSION}`,
    "X-Request-Id": "rid",
    "Content-Length": "15",
    Authorization: "Bearer tok",
  });
  assert.equal(requestHeaders("{}", "r", undefined).Authorization, undefined);
});

Deno.test("a URL with credentials is refused without echoing them", () => {
  assert.throws(
    () => parseApiServer("https://user:SECRET@berth.example:8443/x"),
    (e: Error) =>
      !e.message.includes("SECRET") && !e.message.includes("user") &&
      /must not carry credentials/.test(e.message) &&
      e.message.includes("berth.example:8443"),
  );
});

const HOLDER = "east/prod:pod:p1";
const CTX: AnswerContext = { holder: HOLDER, url: "https://gw/berth/x" };
const TIMES =
  `"expiresAt":"2026-05-07T00:00:30Z","acquiredAt":"2026-05-07T00:00:00Z"`;

function grant(token: string, holder = HOLDER, acquired = true): string {
  return `{"acquired":${acquired},"holder":${
    JSON.stringify(holder)
  },"fencingToken":${token},${TIMES}}`;
}

Deno.test("fencingToken must be a JSON integer literal in int32 range", () => {
  for (const bad of ["1.0", "1e0", "1E1", "4.00", "2147483648", "1e9"]) {
    const out = grantOutcome({ status: 200, body: grant(bad) }, CTX);
    assert.equal(out.kind, "bad-response", bad);
    assert.match(
      out.kind === "bad-response" ? out.message : "",
      /JSON integer in int32 range/,
    );
  }
  for (const good of ["1", "2147483647", " 7 "]) {
    const out = grantOutcome({ status: 200, body: grant(good) }, CTX);
    assert.equal(out.kind, "acquired", good);
  }
  // A nested or escaped-name member does not fool the scan.
  const nested =
    `{"x":{"fencingToken":1.5},"fencing\\u0054oken":3,"acquired":true,"holder":"${HOLDER}",${TIMES}}`;
  const out = grantOutcome({ status: 200, body: nested }, CTX);
  assert.equal(out.kind === "acquired" && out.lease.fencingToken, 3);
});

Deno.test("the token's literal is the one JSON.parse keeps: the last duplicate's, never a nested member's", () => {
  const body = (tokens: string) =>
    `{"acquired":true,"holder":"${HOLDER}",${TIMES},"b":[1,{"fencingToken":2}],${tokens}}`;
  const last = grantOutcome(
    { status: 200, body: body(`"fencingToken":1.0,"fencingToken":-0`) },
    CTX,
  );
  assert.equal(last.kind, "bad-response"); // -0 is an integer literal, but < 1
  assert.match(last.kind === "bad-response" ? last.message : "", /at least 1/);
  const good = grantOutcome(
    { status: 200, body: body(`"fencingToken":1e0,"fencingToken":5`) },
    CTX,
  );
  assert.equal(good.kind === "acquired" && good.lease.fencingToken, 5);
  const bad = grantOutcome(
    { status: 200, body: body(`"fencingToken":5,"fencingToken":5.0`) },
    CTX,
  );
  assert.equal(bad.kind, "bad-response");
});

Deno.test("acquired:true naming another holder (or none) is a protocol error, on Acquire and Renew", () => {
  for (const holder of ["someone/else", "", HOLDER + " "]) {
    const out = grantOutcome({ status: 200, body: grant("4", holder) }, CTX);
    assert.equal(out.kind, "bad-response", JSON.stringify(holder));
    assert.match(
      out.kind === "bad-response" ? out.message : "",
      /not the holder requested/,
    );
  }
  // acquired:false describing the other holder stays not-acquired.
  const other = grantOutcome(
    { status: 200, body: grant("4", "someone/else", false) },
    CTX,
  );
  assert.equal(other.kind, "not-acquired");
});

Deno.test("a redirect names its Location; secrets are redacted before the excerpt is cut", () => {
  const out = releaseOutcome(
    { status: 307, body: "", location: "https://other/" },
    CTX,
  );
  assert.deepEqual(out, {
    kind: "server-error",
    status: 307,
    message: "redirect to https://other/",
    requestId: undefined,
    url: CTX.url,
  });
  const key = "k".repeat(190) + "SECRET";
  const cut = grantOutcome(
    { status: 500, body: `x${key}` },
    { ...CTX, redact: redactor([key]) },
  );
  assert.ok(!JSON.stringify(cut).includes("kkkk"), JSON.stringify(cut));
});

Deno.test("server text is one printable line: controls, separators and bidi overrides become a space", () => {
  const out = grantOutcome(
    { status: 500, body: "internal\x1b[31m error\u202e\u0085x\u2028y\n" },
    CTX,
  );
  assert.equal((out as { message: string }).message, "internal [31m error x y");
});

Deno.test("400, 401, 403 and 404 say what to do and are persistent; others are not", () => {
  const f = (status: number, message = "m"): LeaseFailure => ({
    kind: "server-error",
    status,
    message,
    url: "https://gw/berth/v1alpha1/namespaces/p/leases/l/acquire",
  });
  assert.match(
    describeFailure(f(400, 'invalid name "A"')),
    /invalid name "A".*lease name/,
  );
  assert.match(describeFailure(f(401)), /--api-key-file/);
  assert.match(describeFailure(f(403)), /start with "<key-id>\/"/);
  assert.match(
    describeFailure(f(404)),
    /requested https:\/\/gw\/berth\/v1alpha1\/.*kept as a prefix/,
  );
  for (const s of [400, 401, 403, 404]) assert.ok(isPersistentFailure(f(s)));
  for (const s of [409, 413, 500, 503]) assert.ok(!isPersistentFailure(f(s)));
  assert.ok(
    !isPersistentFailure({ kind: "transport-error", message: "refused" }),
  );
});

// ---------------------------------------------------------------------------
// Answers no wait can heal name their fix; every other answer has none.

/** What `python3 -m http.server` answers a POST. */
const PYTHON_501 = `<!DOCTYPE HTML>
<html lang="en">
    <head>
        <meta charset="utf-8">
        <title>Error response</title>
    </head>
    <body>
        <h1>Error response</h1>
        <p>Error code: 501</p>
        <p>Message: Unsupported method ('POST').</p>
    </body>
</html>
`;

const HTTP_CTX: AnswerContext = {
  holder: HOLDER,
  url: "http://127.0.0.1:8443/v1alpha1/namespaces/p/leases/l/acquire",
};

Deno.test("http:// on a TLS port: the Go server's 400 (and nginx's) names use https://", () => {
  for (
    const body of [
      "Client sent an HTTP request to an HTTPS server.\n",
      "<html><head><title>400 The plain HTTP request was sent to HTTPS port</title></head></html>",
    ]
  ) {
    const out = grantOutcome({ status: 400, body }, HTTP_CTX);
    assert.equal(out.kind, "server-error", body);
    assert.equal(configFix(out as LeaseFailure), FIXES.useHttps, body);
    assert.match(FIXES.useHttps, /^use https:\/\//);
  }
});

Deno.test("not a Berth API server: python's 501 page, an HTML page, a status Berth never gives without its JSON error, a 2xx that is not JSON", () => {
  const cases: [number, string][] = [
    [501, PYTHON_501],
    [405, "<html><head><title>405 Not Allowed</title></head></html>"],
    [404, "<!doctype html><title>Not Found</title>"],
    [401, "<html><body><h1>Sign in</h1></body></html>"],
    [418, "I'm a teapot"],
    [200, "<html>welcome</html>"],
    [200, "ok"],
    [201, "created"],
  ];
  for (const [status, body] of cases) {
    const out = grantOutcome({ status, body }, CTX);
    assert.equal(
      configFix(out as LeaseFailure),
      FIXES.notBerth,
      `${status} ${JSON.stringify(out)}`,
    );
  }
  assert.equal(
    FIXES.notBerth,
    "this is not a Berth API server: check --api-server / BERTH_API_SERVER",
  );
  // An HTML page is said to be one, by its title, never quoted raw.
  const page = grantOutcome({ status: 501, body: PYTHON_501 }, CTX);
  assert.equal(
    page.kind === "server-error" && page.message,
    'an HTML page titled "Error response", not the API\'s JSON',
  );
  // A release is judged alike.
  const rel = releaseOutcome({ status: 501, body: PYTHON_501 }, CTX);
  assert.equal(configFix(rel as LeaseFailure), FIXES.notBerth);
  // A release is 204, or a 200 with nothing or a JSON object: not a page.
  for (const body of ["", "{}", '{"released":true}']) {
    assert.equal(releaseOutcome({ status: 200, body }, CTX).kind, "released");
  }
  const portal = releaseOutcome(
    { status: 200, body: "<html>portal</html>" },
    CTX,
  );
  assert.equal(portal.kind, "bad-response");
  assert.equal(configFix(portal as LeaseFailure), FIXES.notBerth);
});

Deno.test("no fix for what may heal or has its own advice: 5xx, a gateway's page, 409, Berth's 4xx, redirects, a JSON body that breaks a promise", () => {
  const cases: [number, string][] = [
    [500, '{"error":"internal error"}\n'],
    [502, "<html><title>502 Bad Gateway</title></html>"],
    [503, "<html><title>Service Temporarily Unavailable</title></html>"],
    [504, ""],
    [409, '{"error":"lease held by another identity or token"}\n'],
    [401, '{"error":"unauthorized"}\n'],
    [403, '{"error":"not authorized for this namespace"}\n'],
    [404, "404 page not found\n"],
    [400, '{"error":"invalid json body: unexpected EOF"}\n'],
    [413, '{"error":"request body must be at most 4096 bytes"}\n'],
    [405, "Method Not Allowed\n"],
    [307, ""],
    [501, '{"error":"not implemented"}'],
    [429, '{"error":"slow down"}'],
    [429, "slow down"],
    [408, "<html><title>408 Request Timeout</title></html>"],
    [200, '{"acquired":true}'],
    [204, ""],
  ];
  for (const [status, body] of cases) {
    const out = grantOutcome({ status, body }, CTX);
    assert.equal(
      configFix(out as LeaseFailure),
      undefined,
      `${status} ${JSON.stringify(out)}`,
    );
  }
  // The Go server's 400 over https:// is not a scheme mistake.
  const tls = grantOutcome({
    status: 400,
    body: "Client sent an HTTP request to an HTTPS server.\n",
  }, CTX);
  assert.equal(configFix(tls as LeaseFailure), undefined);
});
