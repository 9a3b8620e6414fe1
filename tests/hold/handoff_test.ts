/**
 * The handoff on the state volume: the marker the acquiring role hands over
 * (pure arithmetic), what a hand-over that fails half-way leaves behind,
 * what the sidecar reads back, and the token it writes again.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  handoffMarker,
  persistHandoff,
  readHandoff,
  type RenewerStore,
  writeHandoff,
  type WriteHandoffOptions,
} from "../../lib/hold/handoff.ts";
import type { ReleaseOutcome } from "../../lib/lease/rpc.ts";
import { createLogger, discardLogger } from "../../lib/obs/log.ts";
import { GO_MESSAGES as GO } from "../../lib/obs/go_messages.ts";
import type { MarkerDeadlines } from "../../lib/state/marker.ts";
import { StateDir } from "../../lib/state/state_dir.ts";
import { FakeClock, settle } from "../support/fake_clock.ts";
import { ScriptedClient } from "../support/scripted_client.ts";

const HOLDER = "prod/pod:web-0:uid:1";

Deno.test("handoffMarker: runtime-singleton carries the acquisition's deadline and gate; startup-gate carries none", () => {
  const cases: [number, number, number, number, number[]][] = [
    [8, 4_000, 50_000, 1_700_000_000_000, [
      58_000,
      54_000,
      1_700_000_008_000,
      1_700_000_004_000,
    ]],
    [30, 2_000, 1_234, 2_000, [31_234, 29_234, 32_000, 30_000]],
  ];
  for (const [ttlSeconds, enforceLeadMs, sentAtBoot, sentAtWall, d] of cases) {
    const config = { ttlSeconds, enforceLeadMs };
    const sent = { sentAtBoot, sentAtWall };
    assert.deepEqual(
      handoffMarker({ mode: "runtime-singleton", ...config }, sent),
      {
        leaseDeadlineBootMs: d[0],
        gateClosesBootMs: d[1],
        leaseDeadlineWallMs: d[2],
        gateClosesWallMs: d[3],
      },
    );
    assert.equal(
      handoffMarker({ mode: "startup-gate", ...config }, sent),
      undefined,
    );
  }
});

// deno-lint-ignore no-explicit-any
type Line = Record<string, any>;

function jsonLogger(lines: Line[]) {
  return createLogger({
    level: "DEBUG",
    format: "json",
    write: (l) => lines.push(JSON.parse(l)),
  });
}

/** A state volume in memory whose writes fail where `fail` names them. */
function fakeState(fail: Partial<Record<string, Error>> = {}) {
  const writes: string[] = [];
  const op = (name: string) => () => {
    writes.push(name);
    return fail[name] ? Promise.reject(fail[name]) : Promise.resolve();
  };
  const state = {
    writeHolder: op("holder"),
    writeToken: op("token"),
    writeMarker: op("marker"),
    removeMarker: op("remove marker"),
  } as unknown as StateDir;
  return { state, writes };
}

function handOver(
  state: StateDir,
  over: Partial<WriteHandoffOptions> & { stateDir?: string } = {},
  ...answers: ReleaseOutcome[]
) {
  const clock = new FakeClock();
  const client = new ScriptedClient(() => clock.now());
  client.queue.push(...answers);
  const lines: Line[] = [];
  const done = writeHandoff({
    state,
    config: {
      mode: "runtime-singleton",
      ttlSeconds: 30,
      enforceLeadMs: 4_000,
      holder: HOLDER,
      stateDir: over.stateDir ?? "/berth",
    },
    lease: { token: 7, sentAt: 0, sentAtBoot: 0, sentAtWall: 0 },
    client,
    clock,
    logger: jsonLogger(lines),
    ...over,
  });
  return { done, client, clock, lines };
}

