/**
 * The pod simulator's pieces the demo and the chaos tests rely on: the
 * kubelet's back-off schedule, the journal format and the workload that
 * writes it, the analysis that judges the journals, the chart, and the
 * fault proxy. If these were wrong, the chaos figures would be too.
 */
import assert from "node:assert/strict";
import { renderChart, timelineRows } from "../../sim/chart.ts";
import {
  type AnalysisInput,
  analyze,
  type Grant,
  type MainRun,
} from "../../sim/journal.ts";
import { crashLoopDelayMs } from "../../sim/pod.ts";
import { FaultProxy } from "../../sim/proxy.ts";
import { median } from "../../sim/stats.ts";
import {
  installWorkload,
  type JournalLine,
  parseJournal,
} from "../../sim/workload.ts";
import { spawnLocal } from "../../sim/host.ts";
import { formatEvent } from "../../sim/lab.ts";
import { waitFor } from "../support/wait.ts";

Deno.test("the kubelet back-off restarts at once, then 10 s doubling to a 300 s cap", () => {
  assert.deepEqual(
    [0, 1, 2, 3, 4, 5, 6, 7, 50].map(crashLoopDelayMs),
    [0, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000],
  );
});

Deno.test("journal lines parse; a torn last line is skipped, a torn middle line is an error", () => {
  assert.deepEqual(
    parseJournal(
      "pod-a 3 1700000000123 0\npod-b 4 1700000000200 2\npod-a 3 17",
    ),
    [
      { pod: "pod-a", token: 3, at: 1700000000123, restart: 0 },
      { pod: "pod-b", token: 4, at: 1700000000200, restart: 2 },
    ],
  );
  assert.throws(
    () => parseJournal("pod-a 3 17\npod-a 3 1700000000123 0\n"),
    /malformed journal line 1/,
  );
});

