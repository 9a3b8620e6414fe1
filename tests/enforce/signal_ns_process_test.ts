/**
 * Signal enforcement against real processes, in a private PID namespace so
 * that nothing outside the test can be signalled. The work happens in
 * `support/signal_ns_driver.ts` (PID 1 of the namespace); this file starts it
 * and asserts on its JSON report.
 */
import assert from "node:assert/strict";
import { namespaceUnavailable } from "../../sim/host.ts";

interface Summary {
  pid: number;
  alive: boolean;
  signal: string | null;
}

interface Event {
  t: number;
  level?: string;
  msg: string;
  pid?: number;
  comm?: string;
  signal?: string;
  reason?: string;
  target_uid?: number;
  detail?: string;
}

const driver = new URL("../support/signal_ns_driver.ts", import.meta.url)
  .pathname;

const skip = await namespaceUnavailable();
if (skip) console.log(`skipped: signal_ns_test: ${skip}`);

Deno.test({
  name:
    "signal enforcement stops real workload processes in a PID namespace and spares the rest",
  ignore: skip !== undefined,
  async fn() {
    const out = await new Deno.Command("unshare", {
      args: [
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        Deno.execPath(),
        "run",
        "-A",
        "--no-config",
        driver,
      ],
      env: { NO_COLOR: "1" },
      stdin: "null",
      signal: AbortSignal.timeout(120_000),
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, `driver failed:\n${stdout}\n${stderr}`);
    const report = JSON.parse(stdout);

    // Privileged enforcer (root, CAP_KILL).
    const root = report.root as Record<string, Summary> & {
      graceMs: number;
      stopped: unknown;
      markerGone: boolean;
      events: Event[];
    };
    const ev = root.events;
    const signals = (pid: number) =>
      ev.filter((e) =>
        /^sent SIG(TERM|KILL) to main process$/.test(String(e.msg)) &&
        e.pid === pid
      );

    assert.equal(root.markerGone, true, "the marker is gone after close()");
    const firstSignal = ev.findIndex((e) => e.signal !== undefined);
    assert.ok(firstSignal > 0, "some signal was sent");
    assert.equal(
      ev.findIndex((e) => e.msg === "marker removed"),
      0,
      "the marker is removed before any signal",
    );

    // The long-named workload ignoring SIGTERM: TERM, then KILL after the grace.
    assert.equal(root.stubborn.signal, "SIGKILL");
    const st = signals(root.stubborn.pid);
    assert.deepEqual(st.map((e) => e.signal), ["SIGTERM", "SIGKILL"]);
    assert.equal(st[0].comm, "payments-worker", "matched by truncated comm");
    assert.equal(st[0].reason, "lease lost (test)");
    assert.ok(
      st[1].t - st[0].t >= root.graceMs - 5,
      `SIGKILL ${st[1].t - st[0].t} ms after SIGTERM, grace ${root.graceMs} ms`,
    );

    // Stopped by SIGTERM: the renamed copy (matched by executable basename),
    // the plain copy and the copy the "kubelet" restarted while gated.
    for (const name of ["renamed", "first", "restarted"]) {
      assert.equal(
        root[name].signal,
        "SIGTERM",
        `${name}: ${JSON.stringify(root[name])}`,
      );
      assert.equal(signals(root[name].pid)[0]?.signal, "SIGTERM", name);
    }
    assert.equal(signals(root.renamed.pid)[0].comm, "renamed");
    assert.deepEqual(
      root.stopped,
      {
        stopped: true,
        detail: "no process named payments-worker-main is running",
      },
      "with every target gone the workload is known to be stopped",
    );

    // Spared: a sidecar, a name that is only a prefix, another workload
    // whose name has the same first 15 bytes (the same comm), a copy of the
    // enforcer's own binary.
    for (const name of ["shipper", "prefix", "lookalike", "ownCopy"]) {
      assert.equal(root[name].alive, true, `${name} must survive`);
      assert.deepEqual(signals(root[name].pid), [], name);
    }

    // A child of another name, in the target's session, in a group of its
    // own and ignoring SIGTERM: stopped with the target, SIGTERM then SIGKILL.
    const q = report.queue as {
      leader: Summary;
      childPid: number;
      childAliveAtTerm: boolean;
      whileChild: { stopped: boolean; detail: string };
      afterChild: { stopped: boolean; detail: string };
      events: Event[];
    };
    assert.equal(q.leader.signal, "SIGTERM", JSON.stringify(q.events));
    const groupTerm = q.events.find((e) =>
      /^sent SIG(TERM|KILL) to main process$/.test(String(e.msg)) &&
      e.pid === q.leader.pid
    );
    assert.equal(
      (groupTerm as Record<string, unknown> | undefined)?.pgid,
      q.leader.pid,
      "the target leading its group is signalled as a group",
    );
    assert.deepEqual(
      q.events.filter((e) =>
        /^sent SIG(TERM|KILL) to main process$/.test(String(e.msg)) &&
        e.pid === q.childPid
      ).map((e) => e.signal),
      ["SIGTERM", "SIGKILL"],
      "the child of another name is signalled too",
    );
    if (q.childAliveAtTerm) {
      assert.equal(
        q.whileChild.stopped,
        false,
        "not stopped while the child runs",
      );
      assert.match(q.whileChild.detail, new RegExp(`${q.childPid} sleep`));
    }
    assert.deepEqual(q.afterChild, {
      stopped: true,
      detail: "no process named queue-runner is running",
    });

    // A double-forked daemon, found by the target's control group.
    const d = report.daemon as {
      skipped?: string;
      runner: Summary;
      daemonPid: number;
      stopped: { stopped: boolean; detail: string };
      events: Event[];
    };
    if (d.skipped !== undefined) {
      console.log(`skipped: the double-forked daemon case: ${d.skipped}`);
    } else {
      assert.equal(d.runner.signal, "SIGTERM", JSON.stringify(d.events));
      assert.deepEqual(
        d.events.filter((e) =>
          /^sent SIG(TERM|KILL) to main process$/.test(String(e.msg)) &&
          e.pid === d.daemonPid
        ).map((e) => e.signal),
        ["SIGTERM"],
        "the daemon is signalled although it left the group and session",
      );
      assert.deepEqual(d.stopped, {
        stopped: true,
        detail: "no process named daemon-runner is running",
      });
    }

    // Unprivileged enforcer (uid 1000, no capabilities).
    const u = report.unprivileged as {
      code: number;
      output: { uid: number; capEff: string; events: Event[] };
      foreign: Summary;
      own: Summary;
    };
    assert.equal(u.code, 0);
    assert.equal(u.output.uid, 1000);
    assert.equal(BigInt(`0x${u.output.capEff}`), 0n, "runs without CAP_KILL");
    const warns = u.output.events.filter((e) => e.level === "WARN");
    assert.equal(warns.length, 1, JSON.stringify(warns));
    assert.equal(warns[0].pid, u.foreign.pid);
    assert.equal(warns[0].target_uid, 65532);
    assert.equal(warns[0].msg, "SIGTERM failed", "the Go helper's message");
    assert.match(String(warns[0].detail), /CAP_KILL/);
    assert.match(String(warns[0].detail), /runAsUser/);
    assert.match(String(warns[0].detail), /BERTH_ENFORCE=probe/);
    assert.equal(
      u.foreign.alive,
      true,
      "another user's process is out of reach",
    );
    assert.equal(u.own.signal, "SIGTERM", "the enforcer keeps working");
  },
});
