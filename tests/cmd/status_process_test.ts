/**
 * `berth-acquire status`, the operator's view, as an operator runs it: the
 * installed `<state>/check status <state>` (what `kubectl exec` runs in the
 * main container) after a real `acquire`, and the CLI on state directories
 * in each state the probe distinguishes. Its verdict must be the probe's,
 * word for word, and it must change nothing.
 *
 * @module
 */
import assert from "node:assert/strict";
import { startDevServer } from "../../lib/devserver/server.ts";
import { formatStatusText } from "../../lib/cmd/status.ts";
import { readSnapshot } from "../../lib/state/snapshot.ts";
import { StateDir } from "../../lib/state/state_dir.ts";
import { cliArgv, REPO_ROOT, runCli, runExecutable } from "../support/cli.ts";
import {
  HelperProcess,
  leaseEnv,
  runtimeHolder,
  tempDir,
} from "../support/lease_env.ts";

const BOUND = () => AbortSignal.timeout(60_000);

/** What is in `dir`, with each file's mtime and size, to prove nothing was written. */
function fingerprint(dir: string): string {
  return [...Deno.readDirSync(dir)].map((e) => {
    const i = Deno.lstatSync(`${dir}/${e.name}`);
    return `${e.name} ${i.mtime?.getTime()} ${i.size} ${i.mode}`;
  }).sort().join("\n");
}

Deno.test("after acquire: holder, token, OK and the time left on both clocks, through the installed check", async () => {
  await using server = await startDevServer();
  await using dir = await tempDir();
  const r = await runCli(["acquire"], {
    env: leaseEnv({
      apiServer: server.url,
      stateDir: dir.path,
      ttlSeconds: 30,
    }),
    signal: BOUND(),
  });
  assert.equal(r.code, 0, r.stderr);
  const before = fingerprint(dir.path);

  // As `kubectl exec POD -c MAIN -- /berth/check status /berth` runs it:
  // no environment besides PATH.
  const text = await runExecutable([`${dir.path}/check`, "status", dir.path], {
    env: {},
    signal: BOUND(),
  });
  assert.equal(text.code, 0, text.stderr);
  assert.equal(text.stderr, "");
  const line = (label: string) =>
    text.stdout.split("\n").find((l) => l.startsWith(label))?.slice(17);
  assert.equal(line("holder"), runtimeHolder());
  assert.equal(line("fencing token"), "1");
  assert.match(String(line("marker")), /^OK \(written \S+ ago\)$/);
  assert.match(
    String(line("gate closes")),
    /^in [\d.]+s on the boot-time clock, in [\d.]+s on the wall clock$/,
  );
  assert.match(
    String(line("lease deadline")),
    /^in [\d.]+s on the boot-time clock, in [\d.]+s on the wall clock$/,
  );

  const json = await runExecutable(
    [`${dir.path}/check`, "status", dir.path, "--json"],
    { env: {}, signal: BOUND() },
  );
  assert.equal(json.code, 0, json.stderr);
  const s = JSON.parse(json.stdout);
  assert.equal(s.holder, runtimeHolder());
  assert.equal(s.fencingToken, 1);
  assert.deepEqual(
    { verdict: s.marker.verdict, reason: s.marker.reason },
    { verdict: "OK", reason: null },
  );
  // TTL 30 s, probe lead 4 s: the gate closes 4 s before the deadline, on
  // both clocks, and within the TTL from now.
  for (const clock of ["boottime", "wall"]) {
    const gate = s.gateClosesInMs[clock];
    const deadline = s.leaseDeadlineInMs[clock];
    assert.ok(gate > 0 && gate <= 26_000, `${clock}: ${gate}`);
    assert.equal(deadline - gate, 4_000, clock);
  }
  assert.deepEqual(s.problems, []);
  assert.equal(fingerprint(dir.path), before, "status wrote nothing");
});

/** `status --json` and `check` on the same directory. */
async function bothViews(dir: string) {
  const check = await runCli(["check", `${dir}/healthy`, "--max-age", "30s"], {
    env: {},
    signal: BOUND(),
  });
  const status = await runCli(["status", dir, "--json"], {
    env: {},
    signal: BOUND(),
  });
  return { check, status, json: JSON.parse(status.stdout) };
}

