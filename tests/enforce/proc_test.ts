import assert from "node:assert/strict";
import { matchesTarget, type ProcessInfo } from "../../lib/enforce/proc.ts";

/** A process named `comm` (what the kernel keeps), with the given fields. */
const p = (comm: string, o: Partial<ProcessInfo> = {}): ProcessInfo => ({
  pid: 10,
  comm,
  startTime: 1,
  state: "S",
  ...o,
});

const LONG = "payments-worker-main"; // 20 bytes: the kernel keeps 15
const PEER = "worker-payments-1"; // cut to worker-payments, as -2 is
const UNI = "wörker-ünïcode-x"; // 19 bytes; byte 15 is inside "ï"
const UNI_KEPT = new TextDecoder().decode(
  new TextEncoder().encode(UNI).subarray(0, 15),
);

Deno.test("matchesTarget: by executable basename, by a comm that cannot have been cut, a cut comm only by its full name", () => {
  const cases: [string, ProcessInfo, string, boolean][] = [
    [
      "renamed, its executable says",
      p("renamed", { exe: "/bin/app" }),
      "app",
      true,
    ],
    ["a short comm is the whole name", p("app"), "app", true],
    ["another short name", p("apple"), "app", false],
    ["an empty target matches nothing", p(""), "", false],
    ["a cut comm alone", p("payments-worker"), LONG, false],
    [
      "a cut comm, argv[0] the full name",
      p("payments-worker", {
        cmdline: [`/opt/${LONG}`],
      }),
      LONG,
      true,
    ],
    [
      "a #! script, the script argument 1",
      p("payments-worker", {
        cmdline: ["/bin/sh", `/opt/${LONG}`],
      }),
      LONG,
      true,
    ],
    [
      "a cut comm, another full name",
      p("payments-worker", {
        cmdline: ["/opt/payments-worker-aux"],
      }),
      LONG,
      false,
    ],
    [
      "the target only an argument of its executable",
      p("worker-payments", {
        exe: "/app/worker-payments-2",
        cmdline: ["/app/worker-payments-2", "--peer", PEER],
      }),
      PEER,
      false,
    ],
    [
      "the target only an argument, executable unreadable",
      p(
        "worker-payments",
        { cmdline: ["worker-payments-2", "--peer", PEER] },
      ),
      PEER,
      false,
    ],
    [
      "the target an argument of a script",
      p("worker-payments", {
        exe: "/usr/bin/python3.12",
        cmdline: ["/usr/bin/python3", "/app/worker-payments-2", PEER],
      }),
      PEER,
      false,
    ],
    [
      "the script after its interpreter's one argument",
      p("worker-payments", {
        exe: "/usr/bin/python3.12",
        cmdline: ["/usr/bin/python3", "-u", `/app/${PEER}`],
      }),
      PEER,
      true,
    ],
    [
      "a symlink named like the target to a versioned binary",
      p(
        "worker-payments",
        { exe: `/app/${PEER}.4.2`, cmdline: [`/app/${PEER}`] },
      ),
      PEER,
      true,
    ],
    [
      "its argv rewritten: the executable's name decides",
      p("worker-payments", {
        exe: "/app/worker-payments-2",
        cmdline: ["worker: idle"],
      }),
      PEER,
      false,
    ],
    [
      "a symlink named like the target to another binary",
      p("worker-payments", {
        exe: "/usr/bin/sleep",
        cmdline: [`/app/${PEER}`, "1000"],
      }),
      PEER,
      true,
    ],
    [
      "a cut inside a multi-byte character",
      p(UNI_KEPT, {
        cmdline: [`/bin/${UNI}`],
      }),
      UNI,
      true,
    ],
    [
      "a cut multi-byte name, another full name",
      p(UNI_KEPT, {
        cmdline: ["/bin/wörker-ünïcode-y"],
      }),
      UNI,
      false,
    ],
    [
      "a comm that is not what the kernel keeps",
      p("wörker-ünïcode"),
      UNI,
      false,
    ],
  ];
  for (const [what, proc, target, expected] of cases) {
    assert.equal(matchesTarget(proc, target), expected, what);
  }
});
