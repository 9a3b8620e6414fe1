/**
 * `run` at the walkthrough's settings (docs/run.md: TTL 10 s, the default
 * heartbeat and grace) while the development server stalls: the real CLI
 * against a server on 127.0.0.1 whose lease RPCs hang on demand.
 *
 * @module
 */
import assert from "node:assert/strict";
import { startDevServer } from "../../lib/devserver/server.ts";
import {
  HelperProcess,
  leaseEnv,
  readMarker,
  tempDir,
  waitFor,
} from "../support/lease_env.ts";

const TRAP =
  'trap "echo cleans up; exit 0" TERM; echo running; while :; do sleep 0.1; done';

/**
 * Starts `run` (with `args`) at TTL 10 s; right after its first renewal the
 * server freezes, and the renewal that arrives next is answered a second
 * after it came: the worst moment for a one-second stall.
 */
async function stall(args: string[]) {
  const server = await startDevServer();
  const tmp = await tempDir();
  const env = leaseEnv({ apiServer: server.url, stateDir: tmp.path });
  env.BERTH_TTL_SECONDS = "10";
  delete env.BERTH_HEARTBEAT_SECONDS;
  delete env.BERTH_STATE_DIR;
  const run = new HelperProcess(["run", ...args, "--", "sh", "-c", TRAP], {
    ...env,
    TMPDIR: tmp.path,
  });
  const dir = /run_dir=(\S+)/.exec(await run.waitForLine(/run_dir=/))![1];
  const bound = { timeoutMs: 30_000 };
  await waitFor(() => server.rpcCount("renew") >= 1, {
    ...bound,
    what: "the first renewal",
  });
  server.faults.hangAll();
  await waitFor(() => server.faults.hanging >= 1, {
    ...bound,
    what: "a renewal hanging",
  });
  // The first renewal's marker, long written.
  const before = readMarker(dir)?.text;
  // The stall itself: a second, not a wait for a result.
  await new Promise((r) => setTimeout(r, 1000));
  server.faults.clear();
  return {
    run,
    dir,
    before,
    async [Symbol.asyncDispose]() {
      await run[Symbol.asyncDispose]();
      await server.close();
      await tmp[Symbol.asyncDispose]();
    },
  };
}

Deno.test("run at TTL 10 s with its default grace keeps its command through a one-second stall of the server; the old default grace of 5 s stopped it", async () => {
  await using rides = await stall([]);
  await using stopped = await stall(["--enforce-grace-seconds", "5"]);
  // Lead 2 s: the renewal answered after the stall is confirmed, and the
  // marker moves on to its new deadlines.
  await waitFor(() => {
    const text = readMarker(rides.dir)?.text;
    return text !== undefined && text !== rides.before;
  }, {
    timeoutMs: 30_000,
    what: "the marker rewritten after the stall",
  });
  assert.doesNotMatch(rides.run.log, /gate closed/);
  assert.equal(rides.run.exited, undefined);
  assert.equal(rides.run.stdout, "running\n");
  // Lead 6 s: the permission closed 4 s after the last renewal, during the stall.
  await stopped.run.waitForLine(/msg="gate closed: stopping the workload"/);
  await waitFor(() => stopped.run.stdout.includes("cleans up"), {
    timeoutMs: 30_000,
    what: "the command's SIGTERM trap",
  });
});
