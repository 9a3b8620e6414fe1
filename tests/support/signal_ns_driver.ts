/**
 * Runs real signal enforcement against real processes, inside a private PID
 * namespace made by `tests/enforce/signal_ns_process_test.ts` (`unshare --pid --fork
 * --mount-proc`), where this script is PID 1 and nothing else on the machine
 * can be signalled by mistake. It prints one JSON report on stdout that the
 * test asserts on.
 *
 * Two roles, chosen by the first argument:
 * - `orchestrate` (root): starts look-alike workloads, runs a privileged
 *   enforcer, then starts the unprivileged role as another user.
 * - `unprivileged <target> <foreign-pid> <own-pid>`: an enforcer without
 *   CAP_KILL, facing one target of another user and one of its own.
 *
 * @module
 */
import { waitFor as waitForCondition } from "./wait.ts";
import type { MarkerStore } from "../../lib/enforce/enforcer.ts";
import { SignalEnforcer } from "../../lib/enforce/signal.ts";
import { systemClock } from "../../lib/state/clock.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { LinuxProcessTable } from "../../lib/enforce/proc.ts";
import type { MarkerDeadlines } from "../../lib/state/marker.ts";

/** What the enforcer did, in order, with monotonic times. */
interface Event {
  t: number;
  [k: string]: unknown;
}

/** Collects log records and marker operations into one ordered list. */
function recorder(): {
  events: Event[];
  logger: ReturnType<typeof createLogger>;
} {
  const events: Event[] = [];
  const logger = createLogger({
    format: "json",
    level: "DEBUG",
    write: (line) => events.push({ t: performance.now(), ...JSON.parse(line) }),
  });
  return { events, logger };
}

/** A table that counts its scans, so the driver can wait for rescans instead of sleeping. */
class CountingTable extends LinuxProcessTable {
  scans = 0;
  override list() {
    this.scans++;
    return super.list();
  }
}

function waitFor(
  what: string,
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<boolean> {
  return waitForCondition(cond, { what, timeoutMs, intervalMs: 20 });
}

async function readComm(pid: number): Promise<string | undefined> {
  try {
    return (await Deno.readTextFile(`/proc/${pid}/comm`)).trimEnd();
  } catch {
    return undefined;
  }
}

/**
 * Whether `pid` has exited: gone, or a zombie (this driver is PID 1, the
 * parent of every orphan, and does not reap what it did not start).
 */
async function exited(pid: number): Promise<boolean> {
  try {
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) ===
      "Z";
  } catch {
    return true;
  }
}

/** A started process and what became of it. */
class Proc {
  child: Deno.ChildProcess;
  status: Deno.CommandStatus | undefined;
  constructor(cmd: string, args: string[], env?: Record<string, string>) {
    this.child = new Deno.Command(cmd, {
      args,
      env,
      stdin: "piped", // kept open: a `read` on it blocks for ever
      stdout: "null",
      stderr: "inherit",
    }).spawn();
    this.child.status.then((s) => this.status = s);
  }
  get pid(): number {
    return this.child.pid;
  }
  get alive(): boolean {
    return this.status === undefined;
  }
  summary() {
    return {
      pid: this.pid,
      alive: this.alive,
      signal: this.status?.signal ?? null,
    };
  }
}

const DEADLINES: MarkerDeadlines = {
  gateClosesBootMs: 1,
  leaseDeadlineBootMs: 2,
};

