/**
 * API key sources: a fixed key, and a key file that rotates in place (a
 * mounted Secret), re-read at most once a second with the last good key kept
 * through failed reads. Time is a FakeClock, so "once a second" is exact.
 */
import assert from "node:assert/strict";
import {
  ApiKeySource,
  apiKeySourceFromConfig,
} from "../../lib/lease/api_key.ts";
import { createLogger, Secret } from "../../lib/obs/log.ts";
import { FakeClock } from "../support/fake_clock.ts";
import { waitFor } from "../support/wait.ts";

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "berth-auth-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function capture() {
  const lines: string[] = [];
  return { lines, logger: createLogger({ write: (l) => lines.push(l) }) };
}

async function key(source: ApiKeySource): Promise<string | undefined> {
  return (await source.current())?.reveal();
}

Deno.test("a fixed key is given as is; an unusable one is a start-up error", async () => {
  assert.equal(
    await key(ApiKeySource.fromSecret(new Secret("id:abc"))),
    "id:abc",
  );
  for (const bad of ["", "two words", "line\nbreak", "ключ"]) {
    assert.throws(
      () => ApiKeySource.fromSecret(new Secret(bad)),
      (e: Error) =>
        /--api-key/.test(e.message) && (bad === "" || !e.message.includes(bad)),
    );
  }
});

Deno.test("a key file is read at start-up and trimmed", async () => {
  await withDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/key`, "  \n\tid:abc \r\n");
    assert.equal(
      await key(await ApiKeySource.fromFile(`${dir}/key`)),
      "id:abc",
    );
  });
});

Deno.test("a missing, empty or unusable key file at start-up is an error naming it", async () => {
  await withDir(async (dir) => {
    const cases: [string, string | undefined, RegExp][] = [
      ["missing", undefined, /cannot be read/],
      ["empty", "", /is empty/],
      ["blank", " \n\n", /is empty/],
      ["spaced", "a b\n", /spaces/],
    ];
    for (const [name, content, why] of cases) {
      const path = `${dir}/${name}`;
      if (content !== undefined) await Deno.writeTextFile(path, content);
      await assert.rejects(
        ApiKeySource.fromFile(path),
        (e: Error) =>
          e.message.includes(path) && why.test(e.message) &&
          /--api-key-file/.test(e.message),
        name,
      );
    }
    await assert.rejects(ApiKeySource.fromFile(dir), /not a regular file/);
  });
});

Deno.test("a rotated key file is re-read, but at most once a second", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/key`;
    await Deno.writeTextFile(path, "k1\n");
    const clock = new FakeClock();
    const source = await ApiKeySource.fromFile(path, { clock });
    await Deno.writeTextFile(path, "k2\n");
    // Within the second after the start-up read: no read, old key.
    assert.equal(await key(source), "k1");
    await clock.advance(999);
    assert.equal(await key(source), "k1");
    await clock.advance(1);
    assert.equal(await key(source), "k2");
    // That read starts a new second: a change right after it waits for it.
    await Deno.writeTextFile(path, "k3\n");
    for (let i = 0; i < 5; i++) {
      await clock.advance(100);
      assert.equal(await key(source), "k2");
    }
    await clock.advance(500);
    assert.equal(await key(source), "k3");
  });
});

Deno.test("failed re-reads keep the last good key and warn once per streak", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/key`;
    await Deno.writeTextFile(path, "good-1");
    const clock = new FakeClock();
    const { lines, logger } = capture();
    const source = await ApiKeySource.fromFile(path, { clock, logger });

    await Deno.remove(path);
    await clock.advance(1000);
    assert.equal(await key(source), "good-1");
    await Deno.writeTextFile(path, "   \n"); // empty after trimming
    await clock.advance(1000);
    assert.equal(await key(source), "good-1");
    await Deno.writeTextFile(path, "bad key");
    await clock.advance(1000);
    assert.equal(await key(source), "good-1");
    const warnings = () => lines.filter((l) => l.includes("level=WARN"));
    assert.equal(warnings().length, 1);
    assert.match(warnings()[0], new RegExp(`file=${path}`));

    await Deno.writeTextFile(path, "good-2\n");
    await clock.advance(1000);
    assert.equal(await key(source), "good-2");

    await Deno.writeTextFile(path, "");
    await clock.advance(1000);
    assert.equal(await key(source), "good-2");
    assert.equal(warnings().length, 2, "a new streak warns again");

    for (const secret of ["good-1", "good-2", "bad key"]) {
      assert.ok(!lines.join("").includes(secret), `log shows ${secret}`);
    }
  });
});

Deno.test("the configuration picks the key source, or none", async () => {
  assert.equal(await apiKeySourceFromConfig({}), undefined);
  const direct = await apiKeySourceFromConfig({ apiKey: new Secret("k") });
  assert.equal(direct && await key(direct), "k");
  await withDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/key`, "f\n");
    const file = await apiKeySourceFromConfig({ apiKeyFile: `${dir}/key` });
    assert.equal(file && await key(file), "f");
    await assert.rejects(
      apiKeySourceFromConfig({ apiKeyFile: `${dir}/absent` }),
      /absent/,
    );
  });
});

