/**
 * The request side as pure functions: exact bodies in spec field order,
 * paths with the base prefix, headers, and the API server URL's checks.
 */
import assert from "node:assert/strict";
import {
  acquireBody,
  parseApiServer,
  releaseBody,
  renewBody,
  requestHeaders,
  rpcPath,
} from "../../lib/lease/wire.ts";
import { VERSION } from "../../lib/version.ts";

Deno.test("bodies are the spec's fields in the spec's order, nothing else", () => {
  assert.equal(acquireBody("a/b", 30), `{"holder":"a/b","ttlSeconds":30}`);
  assert.equal(
    renewBody('a"b', 4, 30),
    `{"holder":"a\\"b","fencingToken":4,"ttlSeconds":30}`,
  );
  assert.equal(
    releaseBody("é", 2147483647),
    `{"holder":"é","fencingToken":2147483647}`,
  );
  assert.throws(() => renewBody("h", 1.5, 1), RangeError);
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
