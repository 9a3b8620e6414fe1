/**
 * `berth-acquire gate` with real processes: the real CLI guarding real shell
 * commands, with the health marker written by the test the way the sidecar
 * writes it (lib/state/state_dir.ts). Nothing here measures elapsed time:
 * "stopped by the deadline" is the ordering of two wall-clock instants (the
 * command's SIGTERM trap and the lease deadline in the marker), and every
 * wait is a bounded poll.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PRESS_MS } from "../../lib/cmd/signals.ts";
import { readBootMillis } from "../../lib/state/marker.ts";
import { StateDir } from "../../lib/state/state_dir.ts";
import { REPO_ROOT, runCli } from "../support/cli.ts";
import { berthArgv } from "../../sim/cli.ts";
import { HelperProcess, tempDir, waitFor } from "../support/lease_env.ts";

const BOUND_MS = 20_000;

function read(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  const stat = read(`/proc/${pid}/stat`);
  if (stat === undefined) return false;
  const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
  return state !== "Z" && state !== "X";
}

/** Writes the handoff and a marker whose gate closes `gateInMs` from now (lease deadline 1 s later). */
async function confirm(
  dir: string,
  gateInMs = 60_000,
  token = 7,
): Promise<{ leaseDeadlineWallMs: number; earliestGateWallMs: number }> {
  const s = new StateDir(dir);
  await s.writeHolder("prod/gated");
  await s.writeToken(token);
  // The boot clock is read after this wall time: however long the test was
  // descheduled between the two reads, the gate cannot close before it.
  const before = Date.now();
  const boot = readBootMillis();
  const wall = Date.now();
  const d = {
    gateClosesBootMs: boot + gateInMs,
    leaseDeadlineBootMs: boot + gateInMs + 1000,
    gateClosesWallMs: wall + gateInMs,
    leaseDeadlineWallMs: wall + gateInMs + 1000,
  };
  await s.writeMarker(d);
  return { ...d, earliestGateWallMs: before + gateInMs };
}

/**
 * The guarded command: records its start (one line per start, with its
 * token), its PID, and the moment its SIGTERM trap ran; sleeps in a child
 * so the trap runs at once.
 */
const COMMAND =
  `echo "$BERTH_FENCING_TOKEN $BERTH_HOLDER $BERTH_LEASE_EXPIRES_AT" >> "$D/starts"
echo $$ > "$D/pid"
trap 'date +%s%3N > "$D/termed"; exit 0' TERM
while :; do sleep 0.05; done
`;

function script(dir: string, body: string): string[] {
  const path = `${dir}/cmd.sh`;
  Deno.writeTextFileSync(path, `export D=${JSON.stringify(dir)}\n${body}`);
  return ["sh", path];
}

function starts(dir: string): string[] {
  return (read(`${dir}/starts`) ?? "").split("\n").filter(Boolean);
}

/**
 * A gate that a test's end stops the way a container runtime stops it:
 * SIGTERM first, which it forwards to its command. Every helper is SIGKILLed
 * at the end of a test, and a SIGKILLed gate (outside a PID namespace)
 * leaves its command running in the session it made for it; left there,
 * those commands would load the machine under the tests that follow. The
 * command's group is SIGKILLed last, whatever happened.
 */
class GateProcess extends HelperProcess {
  constructor(readonly dir: string, args: string[]) {
    super(args, { NO_COLOR: "1" });
  }

  override async [Symbol.asyncDispose](): Promise<void> {
    if (this.exited === undefined) {
      this.kill("SIGTERM");
      await this.wait(BOUND_MS).catch(() => {});
    }
    await super[Symbol.asyncDispose]();
    const pid = Number(read(`${this.dir}/pid`));
    if (pid > 1) {
      try {
        Deno.kill(-pid, "SIGKILL");
      } catch { /* gone already */ }
    }
  }
}

function gate(dir: string, command: string[], flags: string[] = []) {
  return new GateProcess(
    dir,
    ["gate", "--state-dir", dir, "--grace", "1s", ...flags, "--", ...command],
  );
}

