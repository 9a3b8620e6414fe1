/**
 * The import graph stays a tree of concepts: no cycles anywhere in `lib/`
 * (type-only imports included), and the modules that only need the configuration's error or defaults do
 * not load the configuration.
 *
 * @module
 */
import assert from "node:assert/strict";
import { REPO_ROOT } from "../support/cli.ts";

interface Info {
  modules: {
    specifier: string;
    dependencies?: {
      code?: { specifier?: string };
      type?: { specifier?: string };
    }[];
  }[];
}

async function graph(entry: string): Promise<Map<string, string[]>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", `${REPO_ROOT}/${entry}`],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as Info;
  const local = (s: string) => s.replace(`file://${REPO_ROOT}/`, "");
  return new Map(
    info.modules.map((m) => [
      local(m.specifier),
      (m.dependencies ?? []).flatMap((d) =>
        [d.code?.specifier, d.type?.specifier].flatMap((s) =>
          s ? [local(s)] : []
        )
      ),
    ]),
  );
}

function cycles(g: Map<string, string[]>): string[][] {
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (u: string) => {
    state.set(u, "open");
    stack.push(u);
    for (const v of g.get(u) ?? []) {
      if (state.get(v) === "open") {
        found.push([...stack.slice(stack.indexOf(v)), v]);
      } else if (!state.has(v)) visit(v);
    }
    stack.pop();
    state.set(u, "done");
  };
  for (const u of g.keys()) if (!state.has(u)) visit(u);
  return found;
}

Deno.test("lib/ has no import cycles", async () => {
  const all = new Map<string, string[]>();
  for (const entry of ["main.ts", "lib/run/run.ts", "lib/cmd/renew.ts"]) {
    for (const [k, v] of await graph(entry)) all.set(k, v);
  }
  assert.ok(all.has("lib/config/config.ts"));
  assert.deepEqual(cycles(all).map((c) => c.join(" -> ")), []);
});

Deno.test("the health endpoint and the lease and holder identity do not load the configuration", async () => {
  for (const entry of ["lib/cmd/health.ts", "lib/config/identity.ts"]) {
    const g = await graph(entry);
    assert.ok(!g.has("lib/config/config.ts"), `${entry} loads config.ts`);
    assert.ok(!g.has("lib/config/settings.ts"), `${entry} loads settings.ts`);
  }
});

Deno.test("acquire and renew import no node: module up front: node:https and node:tls load only when a request needs them", async () => {
  for (const entry of ["lib/cmd/acquire.ts", "lib/cmd/renew.ts"]) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", `${REPO_ROOT}/${entry}`],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
      modules: {
        specifier: string;
        dependencies?: { specifier: string; isDynamic?: boolean }[];
      }[];
    };
    const eager = info.modules.flatMap((m) =>
      (m.dependencies ?? []).filter((d) =>
        d.specifier.startsWith("node:") && !d.isDynamic
      ).map((d) =>
        `${m.specifier.replace(`file://${REPO_ROOT}/`, "")} -> ${d.specifier}`
      )
    );
    assert.deepEqual(eager, [], `${entry} loads node: modules at start`);
  }
});
