/**
 * `berth-acquire renew` as the sidecar runs it: the real CLI in a child
 * process, after a real `acquire` handed the lease over through a state
 * directory, against a development lease server on 127.0.0.1. Small TTLs
 * (8 s, heartbeat 1 s, the probe's default 4 s lead) keep it quick.
 *
 * No test measures elapsed time. Orderings are asserted on the deadlines the
 * sidecar itself wrote into the marker (boot-time clock, the one the probe
 * reads), and every wait is a bounded poll whose bound only turns "never"
 * into a failure.
 *
 * @module
 */
import assert from "node:assert/strict";
import { cliArgv, runCli, runExecutable } from "../support/cli.ts";
import { type DevServer, startDevServer } from "../../lib/devserver/server.ts";
import { PRESS_MS } from "../../lib/cmd/signals.ts";
import {
  bootNowMs,
  HelperProcess,
  leaseEnv,
  type LeaseEnvOptions,
  leaseRpc,
  type MarkerSnapshot,
  readMarker,
  readStateFile,
  runtimeHolder,
  tempDir,
  waitFor,
} from "../support/lease_env.ts";
import { namespaceUnavailable } from "../../sim/host.ts";

const KEY = { namespace: "prod", name: "web" };
const OTHER = "prod/pod:web-1:uid:0000-other";
const HOLDER = runtimeHolder();
/** Resolution of /proc/uptime, the boot-time clock the marker is written on. */
const BOOT_RESOLUTION_MS = 10;
/** A bound for conditions that take a few heartbeats; a failure limit only. */
const FEW_HEARTBEATS_MS = 15_000;

type Env = Record<string, string>;

function env(
  server: DevServer,
  stateDir: string,
  o: Partial<LeaseEnvOptions> = {},
): Env {
  return leaseEnv({ apiServer: server.url, stateDir, ...o });
}

/** Runs the init container for `e` and checks it acquired. */
async function acquire(e: Env): Promise<void> {
  const r = await runCli(["acquire"], {
    env: e,
    signal: AbortSignal.timeout(60_000),
  });
  assert.equal(r.code, 0, r.stderr);
}

/**
 * Acquires as the init container would, starts the sidecar, and waits until
 * its first Renew refreshed the marker. Returns the sidecar and that marker.
 */
async function startSidecar(
  server: DevServer,
  e: Env,
): Promise<{ sidecar: HelperProcess; marker: MarkerSnapshot }> {
  await acquire(e);
  const handed = readMarker(e.BERTH_STATE_DIR)!.deadlines!;
  const renewsBefore = server.rpcCount("renew");
  const sidecar = new HelperProcess(["renew"], e);
  try {
    const marker = await waitFor(() => {
      const m = readMarker(e.BERTH_STATE_DIR);
      return server.rpcCount("renew") > renewsBefore &&
        m?.deadlines !== undefined &&
        m.deadlines.leaseDeadlineBootMs > handed.leaseDeadlineBootMs && m;
    }, {
      timeoutMs: FEW_HEARTBEATS_MS,
      what: "the first renew to refresh the marker",
    });
    return { sidecar, marker };
  } catch (err) {
    await sidecar[Symbol.asyncDispose]();
    throw new Error(`${(err as Error).message}\nsidecar log:\n${sidecar.log}`);
  }
}

/** Makes another pod the live holder, as a server whose lease was taken over would have it. */
function seize(server: DevServer, token: number): void {
  const now = Date.now();
  server.store.put(KEY.namespace, KEY.name, {
    holder: OTHER,
    fencingToken: token,
    ttlSeconds: 300,
    acquiredAt: now,
    renewedAt: now,
  });
}

/** Runs the installed probe as the webhook's liveness probe does. */
function probe(dir: string) {
  return runExecutable(
    [`${dir}/check`, "check", `${dir}/healthy`, "--max-age", "30s"],
    { signal: AbortSignal.timeout(60_000) },
  );
}

