/**
 * `berth-acquire run` with real processes: the real CLI supervising real
 * shell commands, against a development lease server on 127.0.0.1.
 *
 * No test measures elapsed time. "Stopped before the deadline" is asserted
 * as an ordering of two wall-clock instants on the same machine: the moment
 * the command's SIGTERM trap ran, and the last renewal the server granted
 * plus the TTL (the server receives a request after `run` sent it, so that
 * bound is never earlier than `run`'s own deadline). Every wait is a
 * bounded poll. TTL 8 s with a 3 s grace gives run's default lead of 4 s:
 * that lead is all the slack a slow test machine gets before SIGTERM must
 * have reached the command.
 *
 * The start-up races (a gate closed while its close is still queued, a
 * signal during the hand-over) cannot be hit on purpose from outside, so
 * those tests run `run` in-process with a scripted server, a fake clock,
 * fake signals and a state directory that pauses at chosen writes.
 *
 * @module
 */
import assert from "node:assert/strict";
import { resolveConfig } from "../../lib/config/config.ts";
import { type DevServer, startDevServer } from "../../lib/devserver/server.ts";
import { createLogger } from "../../lib/obs/log.ts";
import type { MarkerDeadlines } from "../../lib/state/marker.ts";
import { runWith } from "../../lib/run/run.ts";
import {
  EXIT_ACQUIRE_TIMEOUT,
  EXIT_CANCELLED,
  EXIT_CONFIG,
  EXIT_CONFIRMED_LATE,
  EXIT_GATE_DIED,
  EXIT_LEASE_LOST,
} from "../../lib/run/run_supervise.ts";
import {
  EXIT_CANNOT_EXECUTE,
  EXIT_COMMAND_NOT_FOUND,
} from "../../lib/gate/process_group.ts";
import { PRESS_MS, type SignalSource } from "../../lib/cmd/signals.ts";
import { gatedLauncher } from "../../lib/run/launcher.ts";
import { directLauncher } from "../support/direct_launcher.ts";
import { StateDir } from "../../lib/state/state_dir.ts";
import { runCli } from "../support/cli.ts";
import { FakeClock } from "../support/fake_clock.ts";
import { record, ScriptedClient } from "../support/scripted_client.ts";
import { HelperProcess, tempDir, waitFor } from "../support/lease_env.ts";
import { makeTestPki, opensslMissing } from "../support/tls.ts";

const HOLDER = "prod/run-test";
const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
const OTHER = "prod/other";
/** The TTL of the CLI runs. */
const TTL_SECONDS = 8;
/** A failure bound for conditions that take a few heartbeats. */
const BOUND_MS = 20_000;

function runEnv(
  server: DevServer | { url: string },
  lease: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    NO_COLOR: "1",
    BERTH_API_SERVER: server.url,
    BERTH_LEASE_NAME: lease,
    BERTH_LEASE_NAMESPACE: "prod",
    BERTH_HOLDER_IDENTITY: HOLDER,
    BERTH_TTL_SECONDS: String(TTL_SECONDS),
    BERTH_ENFORCE_GRACE_SECONDS: "3",
    ...extra,
  };
}

/** Lets another holder have `lease` for `ttlSeconds`, as if it had taken it over. */
function giveToOther(
  server: DevServer,
  lease: string,
  ttlSeconds = 60,
): number {
  const token = (server.store.get("prod", lease)?.fencingToken ?? 0) + 1;
  const now = Date.now();
  server.store.put("prod", lease, {
    holder: OTHER,
    fencingToken: token,
    ttlSeconds,
    acquiredAt: now,
    renewedAt: now,
  });
  return token;
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

function read(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return undefined;
  }
}

/** Whether `pid` is gone or a zombie (dead, waiting for a parent that may never reap it). */
function dead(pid: number): boolean {
  const stat = read(`/proc/${pid}/stat`);
  if (stat === undefined) return true;
  const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
  return state === "Z" || state === "X";
}

/** Writes `body` as a shell script in `dir` and returns `["sh", path]`. */
function script(dir: string, name: string, body: string): string[] {
  const path = `${dir}/${name}.sh`;
  Deno.writeTextFileSync(path, `D=${JSON.stringify(dir)}\n${body}`);
  return ["sh", path];
}

/**
 * SIGKILLs whatever is left of the command: its group (the leader wrote its
 * PID first in `pids`) and every process listed there, so no test leaks
 * processes even when the group was not what it should be. Declare it after
 * the `run` process: it must act before that is disposed, because a leftover
 * holding run's stdout would keep the disposal waiting for the pipe.
 */
function cleanup(dir: string): Disposable {
  return {
    [Symbol.dispose]() {
      const pids = (read(`${dir}/pids`) ?? "").split("\n").filter(Boolean)
        .map(Number);
      const targets = pids.length > 0 ? [-pids[0], ...pids] : [];
      for (const pid of targets) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    },
  };
}

/**
 * The command of the loss tests: records its deadline, forks a grandchild
 * that ignores SIGTERM (only SIGKILL stops it), and records when its own
 * SIGTERM trap ran.
 */