Deno.test("the workload journals the token it reads at each write, under the name signal mode targets", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = await installWorkload(dir);
    await Deno.writeTextFile(`${dir}/token`, "5");
    const journal = `${dir}/journal`;
    const p = spawnLocal({
      argv: [path],
      env: {
        PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
        SIM_POD: "pod-x",
        SIM_JOURNAL: journal,
        SIM_STATE_DIR: dir,
        SIM_RESTART: "3",
        SIM_INTERVAL: "0.01",
      },
      keepStdinOpen: true,
    });
    try {
      const read = async () =>
        parseJournal(await Deno.readTextFile(journal).catch(() => ""));
      await waitFor(async () => (await read()).length >= 3, {
        timeoutMs: 20_000,
        what: "three journal lines",
      });
      await Deno.writeTextFile(`${dir}/token`, "6");
      await waitFor(
        async () => (await read()).some((l) => l.token === 6),
        { timeoutMs: 20_000, what: "a journal line with the new token" },
      );
      const lines = await read();
      assert.ok(lines.length >= 4, "the workload wrote too little");
      assert.ok(lines.every((l) => l.pod === "pod-x" && l.restart === 3));
      assert.equal(lines[0].token, 5);
      assert.equal(lines.at(-1)!.token, 6);
      assert.ok(Math.abs(lines[0].at - Date.now()) < 60_000, "wall-clock ms");
      if (Deno.build.os === "linux") {
        const comm = (await Deno.readTextFile(`/proc/${p.pid}/comm`)).trim();
        assert.equal(comm, "workload");
      }
    } finally {
      p.kill("SIGTERM");
      const exit = await p.exited;
      assert.equal(exit.signal, "SIGTERM");
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ---------------------------------------------------------------------------
// The analysis, on hand-made timelines (times in ms).

function lines(
  pod: string,
  token: number,
  restart: number,
  from: number,
  to: number,
  step = 100,
): JournalLine[] {
  const out: JournalLine[] = [];
  for (let at = from; at <= to; at += step) {
    out.push({ pod, token, at, restart });
  }
  return out;
}

function input(
  ls: JournalLine[],
  runs: MainRun[],
  grants: Grant[],
  epochStarts: number[] = [],
): AnalysisInput {
  return { lines: ls, runs, grants, epochStarts };
}

const A0: MainRun = {
  pod: "a",
  restart: 0,
  startedAt: 0,
  endedAt: 1050,
  leased: true,
};
const B0: MainRun = { pod: "b", restart: 0, startedAt: 1490, leased: true };
const G = (pod: string, token: number, at: number, epoch = 0): Grant => ({
  pod,
  token,
  at,
  epoch,
});

Deno.test("a clean handover: one failover with its margin, no violations", () => {
  const a = analyze(input(
    [...lines("a", 1, 0, 0, 1000), ...lines("b", 2, 0, 1500, 2000)],
    [A0, B0],
    [G("a", 1, -10), G("b", 2, 1400)],
  ));
  assert.deepEqual(a.violations, []);
  assert.equal(a.failovers.length, 1);
  assert.deepEqual(
    { ...a.failovers[0] },
    {
      fromPod: "a",
      from: { epoch: 0, token: 1 },
      toPod: "b",
      to: { epoch: 0, token: 2 },
      oldStop: 1000,
      newStart: 1500,
      marginMs: 500,
    },
  );
  assert.equal(a.lines, 17);
});

Deno.test("an old holder still writing after the new one started is an overlap with a negative margin", () => {
  const a = analyze(input(
    [...lines("a", 1, 0, 0, 1600), ...lines("b", 2, 0, 1500, 2000)],
    [{ ...A0, endedAt: 1650 }, B0],
    [G("a", 1, -10), G("b", 2, 1400)],
  ));
  assert.equal(a.failovers[0].marginMs, -100);
  assert.deepEqual(
    a.violations.map((v) => v.rule),
    [
      "overlap: a lease-holding run wrote after another pod took over",
      "overlap: a lease-holding run wrote after another pod took over",
    ],
  );
});

Deno.test("a restart without the lease is a restart window: measured, fenced by its old token, not an overlap", () => {
  const a = analyze(input(
    [
      ...lines("a", 1, 0, 0, 1000),
      ...lines("a", 1, 1, 1400, 1700),
      ...lines("b", 2, 0, 1500, 2000),
    ],
    [A0, {
      pod: "a",
      restart: 1,
      startedAt: 1390,
      endedAt: 1720,
      leased: false,
    }, B0],
    [G("a", 1, -10), G("b", 2, 1400)],
  ));
  assert.deepEqual(a.violations, []);
  assert.equal(a.failovers[0].marginMs, 500);
  assert.deepEqual(a.restartWindows, [{
    pod: "a",
    restart: 1,
    startedAt: 1390,
    endedAt: 1720,
    lengthMs: 330,
    endedBy: "stopped",
    lines: 4,
    overlapWithHolderMs: 220,
  }]);
});

Deno.test("a restart window ends when the pod has the lease again", () => {
  const a = analyze(input(
    [...lines("a", 1, 0, 0, 1000), ...lines("a", 1, 1, 1400, 3000)],
    [A0, {
      pod: "a",
      restart: 1,
      startedAt: 1390,
      endedAt: 3050,
      leased: false,
      regainedAt: 1800,
    }],
    [G("a", 1, -10)],
  ));
  assert.deepEqual(a.violations, []);
  assert.equal(a.restartWindows[0].lengthMs, 410);
  assert.equal(a.restartWindows[0].endedBy, "regained");
  assert.equal(a.restartWindows[0].lines, 5);
});

Deno.test("a token the pod was never granted is a violation", () => {
  const a = analyze(input(
    [...lines("a", 1, 0, 0, 300), { pod: "a", token: 7, at: 400, restart: 0 }],
    [A0],
    [G("a", 1, -10), G("b", 7, 350)],
  ));
  assert.deepEqual(a.violations.map((v) => v.rule), [
    "token not granted to this pod",
  ]);
});

Deno.test("the same pod moving to a newer token is a reacquisition, not a failover", () => {
  const a = analyze(input(
    [...lines("a", 1, 0, 0, 500), ...lines("a", 2, 0, 600, 900)],
    [A0],
    [G("a", 1, -10), G("a", 2, 550)],
  ));
  assert.deepEqual(a.violations, []);
  assert.equal(a.failovers.length, 0);
  assert.equal(a.reacquisitions, 1);
});

Deno.test("after a state-losing server restart tokens order by epoch; naive sinks are counted", () => {
  // a held token 5 in epoch 0; the server restarted at 1200 and b got token 1
  // of epoch 1; a's restarted workload still reads 5 from its volume.
  const ls = [
    ...lines("a", 5, 0, 0, 1000),
    ...lines("b", 1, 0, 1500, 2000),
    ...lines("a", 5, 1, 1600, 1700),
  ];
  const runs: MainRun[] = [A0, B0, {
    pod: "a",
    restart: 1,
    startedAt: 1590,
    endedAt: 1750,
    leased: false,
  }];
  const grants = [G("a", 5, -10), G("b", 1, 1400, 1)];
  const a = analyze(input(ls, runs, grants, [1200]));
  assert.deepEqual(a.violations, []);
  assert.deepEqual(a.failovers.map((f) => [f.from, f.to]), [[{
    epoch: 0,
    token: 5,
  }, { epoch: 1, token: 1 }]]);
  // A reset integer sink takes a's stale 5 (2 lines) and a never-reset one
  // refuses all of b's lines.
  assert.equal(a.resetIntegerSinkStaleAccepts, 2);
  assert.equal(a.persistentIntegerSinkRefusals, 6);

  // Read without epochs, the same tokens look like a broken promise: that
  // is why the analysis needs the server's epochs.
  const bare = analyze(
    input(ls, runs, grants.map((g) => ({ ...g, epoch: 0 }))),
  );
  assert.deepEqual(
    [...new Set(bare.violations.map((v) => v.rule))],
    [
      "a later holder started with a lower token",
      "unfenced: a non-holder wrote a token at least the holder's",
    ],
  );
});

Deno.test("median", () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 2, 3]), 2.5);
  assert.ok(Number.isNaN(median([])));
});