Deno.test("renew renews at the heartbeat and refreshes the marker each time", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const e = env(server, dir.path);
  const { sidecar, marker } = await startSidecar(server, e);
  await using _ = sidecar;
  assert.match(sidecar.log, /msg="sidecar starting".* heartbeat_ms=1000 /);

  const seen = [marker];
  await waitFor(() => {
    const m = readMarker(dir.path);
    if (m?.deadlines && m.text !== seen.at(-1)!.text) seen.push(m);
    return seen.length >= 4;
  }, {
    timeoutMs: 30_000,
    what: "three more marker refreshes",
    intervalMs: 10,
  });
  assert.ok(server.rpcCount("renew") >= 4, "one Renew per refresh");

  for (let i = 0; i < seen.length; i++) {
    const d = seen[i].deadlines!;
    assert.equal(d.leaseDeadlineBootMs - d.gateClosesBootMs, 4_000, "lead");
    if (i === 0) continue;
    const prev = seen[i - 1];
    // Renewals are paced by the heartbeat, never faster: each deadline is a
    // send time plus the TTL, and sends are at least a heartbeat apart.
    assert.ok(
      d.leaseDeadlineBootMs - prev.deadlines!.leaseDeadlineBootMs >=
        1_000 - BOOT_RESOLUTION_MS,
      `refresh ${i} came early: ${
        JSON.stringify(seen.map((s) => s.deadlines))
      }`,
    );
    assert.ok(seen[i].mtimeMs >= prev.mtimeMs, "mtime moves forward");
  }
  assert.ok(seen.at(-1)!.mtimeMs > seen[0].mtimeMs, "mtime refreshed");
  assert.equal(readStateFile(dir.path, "token"), "1");
  const ok = await probe(dir.path);
  assert.deepEqual([ok.code, ok.stdout], [0, ""]);
  assert.doesNotMatch(sidecar.log, /gate closed/);
});

Deno.test("with a heartbeat longer than the probe's 30 s (TTL 120), the marker is rewritten between renewals, its deadlines unchanged", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const e = env(server, dir.path, { ttlSeconds: 120, heartbeatSeconds: 0 });
  const { sidecar, marker } = await startSidecar(server, e);
  await using _ = sidecar;
  assert.match(sidecar.log, /heartbeat_ms=40000 /);
  const renews = server.rpcCount("renew");
  const refreshed = await waitFor(() => {
    const m = readMarker(dir.path);
    return m && m.mtimeMs > marker.mtimeMs && m;
  }, { timeoutMs: 40_000, what: "the marker rewritten", intervalMs: 50 });
  assert.equal(server.rpcCount("renew"), renews, "no renewal in between");
  assert.equal(refreshed.text, marker.text);
  assert.equal((await probe(dir.path)).code, 0);
});

Deno.test("renew answered acquired:false removes the marker within a heartbeat, long before the deadline", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  // A long TTL: the gate would close by the deadline only 16 s after the last
  // renewal, far beyond the bound below, so only the refusal can remove it.
  const e = env(server, dir.path, { ttlSeconds: 20 });
  const { sidecar } = await startSidecar(server, e);
  await using _ = sidecar;

  let last = readMarker(dir.path)!;
  seize(server, 2);
  const goneAtBoot = await waitFor(() => {
    const m = readMarker(dir.path);
    if (m) last = m;
    return m === undefined && bootNowMs();
  }, { timeoutMs: 10_000, what: "the marker to be removed", intervalMs: 10 });
  assert.ok(
    goneAtBoot < last.deadlines!.gateClosesBootMs,
    "removed by the refusal, before the gate deadline",
  );
  const lost = await sidecar.waitForLine(
    /level=WARN msg="renew reports lease held by another: lease lost"/,
  );
  assert.match(lost, new RegExp(`the lease is held by ${OTHER}`));
  const r = await probe(dir.path);
  assert.deepEqual(
    [r.code, r.stdout.trim()],
    [1, `health marker absent: ${dir.path}/healthy`],
  );
  // It keeps trying to take the lease back, without touching the other's.
  await waitFor(() => server.rpcCount("acquire") >= 3, {
    timeoutMs: FEW_HEARTBEATS_MS,
    what: "reacquire attempts",
  });
  assert.equal(server.store.get("prod", "web")?.holder, OTHER);
  assert.equal(readMarker(dir.path), undefined);
});