const LOSS_SCRIPT = `echo $$ >> "$D/pids"
(trap '' TERM; exec sleep 1000) &
echo $! > "$D/grandchild"; echo $! >> "$D/pids"
trap 'date +%s%3N > "$D/termed.tmp"; mv "$D/termed.tmp" "$D/termed"; exit 0' TERM
sleep 1000 & echo $! >> "$D/pids"
echo "$BERTH_LEASE_EXPIRES_AT" > "$D/expires.tmp"; mv "$D/expires.tmp" "$D/expires"
wait $!
`;

/**
 * The latest deadline `run` can have for `lease`: the wall-clock time the
 * server last granted it a renewal (or the acquisition), plus the TTL. `run`
 * sent that request earlier and counts its deadline from the send, so its
 * own deadline is at or before this. Read it before another holder takes
 * the lease (that rewrites the record).
 */
function serverDeadline(server: DevServer, lease: string): number {
  const renewedAt = server.store.get("prod", lease)?.renewedAt;
  assert.ok(renewedAt, `the server never granted ${lease}`);
  return renewedAt + TTL_SECONDS * 1000;
}

/**
 * Checks a loss test's records after `run` exited: SIGTERM reached the
 * command before `deadline` (from {@linkcode serverDeadline}, taken when
 * no renewal could succeed any more), and the group is gone.
 */
function assertStoppedBeforeDeadline(dir: string, deadline: number): void {
  // The deadline the command was given when it started is never later than
  // the one the server's record allows.
  const given = Date.parse(read(`${dir}/expires`)!.trim());
  assert.ok(
    given <= deadline,
    `BERTH_LEASE_EXPIRES_AT ${read(`${dir}/expires`)} vs ${deadline}`,
  );
  const termedAt = Number(read(`${dir}/termed`)!.trim());
  assert.ok(
    termedAt < deadline,
    `SIGTERM reached the command at ${termedAt}, not before the deadline ${deadline} of the last renewal the server granted`,
  );
  const grandchild = Number(read(`${dir}/grandchild`));
  assert.ok(
    dead(grandchild),
    `the grandchild ${grandchild} outlived run: the process group was not stopped`,
  );
}

Deno.test("run: the command gets token, holder and deadline (not the API key); its status is run's; the lease is released after it", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const state = `${dir.path}/state`;
  Deno.mkdirSync(state);
  const argv = script(
    dir.path,
    "env",
    `printf '%s\\n%s\\n%s\\n%s\\n' "$BERTH_FENCING_TOKEN" "$BERTH_HOLDER" "$BERTH_LEASE_EXPIRES_AT" "\${BERTH_API_KEY-unset}" > "$D/env"
cat "$D/state/token" > "$D/token-file"; test -f "$D/state/healthy" && echo yes > "$D/marker-seen"
exit 3
`,
  );
  const r = await runCli(["run", "--", ...argv], {
    env: runEnv(server, "env", {
      BERTH_API_KEY: "s3cret-key",
      BERTH_STATE_DIR: state,
    }),
    signal: AbortSignal.timeout(60_000),
  });
  assert.equal(r.code, 3, r.stderr);
  const [token, holder, expires, apiKey] = read(`${dir.path}/env`)!.split("\n");
  const record = server.store.get("prod", "env")!;
  assert.equal(token, String(record.fencingToken));
  assert.equal(read(`${dir.path}/token-file`), token);
  assert.equal(holder, HOLDER);
  assert.match(expires, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal(apiKey, "unset");
  assert.equal(read(`${dir.path}/marker-seen`), "yes\n");
  assert.ok(!r.stderr.includes("s3cret-key"));
  // Its own acquire said "lease acquired"; a sidecar's adoption line would
  // only mislead.
  assert.match(r.stderr, /msg="lease acquired"/);
  assert.doesNotMatch(r.stderr, /adopted the lease/);
  // Released: the record is a tombstone, and the marker is gone.
  assert.equal(record.holder, "");
  assert.ok(!exists(`${state}/healthy`));
});