Deno.test("each failing verdict is the probe's own line, and status exits 1", async () => {
  await using dir = await tempDir();
  const s = new StateDir(dir.path);
  const cases: [string, () => Promise<void>][] = [
    ["Absent", async () => {}],
    [
      "Stale",
      () => s.writeMarker({ gateClosesBootMs: 1, leaseDeadlineBootMs: 2 }),
    ],
    ["Indeterminate", async () => {
      await Deno.remove(`${dir.path}/healthy`);
      await Deno.mkdir(`${dir.path}/healthy`);
    }],
  ];
  for (const [kind, setUp] of cases) {
    await setUp();
    const { check, status, json } = await bothViews(dir.path);
    assert.equal(status.code, 1, `${kind}: ${status.stderr}`);
    assert.equal(json.marker.verdict, kind);
    // The age in a stale line moves between the two runs.
    const mask = (t: string) => t.replace(/passed \S+ ago/, "passed AGE ago");
    assert.equal(mask(json.marker.reason + "\n"), mask(check.stdout), kind);
    if (kind === "Indeterminate") {
      // Nothing was read, so nothing is said of who wrote it.
      const text = await runCli(["status", dir.path], {
        env: {},
        signal: BOUND(),
      });
      assert.match(
        text.stdout,
        /^gate closes {6}unknown: the health marker cannot be read/m,
      );
      assert.doesNotMatch(text.stdout, /Go helper/);
    }
  }
});

