import assert from "node:assert/strict";
import { createLogger } from "../../lib/obs/log.ts";

function line(fields: Record<string, unknown>): string {
  const lines: string[] = [];
  createLogger({ write: (l) => lines.push(l), now: () => new Date(0) })
    .info("m", fields);
  return lines[0].replace("time=1970-01-01T00:00:00.000Z level=INFO msg=m ", "")
    .trimEnd();
}

Deno.test("text values are quoted where slog quotes them, with Go's escapes", () => {
  const cases: [unknown, string][] = [
    ["web", "web"],
    ["", '""'],
    ["a b", '"a b"'],
    ["a=b", '"a=b"'],
    ['a"b', '"a\\"b"'],
    ["a\\b", "a\\b"], // a backslash alone: slog prints it as it is
    ["a\\b c", '"a\\\\b c"'],
    ["\x1b[31m", '"\\x1b[31m"'],
    ["a\x7fb", '"a\\x7fb"'],
    ["é日本", "é日本"],
    ["a\u00a0b", '"a\\u00a0b"'],
    [4, "4"],
  ];
  for (const [value, want] of cases) {
    assert.equal(line({ v: value }), `v=${want}`);
  }
});

Deno.test("a bidi override in a holder or server text is escaped, so it cannot reorder the line", () => {
  assert.equal(
    line({ holder: "a\u202eb", error: "server answered 500: x\u202ey" }),
    'holder="a\\u202eb" error="server answered 500: x\\u202ey"',
  );
});