function mkfifo(path: string): void {
  const out = new Deno.Command("mkfifo", { args: [path] }).outputSync();
  assert.ok(out.success, "mkfifo failed");
}

/** Opens the FIFO's write end and closes it, so a reader blocked in open() ends. */
async function unblock(path: string): Promise<void> {
  const w = await Deno.open(path, { write: true });
  w.close();
}

Deno.test("a FIFO as the key file is refused at once, at start-up and on rotation", async () => {
  await withDir(async (dir) => {
    const fifo = `${dir}/fifo`;
    mkfifo(fifo);
    await assert.rejects(ApiKeySource.fromFile(fifo), /is a FIFO/);
    const path = `${dir}/key`;
    await Deno.writeTextFile(path, "good-1");
    const clock = new FakeClock();
    const source = await ApiKeySource.fromFile(path, { clock });
    await Deno.remove(path);
    mkfifo(path);
    await clock.advance(1000);
    assert.equal(await key(source), "good-1");
    await Deno.remove(path);
    await Deno.writeTextFile(path, "good-2");
    await clock.advance(1000);
    assert.equal(await key(source), "good-2");
  });
});

Deno.test("a read that blocks is bounded: start-up error, then the last good key and one read at a time", async () => {
  await withDir(async (dir) => {
    const fifo = `${dir}/fifo`;
    mkfifo(fifo);
    // The plain read, without the regular-file check: open() blocks on a FIFO
    // as it would on a hung mount.
    const blocking = (p: string) => Deno.readFile(p);
    const clock = new FakeClock();
    const starting = ApiKeySource.fromFile(fifo, { clock, readFile: blocking });
    const refused = assert.rejects(
      starting,
      /could not be read within 2000 ms/,
    );
    await clock.advance(2000);
    await refused;
    await unblock(fifo);

    const path = `${dir}/key`;
    await Deno.writeTextFile(path, "good-1");
    let reads = 0;
    let target = path;
    const { lines, logger } = capture();
    const source = await ApiKeySource.fromFile(path, {
      clock,
      logger,
      readFile: (p) => {
        reads++;
        return blocking(target === p ? p : target);
      },
    });
    target = fifo; // the next read blocks
    await clock.advance(1000);
    const pending = source.current();
    await clock.advance(100);
    // The request waited only REREAD_WAIT_MS, well before the read's bound.
    assert.equal((await pending)?.reveal(), "good-1");
    assert.doesNotMatch(lines.join(""), /did not finish/);
    await clock.advance(1900);
    assert.match(lines.join(""), /did not finish within 2000 ms/);
    // Due again, but the blocked read is still pending: no second read.
    await clock.advance(1000);
    assert.equal(await key(source), "good-1");
    assert.equal(reads, 2);
    const w = await Deno.open(fifo, { write: true });
    await w.write(new TextEncoder().encode("late-key"));
    w.close();
    // The late read lands: its key is the one in use (secrets() reads nothing).
    await waitFor(() => source.secrets()[0] === "late-key", {
      timeoutMs: 10_000,
      what: "the late read's key",
    });
  });
});

Deno.test("an unreadable key file names the uid, the mode and the owner", async () => {
  await withDir(async (dir) => {
    const path = `${dir}/key`;
    await Deno.writeTextFile(path, "k");
    await Deno.chmod(path, 0o440);
    // Root reads anything: the permission error is injected; the stat is real.
    const denied = () =>
      Promise.reject(new Deno.errors.PermissionDenied("Permission denied"));
    await assert.rejects(
      ApiKeySource.fromFile(path, { readFile: denied }),
      new RegExp(
        `not readable by uid ${Deno.uid()} \\(mode 0440, owner ${Deno.uid()}:\\d+\\); make it readable`,
      ),
    );
  });
});
