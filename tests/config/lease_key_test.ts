/**
 * The lease key rules, at their boundaries, as the API server checks them.
 *
 * @module
 */
import assert from "node:assert/strict";
import { leaseKeyProblem } from "../../lib/config/lease_key.ts";

Deno.test("the namespace is an RFC 1123 label of 1-63 characters", () => {
  assert.equal(leaseKeyProblem("prod", "web"), undefined);
  assert.equal(leaseKeyProblem("a".repeat(63), "web"), undefined);
  assert.equal(leaseKeyProblem("a-1", "web"), undefined);
  for (const ns of ["a".repeat(64), "Prod", "-a", "a-", "a.b", "a_b", ""]) {
    const p = leaseKeyProblem(ns, "web");
    assert.equal(p?.part, "namespace", ns);
    assert.match(
      p!.message,
      /^invalid namespace ".*": must be an RFC 1123 label/,
    );
  }
  // Invisible characters are shown, not printed raw.
  assert.match(leaseKeyProblem("prod\u00a0", "web")!.message, /\\u00a0/);
});

Deno.test("the name is an RFC 1123 subdomain of 1-253 characters", () => {
  assert.equal(leaseKeyProblem("p", "a.b-c.d1"), undefined);
  for (const name of ["Web", "a..b", ".a", "a.", "a_b", "-a", "a-.b", ""]) {
    const p = leaseKeyProblem("prod", name);
    assert.equal(p?.part, "name", name);
    assert.match(
      p!.message,
      /^invalid name ".*": must be an RFC 1123 subdomain/,
    );
  }
  // 253 characters is a valid name alone, but not with any namespace.
  const long = "a".repeat(253);
  assert.equal(leaseKeyProblem("p", "a".repeat(254))?.part, "name");
  assert.equal(leaseKeyProblem("p", long)?.part, "key");
});

Deno.test("namespace, '/' and name together are at most 253 characters", () => {
  assert.equal(leaseKeyProblem("n".repeat(52), "a".repeat(200)), undefined);
  const p = leaseKeyProblem("n".repeat(53), "a".repeat(200));
  assert.equal(p?.part, "key");
  assert.match(p!.message, /^invalid key "n{53}\/a{200}": .*at most 253 .*254/);
});
