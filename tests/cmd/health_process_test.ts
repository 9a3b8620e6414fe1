// The HTTP health endpoint: its verdict from the renewer's state (pure), the
// handler's answers, its address parsing, and `renew --health-addr` as a
// real sidecar against a development lease server on 127.0.0.1.
import assert from "node:assert/strict";
import { startDevServer } from "../../lib/devserver/server.ts";
import {
  healthAddrFrom,
  healthHandler,
  healthVerdict,
} from "../../lib/cmd/health.ts";
import type { RenewerStatus } from "../../lib/hold/lease.ts";
import { runCli } from "../support/cli.ts";
import {
  HelperProcess,
  leaseEnv,
  tempDir,
  waitFor,
} from "../support/lease_env.ts";

const OPEN: RenewerStatus = {
  permissionOpen: true,
  token: 4,
  deadline: 20_000,
  permissionClosesAt: 16_000,
};

Deno.test("verdict: OK while the gate is open and its closing time is ahead (equal passes)", () => {
  assert.deepEqual(healthVerdict(OPEN, 15_000), { kind: "OK" });
  assert.deepEqual(healthVerdict(OPEN, 16_000), { kind: "OK" });
});

Deno.test("verdict: a closed gate fails with the renewer's reason", () => {
  assert.deepEqual(
    healthVerdict({
      permissionOpen: false,
      token: 4,
      reason: "lease lost: the server refused the renewal",
    }, 1),
    {
      kind: "Absent",
      reason: "lease gate closed: lease lost: the server refused the renewal",
    },
  );
  assert.deepEqual(healthVerdict({ permissionOpen: false, token: 0 }, 1), {
    kind: "Absent",
    reason: "lease gate closed: the lease is not held",
  });
});

Deno.test("verdict: an open gate past its closing time is stale (the renewer did not act)", () => {
  assert.deepEqual(healthVerdict(OPEN, 17_234), {
    kind: "Stale",
    reason:
      "lease stale: gate deadline passed 1s ago; the renewer has not confirmed the lease and has not stopped the workload",
  });
  assert.equal(
    healthVerdict({ permissionOpen: true, token: 4 }, 0).kind,
    "Stale",
  );
});

function handler(status: () => RenewerStatus, now = 15_000) {
  return healthHandler({
    status,
    clock: { now: () => now },
    metrics: () => "m 1\n",
  });
}

Deno.test("handler: 200 ok / 503 reason on /healthz, HEAD without body, 404 and 405", async () => {
  let status: RenewerStatus = OPEN;
  const h = handler(() => status);
  let res = h(new Request("http://x/healthz"));
  assert.equal(res.status, 200);
  assert.equal(await res.text(), "ok\n");
  assert.equal(res.headers.get("content-type"), "text/plain; charset=utf-8");
  assert.equal(res.headers.get("cache-control"), "no-store");

  status = { permissionOpen: false, token: 4, reason: "lease lost: gone" };
  res = h(new Request("http://x/healthz?verbose=1"));
  assert.equal(res.status, 503);
  assert.equal(await res.text(), "lease gate closed: lease lost: gone\n");

  res = h(new Request("http://x/healthz", { method: "HEAD" }));
  assert.equal(res.status, 503);
  assert.equal(res.body, null);

  res = h(new Request("http://x/healthz", { method: "POST" }));
  assert.equal(res.status, 405);
  assert.equal(res.headers.get("allow"), "GET, HEAD");
  await res.body?.cancel();

  res = h(new Request("http://x/"));
  assert.equal(res.status, 404);
  await res.body?.cancel();
});

Deno.test("handler: /metrics in the Prometheus text content type; 404 without metrics", async () => {
  const res = handler(() => OPEN)(new Request("http://x/metrics"));
  assert.equal(res.status, 200);
  assert.equal(
    res.headers.get("content-type"),
    "text/plain; version=0.0.4; charset=utf-8",
  );
  assert.equal(await res.text(), "m 1\n");
  const bare = healthHandler({ status: () => OPEN, clock: { now: () => 0 } });
  const r2 = bare(new Request("http://x/metrics"));
  assert.equal(r2.status, 404);
  await r2.body?.cancel();
});