async function orchestrate(): Promise<Record<string, unknown>> {
  const report: Record<string, unknown> = { pid: Deno.pid };
  const dir = await Deno.makeTempDir({ prefix: "berth-signal-ns-" });
  await Deno.chmod(dir, 0o755);
  const started: Proc[] = [];
  const start = (cmd: string, args: string[], env?: Record<string, string>) => {
    const p = new Proc(cmd, args, env);
    started.push(p);
    return p;
  };
  try {
    const sleep = await Deno.realPath("/usr/bin/sleep");
    const target = "payments-worker-main"; // 20 bytes: comm keeps "payments-worker"
    for (const d of ["a", "b", "c", "u"]) await Deno.mkdir(`${dir}/${d}`);
    await Deno.symlink(sleep, `${dir}/a/${target}`);
    await Deno.symlink(sleep, `${dir}/a/log-shipper`);
    await Deno.symlink(sleep, `${dir}/a/payments`);
    // Same first 15 bytes as the target, so the same comm: another workload.
    await Deno.symlink(sleep, `${dir}/a/payments-worker-aux`);
    await Deno.copyFile("/usr/bin/bash", `${dir}/b/${target}`);
    await Deno.chmod(`${dir}/b/${target}`, 0o755);
    await Deno.symlink(Deno.execPath(), `${dir}/c/${target}`);

    // The workload under its long name; it ignores SIGTERM (an ignored
    // disposition survives exec), so only the SIGKILL after the grace stops it.
    const stubborn = start("/usr/bin/bash", [
      "-c",
      `trap '' TERM; exec ${dir}/a/${target} 1000`,
    ]);
    // The workload that renamed itself: found by its executable's basename.
    const renamed = start(`${dir}/b/${target}`, [
      "-c",
      `printf renamed > /proc/$$/comm; read -r line`,
    ]);
    // A plain copy the kubelet will "restart".
    const first = start(`${dir}/a/${target}`, ["1000"]);
    // Must survive: a sidecar, a name that is only a prefix, another copy of
    // the enforcer's own executable under the target's name.
    const shipper = start(`${dir}/a/log-shipper`, ["1000"]);
    const prefix = start(`${dir}/a/payments`, ["1000"]);
    const lookalike = start(`${dir}/a/payments-worker-aux`, ["1000"]);
    const ownCopy = start(`${dir}/c/${target}`, [
      "eval",
      "--no-config",
      "setInterval(() => {}, 1e9)",
    ]);

    await waitFor(
      "the look-alike processes to start",
      async () =>
        (await readComm(stubborn.pid)) === "payments-worker" &&
        (await readComm(renamed.pid)) === "renamed" &&
        (await readComm(first.pid)) === "payments-worker" &&
        (await readComm(lookalike.pid)) === "payments-worker" &&
        (await readComm(ownCopy.pid)) === "payments-worker",
    );

    const { events, logger } = recorder();
    const markerPath = `${dir}/healthy`;
    const marker: MarkerStore = {
      async writeMarker() {
        await Deno.writeTextFile(markerPath, "ok");
      },
      async removeMarker() {
        await Deno.remove(markerPath).catch(() => {});
        events.push({ t: performance.now(), msg: "marker removed" });
      },
    };
    const table = new CountingTable();
    const graceMs = 1500;
    const enforcer = new SignalEnforcer({
      target,
      graceMs,
      scanIntervalMs: 100,
      clock: systemClock,
      logger,
      processTable: table,
      marker,
    });
    report.root = { graceMs, events, target };
    await enforcer.open(DEADLINES);
    await enforcer.close("lease lost (test)");
    const markerGone = await Deno.stat(markerPath).then(
      () => false,
      () => true,
    );

    await waitFor("the first workload copy to stop", () => !first.alive);
    const restarted = start(`${dir}/a/${target}`, ["1000"]);
    await waitFor("the restarted copy to stop", () => !restarted.alive);
    await waitFor("the SIGTERM-ignoring copy to stop", () => !stubborn.alive);
    await waitFor("the renamed copy to stop", () => !renamed.alive);
    const scans = table.scans;
    await waitFor("two more rescans", () => table.scans >= scans + 2);
    const stopped = await enforcer.workloadStopped(AbortSignal.timeout(10_000));
    await enforcer.dispose();
    report.root = {
      graceMs,
      target,
      markerGone,
      events,
      stubborn: stubborn.summary(),
      renamed: renamed.summary(),
      first: first.summary(),
      restarted: restarted.summary(),
      shipper: shipper.summary(),
      prefix: prefix.summary(),
      lookalike: lookalike.summary(),
      ownCopy: ownCopy.summary(),
      stopped,
    };

    // A workload leading its own session whose child has another name, sits
    // in a process group of its own (job control) and ignores SIGTERM: the
    // child is the workload's too, so it gets SIGTERM and then SIGKILL, and
    // the workload is not stopped while it lives.
    await Deno.mkdir(`${dir}/q`);
    await Deno.copyFile("/usr/bin/bash", `${dir}/q/queue-runner`);
    await Deno.chmod(`${dir}/q/queue-runner`, 0o755);
    const queue = start("setsid", [
      `${dir}/q/queue-runner`,
      "-c",
      `set -m; (trap '' TERM; exec ${sleep} 1000) & echo $! > ${dir}/q/child; wait`,
    ]);
    let childPid = 0;
    await waitFor("the queue runner's child to start", async () => {
      childPid = Number(
        await Deno.readTextFile(`${dir}/q/child`).catch(() => "0"),
      );
      return childPid > 0 && (await readComm(childPid)) === "sleep" &&
        (await readComm(queue.pid)) === "queue-runner";
    });
    const q = recorder();
    const queueEnforcer = new SignalEnforcer({
      target: "queue-runner",
      graceMs: 200,
      scanIntervalMs: 100,
      clock: systemClock,
      logger: q.logger,
      processTable: new LinuxProcessTable(),
      marker: {
        writeMarker: () => Promise.resolve(),
        removeMarker: () => Promise.resolve(),
      },
    });
    await queueEnforcer.open(DEADLINES);
    await queueEnforcer.close("lease lost (queue test)");
    // Right after the SIGTERMs, before the grace: the child still runs.
    const whileChild = await queueEnforcer.workloadStopped(
      AbortSignal.abort(),
    );
    const childAliveAtTerm = (await readComm(childPid)) === "sleep";
    await waitFor("the queue runner to stop", () => !queue.alive);
    await waitFor(
      "the queue runner's child to be stopped",
      () => exited(childPid),
    );
    const afterChild = await queueEnforcer.workloadStopped(
      AbortSignal.timeout(10_000),
    );
    await queueEnforcer.dispose();
    report.queue = {
      leader: queue.summary(),
      childPid,
      childAliveAtTerm,
      whileChild,
      afterChild,
      events: q.events,
    };

    // A double-forked daemon: it leaves the target's group and session and
    // loses its parent, but stays in the target's control group, which the
    // kubelet gives every container. Needs a cgroup v2 hierarchy to make
    // that group in.
    report.daemon = await daemonScenario(dir, start);

    // An enforcer without CAP_KILL: uid 1000 facing targets of uid 65532 and 1000.
    await Deno.symlink(sleep, `${dir}/u/batch-runner`);
    const asUser = (uid: number) => [
      `--reuid=${uid}`,
      `--regid=${uid}`,
      "--clear-groups",
    ];
    const foreign = start("setpriv", [
      ...asUser(65532),
      `${dir}/u/batch-runner`,
      "1000",
    ]);
    const own = start("setpriv", [
      ...asUser(1000),
      `${dir}/u/batch-runner`,
      "1000",
    ]);
    await waitFor(
      "the batch runners to start",
      async () =>
        (await readComm(foreign.pid)) === "batch-runner" &&
        (await readComm(own.pid)) === "batch-runner",
    );
    const home = `${dir}/home`;
    await Deno.mkdir(home);
    await Deno.chown(home, 1000, 1000);
    const out = await new Deno.Command("setpriv", {
      args: [
        ...asUser(1000),
        Deno.execPath(),
        "run",
        "-A",
        "--no-config",
        new URL(import.meta.url).pathname,
        "unprivileged",
        "batch-runner",
        String(foreign.pid),
        String(own.pid),
      ],
      env: { DENO_DIR: home, HOME: home, NO_COLOR: "1" },
      stdin: "null",
      stderr: "inherit",
      signal: AbortSignal.timeout(60_000),
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    await waitFor("the own-uid batch runner to stop", () => !own.alive);
    report.unprivileged = {
      code: out.code,
      output: text.trim() === "" ? null : JSON.parse(text),
      foreign: foreign.summary(),
      own: own.summary(),
    };
  } finally {
    for (const p of started) {
      if (p.alive) {
        try {
          p.child.kill("SIGKILL");
        } catch { /* exited meanwhile */ }
      }
      await p.child.status;
    }
    await Deno.remove(dir, { recursive: true });
  }
  return report;
}

/** Where the cgroup v2 hierarchy is mounted, from /proc/self/mountinfo; undefined without one. */
async function cgroup2Root(): Promise<string | undefined> {
  const info = await Deno.readTextFile("/proc/self/mountinfo");
  for (const line of info.split("\n")) {
    const [mount, fs] = line.split(" - ");
    if (fs?.startsWith("cgroup2 ")) return mount.split(" ")[4];
  }
  return undefined;
}

async function daemonScenario(
  dir: string,
  start: (cmd: string, args: string[]) => Proc,
): Promise<Record<string, unknown>> {
  const root = await cgroup2Root();
  if (root === undefined) return { skipped: "no cgroup v2 hierarchy mounted" };
  // Named as the kubelet names its groups: signal mode uses only a
  // container's control groups.
  const group = `${root}/kubepods-berth-signal-test-${Deno.pid}-${Date.now()}`;
  try {
    await Deno.mkdir(group);
  } catch (e) {
    return { skipped: `cannot make a cgroup at ${group}: ${e}` };
  }
  const procs: Proc[] = [];
  try {
    await Deno.mkdir(`${dir}/d`);
    await Deno.copyFile("/usr/bin/bash", `${dir}/d/daemon-runner`);
    await Deno.chmod(`${dir}/d/daemon-runner`, 0o755);
    // The target joins the container's group, starts a daemon that calls
    // setsid from a subshell that exits at once, and waits.
    const runner = start("setsid", [
      `${dir}/d/daemon-runner`,
      "-c",
      `echo $$ > ${group}/cgroup.procs
( setsid sh -c 'echo $$ > ${dir}/d/daemon; exec sleep 1000' & )
sleep 1000 & wait`,
    ]);
    procs.push(runner);
    let daemonPid = 0;
    await waitFor("the daemon to start", async () => {
      daemonPid = Number(
        await Deno.readTextFile(`${dir}/d/daemon`).catch(() => "0"),
      );
      if (!(daemonPid > 0) || (await readComm(daemonPid)) !== "sleep") {
        return false;
      }
      const stat = await Deno.readTextFile(`/proc/${daemonPid}/stat`);
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // ppid 1 (this driver), its own group and session.
      return f[1] === "1" && f[2] === String(daemonPid) &&
        f[3] === String(daemonPid);
    });
    const d = recorder();
    const enforcer = new SignalEnforcer({
      target: "daemon-runner",
      graceMs: 200,
      scanIntervalMs: 100,
      clock: systemClock,
      logger: d.logger,
      processTable: new LinuxProcessTable(),
      marker: {
        writeMarker: () => Promise.resolve(),
        removeMarker: () => Promise.resolve(),
      },
    });
    await enforcer.open(DEADLINES);
    await enforcer.close("lease lost (daemon test)");
    await waitFor("the daemon runner to stop", () => !runner.alive);
    await waitFor(
      "the double-forked daemon to be stopped",
      () => exited(daemonPid),
    );
    const stopped = await enforcer.workloadStopped(AbortSignal.timeout(10_000));
    await enforcer.dispose();
    return {
      runner: runner.summary(),
      daemonPid,
      stopped,
      events: d.events,
    };
  } finally {
    for (const p of procs) {
      if (p.alive) p.child.kill("SIGKILL");
      await p.child.status;
    }
    const left = await Deno.readTextFile(`${group}/cgroup.procs`).catch(() =>
      ""
    );
    for (const pid of left.split("\n").filter((l) => l !== "")) {
      try {
        Deno.kill(Number(pid), "SIGKILL");
      } catch { /* exited meanwhile */ }
    }
    await waitFor(
      "the test cgroup to empty",
      async () =>
        (await Deno.readTextFile(`${group}/cgroup.procs`).catch(() => ""))
          .trim() === "",
    );
    await Deno.remove(group);
  }
}

async function unprivileged(
  target: string,
  foreignPid: number,
  ownPid: number,
): Promise<Record<string, unknown>> {
  const { events, logger } = recorder();
  const marker: MarkerStore = {
    writeMarker: () => Promise.resolve(),
    removeMarker: () => Promise.resolve(),
  };
  const table = new CountingTable();
  const enforcer = new SignalEnforcer({
    target,
    graceMs: 0,
    scanIntervalMs: 100,
    clock: systemClock,
    logger,
    processTable: table,
    marker,
  });
  const status = await Deno.readTextFile("/proc/self/status");
  await enforcer.close("lease lost (unprivileged test)");
  await waitFor(
    "the refused and the sent signal",
    () =>
      events.some((e) => e.level === "WARN" && e.pid === foreignPid) &&
      events.some((e) => e.signal === "SIGTERM" && e.pid === ownPid),
  );
  const scans = table.scans;
  await waitFor("three more rescans", () => table.scans >= scans + 3);
  await enforcer.close("lease lost (unprivileged test)");
  await enforcer.dispose();
  return {
    uid: Deno.uid(),
    capEff: /^CapEff:\s*(\S+)/m.exec(status)?.[1],
    events,
  };
}

if (import.meta.main) {
  const [role = "orchestrate", ...rest] = Deno.args;
  let report: Record<string, unknown>;
  try {
    report = role === "unprivileged"
      ? await unprivileged(rest[0], Number(rest[1]), Number(rest[2]))
      : await orchestrate();
  } catch (e) {
    report = { error: e instanceof Error ? e.stack ?? e.message : String(e) };
  }
  console.log(JSON.stringify(report));
  Deno.exit(report.error === undefined ? 0 : 1);
}
