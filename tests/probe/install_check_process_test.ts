/**
 * The probe as it runs in a main image without glibc: `install-check` (and
 * `acquire`'s install) with the `deno` executable standing in for the
 * compiled binary (it is linked the same way), the installed copy compared
 * byte for byte with its source, and run under `chroot` in a root holding
 * nothing but the state volume at `/berth`, `/proc`, `/dev` and a copy of the
 * sources (`/berth/check run -A /src/main.ts check ...`: plain
 * `/berth/check check` would be deno's type checker). The refusals of
 * `install-check` leave nothing behind, on a full or read-only volume too.
 *
 * The chroot and volume tests need root and a mount namespace
 * (`unshare --mount`); they are skipped with the reason elsewhere.
 */
import { deepEqual, equal, match, ok, rejects } from "node:assert/strict";
import { existsSync } from "node:fs";
import { installProbe } from "../../lib/cmd/install_check.ts";
import { bytesSource, type ElfInfo, readElf } from "../../lib/probe/elf.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { StateDir } from "../../lib/state/state_dir.ts";
import { REPO_ROOT, runCli, runExecutable } from "../support/cli.ts";
import { cliArgv } from "../support/cli.ts";
import {
  inMountNamespace,
  mountNamespaceUnavailable,
} from "../support/mount_namespace.ts";
import { shortTempDir } from "../support/short_dir.ts";
import { syntheticElf } from "./synthetic_elf.ts";

const DENO = Deno.execPath();
const LIBS = ["c", "dl", "gcc_s", "ld.so", "m", "pthread", "rt"];
const FAR = { gateClosesBootMs: 1e15, leaseDeadlineBootMs: 1e15 };

const skipRoot = mountNamespaceUnavailable("mount namespace, chroot, tmpfs");
if (skipRoot) console.log(`skipping the chroot and volume tests: ${skipRoot}`);

/** Names in a directory, sorted. */
function names(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
}

/** The headers of a file, read whole (a test may). */
function headers(path: string): ElfInfo {
  return readElf(bytesSource(Deno.readFileSync(path)), path);
}

/**
 * Checks that `copy` is `source` with only its interpreter and needed names
 * rewritten: same size, same trailing bytes, every other byte equal, and
 * the names now under `dir`.
 */
function assertRewrittenCopy(source: string, copy: string, dir: string) {
  const a = Deno.readFileSync(source);
  const b = Deno.readFileSync(copy);
  equal(b.length, a.length, "same size");
  deepEqual(b.subarray(b.length - 4096), a.subarray(a.length - 4096));
  const info = headers(source);
  const strings = [info.interp!, ...info.needed];
  let differing = 0;
  for (let i = 0; i < a.length; i++) {
    if (a[i] === b[i]) continue;
    differing++;
    ok(
      strings.some((s) => i >= s.offset && i < s.offset + s.capacity),
      `byte ${i} differs outside the rewritten names`,
    );
  }
  ok(differing > 0);
  const after = headers(copy);
  equal(after.interp?.value, `${dir}/ld.so`);
  for (const n of after.needed) match(n.value, new RegExp(`^${dir}/`));
}

