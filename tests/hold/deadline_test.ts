// Deadline arithmetic and outcome classification, as pure functions.
import assert from "node:assert/strict";
import { classifyRenew } from "../../lib/hold/deadline.ts";
import { record } from "../support/scripted_client.ts";

Deno.test("a lost lease's summary carries no server text; the reason for the log does", () => {
  const refused = classifyRenew({
    kind: "not-acquired",
    lease: record("prod/pod:web-1:uid:other", 5),
  }, 4);
  assert.equal(refused.kind, "lost");
  if (refused.kind !== "lost") return;
  assert.equal(refused.summary, "the server refused the renewal");
  assert.match(refused.reason, /prod\/pod:web-1:uid:other/);
  const conflict = classifyRenew({
    kind: "conflict",
    message: "lease held by another identity or token (echo: secret)",
  }, 4);
  assert.ok(conflict.kind === "lost" && !conflict.summary.includes("secret"));
});