Deno.test({
  name:
    "run over HTTPS: the command's environment does not get the trust-store choice the helper made for itself",
  ignore: opensslMissing() !== undefined,
  async fn() {
    await using pki = await makeTestPki({ names: ["127.0.0.1"] });
    await using server = await startDevServer({
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
    });
    await using dir = await tempDir();
    const argv = script(
      dir.path,
      "store",
      `printf '%s' "\${DENO_TLS_CA_STORE-unset}" > "$D/store"
`,
    );
    const r = await runCli([
      "run",
      "--ca-bundle-file",
      pki.caCert,
      "--",
      ...argv,
    ], {
      env: runEnv({ url: `https://127.0.0.1:${server.port}` }, "store"),
      signal: AbortSignal.timeout(60_000),
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(read(`${dir.path}/store`), "unset");
  },
});

Deno.test("run: exit status table (config 78, not found 127, not executable 126, signalled 128+N, timeout 76)", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const notExecutable = `${dir.path}/plain-file`;
  Deno.writeTextFileSync(notExecutable, "#!/bin/sh\n");
  Deno.chmodSync(notExecutable, 0o644);
  giveToOther(server, "timeout");
  const ran = `${dir.path}/ran`;
  const cases: Array<[string, string[], Record<string, string>, number]> = [
    [
      "no lease name",
      ["run", "--", "true"],
      { BERTH_LEASE_NAME: "" },
      EXIT_CONFIG,
    ],
    ["no command", ["run", "--"], {}, EXIT_CONFIG],
    ["no --", ["run", "true"], {}, EXIT_CONFIG],
    ["bad flag", ["run", "--nope", "--", "true"], {}, EXIT_CONFIG],
    [
      "startup-gate",
      ["run", "--", "true"],
      { BERTH_MODE: "startup-gate" },
      EXIT_CONFIG,
    ],
    ["not found", ["run", "--", `${dir.path}/missing`], {
      BERTH_LEASE_NAME: "nf",
    }, EXIT_COMMAND_NOT_FOUND],
    [
      "not executable",
      ["run", "--", notExecutable],
      { BERTH_LEASE_NAME: "nx" },
      EXIT_CANNOT_EXECUTE,
    ],
    ["signalled", ["run", "--", "sh", "-c", "kill -USR1 $$"], {
      BERTH_LEASE_NAME: "sig",
    }, 128 + 10],
    [
      "acquire timeout",
      ["run", "--acquire-timeout", "300ms", "--", "sh", "-c", `touch ${ran}`],
      { BERTH_LEASE_NAME: "timeout" },
      EXIT_ACQUIRE_TIMEOUT,
    ],
  ];
  const results = await Promise.all(
    cases.map(([, args, extra]) =>
      runCli(args, {
        env: runEnv(server, "codes", extra),
        signal: AbortSignal.timeout(60_000),
      })
    ),
  );
  cases.forEach(([name, , , want], i) =>
    assert.equal(results[i].code, want, `${name}: ${results[i].stderr}`)
  );
  assert.ok(!exists(ran), "the command ran without the lease");
  // A command that cannot start is found out before the lease is taken.
  assert.equal(server.store.get("prod", "nf"), undefined);
  assert.equal(server.store.get("prod", "nx"), undefined);
  assert.match(
    results[5].stderr,
    /cannot be executed; the lease was not acquired.*no such file/,
  );
  assert.match(results[6].stderr, /has no execute permission/);
  assert.match(results[2].stderr, /put the command after --/);
  // An empty command after -- gets the same hint, said once.
  assert.equal(
    results[1].stderr.match(/put the command after --/g)?.length,
    1,
    results[1].stderr,
  );
});

Deno.test("run without --: with JSON logs the hint is part of the one JSON error line", async () => {
  await using server = await startDevServer();
  const r = await runCli(["run", "true"], {
    env: runEnv(server, "json-hint", { BERTH_LOG_FORMAT: "json" }),
    signal: AbortSignal.timeout(60_000),
  });
  assert.equal(r.code, EXIT_CONFIG, r.stderr);
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.length, 1, r.stderr);
  const record = JSON.parse(lines[0]);
  assert.equal(record.level, "ERROR");
  assert.match(
    record.msg,
    /^invalid configuration: unexpected argument "true": put the command after --/,
  );
});

Deno.test("run -- NAME looks NAME up in PATH as the start would, before acquiring", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const missing = await runCli(["run", "--", "berth-no-such-command"], {
    env: runEnv(server, "path", { BERTH_LEASE_NAME: "path-missing" }),
    signal: AbortSignal.timeout(60_000),
  });
  assert.equal(missing.code, EXIT_COMMAND_NOT_FOUND, missing.stderr);
  assert.match(missing.stderr, /berth-no-such-command\\?": not found in PATH/);
  assert.equal(server.store.get("prod", "path-missing"), undefined);
  Deno.mkdirSync(`${dir.path}/bin/tool`, { recursive: true });
  const inDir = await runCli(["run", "--", "tool"], {
    env: runEnv(server, "path", {
      BERTH_LEASE_NAME: "path-dir",
      PATH: `${dir.path}/bin:${Deno.env.get("PATH")}`,
    }),
    signal: AbortSignal.timeout(60_000),
  });
  assert.equal(inDir.code, EXIT_CANNOT_EXECUTE, inDir.stderr);
  assert.match(inDir.stderr, /tool is a directory/);
  assert.equal(server.store.get("prod", "path-dir"), undefined);
});

Deno.test("run: a signal while waiting for the lease ends the wait (77); the command never runs", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  giveToOther(server, "wait");
  const ran = `${dir.path}/ran`;
  await using waiting = new HelperProcess(
    ["run", "--", "sh", "-c", `touch ${ran}`],
    runEnv(server, "wait"),
  );
  await waiting.waitForLine(/lease held by another, waiting/);
  waiting.kill("SIGQUIT");
  assert.equal((await waiting.wait()).code, EXIT_CANCELLED, waiting.log);
  assert.ok(!exists(ran));
  assert.equal(server.store.get("prod", "wait")?.holder, OTHER);
});

