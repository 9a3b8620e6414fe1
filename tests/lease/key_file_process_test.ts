/**
 * The key file as `acquire` meets it at start-up, through the real CLI: a
 * FIFO in its place (whose open would block) and a Secret file the helper's
 * uid cannot read (the root-owned 0440 mount). Both must end at once with a
 * line that says what is wrong, never a hang or "fix the path".
 *
 * @module
 */
import assert from "node:assert/strict";
import { cliArgv, runCli } from "../support/cli.ts";
import { leaseEnv, tempDir } from "../support/lease_env.ts";

/** Bounds a whole CLI run, so a wedged child fails the test instead of hanging it. */
const RUN_BOUND_MS = 60_000;
/** The uid the examples run the helpers as. */
const NONROOT = 65532;

Deno.test("acquire with a FIFO as the key file stops at once and names it", async () => {
  await using dir = await tempDir();
  const fifo = `${dir.path}/key`;
  const made = new Deno.Command("mkfifo", { args: [fifo] }).outputSync();
  assert.ok(made.success, "mkfifo failed");
  const r = await runCli(["acquire"], {
    env: leaseEnv({
      apiServer: "http://127.0.0.1:1",
      stateDir: dir.path,
      extra: { BERTH_API_KEY_FILE: fifo },
    }),
    signal: AbortSignal.timeout(RUN_BOUND_MS),
  });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /API key file .*key: is a FIFO, not a regular file/);
});

function setprivMissing(): string | undefined {
  if (Deno.uid() !== 0) return "not root";
  try {
    const out = new Deno.Command("setpriv", { args: ["--version"] })
      .outputSync();
    return out.success ? undefined : "setpriv --version failed";
  } catch (e) {
    return `setpriv is not runnable: ${(e as Error).message}`;
  }
}

const noSetpriv = setprivMissing();
if (noSetpriv !== undefined) {
  console.log(
    `skipped: the unreadable-key test needs root and setpriv (${noSetpriv})`,
  );
}

Deno.test({
  name:
    "acquire as a non-root uid with a root-owned 0440 key file names uid, mode and owner",
  ignore: noSetpriv !== undefined,
  async fn() {
    await using dir = await tempDir();
    await Deno.chmod(dir.path, 0o755);
    const key = `${dir.path}/key`;
    await Deno.writeTextFile(key, "tenant:token\n");
    await Deno.chmod(key, 0o440);
    const home = `${dir.path}/home`;
    await Deno.mkdir(home);
    await Deno.chown(home, NONROOT, NONROOT);
    const env = {
      ...leaseEnv({
        apiServer: "http://127.0.0.1:1",
        stateDir: home,
        extra: { BERTH_API_KEY_FILE: key },
      }),
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: home,
      DENO_DIR: home,
    };
    const [exe, ...args] = cliArgv(["acquire"]);
    const out = await new Deno.Command("setpriv", {
      args: [
        `--reuid=${NONROOT}`,
        `--regid=${NONROOT}`,
        "--clear-groups",
        exe,
        ...args,
      ],
      env,
      clearEnv: true,
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(RUN_BOUND_MS),
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 1, stderr);
    assert.match(
      stderr,
      new RegExp(
        `is not readable by uid ${NONROOT} \\(mode 0440, owner 0:0\\); make it readable by that uid`,
      ),
    );
    assert.doesNotMatch(stderr, /tenant:token/);
  },
});
