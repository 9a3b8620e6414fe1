/**
 * Every relative link in README.md and docs/*.md leads somewhere: the file
 * exists, and an anchor (`#...`) names a heading of the target page, by the
 * rule GitHub uses to make a heading's anchor (lower case, punctuation
 * dropped, spaces to hyphens, `-1`, `-2` for repeats). Links into code
 * blocks are not links and are skipped; absolute URLs are not checked.
 *
 * @module
 */
import assert from "node:assert/strict";
import { dirname, join, normalize } from "node:path";
import { REPO_ROOT } from "./support/cli.ts";

/** A heading's anchor as GitHub makes it. */
export function headingAnchor(heading: string): string {
  return heading.trim().toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/ /g, "-");
}

/** The text outside fenced code blocks. */
function outsideCode(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```[^\n]*$/gm, "");
}

/** The anchors a Markdown page defines: its headings' and explicit ones. */
export function anchorsOf(text: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of outsideCode(text).split("\n")) {
    const m = /^#{1,6}\s+(.*)$/.exec(line);
    if (m) {
      const base = headingAnchor(m[1]);
      const n = seen.get(base);
      seen.set(base, n === undefined ? 0 : n + 1);
      out.add(n === undefined ? base : `${base}-${n + 1}`);
    }
    for (const a of line.matchAll(/<a (?:name|id)="([^"]+)"/g)) out.add(a[1]);
  }
  return out;
}

/** The link targets of a Markdown page (inline and reference style). */
export function linksOf(text: string): string[] {
  const body = outsideCode(text);
  return [
    ...[...body.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]),
    ...[...body.matchAll(/^\[[^\]]+\]:\s*(\S+)/gm)].map((m) => m[1]),
  ];
}

function pages(): string[] {
  const docs = [...Deno.readDirSync(join(REPO_ROOT, "docs"))]
    .filter((e) => e.isFile && e.name.endsWith(".md"))
    .map((e) => `docs/${e.name}`);
  return ["README.md", ...docs.sort()];
}

Deno.test("every relative link and anchor in README.md and docs/*.md resolves", () => {
  const broken: string[] = [];
  const anchors = new Map<string, Set<string>>();
  const anchorsIn = (path: string) => {
    let a = anchors.get(path);
    if (!a) {
      a = anchorsOf(Deno.readTextFileSync(join(REPO_ROOT, path)));
      anchors.set(path, a);
    }
    return a;
  };
  for (const page of pages()) {
    for (const link of linksOf(Deno.readTextFileSync(join(REPO_ROOT, page)))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue;
      const hash = link.indexOf("#");
      const path = hash < 0 ? link : link.slice(0, hash);
      const anchor = hash < 0 ? "" : link.slice(hash + 1);
      const target = path === "" ? page : normalize(join(dirname(page), path));
      let exists = true;
      try {
        Deno.statSync(join(REPO_ROOT, target));
      } catch {
        exists = false;
      }
      if (!exists) {
        broken.push(`${page}: ${link} (no file ${target})`);
      } else if (anchor && target.endsWith(".md")) {
        if (!anchorsIn(target).has(anchor)) {
          broken.push(`${page}: ${link} (no heading #${anchor} in ${target})`);
        }
      }
    }
  }
  assert.deepEqual(broken, [], broken.join("\n"));
});

Deno.test("the anchor rule: punctuation dropped, spaces to hyphens, repeats numbered", () => {
  assert.equal(
    headingAnchor(
      "HTTP health endpoint and metrics (`renew --health-addr`, `run --health-addr`)",
    ),
    "http-health-endpoint-and-metrics-renew---health-addr-run---health-addr",
  );
  assert.deepEqual(
    [...anchorsOf("# A\n## Logs\n```\n# not a heading\n```\n## Logs\n")],
    ["a", "logs", "logs-1"],
  );
  assert.deepEqual(linksOf("[x](a.md#b) `[y](c.md)`\n```\n[z](d.md)\n```\n"), [
    "a.md#b",
    "c.md",
  ]);
});
