import assert from "node:assert/strict";
import { withTwoDashes } from "../../lib/config/flag_name.ts";

Deno.test("withTwoDashes: one dash becomes two, as Go's flag package reads it; nothing else changes", () => {
  assert.equal(withTwoDashes("-max-age"), "--max-age");
  assert.equal(withTwoDashes("-max-age=5s"), "--max-age=5s");
  assert.equal(withTwoDashes("--json"), "--json");
  assert.equal(withTwoDashes("-"), "-");
  assert.equal(withTwoDashes("--"), "--");
  assert.equal(withTwoDashes("/berth"), "/berth");
  assert.equal(withTwoDashes(""), "");
});
