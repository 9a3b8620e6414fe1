// The readers of shipped text files: what they accept and what they refuse.
import assert from "node:assert/strict";
import { parseUnit, parseYaml } from "./readers.ts";

Deno.test("the YAML reader reads what the examples use and refuses the rest", () => {
  assert.deepEqual(
    parseYaml(
      [
        "a: 1 # note",
        "b:",
        "  - x: 'it''s'",
        '    y: ["p", q]',
        "  - - 30s",
        "c:",
        "- --flag",
        'd: "0.0.0.0:8471"',
        "e: https://h:8443",
      ].join("\n"),
    ),
    [{
      a: 1,
      b: [{ x: "it's", y: ["p", "q"] }, ["30s"]],
      c: ["--flag"],
      d: "0.0.0.0:8471",
      e: "https://h:8443",
    }],
  );
  assert.throws(() => parseYaml("a: 1\na: 2"), /duplicate key/);
  assert.throws(() => parseYaml("a: |\n  x"), /unsupported/);
});

Deno.test("the YAML reader takes a leading zero as octal, as Kubernetes does", () => {
  // `defaultMode: 0444` is what kubectl sends as 292; `"0444"` and `0o444`
  // (YAML 1.2) reach the API server as strings, which it refuses.
  assert.deepEqual(
    parseYaml("a: 0444\nb: 0440\nc: '0444'\nd: 0o444\ne: 0\nf: 089"),
    [{ a: 0o444, b: 0o440, c: "0444", d: "0o444", e: 0, f: "089" }],
  );
});

Deno.test("the unit reader keeps sections, repeated keys and continued lines", () => {
  const unit = parseUnit(
    [
      "# comment",
      "[Unit]",
      "Description=x",
      "",
      "[Service]",
      "; another comment",
      "Environment=A=1",
      "Environment=B=2",
      "ExecStart=/bin/run \\",
      "  -- /bin/cmd",
    ].join("\n"),
  );
  assert.deepEqual([...unit.keys()], ["Unit", "Service"]);
  assert.deepEqual(unit.get("Service")?.get("Environment"), ["A=1", "B=2"]);
  assert.deepEqual(unit.get("Service")?.get("ExecStart"), [
    "/bin/run -- /bin/cmd",
  ]);
  assert.throws(() => parseUnit("Key=1"), /before any \[Section\]/);
  assert.throws(() => parseUnit("[A]\nnot a setting"), /expected Key=Value/);
});
