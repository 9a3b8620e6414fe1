// The Prometheus text exposition (format 0.0.4) byte for byte, and the
// berth_acquire_* metrics as the lease client, the renewer and the enforcers
// feed them.
import assert from "node:assert/strict";
import type {
  GrantOutcome,
  LeaseClient,
  ReleaseOutcome,
} from "../../lib/lease/rpc.ts";
import { LeaseMetrics } from "../../lib/cmd/lease_keeper.ts";
import {
  escapeHelp,
  escapeLabelValue,
  formatSampleValue,
  METRICS_CONTENT_TYPE,
  Registry,
} from "../../lib/obs/prometheus.ts";
import type { ProcessTable } from "../../lib/enforce/proc.ts";
import type { RenewerStatus } from "../../lib/hold/lease.ts";

Deno.test("exposition: HELP, TYPE and samples of every kind, exactly", () => {
  const r = new Registry();
  const c = r.counter("app_requests_total", "Requests by code.", [
    "code",
    "path",
  ]);
  c.inc({ code: "200", path: "/a" });
  c.inc({ code: "200", path: "/a" }, 2);
  c.inc({ code: "500", path: 'say "hi"\\\n' });
  r.counter("app_plain_total", "No labels: shown from the start.");
  r.gauge(
    "app_temperature_celsius",
    "A gauge read at scrape time.",
    () => -1.5,
  );
  const h = r.histogram("app_latency_seconds", "Back\\slash\nnewline.", [
    0.1,
    1,
  ]);
  h.observe(0.1);
  h.observe(0.5);
  h.observe(3);
  assert.equal(
    r.render(),
    `# HELP app_requests_total Requests by code.
# TYPE app_requests_total counter
app_requests_total{code="200",path="/a"} 3
app_requests_total{code="500",path="say \\"hi\\"\\\\\\n"} 1
# HELP app_plain_total No labels: shown from the start.
# TYPE app_plain_total counter
app_plain_total 0
# HELP app_temperature_celsius A gauge read at scrape time.
# TYPE app_temperature_celsius gauge
app_temperature_celsius -1.5
# HELP app_latency_seconds Back\\\\slash\\nnewline.
# TYPE app_latency_seconds histogram
app_latency_seconds_bucket{le="0.1"} 1
app_latency_seconds_bucket{le="1"} 2
app_latency_seconds_bucket{le="+Inf"} 3
app_latency_seconds_sum 3.6
app_latency_seconds_count 3
`,
  );
});

Deno.test("exposition: a labelled counter without series shows HELP and TYPE only", () => {
  const r = new Registry();
  r.counter("x_total", "Nothing yet.", ["kind"]);
  assert.equal(
    r.render(),
    "# HELP x_total Nothing yet.\n# TYPE x_total counter\n",
  );
});

Deno.test("sample values and escapes follow the format, not JavaScript", () => {
  assert.equal(formatSampleValue(Infinity), "+Inf");
  assert.equal(formatSampleValue(-Infinity), "-Inf");
  assert.equal(formatSampleValue(NaN), "NaN");
  assert.equal(formatSampleValue(-0), "0");
  assert.equal(formatSampleValue(2147483647), "2147483647");
  assert.equal(formatSampleValue(0.25), "0.25");
  assert.equal(escapeLabelValue('a\\b"c\nd'), 'a\\\\b\\"c\\nd');
  assert.equal(escapeHelp('a\\b"c\nd'), 'a\\\\b"c\\nd');
});

Deno.test("misuse fails at registration or at the call, never at a scrape", () => {
  const r = new Registry();
  assert.throws(() => r.counter("bad-name_total", "x"), /invalid metric name/);
  assert.throws(() => r.counter("x_total", "x", ["le"]), /invalid label name/);
  assert.throws(() => r.counter("y_total", "x", ["__a"]), /invalid label name/);
  const c = r.counter("ok_total", "x", ["a"]);
  assert.throws(() => r.counter("ok_total", "x"), /registered twice/);
  assert.throws(() => c.inc({}), /do not match/);
  assert.throws(() => c.inc({ a: "1", b: "2" }), /do not match/);
  assert.throws(() => c.inc({ a: "1" }, -1), /only goes up/);
  assert.throws(() => r.histogram("h", "x", [1, 1]), /strictly increasing/);
  assert.equal(c.get({ a: "1" }), 0);
});

Deno.test("the content type is the one Prometheus negotiates for text 0.0.4", () => {
  assert.equal(
    METRICS_CONTENT_TYPE,
    "text/plain; version=0.0.4; charset=utf-8",
  );
});

// ---------------------------------------------------------------------------
// berth_acquire_*

class StepClock {
  t = 1_000;
  now(): number {
    return this.t;
  }
}

const RECORD = {
  holder: "prod/a",
  fencingToken: 7,
  expiresAt: "",
  acquiredAt: "",
};

