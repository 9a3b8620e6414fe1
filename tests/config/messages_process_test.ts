/**
 * What a configuration mistake says through the real CLI: Go's words first
 * (operators and the peer tests compare them), then the value and the
 * setting it came from, and what to do.
 *
 * @module
 */
import assert from "node:assert/strict";
import { runCli } from "../support/cli.ts";

const BOUND = () => AbortSignal.timeout(30_000);

/** A valid `run` on a plain machine, but for what a test changes. */
const RUN_ENV = {
  BERTH_LEASE_NAME: "web",
  BERTH_LEASE_NAMESPACE: "dev",
  BERTH_TTL_SECONDS: "10",
  BERTH_API_SERVER: "http://127.0.0.1:1",
};

Deno.test("a TTL out of range names its value and its setting, after Go's words", async () => {
  const go =
    "ttl must be positive and at most 2147483647 seconds (the API limit)";
  for (
    const [env, args, source] of [
      [{ BERTH_TTL_SECONDS: "0" }, [], "BERTH_TTL_SECONDS=0"],
      [{ BERTH_TTL_SECONDS: "-5" }, [], "BERTH_TTL_SECONDS=-5"],
      [{}, ["--ttl-seconds", "99999999999"], "--ttl-seconds=99999999999"],
    ] as const
  ) {
    const r = await runCli(["run", ...args, "--", "true"], {
      env: { ...RUN_ENV, ...env },
      signal: BOUND(),
    });
    assert.equal(r.code, 78);
    assert.equal(
      r.stderr,
      `berth-acquire run: invalid configuration: ${go}: ${source}\n`,
    );
    // acquire: the Go helper's line, the same words in its error.
    const a = await runCli(["acquire", ...args], {
      env: { ...RUN_ENV, BERTH_HOLDER_IDENTITY: "me", ...env },
      signal: BOUND(),
    });
    assert.equal(a.code, 1);
    assert.match(a.stderr, /msg="berth-acquire failed"/);
    assert.ok(
      a.stderr.includes(`invalid configuration: ${go}: ${source}`),
      a.stderr,
    );
  }
});

Deno.test("both API key settings name the two as given and the fix", async () => {
  const r = await runCli(["run", "--api-key-file", "/k", "--", "true"], {
    env: { ...RUN_ENV, BERTH_API_KEY: "tenant:secret" },
    signal: BOUND(),
  });
  assert.equal(r.code, 78);
  assert.equal(
    r.stderr,
    "berth-acquire run: invalid configuration: api key and api key file are mutually exclusive: BERTH_API_KEY and --api-key-file are both set; set only one\n",
  );
  assert.doesNotMatch(r.stderr, /secret/);
});

Deno.test("run with BERTH_MODE=startup-gate says the mode first, before the holder it would want", async () => {
  const r = await runCli(["run", "--", "true"], {
    env: { ...RUN_ENV, BERTH_MODE: "startup-gate" },
    signal: BOUND(),
  });
  assert.equal(r.code, 78);
  assert.equal(
    r.stderr,
    'berth-acquire run: invalid configuration: run keeps the lease while the command runs (runtime-singleton semantics); mode "startup-gate" is not supported: unset BERTH_MODE or set it to runtime-singleton\n',
  );
});