Deno.test("gate: waits for the marker before the first start; the command gets token, holder and deadline", async () => {
  await using tmp = await tempDir("berth-gate-");
  const dir = tmp.path;
  await using g = gate(dir, script(dir, COMMAND));
  await g.waitForLine(
    /waiting for the lease before starting the command.*absent/,
  );
  assert.deepEqual(starts(dir), [], "the command ran without a marker");
  const d = await confirm(dir);
  await waitFor(() => starts(dir).length === 1, {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  assert.equal(
    starts(dir)[0],
    `7 prod/gated ${new Date(d.leaseDeadlineWallMs).toISOString()}`,
  );
  g.kill("SIGTERM");
  const st = await g.wait();
  assert.equal(st.code, 0, "the command's own status (its trap exits 0)");
  assert.ok(read(`${dir}/termed`), "SIGTERM was forwarded");
  assert.equal(starts(dir).length, 1, "not started again after SIGTERM");
});

Deno.test("gate: stops the command on each failed verdict kind and starts it again when the marker passes", async () => {
  await using tmp = await tempDir("berth-gate-");
  const dir = tmp.path;
  await confirm(dir);
  await using g = gate(dir, script(dir, COMMAND));
  const failures: [string, () => Promise<void>][] = [
    ["absent", () => Deno.remove(`${dir}/healthy`)],
    ["indeterminate", async () => {
      await Deno.remove(`${dir}/healthy`);
      await Deno.mkdir(`${dir}/healthy`);
    }],
    ["stale (deadline)", () => confirm(dir, -1000).then(() => {})],
  ];
  let n = 1;
  for (const [kind, fail] of failures) {
    await waitFor(() => starts(dir).length === n, {
      timeoutMs: BOUND_MS,
      what: `start ${n}`,
    });
    const pid = Number(read(`${dir}/pid`));
    await Deno.remove(`${dir}/termed`).catch(() => {});
    await fail();
    await waitFor(() => read(`${dir}/termed`) && !alive(pid), {
      timeoutMs: BOUND_MS,
      what: `the command stopped on a marker ${kind}`,
    });
    assert.equal(starts(dir).length, n, `${kind}: restarted without the lease`);
    await Deno.remove(`${dir}/healthy`, { recursive: true }).catch(() => {});
    await confirm(dir, 60_000, 7 + n);
    n++;
  }
  await waitFor(() => starts(dir).length === n, {
    timeoutMs: BOUND_MS,
    what: "the start after the last recovery",
  });
  assert.match(starts(dir)[n - 1], new RegExp(`^${6 + n} `), "the new token");
  assert.match(g.log, /the command was stopped: the lease is not confirmed/);
});

Deno.test("gate: a dead sidecar (nobody refreshes the marker) stops the command by the marker's own deadline", async () => {
  await using tmp = await tempDir("berth-gate-");
  const dir = tmp.path;
  // The gate closes 3 s after it is written; nothing touches it again.
  const d = await confirm(dir, 3000);
  await using _g = gate(dir, script(dir, COMMAND), ["--interval", "5s"]);
  // The trap's shell creates the file before date writes the line: wait for
  // the whole line, not the file.
  const termed = await waitFor(() => {
    const line = read(`${dir}/termed`);
    return line?.endsWith("\n") ? Number(line) : undefined;
  }, {
    timeoutMs: BOUND_MS,
    what: "the command's SIGTERM",
  });
  assert.ok(
    termed <= d.leaseDeadlineWallMs,
    `SIGTERM at ${termed}, after the lease deadline ${d.leaseDeadlineWallMs}`,
  );
  // 50 ms for the boot clock's 10 ms ticks and the trap's own start.
  assert.ok(
    termed >= d.earliestGateWallMs - 50,
    `SIGTERM at ${termed}, before the gate deadline ${d.earliestGateWallMs}: the timer, not a 5 s look, stopped it`,
  );
  assert.equal(starts(dir).length, 1);
});

Deno.test("gate: exit codes: the command's own, 127, 78, 75 with --exit-on-close, 77 on SIGTERM while waiting", async () => {
  await using tmp = await tempDir("berth-gate-");
  const dir = tmp.path;
  await confirm(dir);
  const env = { NO_COLOR: "1" };
  const signal = () => AbortSignal.timeout(BOUND_MS);
  const own = await runCli([
    "gate",
    "--state-dir",
    dir,
    "--",
    "sh",
    "-c",
    "echo out; exit 42",
  ], { env, signal: signal() });
  assert.equal(own.code, 42);
  assert.equal(own.stdout, "out\n", "stdout is the command's");
  const missing = await runCli([
    "gate",
    "--state-dir",
    dir,
    "--",
    "/no/such/cmd",
  ], { env, signal: signal() });
  assert.equal(missing.code, 127);
  const usage = await runCli(["gate", "--state-dir", dir], {
    env,
    signal: signal(),
  });
  assert.equal(usage.code, 78);
  assert.match(usage.stderr, /put it after --/);
  const bad = await runCli(["gate", "--bogus", "--", "true"], {
    env,
    signal: signal(),
  });
  assert.equal(bad.code, 78);
  assert.match(
    bad.stderr,
    /unknown flag --bogus; run with --help for the list$/m,
  );
  const oneDash = await runCli(
    ["gate", "-state-dir", dir, "-interval=1s", "-bogus", "--", "true"],
    { env, signal: signal() },
  );
  assert.equal(oneDash.code, 78);
  assert.match(oneDash.stderr, /unknown flag -bogus;/, "the others were read");
  const typo = await runCli(["gate", "--intervl", "1s", "--", "true"], {
    env,
    signal: signal(),
  });
  assert.match(
    typo.stderr,
    /unknown flag --intervl: did you mean --interval\?/,
  );

  await using once = gate(dir, script(dir, COMMAND), ["--exit-on-close"]);
  await waitFor(() => read(`${dir}/pid`), {
    timeoutMs: BOUND_MS,
    what: "start",
  });
  await Deno.remove(`${dir}/healthy`);
  assert.equal((await once.wait()).code, 75);

  await using waiting = gate(dir, ["true"]);
  await waiting.waitForLine(/waiting for the lease/);
  waiting.kill("SIGTERM");
  assert.equal((await waiting.wait()).code, 77);
});

Deno.test("gate: a worker that left the process group with setsid is stopped too", async () => {
  await using tmp = await tempDir("berth-gate-");
  const dir = tmp.path;
  await confirm(dir);
  // The command starts a daemon in a new session, then exits: the daemon
  // is reparented to the gate (a child subreaper), not to init.
  const cmd = script(
    dir,
    `setsid sh -c 'echo $$ > "$D/daemon"; exec sleep 1000' &
while [ ! -s "$D/daemon" ]; do sleep 0.02; done
while :; do sleep 0.05; done
`,
  );
  await using _g = gate(dir, cmd);
  const daemon = Number(
    await waitFor(() => read(`${dir}/daemon`)?.trim() || undefined, {
      timeoutMs: BOUND_MS,
      what: "the daemon",
    }),
  );
  try {
    await Deno.remove(`${dir}/healthy`);
    await waitFor(() => !alive(daemon), {
      timeoutMs: BOUND_MS,
      what: "the setsid daemon to be stopped",
    });
  } finally {
    try {
      Deno.kill(daemon, "SIGKILL");
    } catch {
      // gone, as it should be
    }
  }
});

Deno.test("gate --parent-pid: the command is stopped as soon as the parent is gone", async () => {
  await using tmp = await tempDir("berth-gate-");
  const dir = tmp.path;
  await confirm(dir);
  const cmd = script(dir, COMMAND);
  // A grace, so that the SIGKILL cannot overtake the shell's TERM trap on a
  // loaded machine (the default, 0s, kills at once).
  const quoted = berthArgv([
    "gate",
    "--state-dir",
    dir,
    "--grace",
    "20s",
    "--parent-pid",
    "$$",
    "--",
    ...cmd,
  ])
    .map((a) => a === "$$" ? a : `'${a}'`).join(" ");
  const parent = new Deno.Command("sh", {
    args: ["-c", `${quoted} 2>'${dir}/gate.log' & wait`],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const pid = Number(
    await waitFor(() => read(`${dir}/pid`)?.trim() || undefined, {
      timeoutMs: BOUND_MS,
      what: "the command to start",
    }),
  );
  parent.kill("SIGKILL");
  await parent.status;
  try {
    await waitFor(() => read(`${dir}/termed`) && !alive(pid), {
      timeoutMs: BOUND_MS,
      what: "the command to stop after its gate's parent died",
    }).catch((e) => {
      throw new Error(
        `${e.message}; the gate said:\n${read(`${dir}/gate.log`)}`,
      );
    });
  } finally {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
});

Deno.test("gate loads no lease client and no node: module (it runs in the main container)", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", `${REPO_ROOT}/lib/gate/gate.ts`],
    stdout: "piped",
  }).output();
  const info = JSON.parse(new TextDecoder().decode(out.stdout));
  const modules = (info.modules as { specifier: string }[]).map((m) =>
    m.specifier.replace(`file://${REPO_ROOT}/`, "")
  );
  assert.deepEqual(
    modules.filter((m) =>
      m.startsWith("node:") || m.startsWith("lib/lease/") ||
      m.startsWith("lib/hold/") || m.startsWith("lib/config/config")
    ),
    [],
  );
});

Deno.test("gate: orphans reparented to it (a child subreaper, or PID 1) are reaped, not left as zombies", async () => {
  await using tmp = await tempDir("berth-gate-");
  const dir = tmp.path;
  await confirm(dir);
  // The subshell exits at once, so its sleep is orphaned and reparented to
  // the gate, where it exits 0.3 s later.
  await using _g = gate(
    dir,
    script(
      dir,
      `( sleep 0.3 & echo $! > "$D/orphan" )
while :; do sleep 0.05; done
`,
    ),
  );
  const orphan = Number(
    await waitFor(() => read(`${dir}/orphan`)?.trim() || undefined, {
      timeoutMs: BOUND_MS,
      what: "the orphan",
    }),
  );
  await waitFor(() => read(`/proc/${orphan}/stat`) === undefined, {
    timeoutMs: BOUND_MS,
    what: `the orphan ${orphan} to be reaped (not a zombie)`,
  });
});

Deno.test("gate: a SIGHUP forwarded while the verdict fails stops the command but does not end the gate", async () => {
  await using tmp = await tempDir("berth-gate-");
  const dir = tmp.path;
  await confirm(dir);
  // A long interval: the signal, not a look, notices the failed verdict.
  await using g = gate(dir, script(dir, COMMAND), ["--interval", "10s"]);
  await waitFor(() => starts(dir).length === 1, {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  const pid = Number(read(`${dir}/pid`));
  await Deno.remove(`${dir}/healthy`);
  g.kill("SIGHUP");
  await waitFor(() => read(`${dir}/termed`) && !alive(pid), {
    timeoutMs: BOUND_MS,
    what: "the command to stop",
  });
  await g.waitForLine(/waiting for the lease to run the command again/);
  await confirm(dir, 60_000, 8);
  await waitFor(() => starts(dir).length === 2, {
    timeoutMs: BOUND_MS,
    what: "the command to start again",
  });
  assert.match(starts(dir)[1], /^8 /);
  g.kill("SIGTERM");
  assert.equal((await g.wait()).code, 0);
});

Deno.test("gate: one Ctrl-C (SIGINT twice, as under deno task) is forwarded once; another sends SIGKILL, said once", async () => {
  await using tmp = await tempDir("berth-gate-");
  const dir = tmp.path;
  await confirm(dir);
  await using g = gate(
    dir,
    script(
      dir,
      `echo $$ > "$D/pid"
trap 'echo INT >> "$D/got"' INT
trap 'echo TERM >> "$D/got"' TERM
while :; do sleep 0.05; done
`,
    ),
  );
  await waitFor(() => read(`${dir}/pid`), {
    timeoutMs: BOUND_MS,
    what: "the command to start",
  });
  const pid = Number(read(`${dir}/pid`));
  await g.ctrlC();
  await waitFor(() => read(`${dir}/got`) === "INT\n", {
    timeoutMs: BOUND_MS,
    what: "the command to get SIGINT",
  });
  await new Promise((r) => setTimeout(r, PRESS_MS));
  const said = (re: RegExp) => g.lines.filter((l) => re.test(l)).length;
  assert.equal(said(/forwarding it to the command/), 1, g.log);
  assert.ok(alive(pid), "the command cleans up as it likes");
  await g.ctrlC();
  assert.equal((await g.wait(BOUND_MS)).code, 137, g.log);
  assert.ok(!alive(pid));
  assert.equal(said(/signal received again; sending SIGKILL/), 1, g.log);
  assert.equal(said(/left processes|stopping the command/), 0, g.log);
  assert.equal(read(`${dir}/got`), "INT\n");
});

Deno.test("gate: --grace 0s sends SIGKILL at once without saying the command outlived the grace; a grace it does outlive is said", async () => {
  await using tmp = await tempDir("berth-gate-");
  const dir = tmp.path;
  const stubborn = script(
    dir,
    `echo $$ > "$D/pid"\ntrap '' TERM\nwhile :; do sleep 0.05; done\n`,
  );
  for (const grace of ["0s", "200ms"]) {
    await confirm(dir);
    await using g = new GateProcess(dir, [
      "gate",
      ...["--state-dir", dir, "--grace", grace, "--exit-on-close"],
      ...["--", ...stubborn],
    ]);
    await waitFor(() => read(`${dir}/pid`), {
      timeoutMs: BOUND_MS,
      what: "start",
    });
    const pid = Number(read(`${dir}/pid`));
    await Deno.remove(`${dir}/healthy`);
    assert.equal((await g.wait(BOUND_MS)).code, 75, g.log);
    assert.ok(!alive(pid), `${grace}: the command was killed`);
    assert.match(g.log, /msg="stopping the command"/);
    assert.equal(/outlived the grace/.test(g.log), grace !== "0s", g.log);
    await Deno.remove(`${dir}/pid`);
  }
});
