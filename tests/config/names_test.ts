/**
 * "Did you mean ...?": the edit distance, the nearest known name, and the
 * unknown `BERTH_*` variables warned about at start-up.
 *
 * @module
 */
import assert from "node:assert/strict";
import { nearest } from "../../lib/config/argv.ts";
import {
  CONFIG_SETTINGS,
  OTHER_KNOWN_ENV,
  unknownVariables,
} from "../../lib/config/settings.ts";
import { HEALTH_ADDR_ENV } from "../../lib/cmd/health.ts";
import { commandEnv } from "../../lib/gate/gate_loop.ts";

Deno.test("nearest counts an insertion, a deletion, a substitution and an adjacent swap as one edit", () => {
  // A 4-letter name allows 1 edit.
  for (const typo of ["mde", "modee", "mote", "mdoe", "MODE"]) {
    assert.equal(nearest(typo, ["mode"]), "mode", typo);
  }
  assert.equal(nearest("mtoe", ["mode"]), undefined);
  assert.equal(nearest("kitten", ["sitting", "mitten"]), "mitten");
  assert.equal(nearest("kitten", ["sitting"]), undefined);
  assert.equal(nearest("", ["mode"]), undefined);
});

Deno.test("nearest suggests a close name or the one a prefix extends, and nothing far", () => {
  const flags = CONFIG_SETTINGS.map((s) => s.flag);
  assert.equal(nearest("lease-nmae", flags), "lease-name");
  assert.equal(nearest("lease-namespac", flags), "lease-namespace");
  assert.equal(nearest("ttl", flags), "ttl-seconds");
  assert.equal(nearest("api-sever", flags), "api-server");
  assert.equal(nearest("nope", flags), undefined);
  assert.equal(nearest("colour", flags), undefined);
  assert.equal(nearest("enforce-g", flags), "enforce-grace-seconds");
  // A prefix of several names is not a suggestion.
  assert.equal(nearest("lease-", flags), undefined);
});

Deno.test("unknown BERTH_* variables are listed with the nearest known name", () => {
  assert.deepEqual(
    unknownVariables({
      BERTH_LEASE_NAEM: "web",
      BERTH_TTL: "30",
      BERTH_POD_UID: "x",
      BERTH_COLOUR: "blue",
      BERTH_LEASE_NAME: "web",
      POD_UID: "x",
      HOME: "/root",
      berth_lease_name: "lower case is not ours",
    }),
    [
      { name: "BERTH_COLOUR" },
      { name: "BERTH_LEASE_NAEM", suggestion: "BERTH_LEASE_NAME" },
      { name: "BERTH_POD_UID", suggestion: "POD_UID" },
      { name: "BERTH_TTL", suggestion: "BERTH_TTL_SECONDS" },
    ],
  );
});

Deno.test("every variable the project reads or sets is known: no warning for them", () => {
  const env: Record<string, string> = {};
  for (const s of CONFIG_SETTINGS) env[s.env] = "x";
  for (const name of OTHER_KNOWN_ENV) env[name] = "x";
  assert.deepEqual(unknownVariables(env), []);
  // The names known besides the table are the ones their modules use.
  assert.ok(OTHER_KNOWN_ENV.includes(HEALTH_ADDR_ENV));
  const child = commandEnv({}, { holder: "h", token: 1, expiresAtMs: 0 });
  for (const name of Object.keys(child)) {
    assert.ok(OTHER_KNOWN_ENV.includes(name), name);
  }
  assert.deepEqual(unknownVariables(child), []);
});