/** Answers from a queue and lets the clock advance by a set latency per call. */
function queuedClient(
  clock: StepClock,
  answers: Array<{ out: GrantOutcome | ReleaseOutcome; ms: number }>,
): LeaseClient {
  const next = <T>() => {
    const a = answers.shift()!;
    clock.t += a.ms;
    return Promise.resolve(a.out as T);
  };
  return {
    acquire: () => next<GrantOutcome>(),
    renew: () => next<GrantOutcome>(),
    release: () => next<ReleaseOutcome>(),
  };
}

Deno.test("berth_acquire_*: the full exposition for a held lease, exactly", async () => {
  const clock = new StepClock();
  const now: { status?: RenewerStatus } = {};
  const m = new LeaseMetrics({ status: () => now.status, clock });
  const client = m.instrumentClient(queuedClient(clock, [
    { out: { kind: "acquired", lease: RECORD }, ms: 20 },
    { out: { kind: "acquired", lease: RECORD }, ms: 30 },
    { out: { kind: "timeout", message: "t" }, ms: 2_000 },
    { out: { kind: "aborted", message: "shutdown" }, ms: 1 },
    { out: { kind: "released" }, ms: 5 },
  ]));
  const never = new AbortController().signal;
  await client.acquire("prod/a", 10, never);
  await client.renew("prod/a", 7, 10, never);
  await client.renew("prod/a", 7, 10, never);
  await client.renew("prod/a", 7, 10, never);
  await client.release("prod/a", 7, never);
  now.status = {
    permissionOpen: true,
    token: 7,
    deadline: clock.t + 8_500,
    permissionClosesAt: clock.t + 6_500,
  };
  m.countEnforcement("marker_written");
  assert.equal(
    m.render(),
    `# HELP berth_acquire_lease_held 1 while the lease is confirmed and the workload may run (the gate is open), else 0.
# TYPE berth_acquire_lease_held gauge
berth_acquire_lease_held 1
# HELP berth_acquire_fencing_token Fencing token of the lease held or last held; 0 before the first acquisition.
# TYPE berth_acquire_fencing_token gauge
berth_acquire_fencing_token 7
# HELP berth_acquire_lease_deadline_seconds Seconds until the local lease deadline (last confirmed send + TTL); 0 when no lease is confirmed, negative once passed.
# TYPE berth_acquire_lease_deadline_seconds gauge
berth_acquire_lease_deadline_seconds 8.5
# HELP berth_acquire_renew_duration_seconds Duration of Renew RPCs in seconds, whatever their outcome (cancelled ones excluded).
# TYPE berth_acquire_renew_duration_seconds histogram
berth_acquire_renew_duration_seconds_bucket{le="0.005"} 0
berth_acquire_renew_duration_seconds_bucket{le="0.01"} 0
berth_acquire_renew_duration_seconds_bucket{le="0.025"} 0
berth_acquire_renew_duration_seconds_bucket{le="0.05"} 1
berth_acquire_renew_duration_seconds_bucket{le="0.1"} 1
berth_acquire_renew_duration_seconds_bucket{le="0.25"} 1
berth_acquire_renew_duration_seconds_bucket{le="0.5"} 1
berth_acquire_renew_duration_seconds_bucket{le="1"} 1
berth_acquire_renew_duration_seconds_bucket{le="2.5"} 2
berth_acquire_renew_duration_seconds_bucket{le="5"} 2
berth_acquire_renew_duration_seconds_bucket{le="10"} 2
berth_acquire_renew_duration_seconds_bucket{le="+Inf"} 2
berth_acquire_renew_duration_seconds_sum 2.03
berth_acquire_renew_duration_seconds_count 2
# HELP berth_acquire_rpc_total Lease RPCs by rpc (acquire, renew, release) and outcome (acquired, not-acquired, released, conflict, server-error, bad-response, transport-error, timeout, aborted).
# TYPE berth_acquire_rpc_total counter
berth_acquire_rpc_total{rpc="acquire",outcome="acquired"} 1
berth_acquire_rpc_total{rpc="renew",outcome="acquired"} 1
berth_acquire_rpc_total{rpc="renew",outcome="timeout"} 1
berth_acquire_rpc_total{rpc="renew",outcome="aborted"} 1
berth_acquire_rpc_total{rpc="release",outcome="released"} 1
# HELP berth_acquire_lease_losses_total Times the gate closed on a confirmed lease: the server said it was gone, or it was not confirmed before its local deadline.
# TYPE berth_acquire_lease_losses_total counter
berth_acquire_lease_losses_total 0
# HELP berth_acquire_reacquires_total Times the lease was acquired again by the renewer after it was lost or not handed over.
# TYPE berth_acquire_reacquires_total counter
berth_acquire_reacquires_total 0
# HELP berth_acquire_enforcement_actions_total Enforcement actions by action: marker_written, marker_removed, sigterm, sigkill.
# TYPE berth_acquire_enforcement_actions_total counter
berth_acquire_enforcement_actions_total{action="marker_written"} 1
`,
  );
});

