import assert from "node:assert/strict";
import { LinuxProcessTable, parseProcStat } from "../../lib/enforce/proc.ts";

const isRoot = Deno.uid() === 0;

function spawnSleep(): Deno.ChildProcess {
  return new Deno.Command("sleep", {
    args: ["1000"],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
}

Deno.test("parseProcStat: a comm holding spaces and parentheses does not shift the fields", () => {
  const line =
    "4242 (a) R (b c) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200 " +
    "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  assert.deepEqual(parseProcStat(line), {
    comm: "a) R (b c",
    state: "S",
    ppid: 17,
    pgrp: 4242,
    session: 4242,
    flags: 4194560,
    startTime: 987654,
  });
  assert.throws(() => parseProcStat("4242 no parentheses"), /malformed/);
  assert.throws(() => parseProcStat("4242 (x) S 1 2"), /field 6/);
});

Deno.test("LinuxProcessTable: knows who it is", () => {
  const t = new LinuxProcessTable();
  assert.equal(t.selfPid, Deno.pid);
  assert.equal(t.parentPid, Deno.ppid);
  assert.equal(t.selfExe, Deno.execPath());
});

Deno.test("LinuxProcessTable: sees a spawned sleep with its comm, executable and start time", async () => {
  const child = spawnSleep();
  try {
    const t = new LinuxProcessTable();
    const all = await t.list();
    const p = all.find((x) => x.pid === child.pid);
    assert.ok(p, `pid ${child.pid} not listed`);
    assert.equal(p.comm, "sleep");
    assert.equal(p.exe, await Deno.realPath(p.exe!));
    assert.match(p.exe!, /\/sleep$/);
    assert.equal(p.uid, Deno.uid());
    const self = all.find((x) => x.pid === Deno.pid);
    assert.ok(self, "own process not listed");
    assert.equal(self.exe, t.selfExe);
    assert.ok(
      p.startTime >= self.startTime && self.startTime > 0,
      `child start ${p.startTime} must not precede ours ${self.startTime}`,
    );
    // A child starts in its parent's control groups.
    assert.equal(
      self.cgroup,
      (await Deno.readTextFile("/proc/self/cgroup")).trim(),
    );
    assert.equal(p.cgroup, self.cgroup);
    // The executable's file identity, the same through any path to it.
    assert.ok(p.exeId !== undefined);
    assert.equal(p.exeId, await t.fileId(p.exe!));
    assert.equal(self.exeId, await t.fileId(t.selfExe));
    assert.notEqual(p.exeId, self.exeId);
    assert.equal(await t.fileId("/no/such/file"), undefined);
    assert.deepEqual(await t.get(child.pid), p);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.status;
  }
});

Deno.test("LinuxProcessTable: kill reports sent, then gone once the process is reaped", async () => {
  const child = spawnSleep();
  const t = new LinuxProcessTable();
  assert.equal(t.kill(child.pid, "SIGTERM"), "sent");
  const status = await child.status;
  assert.equal(status.signal, "SIGTERM");
  assert.equal(t.kill(child.pid, "SIGKILL"), "gone");
  assert.equal(await t.get(child.pid), undefined);
});

/** Whether `setpriv` (util-linux) is here to run a process as another user. */
function hasSetpriv(): boolean {
  try {
    return new Deno.Command("setpriv", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    })
      .outputSync().success;
  } catch {
    console.log("skipped: the denied-signal test needs setpriv (util-linux)");
    return false;
  }
}

Deno.test({
  name: "LinuxProcessTable: kill reports denied for another user's process",
  ignore: !isRoot || !hasSetpriv(),
  async fn() {
    const child = spawnSleep(); // runs as root
    const home = await Deno.makeTempDir();
    try {
      await Deno.chown(home, 65532, 65532);
      const mod = new URL("../../lib/enforce/proc.ts", import.meta.url).href;
      const code =
        `const { LinuxProcessTable } = await import(${
          JSON.stringify(mod)
        });\n` +
        `const t = new LinuxProcessTable();\n` +
        `const p = await t.get(${child.pid});\n` +
        `console.log(JSON.stringify({ kill: t.kill(${child.pid}, "SIGTERM"), exe: p?.exe ?? null, comm: p?.comm }));`;
      const out = await new Deno.Command("setpriv", {
        args: [
          "--reuid=65532",
          "--regid=65532",
          "--clear-groups",
          Deno.execPath(),
          "eval",
          "--no-config",
          code,
        ],
        env: { DENO_DIR: home, HOME: home, NO_COLOR: "1" },
        stdin: "null",
      }).output();
      const stderr = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 0, stderr);
      const report = JSON.parse(new TextDecoder().decode(out.stdout));
      assert.deepEqual(report, { kill: "denied", exe: null, comm: "sleep" });
    } finally {
      child.kill("SIGKILL");
      await child.status;
      await Deno.remove(home, { recursive: true });
    }
  },
});
if (!isRoot) {
  console.log("skipped: the EPERM case of LinuxProcessTable.kill needs root");
}