Deno.test("a server that stops answering gets the marker removed at the gate deadline, not before", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const { sidecar } = await startSidecar(server, env(server, dir.path));
  await using _ = sidecar;

  server.faults.hangAll();
  let latest = readMarker(dir.path)!.deadlines!;
  let lastSeenAtBoot = 0;
  const goneAtBoot = await waitFor(() => {
    // Read before the marker: it was present at least until this instant.
    const boot = bootNowMs();
    const m = readMarker(dir.path);
    if (m) {
      lastSeenAtBoot = boot;
      if (m.deadlines!.gateClosesBootMs > latest.gateClosesBootMs) {
        latest = m.deadlines!;
      }
      return undefined;
    }
    // Read after the absence was seen: never earlier than the removal.
    return bootNowMs();
  }, { timeoutMs: 30_000, what: "the marker to be removed", intervalMs: 10 });
  const { gateClosesBootMs: gate, leaseDeadlineBootMs: deadline } = latest;
  // Not before the deadline minus the lead that the last marker carried...
  assert.ok(
    goneAtBoot >= gate - BOOT_RESOLUTION_MS,
    `removed at boot ${goneAtBoot} ms, gate closes at ${gate} ms`,
  );
  // ...and never still there at the lease deadline itself (the whole lead is
  // the slack here, so a slow test process cannot fail this).
  assert.ok(
    lastSeenAtBoot < deadline,
    `present at boot ${lastSeenAtBoot} ms, lease deadline ${deadline} ms`,
  );
  const reached = await sidecar.waitForLine(
    /level=WARN msg="local lease deadline reached; enforcing"/,
  );
  assert.match(reached, /not confirmed in time/);
  const closed = await sidecar.waitForLine(
    /msg="gate closed: stopping the workload"/,
  );
  assert.match(closed, /not confirmed in time/);
  // Each renewal was bounded, so the sidecar kept trying meanwhile.
  await waitFor(() => server.faults.hanging >= 2, {
    timeoutMs: 10_000,
    what: "a second bounded renewal attempt",
  });
  const r = await probe(dir.path);
  assert.equal(r.code, 1);
  assert.match(r.stdout, /^health marker absent: /);
  server.faults.clear();
});

Deno.test("after a loss, reacquiring restores the marker and writes the new token", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const { sidecar } = await startSidecar(server, env(server, dir.path));
  await using _ = sidecar;

  seize(server, 2);
  await waitFor(() => readMarker(dir.path) === undefined, {
    timeoutMs: FEW_HEARTBEATS_MS,
    what: "the marker to be removed after the loss",
  });
  const released = await leaseRpc(server.url, "release", KEY, {
    holder: OTHER,
    fencingToken: 2,
  });
  assert.equal(released.status, 204);

  const back = await waitFor(() => readMarker(dir.path), {
    timeoutMs: FEW_HEARTBEATS_MS,
    what: "the marker to come back",
  });
  assert.ok(back.deadlines, "the restored marker carries deadlines");
  assert.equal(readStateFile(dir.path, "token"), "3");
  assert.equal(readStateFile(dir.path, "holder"), HOLDER);
  assert.match(
    await sidecar.waitForLine(
      /msg="lease reacquired; main container released"/,
    ),
    /fencing_token=3(\s|$)/,
  );
  const rec = server.store.get("prod", "web");
  assert.deepEqual([rec?.holder, rec?.fencingToken], [HOLDER, 3]);
  // It renews the new lease with the new token.
  const renews = server.rpcCount("renew");
  await waitFor(() => server.rpcCount("renew") > renews + 1, {
    timeoutMs: FEW_HEARTBEATS_MS,
    what: "renewals of the reacquired lease",
  });
  assert.ok(readMarker(dir.path), "still held");
  const r = await probe(dir.path);
  assert.equal(r.code, 0, r.stdout);
});

Deno.test("a sidecar whose state directory is missing creates it, acquires and writes the marker", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const stateDir = `${dir.path}/not/yet`;
  const sidecar = new HelperProcess(["renew"], env(server, stateDir));
  await using _ = sidecar;
  const back = await waitFor(() => readMarker(stateDir), {
    timeoutMs: FEW_HEARTBEATS_MS,
    what: "the marker in the created directory",
  });
  assert.ok(back.deadlines);
  assert.equal(readStateFile(stateDir, "token"), "1");
  assert.equal((await Deno.stat(stateDir)).mode! & 0o777, 0o755);
});

