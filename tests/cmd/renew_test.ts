// `renew`'s wiring: which enforcer a configuration gets.
import assert from "node:assert/strict";
import { enforcerFor } from "../../lib/cmd/renew.ts";
import type { Config } from "../../lib/config/config.ts";
import { ProbeEnforcer } from "../../lib/enforce/enforcer.ts";
import { SignalEnforcer } from "../../lib/enforce/signal.ts";
import { discardLogger } from "../../lib/obs/log.ts";
import { StateDir } from "../../lib/state/state_dir.ts";

Deno.test("a probe-mode sidecar builds no process table; a signal-mode one does", () => {
  // Building the process table asks for this executable's path (to spare
  // its own copies); count those calls.
  const execPath = Deno.execPath;
  let tables = 0;
  Object.defineProperty(Deno, "execPath", {
    value: () => {
      tables++;
      return execPath();
    },
    configurable: true,
    writable: true,
  });
  try {
    const state = new StateDir("/nonexistent-berth-state");
    const probe = enforcerFor(
      { enforce: "probe" } as Config,
      state,
      discardLogger,
    );
    assert.ok(probe instanceof ProbeEnforcer);
    assert.equal(tables, 0, "no process table in probe mode");
    const signal = enforcerFor(
      {
        enforce: "signal",
        signalTarget: "app",
        enforceGraceSeconds: 1,
      } as Config,
      state,
      discardLogger,
    );
    assert.ok(signal instanceof SignalEnforcer);
    assert.equal(tables, 1);
  } finally {
    Object.defineProperty(Deno, "execPath", {
      value: execPath,
      configurable: true,
      writable: true,
    });
  }
});