Deno.test("passed deadlines, a marker without deadlines, unreadable files: said, not hidden", async () => {
  await using dir = await tempDir();
  const s = new StateDir(dir.path);
  await s.writeMarker({
    gateClosesBootMs: 10_000,
    leaseDeadlineBootMs: 14_000,
    gateClosesWallMs: 1_000_000,
    leaseDeadlineWallMs: 1_004_000,
  });
  await Deno.writeTextFile(`${dir.path}/token`, "012");
  const snap = readSnapshot(dir.path, {
    maxAgeMs: 0,
    clocks: { bootMs: 12_500, wallMs: 1_002_500 },
  });
  const text = formatStatusText(snap);
  assert.match(
    text,
    /^gate closes {6}passed 2\.5s ago on the boot-time clock, passed 2\.5s ago on the wall clock$/m,
  );
  assert.match(
    text,
    /^lease deadline {3}in 1\.5s on the boot-time clock, in 1\.5s on the wall clock$/m,
  );
  assert.match(
    text,
    /^marker {11}Stale: health marker stale: .* gate deadline passed 3s ago/m,
  );
  assert.match(text, /^holder {11}none \(no holder file\)$/m);
  assert.match(
    text,
    /^fencing token {4}unreadable: .*"012" is not a positive 32-bit/m,
  );

  // What was found is said, never guessed: each judged by its age alone.
  const found: [string | Uint8Array, RegExp, string][] = [
    ["ok\n", /the Go helper's marker \(ok\)/, "go-helper"],
    ["", /an empty marker:/, "empty"],
    [
      new Uint8Array([0, 0xff, 0xfe]),
      /content this helper does not recognise/,
      "unrecognised",
    ],
    ["garbage", /content this helper does not recognise/, "unrecognised"],
    [
      "berth-acquire health marker v1\n",
      /this helper without deadlines/,
      "no-deadlines",
    ],
  ];
  for (const [content, words, kind] of found) {
    const path = `${dir.path}/healthy`;
    if (typeof content === "string") await Deno.writeTextFile(path, content);
    else await Deno.writeFile(path, content);
    const r = await runCli(["status", dir.path], { env: {}, signal: BOUND() });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^gate closes {6}not in the marker \(/m);
    assert.match(r.stdout, words, kind);
    assert.doesNotMatch(r.stdout, /written by the Go helper/);
    const j = await runCli(["status", dir.path, "--json"], {
      env: {},
      signal: BOUND(),
    });
    assert.equal(JSON.parse(j.stdout).marker.content, kind);
  }
  // Ours, but malformed: no deadline to show, and the verdict says why.
  await Deno.writeTextFile(
    `${dir.path}/healthy`,
    "berth-acquire health marker v1\ngarbage\n",
  );
  const bad = await runCli(["status", dir.path, "--json"], {
    env: {},
    signal: BOUND(),
  });
  assert.equal(bad.code, 1);
  const badJson = JSON.parse(bad.stdout);
  assert.equal(badJson.marker.content, "malformed");
  assert.equal(badJson.marker.verdict, "Indeterminate");
  await Deno.writeTextFile(`${dir.path}/healthy`, "");
  const j = await runCli(["status", dir.path, "--json"], {
    env: {},
    signal: BOUND(),
  });
  const json = JSON.parse(j.stdout);
  assert.deepEqual(json.gateClosesInMs, { boottime: null, wall: null });
  assert.equal(json.deadlines, null);
  assert.equal(json.problems.length, 1, json.problems);
});

Deno.test("the state directory: the argument, then BERTH_STATE_DIR; --max-age as the probe's", async () => {
  await using dir = await tempDir();
  await Deno.writeTextFile(`${dir.path}/healthy`, "");
  const old = new Date(Date.now() - 60_000);
  await Deno.utime(`${dir.path}/healthy`, old, old);
  const viaEnv = await runCli(["status", "--json"], {
    env: { BERTH_STATE_DIR: dir.path },
    signal: BOUND(),
  });
  // 60 s old against the webhook's 30 s: stale.
  assert.equal(viaEnv.code, 1);
  assert.equal(JSON.parse(viaEnv.stdout).stateDir, dir.path);
  assert.equal(JSON.parse(viaEnv.stdout).marker.verdict, "Stale");
  const relaxed = await runCli(["status", dir.path, "--max-age=2m"], {
    env: {},
    signal: BOUND(),
  });
  assert.equal(relaxed.code, 0, relaxed.stdout);
  // One dash, as the Go helper's flags take it.
  const oneDash = await runCli(
    ["status", "-max-age", "2m", "-json", dir.path],
    {
      env: {},
      signal: BOUND(),
    },
  );
  assert.equal(oneDash.code, 0, oneDash.stderr);
  assert.equal(JSON.parse(oneDash.stdout).marker.verdict, "OK");
});

Deno.test("usage errors exit 78 with one line naming the problem; --help exits 0", async () => {
  for (
    const [args, re] of [
      [["--bogus"], /unknown flag --bogus; run with --help for the list$/m],
      [["-bogus=1"], /unknown flag -bogus; run with --help for the list/],
      [["--jsn"], /unknown flag --jsn: did you mean --json\?/],
      [
        ["/a", "/b"],
        /unexpected argument "\/b": status takes one state directory/,
      ],
      [["--max-age", "soon"], /--max-age: invalid duration "soon"/],
      [["--max-age"], /flag --max-age needs a value/],
    ] as [string[], RegExp][]
  ) {
    const r = await runCli(["status", ...args], { env: {}, signal: BOUND() });
    assert.equal(r.code, 78, args.join(" "));
    assert.match(r.stderr, re);
    assert.equal(r.stderr.trim().split("\n").length, 1);
  }
  const help = await runCli(["status", "--help"], { env: {}, signal: BOUND() });
  assert.equal(help.code, 0);
  assert.match(
    help.stdout,
    /kubectl exec POD -c MAIN -- \/berth\/check status \/berth/,
  );
  const top = await runCli(["--help"], { env: {}, signal: BOUND() });
  assert.match(top.stdout, /berth-acquire status \[STATE_DIR\] \[--json\]/);
});

Deno.test("status loads only the state modules it reads with: no configuration, no network, no node: module", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", `${REPO_ROOT}/lib/cmd/status.ts`],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const modules = (JSON.parse(new TextDecoder().decode(out.stdout)).modules as {
    specifier: string;
  }[]).map((m) => m.specifier.replace(`file://${REPO_ROOT}/`, "")).sort();
  assert.deepEqual(modules, [
    "lib/cmd/status.ts",
    "lib/config/argv.ts",
    "lib/config/duration.ts",
    "lib/state/marker.ts",
    "lib/state/snapshot.ts",
    "lib/state/state_dir.ts",
  ]);
});

Deno.test("status of a directory that does not exist says so, in text and JSON; exit 1", async () => {
  await using dir = await tempDir();
  const missing = `${dir.path}/nope`;
  const text = await runCli(["status", missing], { env: {}, signal: BOUND() });
  assert.equal(text.code, 1, text.stderr);
  const lines = text.stdout.split("\n");
  assert.equal(lines[0], `state directory  ${missing} (does not exist)`);
  assert.equal(
    lines[1],
    "holder           none (the state directory does not exist)",
  );
  assert.doesNotMatch(text.stdout, /no holder file/);
  const json = await runCli(["status", missing, "--json"], {
    env: {},
    signal: BOUND(),
  });
  assert.deepEqual(JSON.parse(json.stdout).problems, [
    `the state directory ${missing} does not exist`,
  ]);
});

