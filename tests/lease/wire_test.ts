/**
 * The request side as pure functions: bodies byte for byte the Go helper's
 * (sorted keys, Go's escapes), headers, and the API server URL's checks.
 */
import assert from "node:assert/strict";
import {
  goJsonString,
  parseApiServer,
  requestBody,
  requestHeaders,
} from "../../lib/lease/wire.ts";
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
