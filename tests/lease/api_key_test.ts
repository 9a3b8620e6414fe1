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