Deno.test("a SIGKILLed sidecar's marker makes check fail by the gate deadline in it", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const { sidecar } = await startSidecar(server, env(server, dir.path));
  await using _ = sidecar;
  sidecar.kill("SIGKILL");
  await sidecar.wait();
  const marker = readMarker(dir.path);
  assert.ok(marker?.deadlines, "a SIGKILLed sidecar leaves its marker behind");
  const gate = marker.deadlines.gateClosesBootMs;

  const before = await probe(dir.path);
  if (bootNowMs() < gate) {
    // The whole probe ran before the deadline: it must have passed.
    assert.deepEqual([before.code, before.stdout], [0, ""]);
  }
  await waitFor(() => bootNowMs() > gate + BOOT_RESOLUTION_MS, {
    timeoutMs: 20_000,
    what: "the boot clock to pass the marker's gate deadline",
  });
  const after = await probe(dir.path);
  assert.equal(after.code, 1);
  assert.match(
    after.stdout,
    new RegExp(
      `^health marker stale: ${dir.path}/healthy gate deadline passed \\S+ ago \\(gate_closes_boottime_ms in the marker\\); the lease sidecar has not confirmed the lease or cannot write the marker \\(its log says which\\)\\n$`,
    ),
  );
  // Nobody removed it: only the deadline in its content failed the probe.
  assert.equal(readMarker(dir.path)?.text, marker.text);
});

Deno.test("a sidecar restarted with a healthy lease never drops the marker and renews with the same token", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  // A long TTL keeps the gate deadline far away, so a slow start of the new
  // sidecar on a loaded machine cannot be mistaken for a failure.
  const e = env(server, dir.path, { ttlSeconds: 20 });
  const { sidecar: first } = await startSidecar(server, e);
  await using _first = first;

  const absences: number[] = [];
  const watching = new AbortController();
  const watcher = (async () => {
    while (!watching.signal.aborted) {
      if (readMarker(dir.path) === undefined) absences.push(bootNowMs());
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  let secondLog = "";
  try {
    first.kill("SIGKILL");
    await first.wait();
    const renewsBefore = server.rpcCount("renew");
    await using second = new HelperProcess(["renew"], e);
    try {
      await waitFor(() => server.rpcCount("renew") >= renewsBefore + 2, {
        timeoutMs: FEW_HEARTBEATS_MS,
        what: "the restarted sidecar to renew twice",
      });
    } finally {
      secondLog = second.log;
    }
  } finally {
    watching.abort();
    await watcher;
  }
  assert.deepEqual(
    absences,
    [],
    `the marker was absent during the restart; new sidecar's log:\n${secondLog}`,
  );
  assert.match(secondLog, /msg="adopted the lease.* fencing_token=1(\s|$)/m);
  assert.doesNotMatch(secondLog, /gate closed|lease lost|confirming/);
  assert.equal(readStateFile(dir.path, "token"), "1");
  const rec = server.store.get("prod", "web");
  assert.deepEqual([rec?.holder, rec?.fencingToken], [HOLDER, 1]);
});

Deno.test("SIGTERM releases the lease once the lead has passed and exits 0; the next holder gets the next token at once", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const { sidecar } = await startSidecar(server, env(server, dir.path));
  await using _ = sidecar;
  sidecar.kill("SIGTERM");
  const status = await sidecar.wait();
  assert.equal(status.code, 0, sidecar.log);
  assert.match(
    sidecar.log,
    /msg="released lease on shutdown".* fencing_token=1(\s|$)/m,
  );
  // Probe mode cannot see the workload: the release waits out the lead.
  assert.match(
    sidecar.log,
    /msg="waiting for the enforcement lead to pass before releasing the lease".* wait_ms=\d+/,
  );
  assert.match(
    sidecar.log,
    /msg="releasing the lease: the enforcement lead has passed since the gate closed"/,
  );
  assert.equal(server.rpcCount("release"), 1);
  assert.equal(readMarker(dir.path), undefined, "gate closed before release");

  const next = await leaseRpc(server.url, "acquire", KEY, {
    holder: OTHER,
    ttlSeconds: 30,
  });
  assert.deepEqual(
    [next.body?.acquired, next.body?.fencingToken],
    [true, 2],
  );
});

Deno.test("a second SIGTERM, or Ctrl-C, during the release does not cut it short; one Ctrl-C (SIGINT twice under deno task) is said once", async () => {
  for (const sig of ["SIGTERM", "SIGINT"] as const) {
    await using server = await startDevServer();
    await using dir = await tempDir();
    const { sidecar } = await startSidecar(server, env(server, dir.path));
    await using _ = sidecar;
    server.faults.hangAll(); // the release will hang until the fault is cleared
    const press = () => sig === "SIGINT" ? sidecar.ctrlC() : sidecar.kill(sig);
    await press();
    await waitFor(
      () => server.faults.hanging > 0 && server.rpcCount("release") > 0,
      {
        timeoutMs: 10_000,
        what: "the release request reaching the server",
      },
    );
    await new Promise((r) => setTimeout(r, PRESS_MS));
    await press();
    await sidecar.waitForLine(/signal received again; still finishing/);
    assert.equal(
      sidecar.exited,
      undefined,
      "still running after the second signal",
    );
    server.faults.clear(); // the hung release is now served
    const status = await sidecar.wait();
    assert.equal(status.code, 0, sidecar.log);
    assert.match(sidecar.log, /msg="released lease on shutdown"/);
    const said = (re: RegExp) => sidecar.lines.filter((l) => re.test(l));
    assert.equal(said(/signal received/).length, 2, sidecar.log);
    assert.equal(
      server.store.get("prod", "web")?.holder,
      "",
      "released on the server",
    );
  }
});

Deno.test("SIGTERM with release-on-shutdown=false exits 0 and keeps the lease", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const e = env(server, dir.path, {
    extra: { BERTH_RELEASE_ON_SHUTDOWN: "false" },
  });
  const { sidecar } = await startSidecar(server, e);
  await using _ = sidecar;
  sidecar.kill("SIGTERM");
  const status = await sidecar.wait();
  assert.equal(status.code, 0, sidecar.log);
  assert.match(sidecar.log, /msg="sidecar shutting down without release"/);
  assert.equal(server.rpcCount("release"), 0);

  const next = await leaseRpc(server.url, "acquire", KEY, {
    holder: OTHER,
    ttlSeconds: 30,
  });
  assert.deepEqual(
    [next.body?.acquired, next.body?.holder, next.body?.fencingToken],
    [false, HOLDER, 1],
  );
});

// ---------------------------------------------------------------------------
// A state volume that turns read-only while the sidecar runs.

async function canMount(): Promise<string | undefined> {
  if (Deno.uid() !== 0) return "needs root to mount a tmpfs";
  const dir = await Deno.makeTempDir({ prefix: "berth-mount-probe-" });
  try {
    const out = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", "size=1m", "tmpfs", dir],
      stderr: "piped",
    }).output();
    if (!out.success) {
      return `cannot mount a tmpfs: ${
        new TextDecoder().decode(out.stderr).trim()
      }`;
    }
    await new Deno.Command("umount", { args: [dir] }).output();
    return undefined;
  } finally {
    await Deno.remove(dir).catch(() => {});
  }
}