Deno.test("status shows every duration to one precision (a tenth of a second) and whole milliseconds in JSON", async () => {
  await using dir = await tempDir();
  const state = new StateDir(dir.path);
  await state.writeHolder("h");
  await state.writeToken(3);
  const wall = 1_800_000_000_000;
  const boot = 5_000_000.4567;
  await state.writeMarker({
    gateClosesBootMs: boot + 4_321.987,
    leaseDeadlineBootMs: boot + 8_321.987,
    gateClosesWallMs: wall + 4_321,
    leaseDeadlineWallMs: wall + 8_321,
  });
  const snapshot = readSnapshot(dir.path, {
    maxAgeMs: 0,
    clocks: { wallMs: wall, bootMs: boot },
  });
  const text = formatStatusText(snapshot);
  assert.match(
    text,
    /gate closes {6}in 4\.3s on the boot-time clock, in 4\.3s on the wall clock/,
  );
  assert.match(text, /lease deadline {3}in 8\.3s on the boot-time clock/);
  // No duration with more than one decimal anywhere.
  assert.doesNotMatch(text, /\d\.\d\d+s/);
});

/** A left-behind or decoy top directory in `tmp`: `inner` gets a state directory with a stale marker. */
async function plant(tmp: string, name: string, mode: number, inner = true) {
  const top = `${tmp}/${name}`;
  await Deno.mkdir(top);
  if (inner) {
    await Deno.mkdir(`${top}/prod.web`);
    await new StateDir(`${top}/prod.web`).writeMarker({
      gateClosesBootMs: 1,
      leaseDeadlineBootMs: 2,
    });
  }
  await Deno.chmod(top, mode);
  return top;
}