Deno.test("writeHandoff: a state volume that fails after the marker is written gets the marker removed before the lease is released", async () => {
  const dir = await Deno.makeTempDir({ prefix: "berth-handover-" });
  try {
    // The probe cannot be installed: a directory with content is in its place.
    await Deno.mkdir(`${dir}/check/sub`, { recursive: true });
    const state = new StateDir(dir);
    const h = handOver(state, {
      stateDir: dir,
      installCheck: () =>
        state.installCheck({ script: new TextEncoder().encode("#!/bin/sh\n") }),
    }, { kind: "released" });
    assert.equal(await h.done, false);
    assert.equal(state.readMarkerDeadlines(), undefined, "no marker left");
    assert.deepEqual(
      h.client.calls.map((c) => [c.rpc, c.token]),
      [["release", 7]],
    );
    assert.deepEqual(h.lines.map((l) => `${l.level} ${l.msg}`), [
      "ERROR cannot write the state volume; releasing the lease",
      "INFO lease released",
    ]);
    assert.equal(h.lines[0].state_dir, dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeHandoff writes holder, token and marker, then installs the probe, last", async () => {
  const { state, writes } = fakeState();
  const h = handOver(state, {
    installCheck: () => {
      writes.push("check");
      return Promise.resolve();
    },
  });
  assert.equal(await h.done, true);
  assert.deepEqual(writes, ["holder", "token", "marker", "check"]);
  assert.deepEqual(h.client.calls, []);
  assert.deepEqual(h.lines, []);
});

Deno.test("writeHandoff: a release that fails after a refused write is said in releaseLease's words; the lease expires on its own", async () => {
  const { state, writes } = fakeState({ token: new Error("EROFS") });
  const h = handOver(state, {}, {
    kind: "server-error",
    status: 503,
    message: "unavailable",
  });
  assert.equal(await h.done, false);
  assert.deepEqual(writes, ["holder", "token", "remove marker"]);
  assert.deepEqual(h.client.calls.map((c) => [c.rpc, c.holder, c.token]), [
    ["release", HOLDER, 7],
  ]);
  assert.deepEqual(h.lines.map((l) => `${l.level} ${l.msg}`), [
    "ERROR cannot write the state volume; releasing the lease",
    "WARN lease release failed; it will expire on its own",
  ]);
  assert.equal(h.lines[0].error, "EROFS");
  assert.equal(h.lines[0].state_dir, "/berth");
  assert.equal(h.lines[0].fencing_token, 7);
  assert.match(h.lines[1].error, /503/);
  assert.equal(h.lines[1].fencing_token, 7);
});

Deno.test("writeHandoff keeps the lease when the marker it may have written cannot be removed: the probe could pass on it", async () => {
  const { state, writes } = fakeState({
    marker: new Error("ENOSPC"),
    "remove marker": new Error("EACCES"),
  });
  const h = handOver(state);
  assert.equal(await h.done, false);
  assert.deepEqual(writes, ["holder", "token", "marker", "remove marker"]);
  assert.deepEqual(h.client.calls, [], "no release");
  assert.equal(h.lines.length, 2);
  assert.equal(h.lines[1].level, "ERROR");
  assert.match(h.lines[1].msg, /^not releasing the lease: the health marker/);
  assert.equal(h.lines[1].error, "EACCES");
});

/** A state volume as the renewer reads it. */
function store(s: {
  holder?: string;
  token?: number | Error;
  marker?: MarkerDeadlines | Error;
}): RenewerStore {
  const read = <T>(v: T | Error): T => {
    if (v instanceof Error) throw v;
    return v;
  };
  return {
    readHolder: () => s.holder,
    readToken: () => read(s.token),
    readMarkerDeadlines: () => read(s.marker),
    writeHolder: () => Promise.resolve(),
    writeToken: () => Promise.resolve(),
  };
}

Deno.test("readHandoff takes only the configured holder's lease, byte for byte, and says what it refuses", () => {
  const none = "no lease handed over by the init container; acquiring";
  const cases: [string, Parameters<typeof store>[0], string, string][] = [
    ["nothing", {}, none, "no lease handed over by the init container"],
    ["no token", { holder: HOLDER }, none, "has a holder but no token"],
    [
      "an unreadable token",
      {
        holder: HOLDER,
        token: new Error("token file: 0 is not a positive int32"),
      },
      none,
      "cannot read the init container's handoff",
    ],
    [
      "another holder",
      { holder: "prod/pod:web-1:uid:2", token: 5 },
      "the handed-over lease belongs to another holder",
      "names another holder",
    ],
    [
      "another byte",
      { holder: HOLDER + " ", token: 5 },
      "the handed-over lease belongs to another holder",
      "names another holder",
    ],
  ];
  for (const [name, s, reason, detail] of cases) {
    const lines: Line[] = [];
    const clock = new FakeClock();
    const got = readHandoff({
      store: store(s),
      holder: HOLDER,
      ttlSeconds: 10,
      clock,
      logger: jsonLogger(lines),
    });
    assert.deepEqual(got, { kind: "none", reason }, name);
    assert.equal(lines.length, 1, name);
    assert.equal(lines[0].level, "WARN");
    assert.equal(lines[0].msg, GO.noHandoff);
    assert.ok(lines[0].detail.includes(detail), name);
    if (s.token instanceof Error) assert.match(lines[0].error, /positive/);
    if (name === "another holder") {
      assert.equal(lines[0].file_holder, "prod/pod:web-1:uid:2");
    }
  }
});

Deno.test("readHandoff trusts the marker's earlier deadline only while it lies ahead and within one TTL", () => {
  const clock = new FakeClock();
  const boot = clock.bootNow();
  const wall = clock.wallNow();
  const marker = (bootLeft: number, wallLeft?: number): MarkerDeadlines => ({
    leaseDeadlineBootMs: boot + bootLeft,
    gateClosesBootMs: boot + bootLeft - 4_000,
    ...(wallLeft === undefined ? {} : {
      leaseDeadlineWallMs: wall + wallLeft,
      gateClosesWallMs: wall + wallLeft - 4_000,
    }),
  });
  const cases: [string, MarkerDeadlines | Error | undefined, number?][] = [
    ["no marker", undefined],
    ["the boot copy", marker(9_000), 9_000],
    ["the earlier wall copy", marker(9_000, 5_000), 5_000],
    ["the earlier boot copy", marker(5_000, 9_000), 5_000],
    ["a whole TTL", marker(10_000), 10_000],
    ["past", marker(-1)],
    ["now", marker(0)],
    ["beyond a TTL", marker(10_001)],
    ["unreadable", new Error("marker: bad JSON")],
  ];
  for (const [name, m, leftMs] of cases) {
    const lines: Line[] = [];
    const got = readHandoff({
      store: store({ holder: HOLDER, token: 7, marker: m }),
      holder: HOLDER,
      ttlSeconds: 10,
      clock,
      logger: jsonLogger(lines),
    });
    assert.ok(got.kind === "lease" && got.token === 7, name);
    assert.equal(got.leftMs, leftMs, name);
    assert.deepEqual(
      lines.map((l) => `${l.level} ${l.msg} ${l.error}`),
      m instanceof Error
        ? [
          "WARN cannot read the health marker's deadline; confirming the lease first marker: bad JSON",
        ]
        : [],
      name,
    );
  }
});

/** A store recording its writes; those named in `refuse` fail their first `times` tries. */
function writingStore(refuse: "holder" | "token" | undefined, times = 3) {
  const writes: string[] = [];
  let failures = 0;
  const write = (what: string, v: unknown) => {
    writes.push(`${what}=${v}`);
    if (what === refuse && failures++ < times) {
      return Promise.reject(new Error(`${what}: read-only`));
    }
    return Promise.resolve();
  };
  const s: RenewerStore = {
    ...store({}),
    writeHolder: (h) => write("holder", h),
    writeToken: (t) => write("token", t),
  };
  return { s, writes };
}

Deno.test("persistHandoff writes only what the volume lacks, and records it", async () => {
  type Saved = { holder: boolean; token: number };
  const cases: [Saved, number, string[], Saved][] = [
    [{ holder: false, token: 0 }, 7, [`holder=${HOLDER}`, "token=7"], {
      holder: true,
      token: 7,
    }],
    [{ holder: true, token: 7 }, 8, ["token=8"], { holder: true, token: 8 }],
    [{ holder: true, token: 7 }, 7, [], { holder: true, token: 7 }],
  ];
  for (const [saved, token, writes, after] of cases) {
    const w = writingStore(undefined);
    const clock = new FakeClock();
    const p = { store: w.s, holder: HOLDER, clock, logger: discardLogger };
    const signal = new AbortController().signal;
    assert.equal(await persistHandoff(p, token, saved, signal), undefined);
    assert.deepEqual(w.writes, writes);
    assert.deepEqual(saved, after);
  }
});

Deno.test("persistHandoff tries three times 100 ms apart, then names the file it gave up on and says so; a shutdown cuts the pauses short", async () => {
  const lines: string[] = [];
  const logger = createLogger({ format: "json", write: (l) => lines.push(l) });
  for (const refuse of ["holder", "token"] as const) {
    const w = writingStore(refuse);
    const clock = new FakeClock();
    const t0 = clock.now();
    const saved = { holder: false, token: 0 };
    let settled = false;
    lines.length = 0;
    const done = persistHandoff(
      { store: w.s, holder: HOLDER, clock, logger },
      7,
      saved,
      new AbortController().signal,
    ).finally(() => settled = true);
    await clock.advanceTo(t0 + 199);
    assert.equal(settled, false, refuse);
    await clock.advanceTo(t0 + 200);
    assert.equal(settled, true, refuse);
    assert.equal(await done, refuse);
    assert.equal(lines.length, 1);
    const line = JSON.parse(lines[0]);
    assert.equal(line.msg, GO.persistFailed);
    assert.equal(line.level, "WARN");
    assert.equal(line.write, refuse);
    assert.match(line.error, /read-only/);
    assert.equal(line.attempts, 3);
    assert.equal(line.fencing_token, 7);
    assert.match(
      line.detail,
      new RegExp(`cannot write the ${refuse} file.*releasing the lease`),
    );
    assert.equal(w.writes.filter((x) => x.startsWith(refuse)).length, 3);
    assert.deepEqual(saved, { holder: refuse === "token", token: 0 });
  }
  // Refused twice, then written: the third try succeeds.
  const w = writingStore("token", 2);
  const clock = new FakeClock();
  const saved = { holder: true, token: 0 };
  const done = persistHandoff(
    { store: w.s, holder: HOLDER, clock, logger },
    7,
    saved,
    new AbortController().signal,
  );
  await clock.advance(200);
  assert.equal(await done, undefined);
  assert.deepEqual(saved, { holder: true, token: 7 });
  // Stopping: the three tries go at once.
  const stopped = writingStore("token");
  const stop = new AbortController();
  stop.abort();
  const c = new FakeClock();
  const failed = await persistHandoff(
    { store: stopped.s, holder: HOLDER, clock: c, logger },
    7,
    { holder: true, token: 0 },
    stop.signal,
  );
  await settle();
  assert.equal(failed, "token");
  assert.equal(stopped.writes.length, 3);
});