Deno.test("run: renewal denied (another holder took it) -> whole group stopped before the deadline, exit 75, the other's lease untouched", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  await using run = new HelperProcess(
    ["run", "--", ...script(dir.path, "loss", LOSS_SCRIPT)],
    runEnv(server, "deny"),
  );
  using _cleanup = cleanup(dir.path);
  await waitFor(() => exists(`${dir.path}/expires`), {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  // No renewal can succeed after this (the server runs in this process).
  const deadline = serverDeadline(server, "deny");
  giveToOther(server, "deny");
  const status = await run.wait(BOUND_MS);
  assert.equal(status.code, EXIT_LEASE_LOST, run.log);
  assertStoppedBeforeDeadline(dir.path, deadline);
  assert.match(run.log, /lease lost/);
  assert.match(run.log, /sending SIGKILL/);
  assert.equal(server.store.get("prod", "deny")?.holder, OTHER);
});

Deno.test("run: the server hangs, then disappears -> group stopped before the deadline, exit 75", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  await using run = new HelperProcess(
    ["run", "--", ...script(dir.path, "loss", LOSS_SCRIPT)],
    runEnv(server, "hang"),
  );
  using _cleanup = cleanup(dir.path);
  await waitFor(() => exists(`${dir.path}/expires`), {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  server.faults.hangAll();
  await waitFor(() => exists(`${dir.path}/termed`), {
    timeoutMs: BOUND_MS,
    what: "the command to be stopped",
  });
  // Read now, not at hangAll(): a renewal already past the fault switch may
  // still have been granted after it, and every grant run counted before
  // stopping the command was made by now.
  const deadline = serverDeadline(server, "hang");
  await server.close();
  const status = await run.wait(BOUND_MS);
  assert.equal(status.code, EXIT_LEASE_LOST, run.log);
  assertStoppedBeforeDeadline(dir.path, deadline);
  assert.match(run.log, /not confirmed in time/);
});

Deno.test("run: SIGTERM is forwarded; the lease is released only after the command is gone", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const d = dir.path;
  await using run = new HelperProcess(
    [
      "run",
      "--",
      ...script(
        d,
        "slow-exit",
        `echo $$ >> "$D/pids"
trap 'touch "$D/got-term"; i=0; while [ ! -e "$D/go" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; touch "$D/exited"; exit 7' TERM
sleep 1000 & echo $! >> "$D/pids"
touch "$D/ready"
wait $!
`,
      ),
    ],
    runEnv(server, "fwd"),
  );
  using _cleanup = cleanup(d);
  await waitFor(() => exists(`${d}/ready`), {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  // A supervisor's SIGTERM, repeated, is forwarded each time and forces
  // nothing.
  const forwarded = () => run.lines.filter((l) => /forwarding/.test(l)).length;
  run.kill("SIGTERM");
  await waitFor(() => forwarded() === 1, {
    timeoutMs: BOUND_MS,
    what: "the first SIGTERM to be forwarded",
  });
  run.kill("SIGTERM");
  await waitFor(() => exists(`${d}/got-term`), {
    timeoutMs: BOUND_MS,
    what: "the command to get SIGTERM",
  });
  await waitFor(
    () => forwarded() > 1,
    {
      timeoutMs: BOUND_MS,
      what: "the second SIGTERM to be forwarded",
    },
  );
  // The command still runs: the lease must still be ours.
  assert.equal(server.store.get("prod", "fwd")?.holder, HOLDER);
  assert.equal(run.exited, undefined);
  Deno.writeTextFileSync(`${d}/go`, "");
  const status = await run.wait(BOUND_MS);
  assert.equal(status.code, 7, run.log);
  assert.ok(exists(`${d}/exited`));
  // Released: another holder gets it at once.
  const grant = server.store.acquire("prod", "fwd", OTHER, 10, Date.now());
  assert.equal(grant.acquired, true);
});

Deno.test("run: one Ctrl-C (SIGINT twice, as under deno task) is forwarded once; another sends SIGKILL, said once", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const d = dir.path;
  await using run = new HelperProcess(
    [
      "run",
      "--",
      ...script(
        d,
        "stubborn",
        `echo $$ >> "$D/pids"
trap 'echo INT >> "$D/got"' INT
trap 'echo TERM >> "$D/got"' TERM
touch "$D/ready"
while :; do sleep 0.05; done
`,
      ),
    ],
    runEnv(server, "ctrl-c"),
  );
  using _cleanup = cleanup(d);
  await waitFor(() => exists(`${d}/ready`), {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  const pid = Number(read(`${d}/pids`));
  await run.ctrlC();
  await waitFor(() => read(`${d}/got`) === "INT\n", {
    timeoutMs: BOUND_MS,
    what: "the command to get SIGINT",
  });
  await delay(PRESS_MS);
  const said = (re: RegExp) => run.lines.filter((l) => re.test(l)).length;
  assert.equal(said(/forwarding it to the command/), 1, run.log);
  assert.ok(!dead(pid), "the command cleans up as it likes");
  await run.ctrlC();
  const status = await run.wait(BOUND_MS);
  assert.equal(status.code, 137, run.log);
  assert.ok(dead(pid), "the command was killed");
  assert.equal(said(/signal received again; sending SIGKILL/), 1, run.log);
  assert.equal(
    said(/left processes|gate died|stopping the command/),
    0,
    run.log,
  );
  assert.equal(read(`${d}/got`), "INT\n");
  assert.equal(server.store.get("prod", "ctrl-c")?.holder, "");
});

Deno.test("run: SIGHUP is forwarded to the command, which decides what it means", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const d = dir.path;
  await using run = new HelperProcess(
    [
      "run",
      "--",
      ...script(
        d,
        "hup",
        `echo $$ >> "$D/pids"
trap 'touch "$D/got-hup"; exit 0' HUP
sleep 1000 & echo $! >> "$D/pids"
touch "$D/ready"
wait $!
`,
      ),
    ],
    runEnv(server, "hup"),
  );
  using _cleanup = cleanup(d);
  await waitFor(() => exists(`${d}/ready`), {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  run.kill("SIGHUP");
  const status = await run.wait(BOUND_MS);
  assert.equal(status.code, 0, run.log);
  assert.ok(exists(`${d}/got-hup`));
  assert.equal(server.store.get("prod", "hup")?.holder, "");
});

Deno.test("run --restart-on-reacquire: after a loss the command runs again, with the new token", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const d = dir.path;
  const tokens = () => (read(`${d}/tokens`) ?? "").split("\n").filter(Boolean);
  await using run = new HelperProcess(
    [
      "run",
      "--restart-on-reacquire",
      "--",
      ...script(
        d,
        "restart",
        `echo $$ >> "$D/pids"
sleep 1000 & echo $! >> "$D/pids"
echo "$BERTH_FENCING_TOKEN" >> "$D/tokens"
wait $!
`,
      ),
    ],
    runEnv(server, "again"),
  );
  using _cleanup = cleanup(d);
  await waitFor(() => tokens().length === 1, {
    timeoutMs: BOUND_MS,
    what: "the first start",
  });
  const otherToken = giveToOther(server, "again", 1);
  await waitFor(() => tokens().length === 2, {
    timeoutMs: BOUND_MS,
    what: "the command to run again after the reacquire",
  });
  const [first, second] = tokens().map(Number);
  assert.ok(first < otherToken && otherToken < second, tokens().join(","));
  assert.equal(server.store.get("prod", "again")?.holder, HOLDER);
  run.kill("SIGTERM");
  const status = await run.wait(BOUND_MS);
  assert.equal(status.code, 128 + 15, run.log);
  assert.equal(server.store.get("prod", "again")?.holder, "");
});

/** Signals delivered by the test, so one can arrive at an exact point. */
class FakeSignals implements SignalSource {
  #handlers = new Map<Deno.Signal, Set<() => void>>();
  addSignalListener(signal: Deno.Signal, handler: () => void): void {
    const set = this.#handlers.get(signal) ?? new Set();
    set.add(handler);
    this.#handlers.set(signal, set);
  }
  removeSignalListener(signal: Deno.Signal, handler: () => void): void {
    this.#handlers.get(signal)?.delete(handler);
  }
  send(signal: Deno.Signal): void {
    for (const h of [...this.#handlers.get(signal) ?? []]) h();
  }
}

/**
 * A state directory whose marker writes the test can intercept: `afterHandOver`
 * runs once, right after the first marker write (the hand-over's), and
 * {@linkcode HookedState.holdNextMarkerWrite} parks the next one.
 */
class HookedState extends StateDir {
  afterHandOver: (() => Promise<void> | void) | undefined;
  /** How many times the marker was removed (a close applied). */
  removals = 0;
  #held: Promise<void> | undefined;
  /** True once a parked write is waiting. */
  parked = false;

  override async writeMarker(d: MarkerDeadlines | undefined): Promise<void> {
    const held = this.#held;
    if (held) {
      this.#held = undefined;
      this.parked = true;
      await held;
    }
    await super.writeMarker(d);
    const hook = this.afterHandOver;
    this.afterHandOver = undefined;
    await hook?.();
  }

  override async removeMarker(): Promise<void> {
    await super.removeMarker();
    this.removals++;
  }

  /** Parks the next marker write until the returned function is called. */
  holdNextMarkerWrite(): () => void {
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#held = promise;
    return resolve;
  }
}

/** `run` started in-process, and what the test drives it with. */
interface InProcessRun {
  clock: FakeClock;
  client: ScriptedClient;
  signals: FakeSignals;
  state: HookedState;
  /** Log lines so far. */
  lines: string[];
  /** run's exit status. */
  result: Promise<number>;
  /** How many times the command was started so far. */
  starts(): number;
}

/**
 * Starts `run` in-process (TTL 4 s, lead 2 s, state directory `<dir>/state`)
 * against a scripted server whose first Acquire grants token 5.
 */
function startInProcess(
  dir: string,
  command: string[],
  o: {
    restart?: boolean;
    afterHandOver?: (r: InProcessRun) => Promise<void> | void;
  } = {},
): InProcessRun {
  Deno.mkdirSync(`${dir}/state`);
  const clock = new FakeClock();
  const client = new ScriptedClient(() => clock.now());
  client.queue.push({ kind: "acquired", lease: fresh(5) });
  const lines: string[] = [];
  const config = resolveConfig({
    BERTH_API_SERVER: "http://127.0.0.1:9",
    BERTH_LEASE_NAME: "inproc",
    BERTH_LEASE_NAMESPACE: "prod",
    BERTH_HOLDER_IDENTITY: HOLDER,
    BERTH_TTL_SECONDS: "4",
    BERTH_ENFORCE_GRACE_SECONDS: "1",
    BERTH_ENFORCE_LEAD_SECONDS: "2",
    BERTH_STATE_DIR: `${dir}/state`,
  }, {});
  const state = new HookedState(config.stateDir);
  const signals = new FakeSignals();
  const r: InProcessRun = {
    clock,
    client,
    signals,
    state,
    lines,
    result: Promise.resolve(0),
    starts: () =>
      lines.filter((l) => l.includes('msg="running the command"')).length,
  };
  if (o.afterHandOver) state.afterHandOver = () => o.afterHandOver!(r);
  r.result = runWith({
    config,
    command,
    restart: o.restart ?? false,
    healthAddr: undefined,
    state,
    logger: createLogger({ level: "DEBUG", write: (l) => lines.push(l) }),
    clock,
    client,
    signalSource: signals,
    // A separate gate process cannot share the fake clock.
    launcher: directLauncher,
  });
  return r;
}

/** A fresh grant of `token` to HOLDER, as the server answers it. */
function fresh(token: number) {
  return record(HOLDER, token, {
    acquiredAt: "2026-05-07T00:00:00Z",
    expiresAt: "2026-05-07T00:00:04Z",
  });
}

/**
 * The call of kind `rpc` still waiting for an answer, polled for (bounded);
 * with `tick`, the fake clock moves on in small steps meanwhile (the
 * renewer waits a heartbeat between calls).
 */
function pendingCall(
  r: InProcessRun,
  rpc: "acquire" | "renew" | "release",
  tick = false,
) {
  return waitFor(async () => {
    const call = r.client.calls.findLast((c) => c.rpc === rpc && !c.done);
    if (!call && tick) await r.clock.advance(50);
    return call;
  }, { timeoutMs: BOUND_MS, what: `a pending ${rpc} call` });
}

/**
 * Waits (bounded) for `run` to return, answering its shutdown Release and,
 * with `tick`, moving the fake clock on in small steps (the command's stop
 * polls on it).
 */
async function finish(r: InProcessRun, tick = false): Promise<number> {
  let code: number | undefined;
  let error: unknown;
  r.result.then((c) => code = c, (e) => error = e);
  await waitFor(async () => {
    if (error) throw error;
    for (const c of r.client.calls) {
      if (c.rpc === "release" && !c.done) c.answer({ kind: "released" });
    }
    if (code === undefined && tick) await r.clock.advance(50);
    return code !== undefined;
  }, { timeoutMs: BOUND_MS, what: "run to return" });
  return code!;
}

Deno.test("run: a handed-over lease whose gate closed during the hand-over is confirmed before the command starts", async () => {
  await using dir = await tempDir();
  const r = startInProcess(
    dir.path,
    script(dir.path, "start", `echo "$BERTH_FENCING_TOKEN" > "$D/started"`),
    // The state volume was slow: the gate-closing time (send + 4 s - 2 s)
    // passed while the hand-over wrote it.
    { afterHandOver: (r) => r.clock.advance(2_500) },
  );
  const renew = await pendingCall(r, "renew");
  assert.equal(r.starts(), 0, r.lines.join(""));
  renew.answer({ kind: "acquired", lease: fresh(5) });
  // The command exits at once; its group is then polled on the fake clock.
  assert.equal(await finish(r, true), 0, r.lines.join(""));
  assert.equal(read(`${dir.path}/started`), "5\n");
  const renewed = r.lines.findIndex((l) => l.includes('msg="lease renewed"'));
  assert.ok(
    renewed >= 0 &&
      renewed <
        r.lines.findIndex((l) => l.includes('msg="running the command"')),
    r.lines.join(""),
  );
  assert.equal(r.client.of("release")[0]?.token, 5);
});

Deno.test("run --restart-on-reacquire: a close decided while the reopen is still being applied stops the command again", async () => {
  await using dir = await tempDir();
  const d = dir.path;
  const r = startInProcess(
    d,
    script(
      d,
      "restart",
      `echo $$ >> "$D/pids"
echo "$BERTH_FENCING_TOKEN" >> "$D/tokens"
exec sleep 1000
`,
    ),
    { restart: true },
  );
  using _cleanup = cleanup(d);
  await waitFor(() => read(`${d}/tokens`) === "5\n", {
    timeoutMs: BOUND_MS,
    what: "the first start",
  });
  (await pendingCall(r, "renew")).answer({
    kind: "conflict",
    message: "held by another identity",
  });
  // The stop polls the group on the fake clock.
  await waitFor(async () => {
    await r.clock.advance(50);
    return r.lines.some((l) => l.includes("the command was stopped"));
  }, { timeoutMs: BOUND_MS, what: "the command to be stopped" });
  // Reacquire, with the reopen parked at its marker write; meanwhile the new
  // grant's gate-closing time passes and the renewer decides to close.
  const release = r.state.holdNextMarkerWrite();
  const acquire = await pendingCall(r, "acquire", true);
  acquire.answer({ kind: "acquired", lease: fresh(6) });
  await waitFor(() => r.state.parked, {
    timeoutMs: BOUND_MS,
    what: "the reopen to reach its marker write",
  });
  await r.clock.advanceTo(acquire.at! + 2_000);
  const removals = r.state.removals;
  release();
  await waitFor(() => r.state.removals > removals, {
    timeoutMs: BOUND_MS,
    what: "the queued close to be applied",
  });
  // The renewer alone decides: the command started while it held token 6,
  // and the close it decided next stops it, whatever the marker write did.
  await waitFor(async () => {
    await r.clock.advance(50);
    return (read(`${d}/pids`) ?? "").split("\n").filter(Boolean).map(Number)
      .every(dead);
  }, { timeoutMs: BOUND_MS, what: "the restarted command to be stopped" });
  r.signals.send("SIGTERM");
  assert.equal(await finish(r, true), EXIT_CANCELLED, r.lines.join(""));
  assert.equal(r.client.of("release")[0]?.token, 6);
  // It ran before: the wait it ends is for running it again.
  assert.ok(
    r.lines.some((l) =>
      l.includes("stopped while waiting to run the command again")
    ),
    r.lines.join(""),
  );
  assert.ok(!r.lines.some((l) => l.includes("before the command started")));
});

Deno.test("run: a signal during the hand-over is not lost: the command never starts, the lease is released, exit 77", async () => {
  await using dir = await tempDir();
  const r = startInProcess(
    dir.path,
    script(dir.path, "start", `touch "$D/started"`),
    { afterHandOver: (r) => r.signals.send("SIGTERM") },
  );
  assert.equal(await finish(r), EXIT_CANCELLED, r.lines.join(""));
  assert.equal(r.starts(), 0, r.lines.join(""));
  assert.ok(
    r.lines.some((l) => l.includes("stopped before the command started")),
  );
  assert.ok(!exists(`${dir.path}/started`), "the command ran");
  assert.equal(r.client.of("release")[0]?.token, 5);
  assert.ok(!exists(`${dir.path}/state/healthy`));
});

Deno.test("run fence: run SIGKILLed -> its gate stops the whole command at once, before the deadline", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  await using run = new HelperProcess(
    ["run", "--", ...script(dir.path, "loss", LOSS_SCRIPT)],
    // Its private state directory, which a SIGKILLed run cannot remove.
    { ...runEnv(server, "killed"), TMPDIR: dir.path },
  );
  using _cleanup = cleanup(dir.path);
  await waitFor(() => exists(`${dir.path}/expires`), {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  run.kill("SIGKILL");
  await run.wait(BOUND_MS);
  const deadline = serverDeadline(server, "killed");
  const grandchild = Number(read(`${dir.path}/grandchild`));
  await waitFor(() => exists(`${dir.path}/termed`) && dead(grandchild), {
    timeoutMs: BOUND_MS,
    what: "the command and its TERM-ignoring grandchild to be stopped",
  });
  assertStoppedBeforeDeadline(dir.path, deadline);
});

Deno.test("run fence: run frozen past the TTL -> the command stops by the last confirmed deadline; after SIGCONT run says so", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  await using run = new HelperProcess(
    ["run", "--", ...script(dir.path, "loss", LOSS_SCRIPT)],
    runEnv(server, "frozen"),
  );
  using _cleanup = cleanup(dir.path);
  await waitFor(() => exists(`${dir.path}/expires`), {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  run.kill("SIGSTOP");
  // Frozen: no renewal reaches the server after this one.
  const deadline = serverDeadline(server, "frozen");
  const grandchild = Number(read(`${dir.path}/grandchild`));
  try {
    await waitFor(() => exists(`${dir.path}/termed`) && dead(grandchild), {
      timeoutMs: BOUND_MS,
      what: "the command to be stopped while run is frozen",
    });
    assertStoppedBeforeDeadline(dir.path, deadline);
    await waitFor(() => Date.now() > deadline + 500, {
      timeoutMs: BOUND_MS,
      what: "the lease deadline to pass",
    });
  } finally {
    run.kill("SIGCONT");
  }
  const status = await run.wait(BOUND_MS);
  assert.equal(status.code, EXIT_LEASE_LOST, run.log);
  assert.match(run.log, /deadline passed before run could act/);
  assert.match(run.log, /stopped by its gate at the last confirmed deadline/);
  assert.doesNotMatch(
    run.log,
    /the command was stopped: the lease is not held/,
  );
});

Deno.test("run fence: a worker that escaped with setsid is stopped before run releases", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const d = dir.path;
  await using run = new HelperProcess(
    [
      "run",
      "--",
      ...script(
        d,
        "daemon",
        `export D
setsid sh -c 'echo $$ > "$D/daemon"; echo $$ >> "$D/pids"; exec sleep 1000' &
while [ ! -s "$D/daemon" ]; do sleep 0.02; done
exit 0
`,
      ),
    ],
    runEnv(server, "setsid"),
  );
  using _cleanup = cleanup(d);
  const status = await run.wait(BOUND_MS);
  const daemon = Number(read(`${d}/daemon`));
  assert.ok(daemon > 0, run.log);
  assert.ok(dead(daemon), `the setsid worker ${daemon} outlived run`);
  assert.equal(status.code, 0, run.log);
  assert.equal(server.store.get("prod", "setsid")?.holder, "", "released");
});

Deno.test("run: a renewal confirmed while the command is being stopped: exit 79 (confirmed too late), not 'the lease is not held'", async () => {
  await using dir = await tempDir();
  const d = dir.path;
  const r = startInProcess(
    d,
    script(d, "late", `echo $$ >> "$D/pids"\nexec sleep 1000\n`),
  );
  using _cleanup = cleanup(d);
  await waitFor(() => r.starts() === 1 && read(`${d}/pids`), {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  // The first renewal gets no answer within its bound; the second is sent
  // before the gate closes (acquired + 4 s TTL - 2 s lead) and answered
  // just after it closed: the lease is confirmed again, too late.
  const first = await pendingCall(r, "renew");
  await waitFor(async () => {
    await r.clock.advance(50);
    return r.client.calls.filter((c) => c.rpc === "renew").length >= 2;
  }, { timeoutMs: BOUND_MS, what: "the second renewal" });
  assert.ok(first.done);
  const second = r.client.calls.findLast((c) => c.rpc === "renew")!;
  await waitFor(async () => {
    await r.clock.advance(50);
    return r.lines.some((l) => l.includes("stopping the command"));
  }, { timeoutMs: BOUND_MS, what: "the gate to close" });
  second.answer({ kind: "acquired", lease: fresh(5) });
  assert.equal(await finish(r, true), EXIT_CONFIRMED_LATE, r.lines.join(""));
  const log = r.lines.join("");
  assert.match(log, /confirmed after all: the confirmation came too late/);
  assert.doesNotMatch(log, /the lease is not held/);
  assert.equal(r.client.of("release")[0]?.token, 5, "the command is gone");
});

Deno.test("run fence: its gate SIGKILLed -> the orphaned command is stopped before run releases", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const d = dir.path;
  await using run = new HelperProcess(
    ["run", "--", ...script(d, "loss", LOSS_SCRIPT)],
    runEnv(server, "gatekill"),
  );
  using _cleanup = cleanup(d);
  await waitFor(() => exists(`${d}/expires`), {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  const leader = Number((read(`${d}/pids`) ?? "").split("\n")[0]);
  const stat = read(`/proc/${leader}/stat`)!;
  const gatePid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  Deno.kill(gatePid, "SIGKILL");
  const st = await run.wait(BOUND_MS);
  const grandchild = Number(read(`${d}/grandchild`));
  assert.ok(dead(leader) && dead(grandchild), run.log);
  assert.match(
    run.log,
    /the command's gate died \(SIGKILL\); stopping the command it left/,
  );
  assert.doesNotMatch(run.log, /the command exited/);
  assert.ok(exists(`${d}/termed`), `the command got SIGTERM first: ${run.log}`);
  assert.equal(st.code, EXIT_GATE_DIED, run.log);
  assert.equal(server.store.get("prod", "gatekill")?.holder, "", "released");
});

Deno.test("run fence: a gate that exits on its own (status 1) while its command runs failed: run stops what it left, exits 70", async () => {
  // A stand-in gate, as a gate that failed would behave: it starts the
  // command's process and exits 1 without waiting for it.
  await using server = await startDevServer();
  await using dir = await tempDir();
  const d = dir.path;
  const driver = new URL("../support/run_gate_driver.ts", import.meta.url)
    .pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      driver,
      JSON.stringify(
        runEnv(server, "gatefail", { BERTH_ENFORCE_GRACE_SECONDS: "1" }),
      ),
      `sleep 1000 & echo $! > ${d}/left; exit 1`,
    ],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  const log = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, EXIT_GATE_DIED, log);
  assert.match(
    log,
    /the command's gate failed \(exit code 1\); stopping the command it left/,
  );
  assert.doesNotMatch(log, /the command exited/);
  assert.ok(dead(Number(read(`${d}/left`))), "what the gate left was stopped");
  assert.equal(server.store.get("prod", "gatefail")?.holder, "", "released");
  // Its own status is no status of the command's; a signal death says so too.
  assert.equal(
    gatedLauncher().deathReason({ code: 137, signal: "SIGKILL" }),
    "the command's gate died (SIGKILL)",
  );
});

Deno.test("run fence: a gate that closes on its own verdict while run is on time is not blamed on a freeze", async () => {
  // As a gate whose marker failed for a reason run did not cause (a wall
  // clock that stepped forward): it stops its command and exits 75.
  await using server = await startDevServer();
  const driver = new URL("../support/run_gate_driver.ts", import.meta.url)
    .pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      driver,
      JSON.stringify(runEnv(server, "gateclose")),
      "exit 75",
    ],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  const log = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, EXIT_LEASE_LOST, log);
  assert.match(log, /stopped by its gate on its own verdict/);
  assert.doesNotMatch(log, /frozen or starved/);
});

Deno.test("run fence, the limit: a process started outside the command's tree on its behalf is not stopped", async () => {
  // A daemon the command asks to start something (systemd-run, a container
  // engine): simulated by the test itself, which is outside run's tree.
  await using server = await startDevServer();
  await using dir = await tempDir();
  const d = dir.path;
  await using run = new HelperProcess(
    [
      "run",
      "--",
      ...script(d, "ask", `touch "$D/asked"; exec sleep 1000`),
    ],
    runEnv(server, "outside"),
  );
  using _cleanup = cleanup(d);
  await waitFor(() => exists(`${d}/asked`), {
    timeoutMs: BOUND_MS,
    what: "the command to ask",
  });
  const outside = new Deno.Command("sleep", { args: ["1000"] }).spawn();
  try {
    run.kill("SIGTERM");
    await run.wait(BOUND_MS);
    assert.ok(!dead(outside.pid), "the outside process is not run's to stop");
  } finally {
    outside.kill("SIGKILL");
    await outside.status;
  }
});
