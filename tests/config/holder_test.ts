import assert from "node:assert/strict";
import {
  holderIdentity,
  type HolderInput,
  holderProblem,
  quote,
  runtimeHolderProblem,
  utf8Length,
} from "../../lib/config/holder.ts";

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