function sample(text: string, series: string): string | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line?.slice(series.length + 1);
}

Deno.test("before any lease the gauges read 0; a passed deadline reads negative", () => {
  const clock = new StepClock();
  let status: RenewerStatus | undefined;
  const m = new LeaseMetrics({ status: () => status, clock });
  let text = m.render();
  assert.equal(sample(text, "berth_acquire_lease_held"), "0");
  assert.equal(sample(text, "berth_acquire_fencing_token"), "0");
  assert.equal(sample(text, "berth_acquire_lease_deadline_seconds"), "0");
  status = { permissionOpen: false, token: 3, reason: "lease lost: x" };
  text = m.render();
  assert.equal(sample(text, "berth_acquire_fencing_token"), "3");
  assert.equal(sample(text, "berth_acquire_lease_deadline_seconds"), "0");
  status = {
    permissionOpen: false,
    token: 3,
    deadline: clock.t - 1_250,
    permissionClosesAt: clock.t - 5_250,
    reason: "not confirmed",
  };
  assert.equal(
    sample(m.render(), "berth_acquire_lease_deadline_seconds"),
    "-1.25",
  );
});

Deno.test("losses count gate closings on a held lease, but not the release at shutdown; reacquires count", () => {
  let stopping = false;
  const m = new LeaseMetrics({
    status: () => undefined,
    clock: new StepClock(),
    isStopping: () => stopping,
  });
  const o = m.observer();
  const open: RenewerStatus = { permissionOpen: true, token: 1 };
  const closed: RenewerStatus = {
    permissionOpen: false,
    token: 1,
    reason: "x",
  };
  o.changed!(closed); // never opened: confirming a handoff is no loss
  o.changed!(open);
  o.changed!(open);
  o.changed!(closed); // loss 1
  o.changed!(closed);
  o.reacquired!(2);
  o.changed!({ ...open, token: 2 });
  o.changed!(closed); // loss 2
  o.changed!(open);
  stopping = true;
  o.changed!(closed); // the shutdown release
  const text = m.render();
  assert.equal(sample(text, "berth_acquire_lease_losses_total"), "2");
  assert.equal(sample(text, "berth_acquire_reacquires_total"), "1");
});

Deno.test("enforcement wrappers count what was done, not what was attempted", async () => {
  const m = new LeaseMetrics({
    status: () => undefined,
    clock: new StepClock(),
  });
  let failWrite = false;
  const marker = m.markerStore({
    writeMarker: () =>
      failWrite ? Promise.reject(new Error("disk full")) : Promise.resolve(),
    removeMarker: () => Promise.resolve(),
  });
  await marker.writeMarker({ gateClosesBootMs: 1, leaseDeadlineBootMs: 2 });
  failWrite = true;
  await assert.rejects(
    marker.writeMarker({ gateClosesBootMs: 1, leaseDeadlineBootMs: 2 }),
  );
  await marker.removeMarker();
  await marker.removeMarker();
  const results = ["sent", "gone", "sent", "denied"] as const;
  let i = 0;
  const inner: ProcessTable = {
    selfPid: 10,
    parentPid: 1,
    selfExe: "/berth-acquire",
    list: () => Promise.resolve([]),
    get: () => Promise.resolve(undefined),
    fileId: (p) => Promise.resolve(p === "/berth-acquire" ? "1:2" : undefined),
    kill: () => results[i++],
  };
  const table = m.processTable(inner);
  assert.equal(table.selfPid, 10);
  assert.equal(table.kill(20, "SIGTERM"), "sent");
  assert.equal(table.kill(21, "SIGTERM"), "gone");
  assert.equal(table.kill(20, "SIGKILL"), "sent");
  assert.equal(table.kill(22, "SIGKILL"), "denied");
  const text = m.render();
  const s = (a: string) =>
    sample(text, `berth_acquire_enforcement_actions_total{action="${a}"}`);
  assert.equal(s("marker_written"), "1");
  assert.equal(s("marker_removed"), "2");
  assert.equal(s("sigterm"), "1");
  assert.equal(s("sigkill"), "1");
});

Deno.test("berth_acquire_lease_info names the lease, namespace and holder; the deadline has no float noise", () => {
  const clock = { now: () => 1_000.000_123 };
  const m = new LeaseMetrics({
    status: () => ({
      permissionOpen: true,
      token: 3,
      deadline: 8_043.313_159,
      permissionClosesAt: 4_000,
    }),
    clock,
    lease: { lease: "db", namespace: "prod", holder: 'vm1/pid:7:uid:"x"' },
  });
  const text = m.render();
  assert.match(
    text,
    /^berth_acquire_lease_info\{lease="db",namespace="prod",holder="vm1\/pid:7:uid:\\"x\\""\} 1$/m,
  );
  assert.match(text, /^# TYPE berth_acquire_lease_info gauge$/m);
  assert.match(text, /^berth_acquire_lease_deadline_seconds 7\.043$/m);
});