Deno.test("acquire's install, compiled: the rewritten copy and its loader and libraries, which run", async () => {
  const dir = shortTempDir();
  if (!dir) return console.log("skipped: no free /tmp/XX directory");
  try {
    const logs: string[] = [];
    await installProbe(
      new StateDir(dir),
      createLogger({ write: (l) => logs.push(l) }),
      { standalone: true, execPath: DENO },
    );
    deepEqual(logs, [], "no WARN: the rewrite fits");
    deepEqual(names(dir), ["check", ...LIBS].sort());
    for (const n of names(dir)) {
      equal(Deno.statSync(`${dir}/${n}`).mode! & 0o777, 0o755, n);
    }
    assertRewrittenCopy(DENO, `${dir}/check`, dir);
    const r = await runExecutable([`${dir}/check`, "--version"]);
    equal(r.code, 0, r.stderr);
    match(r.stdout, /^deno /);
    if (Deno.uid() === 0) {
      // The main container may run as any uid: so does the probe here.
      const other = await runExecutable([
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        `${dir}/check`,
        "--version",
      ], { cwd: "/" });
      equal(other.code, 0, other.stderr);
      match(other.stdout, /^deno /);
    } else console.log("not run as another uid: needs root");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("acquire's install, compiled, with a state directory path too long: the plain copy and one WARN line", async () => {
  const dir = await Deno.makeTempDir({ prefix: "berth-long-state-" });
  try {
    const logs: string[] = [];
    await installProbe(
      new StateDir(dir),
      createLogger({ format: "json", write: (l) => logs.push(l) }),
      { standalone: true, execPath: DENO },
    );
    equal(logs.length, 1, logs.join("\n"));
    const rec = JSON.parse(logs[0]);
    equal(rec.level, "WARN");
    match(rec.msg, /needs glibc in the main image/);
    match(rec.reason, /at most 7 bytes/);
    deepEqual(names(dir), ["check"]);
    const cmp = await new Deno.Command("cmp", {
      args: ["-s", DENO, `${dir}/check`],
    }).output();
    ok(cmp.success, "the plain copy is byte for byte the executable");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("acquire's install, compiled, when even the plain copy cannot be written: the error, and no WARN line claiming it was", async () => {
  const logs: string[] = [];
  await rejects(
    installProbe(
      new StateDir("/nonexistent-berth-state-dir"),
      createLogger({ write: (l) => logs.push(l) }),
      { standalone: true, execPath: DENO },
    ),
    /state directory \/nonexistent-berth-state-dir: it does not exist/,
  );
  deepEqual(logs, []);
});

Deno.test("install-check refuses a non-ELF, a truncated executable, a long or relative path and deno run without --from, leaving nothing, not even the directory it created", async () => {
  const work = await Deno.makeTempDir({ prefix: "berth-install-check-" });
  try {
    const script = `${work}/script`;
    Deno.writeTextFileSync(script, "#!/bin/sh\nexit 0\n", { mode: 0o755 });
    const cut = `${work}/cut`;
    const f = await Deno.open(DENO);
    const head = new Uint8Array(1 << 20);
    await f.read(head);
    f.close();
    Deno.writeFileSync(cut, head, { mode: 0o755 });
    const state = `${work}/s`;
    // A file it cannot install: 1; a usage error: 78, as every subcommand
    // the Go helper lacks.
    const cases: [string[], RegExp, number][] = [
      [["--from", script, state], /script: not an ELF file/, 1],
      [
        ["--from", cut, state],
        /cut: truncated: .* beyond the end of the file/,
        1,
      ],
      [["--from", `${work}/none`, state], /cannot open .*none/, 1],
      [["--from", DENO, state], /is \d+ bytes; .* at most 7 bytes/, 1],
      [[state], /pass --from with a compiled berth-acquire/, 1],
      [["--from", DENO, "s"], /"s" is not an absolute path/, 1],
      [["--frm", DENO], /unknown flag --frm: did you mean --from\?/, 78],
      [[state, state], /unexpected argument/, 78],
    ];
    for (const [args, want, code] of cases) {
      // In `work`, so that the relative "s" is `state`.
      const r = await runCli(["install-check", ...args], { cwd: work });
      equal(r.code, code, args.join(" "));
      equal(r.stdout, "");
      match(r.stderr, /^berth-acquire install-check: [^\n]*\n$/);
      match(r.stderr, want);
      ok(!existsSync(state), `${args.join(" ")} left ${state}`);
    }
  } finally {
    await Deno.remove(work, { recursive: true });
  }
});

Deno.test("install-check refuses a directory, a file not executable, another architecture, an installed probe and a 32-bit executable, leaving nothing", async () => {
  const state = shortTempDir();
  if (!state) return console.log("skipped: no free /tmp/XX directory");
  const work = await Deno.makeTempDir({ prefix: "berth-install-from-" });
  try {
    const noExec = `${work}/noexec`;
    await Deno.copyFile("/bin/true", noExec);
    await Deno.chmod(noExec, 0o644);
    const aarch64 = `${work}/aarch64`;
    Deno.writeFileSync(
      aarch64,
      syntheticElf({
        machine: 183,
        interp: "/lib/ld-linux-aarch64.so.1",
        needed: ["libc.so.6"],
      }),
      { mode: 0o755 },
    );
    // x86_64's machine number with the 32-bit class (the x32 ABI): the
    // loader and libc this process runs with are 64-bit.
    const x32 = `${work}/x32`;
    Deno.writeFileSync(
      x32,
      syntheticElf({
        bits: 32,
        machine: 62,
        interp: "/lib64/ld-linux-x86-64.so.2",
        needed: ["libc.so.6"],
      }),
      { mode: 0o755 },
    );
    // A probe install-check installed before, given as --from.
    const installed = `${work}/installed`;
    const first = await runCli(["install-check", "--from", "/bin/true", state]);
    equal(first.code, 0, first.stderr);
    await Deno.rename(`${state}/check`, installed);
    for (const n of names(state)) await Deno.remove(`${state}/${n}`);
    const cases: [string, RegExp][] = [
      [work, /is a directory, not an executable; name the berth-acquire/],
      [noExec, /is not executable \(mode 644\); .*chmod \+x/],
      [aarch64, /is built for aarch64, but berth-acquire runs on x86_64/],
      [installed, /installed probe already; install from the berth-acquire/],
      [x32, /x32 is a 32-bit x86_64 executable, but .* is 64-bit x86_64/],
    ];
    for (const [from, want] of cases) {
      const r = await runCli(["install-check", "--from", from, state]);
      equal(r.code, 1, from);
      equal(r.stdout, "");
      match(r.stderr, /^berth-acquire install-check: [^\n]*\n$/);
      match(r.stderr, want);
      deepEqual(names(state), [], `${from} left files`);
    }
  } finally {
    await Deno.remove(work, { recursive: true });
    await Deno.remove(state, { recursive: true });
  }
});

Deno.test("install-check of an executable needing libc alone: the loader and 1 library beside it, and it runs", async () => {
  const state = shortTempDir();
  if (!state) return console.log("skipped: no free /tmp/XX directory");
  try {
    const r = await runCli(["install-check", "--from", "/bin/true", state]);
    equal(r.code, 0, r.stderr);
    match(
      r.stdout,
      new RegExp(
        `^installed ${state}/check from /bin/true with its loader and 1 library \\(\\d+\\.\\d MiB\\) beside it\n$`,
      ),
    );
    deepEqual(names(state), ["c", "check", "ld.so"]);
    equal(headers(`${state}/check`).interp?.value, `${state}/ld.so`);
    equal((await runExecutable([`${state}/check`])).code, 0);
  } finally {
    await Deno.remove(state, { recursive: true });
  }
});

Deno.test({
  name:
    "install-check under umask 077 creates a state directory the probe can be run from by any uid",
  ignore: Deno.uid() !== 0,
  async fn() {
    const state = shortTempDir();
    if (!state) return console.log("skipped: no free /tmp/XX directory");
    await Deno.remove(state); // a free short name, for install-check to create
    try {
      const r = await runExecutable([
        "/bin/sh",
        "-c",
        'umask 077 && exec "$@"',
        "sh",
        ...cliArgv(["install-check", "--from", "/bin/true", state]),
      ]);
      equal(r.code, 0, r.stderr);
      equal(Deno.statSync(state).mode! & 0o777, 0o755);
      const other = await runExecutable([
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        `${state}/check`,
      ], { cwd: "/" });
      equal(other.code, 0, other.stderr);
    } finally {
      await Deno.remove(state, { recursive: true });
    }
  },
});

const strace = await new Deno.Command("strace", { args: ["-V"] }).output()
  .then((o) => o.success, () => false);
if (!strace) console.log("skipped: the rename order: strace is not installed");

Deno.test({
  name:
    "install-check renames the loader and the libraries into place first and check last, once each",
  ignore: !strace,
  async fn() {
    const state = shortTempDir();
    if (!state) return console.log("skipped: no free /tmp/XX directory");
    const trace = await Deno.makeTempFile({ prefix: "berth-rename-trace-" });
    try {
      const r = await runExecutable([
        "strace",
        "-f",
        "-qq",
        "-e",
        "trace=rename,renameat,renameat2",
        "-o",
        trace,
        ...cliArgv(["install-check", "--from", DENO, state]),
      ]);
      equal(r.code, 0, r.stderr);
      // Each rename's target, in the order the calls were made.
      const targets = Deno.readTextFileSync(trace).split("\n")
        .filter((l) => l.includes(`"${state}/`))
        .map((l) => /, "([^"]+)"(?:, \w+)?\) = 0$/.exec(l)?.[1]);
      deepEqual(targets.slice(0, -1).sort(), LIBS.map((n) => `${state}/${n}`));
      equal(targets.at(-1), `${state}/check`);
    } finally {
      await Deno.remove(trace);
      await Deno.remove(state, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "install-check on a full or read-only volume: one line, exit 1, no file left",
  ignore: skipRoot !== undefined,
  async fn() {
    // The volume at /mnt inside the namespace: 8 MiB hold the libraries, not
    // check; 1 MiB fills up mid-way through the libraries.
    const script = `set -u
mount -t tmpfs -o "$1" tmpfs /mnt || exit 99
shift
"$@"
echo "exit=$?"
echo "left=$(ls -A /mnt | tr '\\n' ' ')"`;
    for (const opts of ["size=8m", "size=1m", "size=64m,ro"]) {
      const r = await inMountNamespace(script, [
        opts,
        ...cliArgv(["install-check", "--from", DENO, "/mnt"]),
      ]);
      const lines = r.stdout.trim().split("\n");
      deepEqual(lines.slice(-2), ["exit=1", "left="], r.stdout + r.stderr);
      match(r.stderr, /^berth-acquire install-check: [^\n]*\n$/);
      match(
        r.stderr,
        opts.endsWith(",ro")
          ? /Read-only file system/
          : /No space left on device.*has space$/m,
      );
    }
  },
});

/**
 * Sets up, in the namespace, `$W/host`: the host's top-level entries bound
 * in, its own `/berth` if any left out, plus `/berth` (the volume `$W/vol`), so the installer sees the
 * volume at `/berth`; and `$W/root`: the volume at `/berth`, `/proc`, `/dev`
 * and the sources at `/src`, nothing else. Then runs `chroot DIR CMD...`,
 * bounded by `timeout`.
 */
const CHROOT_SCRIPT = `set -eu
W=$1; shift
H=$W/host
mkdir -p "$H" "$W/root/berth" "$W/root/proc" "$W/root/dev"
mount -t tmpfs -o size=1m tmpfs "$H"
for e in /*; do
  b=\${e#/}
  # The host's own /berth (a state directory left by a run) is not the volume.
  [ "$b" = berth ] && continue
  if [ -L "$e" ]; then cp -P "$e" "$H/$b"
  elif [ -d "$e" ]; then mkdir "$H/$b"; mount --rbind "$e" "$H/$b"
  fi
done
mkdir "$H/berth"
mount --bind "$W/vol" "$H/berth"
mount --bind "$W/vol" "$W/root/berth"
mount -t proc proc "$W/root/proc"
mount --rbind /dev "$W/root/dev"
set +e
timeout 120 chroot "$W/$@"
`;

Deno.test({
  name:
    "the installed check runs the probe, status and gate in a root holding only /berth, /proc and /dev",
  ignore: skipRoot !== undefined,
  async fn() {
    const work = await Deno.makeTempDir({ prefix: "berth-chroot-" });
    try {
      Deno.mkdirSync(`${work}/vol`);
      Deno.mkdirSync(`${work}/root/src`, { recursive: true });
      const cp = await new Deno.Command("cp", {
        args: [
          "-r",
          `${REPO_ROOT}/main.ts`,
          `${REPO_ROOT}/deno.json`,
          `${REPO_ROOT}/lib`,
          `${work}/root/src/`,
        ],
      }).output();
      ok(cp.success);
      const install = await inMountNamespace(CHROOT_SCRIPT, [
        work,
        "host",
        ...cliArgv(["install-check", "--from", DENO, "/berth"]),
      ]);
      equal(install.code, 0, install.stdout + install.stderr);
      match(
        install.stdout,
        /^installed \/berth\/check from .* with its loader and 6 libraries/,
      );
      deepEqual(names(`${work}/vol`), ["check", ...LIBS].sort());
      assertRewrittenCopy(DENO, `${work}/vol/check`, "/berth");

      // The root holds nothing that could stand in for glibc: a plain copy
      // cannot even be executed there (its interpreter is missing).
      deepEqual(names(`${work}/root`), ["berth", "dev", "proc", "src"]);
      await Deno.copyFile(DENO, `${work}/vol/plain`);
      const plain = await inMountNamespace(CHROOT_SCRIPT, [
        work,
        "root",
        "/berth/plain",
        "--version",
      ]);
      equal(plain.code, 127, plain.stdout + plain.stderr);
      match(plain.stderr, /No such file or directory/);
      await Deno.remove(`${work}/vol/plain`);
      const run = (args: string[]) =>
        inMountNamespace(CHROOT_SCRIPT, [
          work,
          "root",
          "/berth/check",
          "run",
          "-A",
          "--quiet",
          "/src/main.ts",
          ...args,
        ]);
      const checkArgv = ["check", "/berth/healthy", "--max-age", "30s"];
      const absent = await run(checkArgv);
      deepEqual(
        [absent.code, absent.stdout],
        [1, "health marker absent: /berth/healthy\n"],
        absent.stderr,
      );
      const state = new StateDir(`${work}/vol`);
      await state.writeMarker(FAR);
      await state.writeHolder("prod/pod:web-0:uid:1");
      await state.writeToken(7);
      const fresh = await run(checkArgv);
      deepEqual([fresh.code, fresh.stdout, fresh.stderr], [0, "", ""]);
      const status = await run(["status", "/berth"]);
      equal(status.code, 0, status.stderr);
      match(status.stdout, /^state directory +\/berth\n/);
      match(status.stdout, /\nmarker +OK/);
      // gate runs its command while the marker passes: here the probe itself.
      const gate = await run([
        "gate",
        "--state-dir",
        "/berth",
        "--",
        "/berth/check",
        "--version",
      ]);
      equal(gate.code, 0, gate.stdout + gate.stderr);
      match(gate.stdout, /^deno \d/);
    } finally {
      await Deno.remove(work, { recursive: true });
    }
  },
});
