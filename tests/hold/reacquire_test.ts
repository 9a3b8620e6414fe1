/**
 * The sidecar's reacquire step on its own, with a fake clock and a
 * scripted server: which grants it hands to the renewer, and the quiet
 * period after another process's grant under the same holder identity.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Reacquirer } from "../../lib/hold/reacquire.ts";
import { SHARED_HOLDER_MESSAGE } from "../../lib/hold/shared_holder.ts";
import type { GrantOutcome } from "../../lib/lease/rpc.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { FakeClock } from "../support/fake_clock.ts";
import { record, ScriptedClient } from "../support/scripted_client.ts";

const HOLDER = "prod/pod:web-0:uid:1111";
const TTL = 10;
const HB = 1_000;

/** A grant as the server answers it: `age` ms since `acquiredAt` (0: fresh). */
function granted(token: number, ageMs = 0): GrantOutcome {
  const renewedAt = Date.parse("2026-05-07T00:01:00Z");
  return {
    kind: "acquired",
    lease: record(HOLDER, token, {
      acquiredAt: new Date(renewedAt - ageMs).toISOString(),
      expiresAt: new Date(renewedAt + TTL * 1000).toISOString(),
    }),
  };
}

function setup(quiet?: boolean) {
  const clock = new FakeClock();
  const client = new ScriptedClient(() => clock.now());
  const logs: string[] = [];
  const logger = createLogger({ format: "json", write: (l) => logs.push(l) });
  const r = new Reacquirer({
    client,
    holder: HOLDER,
    ttlSeconds: TTL,
    heartbeatMs: HB,
    clock,
    logger,
    quiet,
  });
  const attempt = (token: number, ...answers: GrantOutcome[]) => {
    client.queue.push(...answers);
    return r.attempt(token);
  };
  return { clock, client, logs, attempt };
}

Deno.test("a fresh grant is handed on with its token and the time its Acquire was sent", async () => {
  const h = setup();
  const sentAt = h.clock.now();
  assert.deepEqual(await h.attempt(0, granted(7)), { token: 7, sentAt });
});

Deno.test("another process's grant under this identity is refused, and no Acquire goes out for one TTL and a second", async () => {
  const h = setup();
  assert.equal(await h.attempt(0, granted(7, 5_000)), undefined);
  assert.ok(h.logs.some((l) => l.includes(SHARED_HOLDER_MESSAGE)), h.logs[0]);
  const sent = h.client.calls.length;
  await h.clock.advance(TTL * 1000);
  assert.equal(await h.attempt(0), undefined);
  assert.equal(h.client.calls.length, sent, "an Acquire during the quiet");
  await h.clock.advance(1_000);
  assert.deepEqual(await h.attempt(0, granted(8)), {
    token: 8,
    sentAt: h.clock.now(),
  });
  assert.equal(h.client.calls.length, sent + 1);
});

Deno.test("an extension of the token this process holds is its own", async () => {
  const h = setup();
  const sentAt = h.clock.now();
  assert.deepEqual(await h.attempt(7, granted(7, 5_000)), { token: 7, sentAt });
});

Deno.test("after an Acquire that may have been granted unseen, an extension no older than it is ours; an older one is not", async () => {
  const h = setup();
  assert.equal(
    await h.attempt(0, { kind: "timeout", message: "no answer" }),
    undefined,
  );
  await h.clock.advance(2_000);
  const sentAt = h.clock.now();
  assert.deepEqual(await h.attempt(0, granted(7, 1_500)), { token: 7, sentAt });

  const other = setup();
  await other.attempt(0, { kind: "timeout", message: "no answer" });
  await other.clock.advance(2_000);
  assert.equal(await other.attempt(0, granted(7, 5_000)), undefined);
  assert.ok(other.logs.some((l) => l.includes(SHARED_HOLDER_MESSAGE)));
});

Deno.test("quiet (run's reacquire after a loss): the wait is said once per holder and token, each attempt at DEBUG", async () => {
  const held = (holder: string, token: number): GrantOutcome => ({
    kind: "not-acquired",
    lease: record(holder, token),
  });
  const infos = (logs: string[]) =>
    logs.map((l) => JSON.parse(l)).filter((r) =>
      r.level === "INFO" && r.msg === "waiting to reacquire"
    ).length;
  const quiet = setup(true);
  for (let i = 0; i < 4; i++) await quiet.attempt(0, held("other", 3));
  assert.equal(infos(quiet.logs), 1);
  // With when the current lease would expire, as run's standby says it.
  assert.equal(
    JSON.parse(quiet.logs[0]).expires_at,
    record("other", 3).expiresAt,
  );
  await quiet.attempt(0, held("third", 4));
  assert.equal(infos(quiet.logs), 2);
  // The sidecar keeps Go's line at every attempt.
  const loud = setup();
  for (let i = 0; i < 4; i++) await loud.attempt(0, held("other", 3));
  assert.equal(infos(loud.logs), 4);
});

Deno.test("quiet (run's reacquire after a loss): a server that does not answer is retried with the time waited in each line, and an ERROR each minute after the first", async () => {
  const down = (): GrantOutcome => ({
    kind: "transport-error",
    message: "http://127.0.0.1:8080: connection refused",
  });
  const quiet = setup(true);
  // One attempt every 5 s for 3.5 minutes.
  for (let i = 0; i <= 42; i++) {
    await quiet.attempt(0, down());
    await quiet.clock.advanceTo(quiet.clock.now() + 5_000);
  }
  const lines = quiet.logs.map((l) => JSON.parse(l));
  const warns = lines.filter((r) => r.msg === "reacquire failed");
  assert.equal(warns[0].failing_for, "0s");
  assert.ok(warns.some((w) => w.failing_for === "1m0s"));
  const errors = lines.filter((r) => r.level === "ERROR");
  assert.deepEqual(
    errors.map((e) => e.failing_for),
    ["1m0s", "2m0s", "3m0s"],
    "one ERROR a minute once past a minute",
  );
  assert.match(errors[0].msg, /not answered usably for over a minute/);
  // An answer ends the outage: the next failure starts from 0s again.
  await quiet.attempt(0, {
    kind: "not-acquired",
    lease: record("other", 3),
  });
  await quiet.attempt(0, down());
  assert.equal(JSON.parse(quiet.logs.at(-1)!).failing_for, "0s");
  // The sidecar keeps Go's line as it was.
  const loud = setup();
  await loud.attempt(0, down());
  assert.equal(JSON.parse(loud.logs[0]).failing_for, undefined);
});
