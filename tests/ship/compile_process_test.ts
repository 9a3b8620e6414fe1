/**
 * `deno task compile`: the pure parts always; the real builds only when asked
 * (`BERTH_TEST_COMPILE=1`, which `deno task test:compile` sets), since each
 * takes a while and writes a ~100 MiB binary. `deno compile` downloads its
 * `denort` runtime on first use; where that download is unreachable the
 * release build test is reported as ignored, with the reason printed, never
 * as passed.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  binaryName,
  compileArgs,
  formatSha256Sums,
  isRuntimeDownloadFailure,
  sha256File,
  SUMS_FILE,
  type Target,
  TARGETS,
} from "../../scripts/compile.ts";
import { VERSION } from "../../lib/version.ts";
import { COMMANDS, ON_DEMAND_MODULES, PROBE_COMMAND } from "../../main.ts";
import { shortTempDir } from "../support/short_dir.ts";
import { tempDir } from "../support/lease_env.ts";

const ROOT = decodeURIComponent(new URL("../..", import.meta.url).pathname)
  .replace(/\/+$/, "");

/** What `deno compile` printed here when its runtime host could not be resolved. */
const OFFLINE_ERROR =
  `error: Writing deno compile executable to temporary file '/tmp/ct/b.tmp-5d584a0cef93be7f'

Caused by:
    0: Setting up base binary.
    1: error sending request for url (https://dl.deno.land/release/v2.9.6/denort-x86_64-unknown-linux-gnu.zip): client error (Connect): dns error: failed to lookup address information: Name or service not known
    2: client error (Connect)
`;

Deno.test("a failed runtime download is told apart from a failed build", () => {
  assert.equal(isRuntimeDownloadFailure(OFFLINE_ERROR), true);
  assert.equal(
    isRuntimeDownloadFailure(
      "TS2322 [ERROR]: Type 'string' is not assignable to type 'number'.\nerror: Type checking failed.",
    ),
    false,
  );
});

Deno.test("SHA256SUMS is in sha256sum -c format and independent of build order", () => {
  const a = {
    name: binaryName("1.2.3", "x86_64-unknown-linux-gnu"),
    sha256: "aa",
  };
  const b = {
    name: binaryName("1.2.3", "aarch64-unknown-linux-gnu"),
    sha256: "bb",
  };
  const expected = "bb  berth-acquire-1.2.3-aarch64-unknown-linux-gnu\n" +
    "aa  berth-acquire-1.2.3-x86_64-unknown-linux-gnu\n";
  assert.equal(formatSha256Sums([a, b]), expected);
  assert.equal(formatSha256Sums([b, a]), expected);
});