// ---------------------------------------------------------------------------
// The chart.

Deno.test("the chart draws runs, restart windows, tokens and the cut per pod", () => {
  const rows = timelineRows({
    pods: [{ name: "pod-a", from: 0 }, { name: "pod-b", from: 2000 }],
    runs: [
      { pod: "pod-a", restart: 0, startedAt: 0, endedAt: 6000, leased: true },
      {
        pod: "pod-a",
        restart: 1,
        startedAt: 6000,
        endedAt: 7000,
        leased: false,
      },
      { pod: "pod-b", restart: 0, startedAt: 8000, leased: true },
    ],
    grants: [G("pod-a", 1, 0), G("pod-a", 1, 3000), G("pod-b", 2, 8000)],
    cuts: [{ pod: "pod-a", at: 3000 }],
    leases: [{ pod: "pod-a", from: 0, to: 7500 }, {
      pod: "pod-b",
      from: 8000,
      to: 10000,
    }],
    end: 10000,
  });
  assert.deepEqual(renderChart(rows, { start: 0, end: 10000, width: 20 }), [
    "        0s        5s       10s",
    "        |         |        |",
    "pod-a   T1████✂█████▒▒······",
    "pod-b       ············T2██",
    "server  aaaaaaaaaaaaaaa bbbb",
  ]);
});

// ---------------------------------------------------------------------------
// The fault proxy, in front of a loopback echo server.

