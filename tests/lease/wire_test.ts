/**
 * The request side as pure functions: bodies byte for byte the Go helper's
 * (sorted keys, Go's escapes), paths with the base prefix, headers, and the
 * API server URL's checks.
 */
import assert from "node:assert/strict";
import {
  acquireBody,
  goJsonString,
  parseApiServer,
  releaseBody,
  renewBody,
  requestHeaders,
  rpcPath,
} from "../../lib/lease/wire.ts";
import { VERSION } from "../../lib/version.ts";

/** The UTF-8 bytes of a body, as they go on the wire. */
const bytes = (text: string) => [...new TextEncoder().encode(text)];

Deno.test("bodies are the Go helper's bytes: keys sorted as Go marshals a map, no space, no newline", () => {
  assert.deepEqual(
    bytes(acquireBody("a/b", 30)),
    bytes('{"holder":"a/b","ttlSeconds":30}'),
  );
  assert.deepEqual(
    bytes(renewBody('a"b', 4, 30)),
    bytes('{"fencingToken":4,"holder":"a\\"b","ttlSeconds":30}'),
  );
  assert.deepEqual(
    bytes(releaseBody("é", 2147483647)),
    // "é" as its two UTF-8 bytes, unescaped, as Go writes it.
    [
      ...bytes('{"fencingToken":2147483647,"holder":"'),
      0xc3,
      0xa9,
      ...bytes('"}'),
    ],
  );
  assert.throws(() => renewBody("h", 1.5, 1), RangeError);
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
    bytes(acquireBody("east/<a>&b", 1)),
    bytes('{"holder":"east/\\u003ca\\u003e\\u0026b","ttlSeconds":1}'),
  );
});

Deno.test("paths keep the base prefix and escape each key part as one segment", () => {
  const key = { namespace: "a/b", name: "c d" };
  assert.equal(
    rpcPath(parseApiServer("https://gw:8443/berth//"), key, "renew"),
    "/berth/v1alpha1/namespaces/a%2Fb/leases/c%20d/renew",
  );
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