Deno.test("the release file name and --version name the same version", async () => {
  // Binaries are named from deno.json; `--version` prints lib/version.ts.
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`));
  assert.equal(config.version, VERSION);
});

Deno.test("sha256File agrees with the SHA-256 test vector", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/abc`, "abc");
    assert.equal(
      await sha256File(`${dir}/abc`),
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("compileArgs embeds every module main.ts loads on demand, found from the entry's directory", () => {
  // main.ts imports them through a variable, which deno compile cannot follow.
  const args = compileArgs({
    target: TARGETS[0],
    output: "/out/b",
    config: "/src dir/deno.json",
    entry: "/src dir/main.ts",
  });
  const included = args.flatMap((a, i) =>
    args[i - 1] === "--include" ? [a] : []
  );
  assert.deepEqual(
    included,
    ON_DEMAND_MODULES.map((m) => `/src dir/${m.replace(/^\.\//, "")}`),
  );
  assert.ok(ON_DEMAND_MODULES.includes("./lib/cmd/renew.ts"));
  // The webhook's probe is main.ts's own; any other `check` is a module.
  assert.ok(Object.hasOwn(COMMANDS, PROBE_COMMAND));
  assert.equal(args.at(-1), "/src dir/main.ts", "the entry module comes last");
});

/** Why the builds below do not run unless asked; undefined when asked. */
const notAsked = Deno.env.get("BERTH_TEST_COMPILE") === "1"
  ? undefined
  : "set BERTH_TEST_COMPILE=1 (deno task test:compile) to run deno compile";

/**
 * Whether `deno compile` can get its runtime here, found by compiling a
 * one-line program (so a type error elsewhere in the project cannot be taken
 * for an unreachable download). `undefined` when it can.
 */
async function compileUnavailableReason(): Promise<string | undefined> {
  const dir = await Deno.makeTempDir({ prefix: "compile-probe-" });
  try {
    await Deno.writeTextFile(`${dir}/probe.ts`, "console.log('ok');\n");
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "compile",
        "-q",
        "--no-config",
        "--output",
        `${dir}/probe`,
        `${dir}/probe.ts`,
      ],
      cwd: dir,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      // Bounds a download that hangs instead of failing.
      signal: AbortSignal.timeout(300_000),
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    if (!out.success && isRuntimeDownloadFailure(stderr)) {
      const cause = stderr.split("\n").find((l) =>
        /error sending request/.test(l)
      )
        ?.trim() ?? "the denort download failed";
      return `deno compile cannot download its runtime here (${cause})`;
    }
    return undefined;
  } catch (e) {
    return `deno compile did not finish: ${(e as Error).message}`;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const unavailable = notAsked ?? await compileUnavailableReason();
const host = TARGETS.find((t) => t === Deno.build.target) as Target | undefined;
if (unavailable !== undefined) {
  console.log(`SKIPPED compile tests: ${unavailable}`);
}

/** The named variables of this process's environment that are set. */
function inherited(...names: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) {
    const v = Deno.env.get(n);
    if (v !== undefined) out[n] = v;
  }
  return out;
}

/** Runs a program with only `env` as its environment; bounded, never hangs a run. */
async function run(
  argv: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(argv[0], {
    args: argv.slice(1),
    clearEnv: true,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(600_000),
  }).output();
  const dec = new TextDecoder();
  return {
    code: out.code,
    stdout: dec.decode(out.stdout),
    stderr: dec.decode(out.stderr),
  };
}

Deno.test({
  name:
    "deno task compile builds every target with a verifiable SHA256SUMS, and the binary runs",
  ignore: unavailable !== undefined,
  async fn() {
    const out = await Deno.makeTempDir({ prefix: "compile-out-" });
    const cleanups: (() => Promise<void>)[] = [];
    try {
      const built = await run([
        Deno.execPath(),
        "task",
        "--config",
        `${ROOT}/deno.json`,
        "compile",
        "--out-dir",
        out,
      ], inherited("PATH", "HOME", "DENO_DIR"));
      assert.equal(built.code, 0, built.stderr);

      const sums = await Deno.readTextFile(`${out}/${SUMS_FILE}`);
      const lines = sums.trimEnd().split("\n");
      assert.equal(lines.length, TARGETS.length, sums);
      for (const target of TARGETS) {
        const name = binaryName(VERSION, target);
        assert.ok(
          lines.includes(`${await sha256File(`${out}/${name}`)}  ${name}`),
          `${SUMS_FILE} has no correct line for ${name}:\n${sums}`,
        );
      }

      if (host === undefined) {
        console.log(
          `not running the binary: this machine (${Deno.build.target}) is not a release target`,
        );
        return;
      }
      const bin = `${out}/${binaryName(VERSION, host)}`;
      const version = await run([bin, "--version"]);
      assert.equal(version.code, 0, version.stderr);
      assert.equal(version.stdout.trim(), `berth-acquire ${VERSION}`);

      // The probe runs as `acquire` installs it in the state volume (the
      // copy rewritten to load its loader and libraries from there), with
      // none of the helpers' configuration: the webhook's argv.
      const state = shortTempDir();
      assert.ok(state, "no free /tmp/XX directory");
      cleanups.push(() => Deno.remove(state, { recursive: true }));
      const installed = await run([bin, "install-check", state]);
      assert.equal(installed.code, 0, installed.stderr);
      const probe = [
        `${state}/check`,
        "check",
        `${state}/healthy`,
        "--max-age",
        "30s",
      ];

      const absent = await run(probe);
      assert.equal(absent.code, 1);
      assert.equal(
        absent.stdout.trim(),
        `health marker absent: ${state}/healthy`,
      );

      // A marker just written (empty, as the Go helper writes it) is fresh.
      await Deno.writeTextFile(`${state}/healthy`, "");
      const fresh = await run(probe);
      assert.equal(fresh.code, 0, fresh.stdout + fresh.stderr);
      assert.equal(fresh.stdout, "");
    } finally {
      for (const c of cleanups) await c();
      await Deno.remove(out, { recursive: true });
    }
  },
});

/**
 * A line of `path`'s doc comments that is the longest of them: comments are
 * kept in the embedded source, so finding it in a binary shows that the
 * module was embedded.
 */
async function docLine(path: string): Promise<string> {
  const lines = (await Deno.readTextFile(path)).split("\n")
    .filter((l) => /^\s*(\*|\/\*\*) /.test(l));
  return lines.reduce((a, b) => (b.length > a.length ? b : a), "");
}

Deno.test({
  name:
    "the compiled binary embeds main.ts and every module it loads on demand, with their imports",
  // Needs no download: this Deno serves as the base binary (DENORT_BIN), so
  // the payload is what a release build embeds, though the result does not run.
  ignore: notAsked !== undefined,
  async fn() {
    const out = await Deno.makeTempDir({ prefix: "compile-embed-" });
    try {
      const bin = `${out}/b`;
      const built = await run([
        Deno.execPath(),
        ...compileArgs({
          target: host ?? TARGETS[0],
          output: bin,
          config: `${ROOT}/deno.json`,
          entry: `${ROOT}/main.ts`,
        }),
      ], {
        ...inherited("PATH", "HOME", "DENO_DIR"),
        DENORT_BIN: Deno.execPath(),
      });
      assert.equal(built.code, 0, built.stderr);
      const payload = new TextDecoder("latin1").decode(
        await Deno.readFile(bin),
      );
      // main.ts, the on-demand modules and ones that only a subcommand
      // imports: the probe's rewrite, which acquire loads only compiled.
      const modules = [
        `${ROOT}/main.ts`,
        ...ON_DEMAND_MODULES.map((m) => `${ROOT}/${m.replace(/^\.\//, "")}`),
        `${ROOT}/lib/devserver/store.ts`,
        `${ROOT}/lib/probe/rewrite.ts`,
      ];
      for (const path of modules) {
        const line = await docLine(path);
        assert.ok(line.length > 20, `${path} has no doc comment to look for`);
        assert.ok(payload.includes(line), `${path} is not embedded`);
      }
    } finally {
      await Deno.remove(out, { recursive: true });
    }
  },
});

Deno.test("offline, deno task compile prints its own clear line alone: no Rust error chain, no backtrace", async () => {
  await using dir = await tempDir();
  // An empty DENO_DIR has no runtime cached, and a proxy on a closed port
  // makes its download fail on any machine, quickly.
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${ROOT}/scripts/compile.ts`,
      "--target",
      "x86_64-unknown-linux-gnu",
      "--out-dir",
      `${dir.path}/out`,
    ],
    env: {
      DENO_DIR: `${dir.path}/deno`,
      HTTPS_PROXY: "http://127.0.0.1:9",
      NO_COLOR: "1",
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 1, stderr);
  assert.match(stderr, /could not download the Deno runtime \(denort\)/);
  assert.doesNotMatch(stderr, /Stack backtrace|Caused by/);
});