const noMount = await canMount();
if (noMount) {
  console.log(`skipped: renew on a read-only state volume: ${noMount}`);
}

async function mount(...args: string[]): Promise<void> {
  const out = await new Deno.Command("mount", { args, stderr: "piped" })
    .output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
}

Deno.test({
  name:
    "a state volume that turns read-only: the sidecar names the marker write that failed, the probe points at it, and the marker comes back",
  ignore: noMount !== undefined,
  async fn() {
    await using server = await startDevServer();
    await using dir = await tempDir();
    await mount("-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", dir.path);
    try {
      const { sidecar } = await startSidecar(server, env(server, dir.path));
      await using _ = sidecar;
      await mount("-o", "remount,ro", dir.path);
      const line = await sidecar.waitForLine(
        /level=WARN msg="enforcer release failed".* detail="the lease is confirmed, but the health marker cannot be written/,
      );
      assert.match(line, /write="health marker"/);
      assert.ok(line.includes(`${dir.path}/healthy`), line);
      // The old marker's deadline passes: the probe's line sends the
      // operator to the sidecar's log rather than blaming the lease.
      const stale = await waitFor(async () => {
        const r = await probe(dir.path);
        return r.code === 1 && r;
      }, { timeoutMs: FEW_HEARTBEATS_MS, what: "the probe to fail" });
      assert.match(
        stale.stdout,
        /or cannot write the marker \(its log says which\)/,
      );
      assert.equal(
        sidecar.lines.filter((l) =>
          l.includes("health marker cannot be written")
        )
          .length,
        1,
        "once per run of failures, not at every heartbeat",
      );
      await mount("-o", "remount,rw", dir.path);
      await sidecar.waitForLine(/the health marker is written again/);
      const ok = await waitFor(async () => {
        const r = await probe(dir.path);
        return r.code === 0 && r;
      }, { timeoutMs: FEW_HEARTBEATS_MS, what: "the probe to pass again" });
      assert.equal(ok.stdout, "");
      sidecar.kill("SIGTERM");
      assert.equal((await sidecar.wait()).code, 0, sidecar.log);
    } finally {
      await new Deno.Command("umount", { args: ["-l", dir.path] }).output();
    }
  },
});

