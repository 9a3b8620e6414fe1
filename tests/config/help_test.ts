import assert from "node:assert/strict";
import { configFlagsHelp } from "../../lib/config/settings.ts";
import { hostHolderIdentity } from "../../lib/config/identity.ts";
import { RUN_ROLE, RUN_USAGE } from "../../lib/run/run.ts";

function entry(help: string, flag: string): string {
  const i = help.indexOf(`  --${flag} `);
  assert.ok(i >= 0, `--${flag} is listed`);
  return help.slice(i, help.indexOf("\n  --", i + 1));
}

Deno.test("--help says which form each flag takes: whole seconds, or a duration; the default heartbeat is TTL/3, possibly fractional", () => {
  const help = configFlagsHelp();
  for (
    const flag of [
      "ttl-seconds",
      "heartbeat-seconds",
      "enforce-grace-seconds",
      "enforce-lead-seconds",
    ]
  ) {
    assert.match(entry(help, flag), /whole seconds/, flag);
  }
  assert.match(entry(help, "acquire-timeout"), /a duration such as 30s, 1m/);
  assert.match(entry(help, "heartbeat-seconds"), /TTL\/3.*fractional/);
  assert.match(entry(help, "heartbeat-seconds"), /0 or less: the default/);
});

Deno.test("run's help speaks of what run uses: no enforcer, whose flags it refuses", () => {
  const help = configFlagsHelp({
    leadDefault: RUN_ROLE.leadDefault,
    omit: RUN_ROLE.hiddenSettings,
    defaults: RUN_ROLE.helpDefaults,
  });
  for (const flag of ["mode", "enforce", "signal-target"]) {
    assert.ok(!help.includes(`  --${flag} `), `--${flag} is not listed`);
  }
  assert.doesNotMatch(help, /enforcer/);
  assert.match(entry(help, "enforce-grace-seconds"), /run's command/);
});

Deno.test("run --help gives the host holder's shapes as they are derived, with and without a cluster id", () => {
  const host = { hostname: "HOST", pid: 0, instance: "RANDOM" };
  const shape = (clusterId: string) =>
    hostHolderIdentity(clusterId, host).replace(":pid:0:", ":pid:PID:")
      .replace("/pid:0:", "/pid:PID:");
  const usage = RUN_USAGE.replace(/\s+/g, " ");
  assert.ok(usage.includes(shape("")), shape(""));
  assert.ok(usage.includes(shape("CLUSTER")), shape("CLUSTER"));
  const flags = configFlagsHelp({ defaults: RUN_ROLE.helpDefaults });
  assert.ok(entry(flags, "holder-identity").includes(shape("CLUSTER")));
});