Deno.test("address: HOST:PORT, [V6]:PORT, :PORT; the flag wins over env, empty turns it off", () => {
  assert.deepEqual(healthAddrFrom("127.0.0.1:8471", undefined), {
    hostname: "127.0.0.1",
    port: 8471,
  });
  assert.deepEqual(healthAddrFrom("[::1]:0", undefined), {
    hostname: "::1",
    port: 0,
  });
  assert.deepEqual(healthAddrFrom(":8471", undefined), {
    hostname: "0.0.0.0",
    port: 8471,
  });
  for (const bad of ["8471", "localhost", "h:99999", "h:port", "::1:80"]) {
    assert.throws(
      () => healthAddrFrom(undefined, bad),
      (e: Error) =>
        e.message.includes(`BERTH_HEALTH_ADDR=${JSON.stringify(bad)}`) &&
        e.message.includes("HOST:PORT"),
      bad,
    );
  }
  assert.equal(healthAddrFrom(undefined, undefined), undefined);
  assert.equal(healthAddrFrom(undefined, ""), undefined);
  assert.equal(healthAddrFrom("", "127.0.0.1:1"), undefined);
  assert.deepEqual(healthAddrFrom("127.0.0.1:2", "127.0.0.1:1"), {
    hostname: "127.0.0.1",
    port: 2,
  });
  assert.deepEqual(healthAddrFrom(undefined, "127.0.0.1:1"), {
    hostname: "127.0.0.1",
    port: 1,
  });
  assert.throws(() => healthAddrFrom("nope", undefined), /--health-addr/);
});

Deno.test("renew: a malformed BERTH_HEALTH_ADDR is a start-up error naming it", async () => {
  await using dir = await tempDir();
  const r = await runCli(["renew"], {
    env: leaseEnv({
      apiServer: "http://127.0.0.1:9",
      stateDir: dir.path,
      extra: { BERTH_HEALTH_ADDR: "8471" },
    }),
    signal: AbortSignal.timeout(30_000),
  });
  assert.equal(r.code, 1);
  assert.match(
    r.stderr,
    /msg="berth-acquire failed" error=.*BERTH_HEALTH_ADDR=\\"8471\\": no port; want HOST:PORT/,
  );
});

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  return { status: res.status, body: await res.text() };
}

function sample(text: string, series: string): string | undefined {
  return text.split("\n").find((l) => l.startsWith(`${series} `))?.slice(
    series.length + 1,
  );
}

Deno.test("renew --health-addr: /healthz follows the sidecar's lease, /metrics counts what happened", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const env = leaseEnv({ apiServer: server.url, stateDir: dir.path });
  const acquired = await runCli(["acquire"], {
    env,
    signal: AbortSignal.timeout(60_000),
  });
  assert.equal(acquired.code, 0, acquired.stderr);
  await using sidecar = new HelperProcess(
    ["renew", "--health-addr", "127.0.0.1:0"],
    env,
  );
  const line = await sidecar.waitForLine(/serving \/healthz and \/metrics/);
  const url = /url=(\S+)/.exec(line)![1];
  await sidecar.waitForLine(/adopted the lease/);

  const healthy = await get(`${url}/healthz`);
  assert.deepEqual(healthy, { status: 200, body: "ok\n" });
  const token = server.store.get("prod", "web")!.fencingToken;
  let metrics = await get(`${url}/metrics`);
  assert.equal(sample(metrics.body, "berth_acquire_lease_held"), "1");
  assert.equal(
    sample(metrics.body, "berth_acquire_fencing_token"),
    String(token),
  );

  // Another holder takes the lease: the next renewal is refused.
  const now = Date.now();
  server.store.put("prod", "web", {
    holder: "prod/pod:web-1:uid:other",
    fencingToken: token + 1,
    ttlSeconds: 60,
    acquiredAt: now,
    renewedAt: now,
  });
  const lost = await waitFor(async () => {
    const r = await get(`${url}/healthz`);
    return r.status === 503 && r;
  }, { timeoutMs: 20_000, what: "/healthz to fail after the lease was taken" });
  // The unauthenticated endpoint carries no server text: not even the holder.
  assert.equal(
    lost.body,
    "lease gate closed: lease lost: the server refused the renewal\n",
  );
  metrics = await get(`${url}/metrics`);
  assert.equal(sample(metrics.body, "berth_acquire_lease_held"), "0");
  assert.equal(sample(metrics.body, "berth_acquire_lease_losses_total"), "1");
  assert.equal(
    sample(
      metrics.body,
      'berth_acquire_rpc_total{rpc="renew",outcome="not-acquired"}',
    ),
    "1",
  );
  // The gate's decision is immediate; the marker's removal follows through
  // the enforcement queue, so wait for it rather than reading it at once.
  await waitFor(async () => {
    const m = await get(`${url}/metrics`);
    return Number(
      sample(
        m.body,
        'berth_acquire_enforcement_actions_total{action="marker_removed"}',
      ),
    ) >= 1;
  }, { timeoutMs: 20_000, what: "the marker's removal to be counted" });
  sidecar.kill("SIGTERM");
  assert.equal((await sidecar.wait()).code, 0, sidecar.log);
});
