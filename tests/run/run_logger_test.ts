// run's logger (routineAtDebug): one line per event at INFO and above; the
// acquire loop's and the renewer's routine lines at DEBUG under it.
import assert from "node:assert/strict";
import { routineAtDebug } from "../../lib/run/run.ts";
import {
  Attempts,
  OUTAGE_MESSAGE,
  REJECTION_MESSAGE,
} from "../../lib/hold/attempts.ts";
import type { GrantOutcome } from "../../lib/lease/rpc.ts";
import { createLogger, type LogLevel } from "../../lib/obs/log.ts";
import { GO_MESSAGES as GO } from "../../lib/obs/go_messages.ts";
import { FakeClock } from "../support/fake_clock.ts";
import { record } from "../support/scripted_client.ts";

// deno-lint-ignore no-explicit-any
type Line = Record<string, any>;

function runLogger(level: LogLevel = "DEBUG") {
  const lines: Line[] = [];
  const logger = routineAtDebug(
    createLogger({
      level,
      format: "json",
      write: (l) => lines.push(JSON.parse(l)),
    }),
  );
  return { logger, lines };
}

const who = { current_holder: "other", current_fencing_token: 3 };

/** The recorder `run` says its waits through: the first acquire's lines, or the reacquire's. */
function attempts(held: string) {
  const r = runLogger();
  const a = new Attempts({
    ttlSeconds: 10,
    clock: new FakeClock(),
    logger: r.logger,
    guardSharedHolder: true,
    boundMs: 1_000,
    lines: { held, failed: GO.acquireFailed },
  });
  const wait = (holder: string, token: number) =>
    a.record({ kind: "not-acquired", lease: record(holder, token) }, 0, 3_000);
  return { ...r, a, wait };
}

Deno.test("run says a wait once per holder and token, with when the lease would expire; a repeat at DEBUG, a new token or holder at INFO", () => {
  for (const held of [GO.heldByAnother, GO.waitingToReacquire]) {
    const r = attempts(held);
    for (let i = 0; i < 6; i++) r.wait("other", 4);
    r.wait("other", 5); // the lease expired and was taken again: news
    r.wait("prod/pod:web-2:uid:3333", 6); // another holder: news
    r.wait("other", 5); // back again: news too, only the last line counts
    assert.ok(r.lines.every((l) => l.msg === held));
    assert.deepEqual(r.lines.map((l) => l.level), [
      "INFO",
      ...Array(5).fill("DEBUG"),
      "INFO",
      "INFO",
      "INFO",
    ], held);
    assert.ok(r.lines.every((l) => l.expires_at === "2026-05-07T00:00:10Z"));
    assert.equal(r.lines[7].current_holder, "prod/pod:web-2:uid:3333");
    assert.equal(r.lines[7].current_fencing_token, 6);
  }
});

Deno.test("run keeps the first acquire's wait and the reacquire's apart", () => {
  const { logger, lines } = runLogger();
  logger.info(GO.heldByAnother, who);
  logger.info(GO.waitingToReacquire, who);
  logger.info(GO.waitingToReacquire, who);
  assert.deepEqual(lines.map((l) => `${l.level} ${l.msg}`), [
    `INFO ${GO.heldByAnother}`,
    `INFO ${GO.waitingToReacquire}`,
    `DEBUG ${GO.waitingToReacquire}`,
  ]);
});

Deno.test("run says the adoption and the Go helper's 'local lease deadline reached' at DEBUG, always: its own lines say them", () => {
  const { logger, lines } = runLogger();
  const adopted =
    "adopted the lease; the workload keeps running while it is confirmed";
  logger.info(adopted, { fencing_token: 4 });
  logger.warn(GO.localDeadline, { fencing_token: 4 });
  logger.warn(GO.localDeadline, { fencing_token: 5 });
  assert.deepEqual(lines.map((l) => l.level), ["DEBUG", "DEBUG", "DEBUG"]);
  assert.deepEqual(lines.map((l) => l.fencing_token), [4, 4, 5]);
});

Deno.test("run keeps every other line at its level, repeated or not: failures are WARN, outages and rejections ERROR", () => {
  const { logger, lines } = runLogger();
  const cases: [LogLevel, string][] = [
    ["WARN", "gate closed: stopping the workload"],
    ["WARN", GO.acquireFailed],
    ["WARN", GO.reacquireFailed],
    ["WARN", GO.renewFailed],
    ["ERROR", OUTAGE_MESSAGE],
    ["ERROR", REJECTION_MESSAGE],
    ["INFO", GO.leaseRenewed],
    ["INFO", GO.reacquired],
    ["DEBUG", GO.leaseRenewed],
  ];
  const at = {
    DEBUG: logger.debug,
    INFO: logger.info,
    WARN: logger.warn,
    ERROR: logger.error,
  };
  for (let round = 0; round < 2; round++) {
    for (const [level, msg] of cases) at[level](msg, { error: "x" });
  }
  assert.deepEqual(
    lines.map((l) => `${l.level} ${l.msg} ${l.error}`),
    [...cases, ...cases].map(([level, msg]) => `${level} ${msg} x`),
  );
});

Deno.test("run's failures through the recorder: the retry line stays WARN for a rejection too, its ERROR beside it", () => {
  const r = attempts(GO.heldByAnother);
  const rejected: GrantOutcome = {
    kind: "server-error",
    status: 401,
    message: "unauthorized",
  };
  r.a.record(rejected, 0, 3_000);
  r.a.record(rejected, 0, 3_000);
  assert.deepEqual(r.lines.map((l) => `${l.level} ${l.msg}`), [
    `WARN ${GO.acquireFailed}`,
    `ERROR ${REJECTION_MESSAGE}`,
    `WARN ${GO.acquireFailed}`,
  ]);
});

Deno.test("a child logger of run's keeps the demotion, its fields and what was said", () => {
  const { logger, lines } = runLogger();
  logger.info(GO.heldByAnother, who);
  const child = logger.with({ role: "run" });
  child.info(GO.heldByAnother, who);
  child.warn(GO.localDeadline);
  assert.deepEqual(lines.map((l) => `${l.level} ${l.role}`), [
    "INFO undefined",
    "DEBUG run",
    "DEBUG run",
  ]);
});

Deno.test("at INFO, the default level, a repeated wait is not written at all", () => {
  const { logger, lines } = runLogger("INFO");
  for (let i = 0; i < 3; i++) logger.info(GO.heldByAnother, who);
  assert.equal(lines.length, 1);
});
