import assert from "node:assert/strict";
import type { ProcessInfo } from "../../lib/enforce/proc.ts";
import { matchesTarget } from "../../lib/enforce/target.ts";

Deno.test("matchesTarget: truncation that splits a multi-byte character matches what the kernel keeps", () => {
  const target = "wörker-ünïcode-x"; // 19 bytes; byte 15 is inside "ï"
  const kept = new TextDecoder().decode(
    new TextEncoder().encode(target).subarray(0, 15),
  );
  const p = (comm: string, cmdline?: string[]): ProcessInfo => ({
    pid: 10,
    comm,
    cmdline,
    startTime: 1,
    state: "S",
  });
  assert.equal(matchesTarget(p(kept, [`/bin/${target}`]), target), true);
  assert.equal(
    matchesTarget(p(kept, ["/bin/wörker-ünïcode-y"]), target),
    false,
  );
  assert.equal(matchesTarget(p("wörker-ünïcode"), target), false);
  assert.equal(
    matchesTarget(p(""), ""),
    false,
    "an empty target matches nothing",
  );
});

Deno.test("matchesTarget: by executable basename, by a comm that cannot have been cut, a cut comm only with the full name", () => {
  const p = (o: Partial<ProcessInfo>): ProcessInfo => ({
    pid: 10,
    comm: "x",
    startTime: 1,
    state: "S",
    ...o,
  });
  // Renamed itself: the executable still says what it is.
  assert.equal(
    matchesTarget(p({ comm: "renamed", exe: "/bin/app" }), "app"),
    true,
  );
  // A short comm is the whole name.
  assert.equal(matchesTarget(p({ comm: "app" }), "app"), true);
  assert.equal(matchesTarget(p({ comm: "apple" }), "app"), false);
  // 20 bytes: the kernel keeps 15, which alone could be another workload's.
  const long = "payments-worker-main";
  assert.equal(matchesTarget(p({ comm: "payments-worker" }), long), false);
  assert.equal(
    matchesTarget(
      p({ comm: "payments-worker", cmdline: [`/opt/${long}`] }),
      long,
    ),
    true,
  );
  // A `#!` script started through its interpreter: the script is argument 1.
  assert.equal(
    matchesTarget(
      p({ comm: "payments-worker", cmdline: ["/bin/sh", `/opt/${long}`] }),
      long,
    ),
    true,
  );
  assert.equal(
    matchesTarget(
      p({ comm: "payments-worker", cmdline: ["/opt/payments-worker-aux"] }),
      long,
    ),
    false,
  );
});

Deno.test("matchesTarget: an argument that names the target is not the full name of a cut comm", () => {
  const target = "worker-payments-1";
  const p = (q: Partial<ProcessInfo>): ProcessInfo => ({
    pid: 10,
    comm: "worker-payments",
    startTime: 1,
    state: "S",
    ...q,
  });
  // Its own executable names it, and the target is only its argument.
  assert.equal(
    matchesTarget(
      p({
        exe: "/app/worker-payments-2",
        cmdline: ["/app/worker-payments-2", "--peer", target],
      }),
      target,
    ),
    false,
  );
  // The executable cannot be read: argv[0] names it.
  assert.equal(
    matchesTarget(
      p({ cmdline: ["worker-payments-2", "--peer", target] }),
      target,
    ),
    false,
  );
  // A script run by its interpreter, with the target as its argument.
  assert.equal(
    matchesTarget(
      p({
        exe: "/usr/bin/python3.12",
        cmdline: ["/usr/bin/python3", "/app/worker-payments-2", target],
      }),
      target,
    ),
    false,
  );
  // The script itself, after the interpreter's one argument.
  assert.equal(
    matchesTarget(
      p({
        exe: "/usr/bin/python3.12",
        cmdline: ["/usr/bin/python3", "-u", `/app/${target}`],
      }),
      target,
    ),
    true,
  );
  // A symlink with the target's name to a versioned binary: the name it was
  // started by decides, though the binary's name has the same 15 bytes.
  assert.equal(
    matchesTarget(
      p({ exe: `/app/${target}.4.2`, cmdline: [`/app/${target}`] }),
      target,
    ),
    true,
  );
  // Its argv rewritten: the executable's name decides.
  assert.equal(
    matchesTarget(
      p({ exe: "/app/worker-payments-2", cmdline: ["worker: idle"] }),
      target,
    ),
    false,
  );
  // A symlink with the target's name to a binary of another name.
  assert.equal(
    matchesTarget(
      p({ exe: "/usr/bin/sleep", cmdline: [`/app/${target}`, "1000"] }),
      target,
    ),
    true,
  );
});