Deno.test("status --runs (and status alone, without a state directory or /berth) lists each run's state directory with its verdict; a left-behind one is said to be gone, decoys are skipped", async () => {
  await using server = await startDevServer();
  await using tmp = await tempDir();
  const env = leaseEnv({ apiServer: server.url, stateDir: tmp.path });
  delete env.BERTH_STATE_DIR;
  await using run = new HelperProcess(["run", "--", "sleep", "30"], {
    ...env,
    TMPDIR: tmp.path,
  });
  await run.waitForLine(/msg="running the command"/);
  const own = /run_dir=(\S+)/.exec(run.lines[0])![1];
  // A SIGKILLed run's directory (no such pid), and decoys: a link to the
  // real one, a mode other than 0700, the old shape without a pid, a file.
  await plant(tmp.path, "berth-run-999999999-0ff", 0o700);
  await Deno.symlink(
    own.replace(/\/prod\.web$/, ""),
    `${tmp.path}/berth-run-1-ab`,
  );
  await plant(tmp.path, "berth-run-2-ab", 0o755);
  await plant(tmp.path, "berth-run-abcdef", 0o700);
  await plant(tmp.path, "berth-run-3-xyz", 0o700);
  await Deno.writeTextFile(`${tmp.path}/berth-run-4-ab`, "");
  const status = (args: string[]) =>
    runCli(["status", ...args], { env: { TMPDIR: tmp.path }, signal: BOUND() });

  const text = await status(["--runs"]);
  assert.equal(text.code, 1, "the left-behind marker is stale: " + text.stdout);
  const blocks = text.stdout.trimEnd().split("\n\n");
  assert.equal(blocks.length, 2, text.stdout);
  const root = Deno.uid() === 0 ? `, owner uid ${Deno.uid()}` : "";
  assert.equal(
    blocks[0].split("\n")[0],
    `run              pid ${run.child.pid}${root}`,
  );
  assert.match(blocks[0], new RegExp(`^state directory  ${own}$`, "m"));
  assert.match(blocks[0], /^fencing token {4}1$/m);
  assert.match(blocks[0], /^marker {11}OK /m);
  assert.equal(
    blocks[1].split("\n")[0],
    `run              pid 999999999${root} (gone: the run that left this has exited)`,
  );
  assert.match(blocks[1], /^marker {11}Stale: /m);

  const json = JSON.parse((await status(["--runs", "--json"])).stdout);
  assert.equal(json.runsIn, tmp.path);
  assert.deepEqual(
    json.runs.map((r: { run: unknown }) => r.run),
    [
      { pid: run.child.pid, uid: Deno.uid(), gone: false },
      { pid: 999999999, uid: Deno.uid(), gone: true },
    ],
  );
  assert.equal(json.runs[0].stateDir, own);
  assert.equal(json.runs[0].marker.verdict, "OK");
  assert.equal(json.runs[0].fencingToken, 1);

  // Only the running one left: exit 0. With no argument, the same unless
  // a /berth is there to read.
  await Deno.remove(`${tmp.path}/berth-run-999999999-0ff`, { recursive: true });
  const alone = await status([]);
  if (dirExists("/berth")) {
    assert.match(alone.stdout, /^state directory {2}\/berth/, alone.stdout);
    console.log("status alone read /berth: it exists on this machine");
  } else {
    assert.equal(alone.code, 0, alone.stdout);
    assert.match(alone.stdout, new RegExp(`^run {14}pid ${run.child.pid}`));
  }
  assert.equal((await status(["--runs"])).code, 0);
  // An explicit state directory still wins; --runs takes none.
  assert.equal((await status([own])).code, 0);
  const both = await status(["--runs", own]);
  assert.equal(both.code, 78);
  assert.match(both.stderr, /--runs lists the runs' own: give it no STATE_DIR/);

  run.kill("SIGTERM");
  await run.wait();
  const none = await status(["--runs"]);
  assert.equal(none.code, 1);
  assert.match(
    none.stdout,
    new RegExp(
      `^no run's state directory in ${tmp.path} \\(berth-run-<PID>-<RANDOM>, `,
    ),
  );
  assert.deepEqual(
    JSON.parse((await status(["--runs", "--json"])).stdout).runs,
    [],
  );
});

function dirExists(path: string): boolean {
  try {
    return Deno.statSync(path).isDirectory;
  } catch {
    return false;
  }
}

const NONROOT = 65532;
const noSetpriv = Deno.uid() !== 0
  ? "not root"
  : new Deno.Command("sh", { args: ["-c", "command -v setpriv"] })
      .outputSync().success
  ? undefined
  : "no setpriv";
if (noSetpriv !== undefined) {
  console.log(`skipped: the other-user status --runs test (${noSetpriv})`);
}

Deno.test({
  name:
    "status --runs as a user other than root lists only that user's runs: another user's directory of the right shape may be a decoy",
  ignore: noSetpriv !== undefined,
  async fn() {
    await using tmp = await tempDir();
    await Deno.chmod(tmp.path, 0o1777);
    await plant(tmp.path, "berth-run-999999998-ab", 0o700); // root's
    const mine = await plant(tmp.path, "berth-run-999999999-cd", 0o700);
    await Deno.chown(mine, NONROOT, NONROOT);
    await Deno.chown(`${mine}/prod.web`, NONROOT, NONROOT);
    const home = `${tmp.path}/home`;
    await Deno.mkdir(home);
    await Deno.chown(home, NONROOT, NONROOT);
    const [exe, ...args] = cliArgv(["status", "--runs", "--json"]);
    const out = await new Deno.Command("setpriv", {
      args: [
        `--reuid=${NONROOT}`,
        `--regid=${NONROOT}`,
        "--clear-groups",
        exe,
        ...args,
      ],
      env: {
        PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
        HOME: home,
        DENO_DIR: home,
        TMPDIR: tmp.path,
      },
      clearEnv: true,
      stdout: "piped",
      stderr: "piped",
      signal: BOUND(),
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 1, new TextDecoder().decode(out.stderr));
    assert.deepEqual(
      JSON.parse(stdout).runs.map((r: { stateDir: string }) => r.stateDir),
      [`${mine}/prod.web`],
    );
    // Root sees both, each with its owner.
    const all = await runCli(["status", "--runs", "--json"], {
      env: { TMPDIR: tmp.path },
      signal: BOUND(),
    });
    assert.deepEqual(
      JSON.parse(all.stdout).runs.map((r: { run: { uid: number } }) =>
        r.run.uid
      ),
      [0, NONROOT],
    );
  },
});