function echoServer(): {
  port: number;
  received: () => string;
  close: () => Promise<void>;
} {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let received = "";
  const conns = new Set<Deno.Conn>();
  const serving = (async () => {
    for await (const conn of listener) {
      conns.add(conn);
      (async () => {
        const buf = new Uint8Array(1024);
        try {
          for (;;) {
            const n = await conn.read(buf);
            if (n === null) break;
            received += new TextDecoder().decode(buf.subarray(0, n));
            await conn.write(buf.subarray(0, n));
          }
        } catch { /* closed */ }
        conns.delete(conn);
        try {
          conn.close();
        } catch { /* closed */ }
      })();
    }
  })();
  return {
    port: listener.addr.port,
    received: () => received,
    close: async () => {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await serving;
    },
  };
}

/** Reads once, or reports "silence" if nothing arrives within `ms` (a bound, not a sleep). */
async function readOrSilence(
  conn: Deno.Conn,
  ms: number,
): Promise<string | null | "silence"> {
  const buf = new Uint8Array(1024);
  const timer = AbortSignal.timeout(ms);
  const silence = new Promise<"silence">((r) =>
    timer.addEventListener("abort", () => r("silence"))
  );
  const got = conn.read(buf).then((n) =>
    n === null ? null : new TextDecoder().decode(buf.subarray(0, n))
  )
    .catch(() => null);
  return await Promise.race([got, silence]);
}

Deno.test("the fault proxy passes, blackholes, drops and delays traffic as told", async () => {
  const echo = echoServer();
  const proxy = FaultProxy.start(echo.port);
  const port = Number(new URL(proxy.url).port);
  const open = () => Deno.connect({ hostname: "127.0.0.1", port });
  const conns: Deno.Conn[] = [];
  try {
    const c1 = await open();
    conns.push(c1);
    await c1.write(new TextEncoder().encode("ping"));
    assert.equal(await readOrSilence(c1, 10_000), "ping");

    // Changing the mode breaks the open connection.
    proxy.set({ kind: "blackhole" });
    assert.equal(await readOrSilence(c1, 10_000), null);
    const c2 = await open();
    conns.push(c2);
    await c2.write(new TextEncoder().encode("lost"));
    assert.equal(await readOrSilence(c2, 300), "silence");
    assert.ok(!echo.received().includes("lost"));

    proxy.set({ kind: "drop" });
    const c3 = await open();
    conns.push(c3);
    assert.equal(await readOrSilence(c3, 10_000), null);

    proxy.set({ kind: "delay", delayMs: 200 });
    const c4 = await open();
    conns.push(c4);
    const sent = performance.now();
    await c4.write(new TextEncoder().encode("late"));
    assert.equal(await readOrSilence(c4, 10_000), "late");
    assert.ok(performance.now() - sent >= 350, "delayed both ways");
  } finally {
    for (const c of conns) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    await proxy.close();
    await echo.close();
  }
});

Deno.test("a timed-out wait shows each pod event on one line: exits with code and cause, log records by msg", () => {
  const at = 1_000_500;
  const base = { at, pod: "pod-g" };
  assert.deepEqual(
    [
      formatEvent({
        ...base,
        kind: "exit",
        container: "main",
        restart: 2,
        code: 77,
        signal: null,
        cause: "liveness",
      }, 1_000_000),
      formatEvent({
        ...base,
        kind: "start",
        container: "main",
        restart: 3,
        pid: 74,
        leased: false,
      }, 1_000_000),
      formatEvent({
        ...base,
        kind: "restart-scheduled",
        container: "main",
        delayMs: 20_000,
      }, 1_000_000),
      formatEvent({
        ...base,
        kind: "probe-failed",
        restart: 2,
        output: "health marker absent",
      }, 1_000_000),
      formatEvent({
        ...base,
        kind: "log",
        container: "renew",
        record: {
          time: "t",
          level: "INFO",
          msg: "lease reacquired; main container released",
          fencing_token: 3,
        },
      }, 1_000_000),
    ],
    [
      "500 exit main#2 code 77 (liveness)",
      "500 start main#3 pid 74 unleased",
      "500 restart main in 20000 ms",
      "500 probe failed #2: health marker absent",
      "500 renew INFO lease reacquired; main container released fencing_token=3",
    ],
  );
});
