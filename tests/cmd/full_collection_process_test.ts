/**
 * The periodic full collections of the long-lived processes: they call V8's
 * `gc()` at their interval until disposed, schedule nothing where the V8
 * flags do not expose it; one Deno process started with the CLI's flags
 * shows the real `gc()` called.
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

const g = globalThis as { gc?: () => void };

/** Runs `fn` with `gc` in place of V8's (or none), and a ref'd timer: the collections' own timer keeps nothing alive. */
async function withGc(
  gc: (() => void) | undefined,
  fn: () => Promise<void>,
): Promise<void> {
  const saved = g.gc;
  const hold = setTimeout(() => {}, 60_000);
  if (gc) g.gc = gc;
  else delete g.gc;
  try {
    await fn();
  } finally {
    clearTimeout(hold);
    if (saved === undefined) delete g.gc;
    else g.gc = saved;
  }
}

/** Resolves after every timer due within `ms` has fired (timers fire in deadline order). */
const after = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("a full collection runs at each interval until disposed", async () => {
  let runs = 0;
  await withGc(() => runs++, async () => {
    {
      using _c = startFullCollections(2);
      while (runs < 2) await after(1);
    }
    const seen = runs;
    await after(20);
    assert.equal(runs, seen, "no collection after disposal");
  });
});

Deno.test("without gc() exposed nothing is scheduled", async () => {
  let runs = 0;
  await withGc(undefined, async () => {
    using _c = startFullCollections(2);
    // A gc() that appears later is not called: no timer was started.
    g.gc = () => runs++;
    await after(20);
  });
  assert.equal(runs, 0);
});

Deno.test("the CLI's V8 flags expose gc(), collected at most once a minute", () => {
  assert.ok(V8_FLAGS.includes("--expose-gc"), V8_FLAGS.join(","));
  assert.ok(FULL_COLLECTION_EVERY_MS >= 60_000);
});

Deno.test("under the CLI's V8 flags the collections call V8's own gc()", async () => {
  await using dir = await tempDir();
  const script = `${dir.path}/collect.ts`;
  // The real gc(), wrapped to count its calls: the collections must find it
  // on the global object and call it at each interval.
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
  using _c = startFullCollections(5);
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
