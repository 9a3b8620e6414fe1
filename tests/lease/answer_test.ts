/**
 * The answer decoding as pure functions: status, headers and body text in,
 * outcome out, with no socket. Covers what JSON.parse alone would let
 * through (a token written as 1.0 or 1e0) and what would be a held lease
 * that is not ours (a grant naming another holder).
 */
import assert from "node:assert/strict";
import {
  type AnswerContext,
  grantOutcome,
  releaseOutcome,
} from "../../lib/lease/answer.ts";
import {
  describeFailure,
  isPersistentFailure,
  type LeaseFailure,
} from "../../lib/lease/rpc.ts";
import { redactor } from "../../lib/lease/redact.ts";

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
