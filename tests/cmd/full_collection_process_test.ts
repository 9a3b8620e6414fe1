/**
 * The periodic full collections of the long-lived processes: they run at
 * their interval, stop when disposed, and use V8's `gc()` only where the V8
 * flags expose it; one Deno process started with the CLI's flags shows the
 * real `gc()` called.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  FULL_COLLECTION_EVERY_MS,
  startFullCollections,
} from "../../lib/cmd/full_collection.ts";
import { denoRunArgv, V8_FLAGS } from "../../lib/cmd/self_argv.ts";
import { REPO_ROOT } from "../support/cli.ts";
import { tempDir } from "../support/lease_env.ts";

/** A stand-in interval: records what was scheduled and whether it stopped. */
function fakeEvery() {
  const timers: { fn: () => void; ms: number; stopped: boolean }[] = [];
  return {
    timers,
    every(fn: () => void, ms: number): Disposable {
      const t = { fn, ms, stopped: false };
      timers.push(t);
      return { [Symbol.dispose]: () => t.stopped = true };
    },
  };
}

Deno.test("a full collection runs at each interval until disposed", () => {
  const f = fakeEvery();
  let runs = 0;
  {
    using _c = startFullCollections({
      collect: () => runs++,
      every: f.every,
    });
    assert.equal(f.timers.length, 1);
    assert.equal(f.timers[0].ms, FULL_COLLECTION_EVERY_MS);
    f.timers[0].fn();
    f.timers[0].fn();
    assert.equal(runs, 2);
    assert.equal(f.timers[0].stopped, false);
  }
  assert.equal(f.timers[0].stopped, true);
});

Deno.test("the default collector is V8's gc() when the flags expose it", () => {
  const g = globalThis as { gc?: () => void };
  const saved = g.gc;
  let runs = 0;
  g.gc = () => runs++;
  const f = fakeEvery();
  try {
    using _c = startFullCollections({ every: f.every });
    f.timers[0].fn();
  } finally {
    if (saved === undefined) delete g.gc;
    else g.gc = saved;
  }
  assert.equal(runs, 1);
});

Deno.test("without gc() exposed nothing is scheduled", () => {
  const g = globalThis as { gc?: unknown };
  const saved = g.gc;
  delete g.gc;
  const f = fakeEvery();
  try {
    using _c = startFullCollections({ every: f.every });
  } finally {
    if (saved !== undefined) g.gc = saved;
  }
  assert.equal(f.timers.length, 0);
});

Deno.test("the default interval timer fires while the process has work", async () => {
  // The timer itself does not keep the event loop alive (awaiting it alone
  // ends the test with a pending promise), so a ref'd timer holds it here.
  const hold = setTimeout(() => {}, 60_000);
  try {
    let runs = 0;
    const fired = Promise.withResolvers<void>();
    using _c = startFullCollections({
      everyMs: 5,
      collect: () => ++runs === 2 && fired.resolve(),
    });
    await fired.promise;
  } finally {
    clearTimeout(hold);
  }
});

Deno.test("the CLI's V8 flags expose gc(), collected at most once a minute", () => {
  assert.ok(V8_FLAGS.includes("--expose-gc"), V8_FLAGS.join(","));
  assert.ok(FULL_COLLECTION_EVERY_MS >= 60_000);
});

Deno.test("under the CLI's V8 flags the collections call V8's own gc()", async () => {
  await using dir = await tempDir();
  const script = `${dir.path}/collect.ts`;
  // The real gc(), wrapped to count its calls: the default collector must
  // find it on the global object and call it at each interval.
  await Deno.writeTextFile(
    script,
    `import { startFullCollections } from ${
      JSON.stringify(
        new URL("../../lib/cmd/full_collection.ts", import.meta.url).href,
      )
    };
const g = globalThis as { gc?: () => void };
const real = g.gc;
if (typeof real !== "function") {
  console.log("no gc()");
  Deno.exit(3);
}
let calls = 0;
const twice = Promise.withResolvers<void>();
g.gc = () => {
  real();
  if (++calls === 2) twice.resolve();
};
const hold = setTimeout(() => {}, 60_000);
{
  using _c = startFullCollections({ everyMs: 5 });
  await twice.promise;
}
clearTimeout(hold);
console.log("collected", calls);
`,
  );
  const [exe, ...args] = denoRunArgv(REPO_ROOT, script);
  const out = await new Deno.Command(exe, {
    args,
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, text + new TextDecoder().decode(out.stderr));
  assert.match(text, /^collected 2\n$/);
});
