/**
 * The lease key rules, at their boundaries, as the API server checks them,
 * with the server's exact messages (its lease validation, with Kubernetes'
 * RFC 1123 details).
 *
 * @module
 */
import assert from "node:assert/strict";
import { leaseKeyProblem } from "../../lib/config/lease_key.ts";

const NAMESPACE_RULE =
  "must be an RFC 1123 DNS label (lowercase alphanumerics and '-', at most 63 characters)";
const NAME_RULE =
  "must be an RFC 1123 DNS subdomain (lowercase alphanumerics, '-' and '.', at most 253 characters)";
const LABEL_PATTERN =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_PATTERN =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

Deno.test("the server's exact messages: rule, then the first detail", () => {
  const cases: [string, string, string][] = [
    [
      "Prod",
      "web",
      `invalid namespace "Prod": ${NAMESPACE_RULE}: ${LABEL_PATTERN}`,
    ],
    ["", "web", `invalid namespace "": ${NAMESPACE_RULE}: ${LABEL_PATTERN}`],
    [
      "a.b",
      "web",
      `invalid namespace "a.b": ${NAMESPACE_RULE}: must not contain dots`,
    ],
    [
      "a".repeat(64),
      "web",
      `invalid namespace "${
        "a".repeat(64)
      }": ${NAMESPACE_RULE}: must be no more than 63 characters`,
    ],
    [
      'p\u0001\u00a0"',
      "web",
      `invalid namespace "p\\x01\\u00a0\\"": ${NAMESPACE_RULE}: ${LABEL_PATTERN}`,
    ],
    ["p", "Web", `invalid name "Web": ${NAME_RULE}: ${SUBDOMAIN_PATTERN}`],
    ["p", "", `invalid name "": ${NAME_RULE}: ${SUBDOMAIN_PATTERN}`],
    [
      "p",
      "A".repeat(254),
      `invalid name "${
        "A".repeat(254)
      }": ${NAME_RULE}: must be no more than 253 characters`,
    ],
    [
      "n".repeat(53),
      "a".repeat(200),
      `invalid key ${"n".repeat(53)}/${
        "a".repeat(200)
      }: namespace and name joined with '.' must be at most 253 characters, got 254`,
    ],
  ];
  for (const [namespace, name, message] of cases) {
    assert.equal(leaseKeyProblem(namespace, name)?.message, message);
  }
});

Deno.test("the namespace is an RFC 1123 label of 1-63 characters", () => {
  assert.equal(leaseKeyProblem("prod", "web"), undefined);
  assert.equal(leaseKeyProblem("a".repeat(63), "web"), undefined);
  assert.equal(leaseKeyProblem("a-1", "web"), undefined);
  for (const ns of ["a".repeat(64), "Prod", "-a", "a-", "a.b", "a_b", ""]) {
    const p = leaseKeyProblem(ns, "web");
    assert.equal(p?.part, "namespace", ns);
    assert.match(
      p!.message,
      /^invalid namespace ".*": must be an RFC 1123 DNS label/,
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
      /^invalid name ".*": must be an RFC 1123 DNS subdomain/,
    );
  }
  // 253 characters is a valid name alone, but not with any namespace.
  const long = "a".repeat(253);
  assert.equal(leaseKeyProblem("p", "a".repeat(254))?.part, "name");
  assert.equal(leaseKeyProblem("p", long)?.part, "key");
});

Deno.test("namespace, '.' and name together are at most 253 characters", () => {
  assert.equal(leaseKeyProblem("n".repeat(52), "a".repeat(200)), undefined);
  const p = leaseKeyProblem("n".repeat(53), "a".repeat(200));
  assert.equal(p?.part, "key");
  assert.match(p!.message, /^invalid key n{53}\/a{200}: .*at most 253 .*254$/);
});
