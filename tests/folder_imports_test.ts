/**
 * The folders of `lib/` form layers: a folder imports only folders below it,
 * so no two folders import each other, directly or around a circle. The
 * graph is read from the sources (every relative `import`, `export ... from`
 * and literal `import("...")`, type-only ones included), so the test needs no
 * subprocess.
 *
 * When it fails it prints the circle and the file-level imports that close
 * it: move the shared piece down to the lowest folder that needs it, or the
 * wiring up beside the lease keeper (`lib/cmd/`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { dirname, join, normalize, relative } from "node:path";
import { REPO_ROOT } from "./support/cli.ts";

/** One import of a `lib/` module by another, as paths relative to the checkout. */
export interface FileImport {
  /** The importing module, e.g. `lib/run/run.ts`. */
  from: string;
  /** The imported module, e.g. `lib/cmd/lease_keeper.ts`. */
  to: string;
}

/** The relative specifiers a module's source imports (static, re-exported, literal dynamic). */
export function relativeSpecifiers(source: string): string[] {
  const out: string[] = [];
  const re = /\b(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g;
  for (const m of source.matchAll(re)) out.push(m[1]);
  return out;
}

/** The folder of `lib/` a path relative to the checkout lies in (`lib` for `lib/version.ts`). */
export function folderOf(path: string): string {
  const parts = path.split("/");
  return parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts[0];
}

/** Every `.ts` file under `dir` (relative to the checkout), recursively. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(join(REPO_ROOT, dir))) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) out.push(...sources(path));
    else if (e.name.endsWith(".ts")) out.push(path);
  }
  return out.sort();
}

/** Every import of one `lib/` module by another, read from the sources. */
function libImports(): FileImport[] {
  return sources("lib").flatMap((from) =>
    relativeSpecifiers(Deno.readTextFileSync(join(REPO_ROOT, from)))
      .map((spec) => ({ from, to: normalize(join(dirname(from), spec)) }))
      .filter(({ to }) => !relative("lib", to).startsWith(".."))
  );
}

/**
 * The folder graph: for each folder, the other folders it imports and, for
 * each, the file-level imports that make the edge.
 */
export function folderGraph(
  imports: readonly FileImport[],
): Map<string, Map<string, FileImport[]>> {
  const g = new Map<string, Map<string, FileImport[]>>();
  for (const i of imports) {
    const a = folderOf(i.from), b = folderOf(i.to);
    if (!g.has(a)) g.set(a, new Map());
    if (!g.has(b)) g.set(b, new Map());
    if (a === b) continue;
    const edges = g.get(a)!;
    edges.set(b, [...edges.get(b) ?? [], i]);
  }
  return g;
}

/**
 * The folders in an order where each imports only folders before it, or the
 * folders left over when no such order exists (those in or above a circle).
 */
export function layers(
  g: Map<string, Map<string, FileImport[]>>,
): { order: string[]; stuck: string[] } {
  const order: string[] = [];
  const left = new Set([...g.keys()].sort());
  for (;;) {
    const next = [...left].filter((f) =>
      [...g.get(f)!.keys()].every((to) => !left.has(to))
    );
    if (next.length === 0) break;
    for (const f of next) {
      order.push(f);
      left.delete(f);
    }
  }
  return { order, stuck: [...left] };
}

/** One circle among the stuck folders, as the folders around it and the imports making each step. */
function aCircle(
  g: Map<string, Map<string, FileImport[]>>,
  stuck: string[],
): string[] {
  const inStuck = new Set(stuck);
  const path: string[] = [stuck[0]];
  for (;;) {
    const here = path[path.length - 1];
    const next = [...g.get(here)!.keys()].find((f) => inStuck.has(f))!;
    const seen = path.indexOf(next);
    if (seen >= 0) {
      const circle = [...path.slice(seen), next];
      return circle.slice(1).map((to, i) => {
        const from = circle[i];
        const why = g.get(from)!.get(to)!.map((e) => `${e.from} -> ${e.to}`);
        const more = why.length > 3 ? `, and ${why.length - 3} more` : "";
        return `${from} -> ${to} (${why.slice(0, 3).join(", ")}${more})`;
      });
    }
    path.push(next);
  }
}

Deno.test("lib/ folders import each other in one direction only: no circle of folders", () => {
  const g = folderGraph(libImports());
  const { order, stuck } = layers(g);
  assert.deepEqual(
    stuck,
    [],
    `a circle of folders: ${
      stuck.length ? aCircle(g, stuck).join("; ") : ""
    }\nlayers so far: ${order.join(", ")}`,
  );
  assert.ok(order.includes("lib/lease") && order.includes("lib/run"));
});

Deno.test("leaf folders import no other folder of lib/", () => {
  const g = folderGraph(libImports());
  for (const leaf of ["lib/net", "lib/obs"]) {
    assert.deepEqual([...g.get(leaf)!.keys()], [], `${leaf} imports`);
  }
});

Deno.test("the folder graph's reader sees every import form and finds a circle", () => {
  assert.deepEqual(
    relativeSpecifiers(
      [
        `import { a } from "./a.ts";`,
        `import type { B } from "../b/b.ts";`,
        `export { c } from "../c/c.ts";`,
        `import {\n  d,\n} from "../d/d.ts";`,
        `const e = await import("../e/e.ts");`,
        `import "node:fs";`,
      ].join("\n"),
    ),
    ["./a.ts", "../b/b.ts", "../c/c.ts", "../d/d.ts", "../e/e.ts"],
  );
  const g = folderGraph([
    { from: "lib/a/x.ts", to: "lib/b/y.ts" },
    { from: "lib/b/y.ts", to: "lib/c/z.ts" },
    { from: "lib/c/z.ts", to: "lib/a/w.ts" },
    { from: "lib/d/v.ts", to: "lib/a/x.ts" },
    { from: "lib/e/u.ts", to: "lib/e/t.ts" },
  ]);
  const { order, stuck } = layers(g);
  assert.deepEqual(order, ["lib/e"]);
  assert.deepEqual(stuck, ["lib/a", "lib/b", "lib/c", "lib/d"]);
  assert.deepEqual(aCircle(g, stuck), [
    "lib/a -> lib/b (lib/a/x.ts -> lib/b/y.ts)",
    "lib/b -> lib/c (lib/b/y.ts -> lib/c/z.ts)",
    "lib/c -> lib/a (lib/c/z.ts -> lib/a/w.ts)",
  ]);
});