// ---------------------------------------------------------------------------
// Signal mode, end to end, in a private PID namespace.

const noSignalMode = await namespaceUnavailable();
if (noSignalMode) {
  console.log(`skipped: renew signal mode end to end: ${noSignalMode}`);
}

/**
 * PID 1 of the namespace: starts the workload (a copy of `sleep` named
 * `workload`; with `stubborn`, one that ignores SIGTERM), then the sidecar
 * given as arguments, and records how the workload ended.
 */
const POD_SCRIPT = `work=$1; stubborn=$2; shift 2
if [ "$stubborn" = yes ]; then trap '' TERM; fi
"$work/workload" 600 &
w=$!
trap - TERM
"$@" &
wait "$w"
echo "$?" > "$work/workload.status.tmp" && mv "$work/workload.status.tmp" "$work/workload.status"
wait
`;

/** A pod in its own PID namespace: a workload and the real sidecar. */
async function startPod(
  e: Env,
  work: string,
  stubborn: boolean,
): Promise<{ pod: Deno.ChildProcess; output: Promise<Deno.CommandOutput> }> {
  const sleep = ["/bin/sleep", "/usr/bin/sleep"].find((p) => {
    try {
      return Deno.statSync(p).isFile;
    } catch {
      return false;
    }
  });
  assert.ok(sleep, "sleep is installed");
  await Deno.copyFile(sleep, `${work}/workload`);
  await Deno.chmod(`${work}/workload`, 0o755);
  const pod = new Deno.Command("unshare", {
    args: [
      "--pid",
      "--fork",
      "--kill-child",
      "--mount-proc",
      "/bin/sh",
      "-c",
      POD_SCRIPT,
      "pod",
      work,
      stubborn ? "yes" : "no",
      ...cliArgv(["renew"]),
    ],
    env: { ...e, PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  return { pod, output: pod.output() };
}

/** The children of `pid`, as this (outer) PID namespace numbers them. */
function childrenOf(pid: number): { pid: number; comm: string }[] {
  const out: { pid: number; comm: string }[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(rest[1]) === pid) {
        out.push({
          pid: Number(entry.name),
          comm: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")),
        });
      }
    } catch {
      // Exited meanwhile.
    }
  }
  return out;
}

Deno.test({
  name:
    "signal mode: a lost lease kills the workload in the shared PID namespace and removes the marker",
  ignore: noSignalMode !== undefined,
  async fn() {
    await using server = await startDevServer();
    await using dir = await tempDir();
    await using work = await tempDir("berth-pod-");
    const e = env(server, dir.path, {
      extra: { BERTH_ENFORCE: "signal", BERTH_SIGNAL_TARGET: "workload" },
    });
    await acquire(e);
    const { pod, output } = await startPod(e, work.path, false);
    try {
      const renews = server.rpcCount("renew");
      await waitFor(
        () => server.rpcCount("renew") > renews + 1 && readMarker(dir.path),
        { timeoutMs: FEW_HEARTBEATS_MS, what: "the sidecar to renew" },
      );
      assert.equal(
        readStateFile(work.path, "workload.status"),
        undefined,
        "the workload runs while the lease is held",
      );
      seize(server, 2);
      const status = await waitFor(
        () => readStateFile(work.path, "workload.status"),
        { timeoutMs: FEW_HEARTBEATS_MS, what: "the workload to be stopped" },
      );
      // 143: SIGTERM; 137: SIGKILL (the grace defaults to 0).
      assert.ok(["143", "137"].includes(status.trim()), `status ${status}`);
      assert.equal(readMarker(dir.path), undefined);
    } finally {
      try {
        pod.kill("SIGKILL");
      } catch {
        // Already exited.
      }
      const out = await output;
      const log = new TextDecoder().decode(out.stderr);
      if (!/sent SIGTERM to main process/.test(log)) {
        console.log(`sidecar log:\n${log}`);
      }
    }
    const log = new TextDecoder().decode((await output).stderr);
    assert.match(log, /msg="renew reports lease held by another: lease lost"/);
    assert.match(log, /msg="sent SIGTERM to main process".*comm=workload/);
    assert.doesNotMatch(log, /shareProcessNamespace/, "the target was seen");
  },
});

Deno.test({
  name:
    "signal mode: SIGTERM to the sidecar alone releases only after the workload that ignores SIGTERM was killed",
  ignore: noSignalMode !== undefined,
  async fn() {
    await using server = await startDevServer();
    await using dir = await tempDir();
    await using work = await tempDir("berth-pod-");
    const e = env(server, dir.path, {
      extra: {
        BERTH_ENFORCE: "signal",
        BERTH_SIGNAL_TARGET: "workload",
        BERTH_ENFORCE_GRACE_SECONDS: "1",
      },
    });
    await acquire(e);
    const { pod, output } = await startPod(e, work.path, true);
    let log = "";
    try {
      const renews = server.rpcCount("renew");
      await waitFor(
        () => server.rpcCount("renew") > renews && readMarker(dir.path),
        { timeoutMs: FEW_HEARTBEATS_MS, what: "the sidecar to renew" },
      );
      // The pod's PID 1 is unshare's child; the sidecar is its deno child.
      const init = await waitFor(() => childrenOf(pod.pid)[0], {
        timeoutMs: 10_000,
        what: "the pod's init",
      });
      const sidecar = childrenOf(init.pid).find((c) => c.comm !== "workload");
      assert.ok(sidecar, JSON.stringify(childrenOf(init.pid)));
      Deno.kill(sidecar.pid, "SIGTERM");
      await waitFor(() => server.rpcCount("release") > 0, {
        timeoutMs: FEW_HEARTBEATS_MS,
        what: "the release",
      });
      // It logs the release's answer, then exits: wait for that, not the pod.
      await waitFor(
        () => !childrenOf(init.pid).some((c) => c.pid === sidecar.pid),
        { timeoutMs: FEW_HEARTBEATS_MS, what: "the sidecar to exit" },
      );
      const status = await waitFor(
        () => readStateFile(work.path, "workload.status"),
        { timeoutMs: FEW_HEARTBEATS_MS, what: "the workload's end" },
      );
      assert.equal(
        status.trim(),
        "137",
        "the workload ignored SIGTERM: SIGKILL",
      );
    } finally {
      try {
        pod.kill("SIGKILL");
      } catch {
        // Already exited.
      }
      log = new TextDecoder().decode((await output).stderr);
    }
    const at = (re: RegExp) => log.search(re);
    assert.ok(at(/signal=SIGTERM/) >= 0, log);
    assert.ok(at(/signal=SIGKILL/) > at(/signal=SIGTERM/), log);
    assert.ok(
      at(/releasing the lease: the workload is stopped/) > at(/signal=SIGKILL/),
      log,
    );
    assert.ok(at(/msg="released lease on shutdown"/) > 0, log);
  },
});

Deno.test("SIGHUP and SIGQUIT shut the sidecar down as SIGTERM does, with a line that names the signal", async () => {
  for (const sig of ["SIGHUP", "SIGQUIT"] as const) {
    await using server = await startDevServer();
    await using dir = await tempDir();
    const { sidecar } = await startSidecar(server, env(server, dir.path));
    await using _ = sidecar;
    sidecar.kill(sig);
    const status = await sidecar.wait();
    assert.equal(status.code, 0, sidecar.log);
    assert.match(
      sidecar.log,
      new RegExp(`msg="signal received; shutting down".* signal=${sig}`),
    );
    assert.match(
      sidecar.log,
      /msg="released lease on shutdown".* fencing_token=1(\s|$)/m,
    );
  }
});
