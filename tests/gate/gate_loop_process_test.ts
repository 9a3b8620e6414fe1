/**
 * `gate`'s loop through a small driver (tests/support/gate_loop_driver.ts),
 * for what needs a seam: a boot clock that fails, and the log records as
 * JSON. The commands are real processes.
 *
 * @module
 */
import assert from "node:assert/strict";
import { LEASE_MARGIN_MS } from "../../lib/gate/marker_watch.ts";
import { EXIT_GATE_CLOSED } from "../../lib/gate/gate_loop.ts";
import { readBootMillis } from "../../lib/state/marker.ts";
import { StateDir } from "../../lib/state/state_dir.ts";
import { tempDir, waitFor } from "../support/lease_env.ts";

const BOUND_MS = 20_000;

interface LogRecord {
  level: string;
  msg: string;
  [k: string]: unknown;
}

const driver = new URL("../support/gate_loop_driver.ts", import.meta.url)
  .pathname;

/** Starts the driver with `options`; `records` fills as it logs, `done` is its exit code. */
function startGate(options: Record<string, unknown>) {
  const records: LogRecord[] = [];
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-config", driver, JSON.stringify(options)],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const done = (async () => {
    let exit: number | undefined;
    let rest = "";
    for await (
      const chunk of child.stdout.pipeThrough(new TextDecoderStream())
    ) {
      rest += chunk;
      const lines = rest.split("\n");
      rest = lines.pop()!;
      for (const line of lines.filter((l) => l.trim() !== "")) {
        const r = JSON.parse(line);
        if (typeof r.exit === "number") exit = r.exit;
        else records.push(r);
      }
    }
    await child.status;
    return exit;
  })();
  return { records, done };
}

/** Holder, token and a marker whose gate closes `gateInMs` from now and lease deadline `leadMs` later. */
async function confirm(dir: string, gateInMs: number, leadMs: number) {
  const s = new StateDir(dir);
  await s.writeHolder("prod/gated");
  await s.writeToken(7);
  const boot = readBootMillis();
  const wall = Date.now();
  const d = {
    gateClosesBootMs: boot + gateInMs,
    leaseDeadlineBootMs: boot + gateInMs + leadMs,
    gateClosesWallMs: wall + gateInMs,
    leaseDeadlineWallMs: wall + gateInMs + leadMs,
  };
  await s.writeMarker(d);
  return d;
}

/** A command that ignores SIGTERM and writes its PID to `dir/pid`. */
function stubborn(dir: string): string[] {
  return [
    "sh",
    "-c",
    `echo $$ > "${dir}/pid"; trap '' TERM; while :; do sleep 0.05; done`,
  ];
}

function bounded<T>(p: Promise<T>, what: string): Promise<T> {
  let t: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => {
      t = setTimeout(() => reject(new Error(`timed out: ${what}`)), BOUND_MS);
    }),
  ]).finally(() => clearTimeout(t));
}

Deno.test("gate: a boot clock that cannot be read stops the command with a readable reason instead of crashing", async () => {
  await using tmp = await tempDir("berth-gate-loop-");
  const dir = tmp.path;
  await confirm(dir, 60_000, 5_000);
  const { records, done } = startGate({
    stateDir: dir,
    intervalMs: 100,
    graceMs: 0,
    exitOnClose: true,
    command: ["sleep", "1000"],
    badClock: true,
  });
  const code = await bounded(done, "the gate to stop the command");
  assert.equal(code, EXIT_GATE_CLOSED);
  const stop = records.find((r) => r.msg === "stopping the command");
  assert.match(
    String(stop?.reason),
    /^cannot evaluate the gate deadline: cannot read \/proc\/uptime: permission denied$/,
    JSON.stringify(records),
  );
});

Deno.test("gate: a stop gets SIGKILL before the lease deadline when --grace is longer than the marker's lead", async () => {
  await using tmp = await tempDir("berth-gate-loop-");
  const dir = tmp.path;
  await confirm(dir, 1_000, 1_000);
  const { records, done } = startGate({
    stateDir: dir,
    intervalMs: 100,
    graceMs: 60_000,
    exitOnClose: true,
    command: stubborn(dir),
  });
  // Without the cut the 60 s grace would outlast the bound.
  const code = await bounded(done, "the command to be killed");
  assert.equal(code, EXIT_GATE_CLOSED);
  const warn = records.find((r) =>
    r.level === "WARN" && /exceed the marker's enforcement lead/.test(r.msg)
  );
  assert.ok(warn, "warned at start");
  assert.match(warn.msg, /lower --grace or --interval/);
  assert.equal(warn.grace, "1m0s");
  assert.equal(warn.lead, "1s");
  const cut = records.find((r) => /shortening the grace/.test(r.msg));
  assert.ok(cut, JSON.stringify(records));
  assert.ok(
    (cut.grace_ms as number) <= 1_000 - LEASE_MARGIN_MS,
    `grace ${cut.grace_ms} ms`,
  );
  assert.ok(
    records.some((r) => /sending SIGKILL/.test(r.msg)),
    "the command that ignores SIGTERM got SIGKILL",
  );
});

Deno.test("gate: a missing holder and token is logged once, its recovery once, and the command's own exit is logged", async () => {
  await using tmp = await tempDir("berth-gate-loop-");
  const dir = tmp.path;
  const s = new StateDir(dir);
  await s.writeMarker(undefined);
  const { records, done } = startGate({
    stateDir: dir,
    intervalMs: 10,
    graceMs: 0,
    exitOnClose: true,
    command: ["sh", "-c", "exit 3"],
  });
  await waitFor(
    () =>
      records.filter((r) => /still has no usable holder/.test(r.msg))
        .length >= 3,
    { timeoutMs: BOUND_MS, what: "three more looks without holder and token" },
  );
  await s.writeHolder("prod/gated");
  await s.writeToken(7);
  assert.equal(await bounded(done, "the command to run and exit"), 3);
  const errors = records.filter((r) => r.level === "ERROR");
  assert.deepEqual(
    errors.map((r) => r.msg),
    [
      "the marker passes but the state volume has no holder and token; waiting",
    ],
  );
  assert.equal(
    records.filter((r) => /holder and token again/.test(r.msg)).length,
    1,
  );
  const noDeadlines = records.filter((r) =>
    r.level === "WARN" && /carries no deadlines and --max-age is 0/.test(r.msg)
  );
  assert.equal(noDeadlines.length, 1, JSON.stringify(records));
  const exited = records.find((r) => r.msg === "the command exited");
  assert.equal(exited?.code, 3);
});
