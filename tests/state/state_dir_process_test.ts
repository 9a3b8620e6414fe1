import {
  deepEqual,
  equal,
  match,
  ok,
  rejects,
  throws,
} from "node:assert/strict";
import { formatMarker, StateFileError } from "../../lib/state/marker.ts";
import {
  checkWrapperScript,
  ensureStateDir,
  parseToken,
  prepareStateDir,
  shellQuote,
  StateDir,
  TOKEN_MAX,
} from "../../lib/state/state_dir.ts";
import { runExecutable } from "../support/cli.ts";
import { tempDir } from "../support/lease_env.ts";
import { installProbe } from "../../lib/cmd/install_check.ts";
import { denoRunArgv } from "../../lib/cmd/self_argv.ts";
import { discardLogger } from "../../lib/obs/log.ts";

/** Runs `fn` with a fresh state directory that is removed afterwards. */
async function withState(
  fn: (s: StateDir, dir: string) => Promise<void> | void,
) {
  const dir = await Deno.makeTempDir({ prefix: "berth-state-" });
  try {
    await fn(new StateDir(dir), dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const mode = (p: string) => Deno.statSync(p).mode! & 0o7777;
const names = (dir: string) =>
  [...Deno.readDirSync(dir)].map((e) => e.name).sort();
const DEADLINES = {
  gateClosesBootMs: 1_000_000,
  leaseDeadlineBootMs: 1_002_000,
};

Deno.test("writes have the upstream modes and content, and leave no temp file", async () => {
  await withState(async (s, dir) => {
    // A restrictive umask must not change the modes: they are chmod-ed.
    const old = Deno.umask(0o077);
    try {
      await s.writeHolder("prod/deployment:checkout");
      await s.writeToken(42);
      await s.writeMarker(DEADLINES);
    } finally {
      Deno.umask(old);
    }
    equal(Deno.readTextFileSync(`${dir}/holder`), "prod/deployment:checkout");
    equal(Deno.readTextFileSync(`${dir}/token`), "42");
    equal(Deno.readTextFileSync(`${dir}/healthy`), formatMarker(DEADLINES));
    for (const f of ["holder", "token", "healthy"]) {
      equal(mode(`${dir}/${f}`), 0o644, f);
    }
    deepEqual(names(dir), ["healthy", "holder", "token"]);
  });
});

Deno.test("round trip: what is written reads back exactly", async () => {
  await withState(async (s) => {
    equal(s.readHolder(), undefined);
    equal(s.readToken(), undefined);
    equal(s.readMarkerDeadlines(), undefined);
    const holder = "east/prod:pod:x:uid:8c21b044 ünïcode \uFEFF";
    await s.writeHolder(holder);
    await s.writeToken(TOKEN_MAX);
    await s.writeMarker(DEADLINES);
    equal(s.readHolder(), holder);
    equal(s.readToken(), TOKEN_MAX);
    deepEqual(s.readMarkerDeadlines(), DEADLINES);
    // A rewrite replaces the file.
    await s.writeToken(7);
    equal(s.readToken(), 7);
  });
});

Deno.test("removeMarker: removes it, and a missing marker is fine", async () => {
  await withState(async (s, dir) => {
    await s.writeMarker(DEADLINES);
    await s.removeMarker();
    deepEqual(names(dir), []);
    await s.removeMarker();
  });
});

Deno.test("cleanStaleTemps removes only our temp files", async () => {
  await withState((s, dir) => {
    const ours = [
      ".healthy.tmp-0123456789abcdef",
      ".token.tmp-fedcba9876543210",
      ".check.tmp-00000000ffffffff",
      // The probe's loader and libraries, written beside check.
      ".ld.so.tmp-0123456789abcdef",
      ".c.tmp-0123456789abcdef",
      ".gcc_s.tmp-0123456789abcdef",
      ".pthread.tmp-0123456789abcdef",
    ];
    const theirs = [
      ".healthy.tmp-xyz",
      "notes.tmp-0123456789abcdef",
      ".my.notes.tmp-0123456789abcdef",
      "holder",
      "c",
    ];
    for (const n of [...ours, ...theirs]) {
      Deno.writeTextFileSync(`${dir}/${n}`, "x");
    }
    const removed = s.cleanStaleTemps();
    deepEqual(removed.sort(), ours.map((n) => `${dir}/${n}`).sort());
    deepEqual(names(dir), theirs.sort());
  });
});

Deno.test("a missing state directory is reported with what to do", async () => {
  const s = new StateDir("/nonexistent/berth-state-test");
  await rejects(s.writeToken(1), /does not exist; mount the state volume/);
  throws(() => s.cleanStaleTemps(), /does not exist; mount the state volume/);
});

Deno.test("reads refuse symlinks, even to a valid file", async () => {
  await withState(async (s, dir) => {
    const elsewhere = await Deno.makeTempDir();
    try {
      Deno.writeTextFileSync(`${elsewhere}/holder`, "prod/deployment:checkout");
      Deno.writeTextFileSync(`${elsewhere}/token`, "5");
      Deno.writeTextFileSync(`${elsewhere}/healthy`, formatMarker(DEADLINES));
      for (const f of ["holder", "token", "healthy"]) {
        Deno.symlinkSync(`${elsewhere}/${f}`, `${dir}/${f}`);
      }
      throws(() => s.readHolder(), (e) => {
        ok(e instanceof StateFileError);
        equal(e.path, `${dir}/holder`);
        match(e.message, /symbolic link, which is never followed/);
        return true;
      });
      throws(() => s.readToken(), /token file is a symbolic link/);
      throws(() => s.readMarkerDeadlines(), /health marker is a symbolic link/);
    } finally {
      await Deno.remove(elsewhere, { recursive: true });
    }
  });
});

Deno.test("reads refuse directories and oversized files", async () => {
  await withState((s, dir) => {
    Deno.mkdirSync(`${dir}/holder`);
    throws(() => s.readHolder(), /holder file is a directory/);
    Deno.writeTextFileSync(`${dir}/token`, "1".repeat(33));
    throws(() => s.readToken(), /limit 32 bytes/);
    Deno.writeTextFileSync(`${dir}/healthy`, "x".repeat(4097));
    throws(() => s.readMarkerDeadlines(), /limit 4096 bytes/);
    Deno.removeSync(`${dir}/holder`);
    Deno.writeTextFileSync(`${dir}/holder`, "h".repeat(1025));
    throws(() => s.readHolder(), /limit 1024 bytes/);
    Deno.writeTextFileSync(`${dir}/holder`, "h".repeat(1024));
    equal(s.readHolder(), "h".repeat(1024));
  });
});

Deno.test("a holder that could not be read back is not written", async () => {
  await withState(async (s, dir) => {
    await rejects(s.writeHolder("h".repeat(1025)), /more than the 1024/);
    deepEqual(names(dir), []);
  });
});

Deno.test("holder: invalid UTF-8 is refused rather than mangled", async () => {
  await withState((s, dir) => {
    Deno.writeFileSync(`${dir}/holder`, new Uint8Array([0x70, 0xff, 0x71]));
    throws(() => s.readHolder(), /not valid UTF-8/);
  });
});

Deno.test("token: only the canonical positive int32 berth-acquire writes is accepted, spaces around it aside", () => {
  equal(parseToken("1", "/t"), 1);
  equal(parseToken("2147483647", "/t"), 2147483647);
  // Whitespace around it, as `echo 12 > token` or the Go helper's reader
  // allow, changes nothing about the number.
  equal(parseToken("12\n", "/t"), 12);
  equal(parseToken(" 12\r\n", "/t"), 12);
  equal(parseToken("\t7 ", "/t"), 7);
  // No helper writes a sign, a leading zero or another notation, so those
  // are refused (the sidecar then does not adopt).
  for (
    const bad of [
      "0",
      "-1",
      "2147483648",
      "99999999999",
      "1 2",
      "\n",
      "+12",
      "012",
      "1e3",
      "",
      "0x10",
    ]
  ) {
    throws(() => parseToken(bad, "/berth/token"), (e) => {
      ok(e instanceof StateFileError);
      equal(e.path, "/berth/token");
      match(e.message, /not a positive 32-bit decimal integer/);
      return true;
    }, JSON.stringify(bad));
  }
});

Deno.test("token: the state file is validated on read and on write", async () => {
  await withState(async (s, dir) => {
    Deno.writeTextFileSync(`${dir}/token`, "012\n");
    throws(() => s.readToken(), /"012\\n" is not a positive 32-bit/);
    Deno.writeTextFileSync(`${dir}/token`, "12\n");
    equal(s.readToken(), 12);
    for (const bad of [0, -1, 2147483648, 1.5, NaN]) {
      await rejects(s.writeToken(bad), RangeError, String(bad));
    }
    equal(Deno.readTextFileSync(`${dir}/token`), "12\n");
  });
});

Deno.test("shellQuote survives quotes, spaces and dollars", async () => {
  const nasty = `it's a "$HOME" \`x\` \\ path`;
  const out = await new Deno.Command("/bin/sh", {
    args: ["-c", `printf %s ${shellQuote(nasty)}`],
  }).output();
  equal(new TextDecoder().decode(out.stdout), nasty);
});

Deno.test("installCheck under deno run: an executable 0755 wrapper that behaves like `berth-acquire check`", async () => {
  await withState(async (s, dir) => {
    await installProbe(s, discardLogger);
    equal(mode(`${dir}/check`), 0o755);
    deepEqual(names(dir), ["check"]);
    const text = Deno.readTextFileSync(`${dir}/check`);
    ok(text.startsWith("#!/bin/sh\n"));
    ok(text.includes(" -P=berth-acquire "), text);

    const env = {}; // nothing but PATH: no BERTH_* variables
    const absent = await runExecutable(
      [`${dir}/check`, "check", `${dir}/healthy`, "--max-age", "30s"],
      { env },
    );
    deepEqual(absent, {
      code: 1,
      stdout: `health marker absent: ${dir}/healthy\n`,
      stderr: "",
    });
    await s.writeMarker({
      gateClosesBootMs: Number.MAX_SAFE_INTEGER,
      leaseDeadlineBootMs: Number.MAX_SAFE_INTEGER,
    });
    const fresh = await runExecutable(
      [`${dir}/check`, "check", `${dir}/healthy`, "--max-age", "30s"],
      { env },
    );
    deepEqual(fresh, { code: 0, stdout: "", stderr: "" });
  });
});

Deno.test("installCheck wrapper quotes paths with spaces and quotes", () => {
  const script = checkWrapperScript(
    denoRunArgv(
      "/src/it's here",
      "/src/it's here/main.ts",
      [],
      "/opt/my deno/deno",
    ),
  );
  match(script, /^#!\/bin\/sh\n/);
  ok(
    script.includes(
      `exec '/opt/my deno/deno' run -q --no-prompt -P=berth-acquire`,
    ),
  );
  ok(
    script.includes(
      `--config '/src/it'\\''s here/deno.json' '/src/it'\\''s here/main.ts' "$@"`,
    ),
  );
});

Deno.test("installCheck when compiled: copies the executable byte for byte with mode 0755", async () => {
  await withState(async (s, dir) => {
    const src = await Deno.makeTempFile();
    try {
      const bytes = new Uint8Array(200_000).map((_, i) => (i * 7919) % 251);
      Deno.writeFileSync(src, bytes, { mode: 0o600 });
      await s.installCheck({ copyOf: src });
      equal(mode(`${dir}/check`), 0o755);
      deepEqual(Deno.readFileSync(`${dir}/check`), bytes);
      deepEqual(names(dir), ["check"]);
      // Reinstalling replaces it.
      Deno.writeFileSync(src, new Uint8Array([1, 2, 3]));
      await s.installCheck({ copyOf: src });
      deepEqual(Deno.readFileSync(`${dir}/check`), new Uint8Array([1, 2, 3]));
    } finally {
      await Deno.remove(src);
    }
  });
});

Deno.test("a failed write leaves no temp file and names the target", async () => {
  await withState(async (s, dir) => {
    // A directory in place of the marker: rename cannot replace it.
    Deno.mkdirSync(`${dir}/healthy`);
    Deno.writeTextFileSync(`${dir}/healthy/keep`, "");
    await rejects(s.writeMarker(DEADLINES), (e) => {
      ok(e instanceof StateFileError);
      equal(e.path, `${dir}/healthy`);
      match(e.message, /a directory is in its place; remove that directory$/);
      return true;
    });
    deepEqual(names(dir), ["healthy"]);
    // removeMarker leaves someone's directory alone (the probe already fails on it).
    await s.removeMarker();
    deepEqual(names(`${dir}/healthy`), ["keep"]);
  });
});

Deno.test("a set of files with a directory in one's place installs none of them", async () => {
  await withState(async (s, dir) => {
    Deno.mkdirSync(`${dir}/check`);
    const fill = (text: string) => (tmp: string) =>
      Deno.writeTextFile(tmp, text);
    await rejects(
      s.installFiles([
        { name: "ld.so", fill: fill("loader") },
        { name: "check", fill: fill("probe") },
      ]),
      (e) => {
        ok(e instanceof StateFileError);
        equal(e.path, `${dir}/check`);
        match(e.message, /a directory is in its place/);
        return true;
      },
    );
    deepEqual(names(dir), ["check"]);
  });
});

const strace = await new Deno.Command("strace", { args: ["-V"] }).output()
  .then((o) => o.success, () => false);
if (!strace) {
  console.log("skipped: state write syscalls: strace is not installed");
}

Deno.test({
  name:
    "a state write (and the probe's install) is create, write, close, rename: no fsync, and no chmod when the umask keeps the mode",
  ignore: !strace,
  async fn() {
    await withState(async (_s, dir) => {
      const driver = new URL("./write_syscalls_driver.ts", import.meta.url)
        .pathname;
      const out = await new Deno.Command("strace", {
        args: [
          "-f",
          "-qq",
          // File descriptors with their paths, so the runtime's own syncs
          // (its module cache) are told apart from the state directory's.
          "-y",
          "-e",
          "trace=fsync,fdatasync,chmod,fchmod,fchmodat,rename,renameat,renameat2",
          "-o",
          `${dir}/trace`,
          Deno.execPath(),
          "run",
          "-A",
          "--no-config",
          driver,
          dir,
        ],
        env: { NO_COLOR: "1" },
      }).output();
      equal(out.code, 0, new TextDecoder().decode(out.stderr));
      const calls = (await Deno.readTextFile(`${dir}/trace`)).split("\n")
        .filter((l) => l.includes(dir));
      const count = (re: RegExp) => calls.filter((l) => re.test(l)).length;
      equal(count(/\brename(at2?)?\(/), 10, calls.join("\n"));
      equal(count(/\bf?(data)?sync\(/), 0, calls.join("\n"));
      equal(count(/chmod/), 0, calls.join("\n"));
    });
  },
});

Deno.test("ensureStateDir creates the directory and its parents with mode 0755", async () => {
  await using dir = await tempDir();
  const target = `${dir.path}/x/y/berth`;
  ensureStateDir(target);
  for (const d of [`${dir.path}/x`, `${dir.path}/x/y`, target]) {
    const info = await Deno.stat(d);
    ok(info.isDirectory, d);
    equal(info.mode! & 0o777 & ~0o755, 0, `${d} at most 0755`);
  }
  // An existing directory is left alone, mode included.
  await Deno.chmod(target, 0o700);
  ensureStateDir(target);
  equal((await Deno.stat(target)).mode! & 0o777, 0o700);
});

Deno.test("ensureStateDir names the directory when a file is in the way", async () => {
  await using dir = await tempDir();
  const file = `${dir.path}/file`;
  await Deno.writeTextFile(file, "");
  throws(
    () => ensureStateDir(file),
    (e: Error) =>
      e.message.includes(file) && /BERTH_STATE_DIR/.test(e.message) &&
      /is a file, not a directory/.test(e.message) &&
      !/os error/.test(e.message),
  );
  throws(
    () => ensureStateDir(`${file}/sub`),
    (e: Error) => e.message.includes(`${file}/sub`),
  );
});

Deno.test("prepareStateDir creates a missing directory, then removes the temp files a crash left", async () => {
  await using dir = await tempDir();
  const state = new StateDir(`${dir.path}/a/b`);
  prepareStateDir(state);
  ok((await Deno.stat(state.dir)).isDirectory);
  const left = `${state.dir}/.token.tmp-0123456789abcdef`;
  await Deno.writeTextFile(left, "1");
  prepareStateDir(state);
  deepEqual([...Deno.readDirSync(state.dir)], []);
});
