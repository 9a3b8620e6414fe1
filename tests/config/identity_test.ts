/**
 * The lease key and the holder identity: the lease key rules at their
 * boundaries, with the API server's exact messages (its lease validation,
 * with Kubernetes' RFC 1123 details), and the holder's derivation and checks.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  holderIdentity,
  type HolderInput,
  holderProblem,
  leaseKeyProblem,
  quote,
  runtimeHolderProblem,
  utf8Length,
} from "../../lib/config/identity.ts";

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

function includes(actual: string | undefined, part: string): void {
  assert.ok(
    actual?.includes(part),
    `${JSON.stringify(actual)} lacks ${JSON.stringify(part)}`,
  );
}

const UID = "8c21b044-5f0e-4a7b-9b61-3f1c2d4e5a6b";

function input(over: Partial<HolderInput>): HolderInput {
  return {
    mode: "runtime-singleton",
    explicit: "",
    clusterId: "",
    podNamespace: "",
    workloadKind: "",
    workloadName: "",
    podName: "",
    podUid: "",
    ...over,
  };
}

Deno.test("holder: the spec's examples", () => {
  assert.equal(
    holderIdentity(input({
      clusterId: "east",
      podNamespace: "prod",
      workloadKind: "ReplicaSet",
      workloadName: "checkout-7f6c",
      podName: "checkout-7f6c-j4n8x",
      podUid: UID,
    })),
    `east/prod:ReplicaSet:checkout-7f6c:pod:checkout-7f6c-j4n8x:uid:${UID}`,
  );
  assert.equal(
    holderIdentity(input({
      podNamespace: "prod",
      podName: "checkout-7f6c-j4n8x",
      podUid: UID,
    })),
    `prod/pod:checkout-7f6c-j4n8x:uid:${UID}`,
  );
  // startup-gate: the pod name and UID are not part of a workload's identity.
  assert.equal(
    holderIdentity(input({
      mode: "startup-gate",
      podNamespace: "prod",
      workloadKind: "deployment",
      workloadName: "checkout",
      podName: "checkout-7f6c-j4n8x",
      podUid: UID,
    })),
    "prod/deployment:checkout",
  );
  assert.equal(
    holderIdentity(input({
      mode: "startup-gate",
      clusterId: "east",
      podNamespace: "prod",
      workloadKind: "deployment",
      workloadName: "checkout",
      podUid: UID,
    })),
    "east/prod:deployment:checkout",
  );
  assert.equal(
    holderIdentity(input({
      mode: "startup-gate",
      clusterId: "east",
      podNamespace: "prod",
      podName: "checkout-7f6c-j4n8x",
      podUid: UID,
    })),
    "east/prod:checkout-7f6c-j4n8x",
  );
});

Deno.test("holder: an explicit holder is used byte for byte, untrimmed", () => {
  for (const explicit of [" team-a/x ", "a\tb", "é/ü:ß", "x"]) {
    for (const mode of ["startup-gate", "runtime-singleton"] as const) {
      assert.equal(
        holderIdentity(input({
          mode,
          explicit,
          clusterId: "east",
          podNamespace: "prod",
          podUid: UID,
        })),
        explicit,
      );
    }
  }
});

Deno.test("holder: startup-gate adds the pod name only without kind and name", () => {
  const base = {
    mode: "startup-gate" as const,
    podNamespace: "prod",
    podName: "p-1",
  };
  assert.equal(
    holderIdentity(input({ ...base, workloadKind: "Job" })),
    "prod/Job",
  );
  assert.equal(
    holderIdentity(input({ ...base, workloadName: "batch" })),
    "prod/batch",
  );
  assert.equal(holderIdentity(input(base)), "prod/p-1");
});

Deno.test("holder: one part is the holder itself, none is empty", () => {
  assert.equal(
    holderIdentity(input({ mode: "startup-gate", podNamespace: "prod" })),
    "prod",
  );
  assert.equal(
    holderIdentity(input({ mode: "startup-gate", podName: "p-1" })),
    "p-1",
  );
  assert.equal(holderIdentity(input({ mode: "startup-gate" })), "");
  // runtime-singleton always has `uid`, so even without anything else the join applies.
  assert.equal(holderIdentity(input({ podUid: UID })), `uid/${UID}`);
});

Deno.test("holder: runtime-singleton requires a usable POD_UID", () => {
  assert.match(
    runtimeHolderProblem(input({ podNamespace: "prod" }))!,
    /^POD_UID is required/,
  );
  assert.equal(
    runtimeHolderProblem(input({ podNamespace: "prod", podUid: UID })),
    undefined,
  );
  const bad = [
    "a:b",
    "a/b",
    "a b",
    "a\tb",
    " " + UID,
    UID + "\n",
    "\u00a0" + UID + "\u00a0", // no-break space around
    "\u3000" + UID + "\u3000", // ideographic space around
    UID + "\u3000",
    "a\u00a0b",
    "a\u2028b",
    "a\u0085b", // Go's unicode.IsSpace has NEL
  ];
  for (const podUid of bad) {
    const p = runtimeHolderProblem(input({ podNamespace: "prod", podUid }));
    assert.match(p ?? "", /^invalid POD_UID /, JSON.stringify(podUid));
  }
  // The offending character is visible in the message.
  includes(
    runtimeHolderProblem(input({ podUid: "\u00a0" + UID }))!,
    "\\u00a0",
  );
  includes(
    runtimeHolderProblem(input({ podUid: UID + "\u3000" }))!,
    "\\u3000",
  );
});

Deno.test("holder: the UID is not checked with an explicit holder or in startup-gate", () => {
  assert.equal(runtimeHolderProblem(input({ explicit: "team/x" })), undefined);
  assert.equal(
    runtimeHolderProblem(input({ explicit: "team/x", podUid: "a:b" })),
    undefined,
  );
  assert.equal(
    runtimeHolderProblem(input({ mode: "startup-gate", podUid: "a b" })),
    undefined,
  );
  assert.equal(
    runtimeHolderProblem(input({ mode: "startup-gate" })),
    undefined,
  );
});

Deno.test("holder: a derived holder is limited to 253 bytes of UTF-8, not UTF-16 units", () => {
  // "é" is 2 bytes and 1 UTF-16 unit: cluster + "/uid:" + uid.
  const clusterId = "é".repeat(123);
  const fits = input({ clusterId, podUid: "uu" });
  assert.equal(utf8Length(holderIdentity(fits)), 253);
  assert.equal(runtimeHolderProblem(fits), undefined);
  const over = input({ clusterId, podUid: "uuu" });
  assert.equal(holderIdentity(over).length, 131); // far below 253 UTF-16 units
  assert.match(
    runtimeHolderProblem(over)!,
    /254 bytes of UTF-8, over the API's limit of 253/,
  );
  // A 4-byte character (2 UTF-16 units) counts 4.
  const emoji = input({ clusterId: "🚢".repeat(62), podUid: "u" }); // 248 + 5 + 1
  assert.equal(utf8Length(holderIdentity(emoji)), 254);
  assert.match(runtimeHolderProblem(emoji)!, /254 bytes/);
});

Deno.test("holder: any final holder must be non-empty and at most 253 bytes", () => {
  assert.match(holderProblem("")!, /holder identity is empty.*retry forever/);
  includes(holderProblem("")!, "BERTH_HOLDER_IDENTITY");
  assert.equal(holderProblem("x".repeat(253)), undefined);
  assert.equal(holderProblem("é".repeat(126) + "x"), undefined); // 253 bytes
  assert.match(holderProblem("é".repeat(127))!, /254 bytes/);
  assert.equal(holderProblem(" "), undefined); // verbatim: a space is a holder
});

Deno.test("holder: quote shows invisible spaces", () => {
  assert.equal(quote("a b"), '"a b"');
  assert.equal(quote("\u00a0x\u3000"), '"\\u00a0x\\u3000"');
  assert.equal(quote("a\tb"), '"a\\tb"');
});
