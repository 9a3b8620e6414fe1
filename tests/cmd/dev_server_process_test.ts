/**
 * The `dev-server` subcommand as a user runs it: the real CLI in a child
 * process. It prints its URL, serves, stops on SIGTERM; `--help` is the
 * whole help on stdout; every mistake is one line on stderr that names the
 * flag or the address and says what is wanted, and exits 1.
 */
import assert from "node:assert/strict";
import { type CliResult, runCli, spawnCli } from "../support/cli.ts";

const LEASE = "/v1alpha1/namespaces/prod/leases/checkout";
const PREFIX = "berth-acquire dev-server: ";

function devServer(...args: string[]): Promise<CliResult> {
  return runCli(["dev-server", ...args], {
    signal: AbortSignal.timeout(60_000),
  });
}

/** Asserts a usage error (exit 78) or a start-up error (exit 1): nothing on stdout, exactly one line on stderr. */
function assertOneLineError(
  r: CliResult,
  message: string | RegExp,
  code = 78,
): void {
  assert.equal(r.code, code, r.stderr);
  assert.equal(r.stdout, "", "nothing claims to listen");
  assert.ok(r.stderr.startsWith(PREFIX), r.stderr);
  assert.ok(r.stderr.endsWith("\n"), r.stderr);
  const line = r.stderr.slice(PREFIX.length, -1);
  assert.ok(!line.includes("\n"), `one line, no help text: ${r.stderr}`);
  if (typeof message === "string") assert.equal(line, message);
  else assert.match(line, message);
}

Deno.test("dev-server prints its URL, serves, and exits 0 on SIGTERM", async () => {
  const child = spawnCli(["dev-server", "--listen", "127.0.0.1:0"], {
    signal: AbortSignal.timeout(60_000),
  });
  const stderr = new Response(child.stderr).text();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  try {
    while (!out.includes("\n")) {
      const { done, value } = await lines.read();
      if (done) break;
      out += value;
    }
    const m = /^berth dev-server listening on (http:\/\/127\.0\.0\.1:(\d+))\n$/
      .exec(out);
    assert.ok(m, `first stdout line: ${JSON.stringify(out)}`);
    assert.notEqual(m[2], "0");
    const health = await fetch(`${m[1]}/healthz`);
    assert.equal(await health.text(), "ok\n");
    const a = await fetch(`${m[1]}${LEASE}/acquire`, {
      method: "POST",
      body: '{"holder":"a","ttlSeconds":5}',
    });
    assert.match(await a.text(), /"acquired":true/);
  } finally {
    child.kill("SIGTERM");
  }
  const status = await child.status;
  while (!(await lines.read()).done) { /* drain */ }
  const err = await stderr;
  assert.equal(status.code, 0, err);
  assert.match(err, /development server/);
  assert.match(err, /signal received; shutting down.*signal=SIGTERM/);
});

Deno.test("dev-server --help prints the help on stdout and exits 0", async () => {
  for (const flag of ["--help", "-h"]) {
    const help = await devServer(flag);
    assert.equal(help.code, 0, help.stderr);
    assert.equal(help.stderr, "");
    assert.match(help.stdout, /DEVELOPMENT/);
    assert.match(help.stdout, /in memory/);
    assert.match(help.stdout, /lost when it exits/);
    assert.match(help.stdout, /NOT for production/);
    for (
      const f of ["--listen", "--tls-cert-file", "--tls-key-file", "--api-key"]
    ) {
      assert.ok(help.stdout.includes(f), `help names ${f}`);
    }
  }
  // Values are not checked when help is asked for.
  assert.equal((await devServer("--listen", "nonsense", "--help")).code, 0);
});

Deno.test("dev-server: an address in use names the address and the flag", async () => {
  using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const addr = `127.0.0.1:${taken.addr.port}`;
  assertOneLineError(
    await devServer("--listen", addr),
    `cannot listen on ${addr}: address already in use; choose another --listen (port 0 picks a free one)`,
    1,
  );
});

Deno.test("dev-server: an unknown flag is named, with the nearest flag or a pointer to --help instead of the help", async () => {
  assertOneLineError(
    await devServer("--lisen", "127.0.0.1:0"),
    "unknown flag --lisen: did you mean --listen?",
  );
  assertOneLineError(
    await devServer("-x=hunter2"),
    "unknown flag -x; run with --help for the list",
  );
  const secret = await devServer("--Hunter2-TOKEN-s3cr3t");
  assertOneLineError(
    secret,
    "unknown flag in argument 1 (not shown: it may hold a secret); run with --help for the list",
  );
  assertOneLineError(
    await devServer("serve"),
    'unexpected argument "serve": dev-server takes flags only (--name=value); run with --help for the list',
  );
  // A word after `--api-key=` and a space may be the token itself.
  const stray = await devServer("--api-key=", "eyJhbGciOi.secret");
  assertOneLineError(
    stray,
    "unexpected argument 2 (not shown: it may hold a secret): dev-server takes flags only (--name=value); run with --help for the list",
  );
  assert.ok(!stray.stderr.includes("secret."));
});

Deno.test("dev-server: a bad value names the flag and what it wants", async () => {
  assertOneLineError(
    await devServer("--listen", "localhost"),
    '--listen="localhost": no port; want HOST:PORT, [IPV6]:PORT or :PORT (all interfaces) with a port 0-65535, e.g. 127.0.0.1:8080',
  );
  assertOneLineError(
    await devServer("--listen=127.0.0.1:70000"),
    /^--listen="127\.0\.0\.1:70000": the port is not a number 0-65535; want HOST:PORT/,
  );
  assertOneLineError(
    await devServer("--listen"),
    "flag --listen needs a value: HOST:PORT",
  );
  assertOneLineError(
    await devServer("--tls-cert-file", "/tmp/c.pem", "--listen", "127.0.0.1:0"),
    "--tls-cert-file and --tls-key-file go together: give both for HTTPS, or neither for plain HTTP",
  );
  assertOneLineError(
    await devServer("--tls-cert-file=", "--tls-key-file=/tmp/k.pem"),
    "flag --tls-cert-file needs a value: a PEM certificate file",
  );
  assertOneLineError(
    await devServer("--help=yes"),
    /^--help="yes": must be a boolean \(1, t, T, TRUE, true, True, 0, f, F, FALSE, false or False\)$/,
  );
  const badKey = await devServer(
    "--api-key",
    `ok:${"a".repeat(64)}`,
    "--api-key",
    "hunter2",
    "--listen",
    "127.0.0.1:0",
  );
  assertOneLineError(badKey, /^--api-key #2 is not "key-id:sha256hex": /);
  assert.ok(!badKey.stderr.includes("hunter2"));
  assertOneLineError(
    await devServer(
      "--tls-cert-file=/nonexistent/c.pem",
      "--tls-key-file=/nonexistent/k.pem",
      "--listen=127.0.0.1:0",
    ),
    /^cannot read the TLS certificate \/nonexistent\/c\.pem: .*; give a readable PEM file$/,
    1,
  );
});
