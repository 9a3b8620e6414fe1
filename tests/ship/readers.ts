/**
 * Readers for what ships as text and is checked without running it: the
 * Dockerfile, the example manifests (a YAML subset) and the example systemd
 * unit. They live apart from the checks so the static checks
 * (ship_test.ts) and the kubelet stand-in (kubelet.ts) read the examples
 * the same way.
 *
 * @module
 */
import assert from "node:assert/strict";

/** The checkout's root, as a path. */
export const ROOT: string = decodeURIComponent(
  new URL("../..", import.meta.url).pathname,
).replace(/\/+$/, "");

// ---------------------------------------------------------------------------
// Dockerfile parsing: instructions with continuation lines joined and
// comment lines dropped, grouped by stage.

/** One Dockerfile instruction, continuation lines joined. */
export interface Instruction {
  /** The keyword, upper-case (`RUN`, `COPY`, ...). */
  keyword: string;
  /** Everything after the keyword, trimmed. */
  args: string;
  /** The 1-based line it starts on, for messages. */
  line: number;
}

/** One build stage: its `FROM` and what follows it. */
export interface Stage {
  /** The base image as written (`name:tag`, maybe `@sha256:...`). */
  image: string;
  /** The `AS` name, if any. */
  name?: string;
  /** The `--platform=` value, if any. */
  platform?: string;
  /** The stage's instructions after `FROM`. */
  instructions: Instruction[];
}

/**
 * Reads a Dockerfile into stages.
 *
 * @param text The Dockerfile.
 * @returns The stages in order; global `ARG`s before the first `FROM` are dropped.
 * @throws {assert.AssertionError} On a line it cannot read.
 */
export function parseDockerfile(text: string): Stage[] {
  const instructions: Instruction[] = [];
  let pending: { text: string; line: number } | undefined;
  text.split("\n").forEach((raw, idx) => {
    const line = raw.trimEnd();
    if (/^\s*#/.test(line) || (pending === undefined && line.trim() === "")) {
      return;
    }
    const continued = line.endsWith("\\");
    const body = continued ? line.slice(0, -1) : line;
    pending = pending === undefined
      ? { text: body, line: idx + 1 }
      : { text: `${pending.text} ${body.trim()}`, line: pending.line };
    if (!continued) {
      const m = /^\s*(\w+)\s+(.*)$/.exec(pending.text);
      assert.ok(m, `Dockerfile line ${pending.line}: cannot parse`);
      instructions.push({
        keyword: m[1].toUpperCase(),
        args: m[2].trim(),
        line: pending.line,
      });
      pending = undefined;
    }
  });
  const stages: Stage[] = [];
  for (const ins of instructions) {
    if (ins.keyword === "FROM") {
      const m = /^(?:--platform=(\S+)\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(
        ins.args,
      );
      assert.ok(m, `Dockerfile line ${ins.line}: cannot parse FROM`);
      stages.push({
        platform: m[1],
        image: m[2],
        name: m[3],
        instructions: [],
      });
    } else if (ins.keyword !== "ARG" || stages.length > 0) {
      assert.ok(stages.length > 0, `Dockerfile line ${ins.line}: before FROM`);
      stages.at(-1)!.instructions.push(ins);
    }
  }
  return stages;
}

/** Splits a shell command into words (quotes removed, no expansion). */
export function shellWords(cmd: string): string[] {
  const words: string[] = [];
  for (const m of cmd.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g)) {
    words.push(m[1] ?? m[2] ?? m[3]);
  }
  return words;
}

// ---------------------------------------------------------------------------
// A small YAML reader for the examples: block maps and sequences, plain,
// quoted and flow-sequence scalars, comments. It throws on anything else
// (anchors, block scalars, flow maps), so an example cannot silently drift
// into syntax the checks below would misread.

export type Yaml = string | number | boolean | null | Yaml[] | {
  [k: string]: Yaml;
};
export type YamlMap = { [k: string]: Yaml };

interface YamlLine {
  indent: number;
  text: string;
  no: number;
}

const KEY_RE =
  /^("(?:[^"\\]|\\.)*"|[^\s"'#\-[{][^:]*?|-[^\s:][^:]*?)\s*:(?:\s+(.*))?$/;

function stripYamlComment(s: string): string {
  let quote: string | undefined;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quote) {
      if (c === quote) quote = undefined;
      continue;
    }
    if ((c === '"' || c === "'") && (i === 0 || /[\s[,:]/.test(s[i - 1]))) {
      quote = c;
    } else if (c === "#" && (i === 0 || /\s/.test(s[i - 1]))) {
      return s.slice(0, i);
    }
  }
  return s;
}

function yamlScalar(s: string, line: YamlLine): Yaml {
  const where = `line ${line.no}`;
  if (s.startsWith('"')) return JSON.parse(s);
  if (s.startsWith("'")) {
    assert.ok(s.endsWith("'") && s.length >= 2, `${where}: unterminated '`);
    return s.slice(1, -1).replaceAll("''", "'");
  }
  if (s.startsWith("[")) {
    assert.ok(s.endsWith("]"), `${where}: unterminated flow sequence`);
    const inner = s.slice(1, -1).trim();
    if (inner === "") return [];
    const items = inner.match(/"(?:[^"\\]|\\.)*"|'[^']*'|[^,]+/g) ?? [];
    return items.map((x) => x.trim()).filter((x) => x !== "")
      .map((x) => yamlScalar(x, line));
  }
  if (s === "{}") return {};
  assert.ok(!/^[{|>&*!]/.test(s), `${where}: unsupported YAML ${s}`);
  if (s === "true" || s === "false") return s === "true";
  if (s === "null" || s === "~") return null;
  if (/^-?(0|[1-9]\d*)$/.test(s)) return Number(s);
  // A leading zero is octal, as Kubernetes' YAML reader (YAML 1.1) takes it:
  // `defaultMode: 0444` is 292. `0o444` is YAML 1.2 and stays a string there.
  if (/^0[0-7]+$/.test(s)) return parseInt(s, 8);
  return s;
}

class YamlParser {
  i = 0;
  constructor(private lines: YamlLine[]) {}

  private isItem(l: YamlLine): boolean {
    return l.text === "-" || l.text.startsWith("- ");
  }

  block(indent: number): Yaml {
    return this.isItem(this.lines[this.i])
      ? this.seq(indent)
      : this.map(indent);
  }

  private seq(indent: number): Yaml[] {
    const out: Yaml[] = [];
    while (this.i < this.lines.length) {
      const l = this.lines[this.i];
      if (l.indent < indent || (l.indent === indent && !this.isItem(l))) break;
      assert.ok(l.indent === indent && this.isItem(l), `line ${l.no}: indent`);
      const rest = l.text.slice(1).trimStart();
      if (rest === "") {
        this.i++;
        out.push(this.child(indent));
      } else if (KEY_RE.test(rest) || rest === "-" || rest.startsWith("- ")) {
        // A map or a sequence that starts on the item's own line: read it as
        // if it began on the next line, indented to where it starts.
        const inner = indent + l.text.length - rest.length;
        this.lines[this.i] = { indent: inner, text: rest, no: l.no };
        out.push(this.block(inner));
      } else {
        this.i++;
        out.push(yamlScalar(rest, l));
      }
    }
    return out;
  }

  private child(indent: number): Yaml {
    const next = this.lines[this.i];
    if (next && next.indent > indent) return this.block(next.indent);
    if (next && next.indent === indent && this.isItem(next)) {
      return this.seq(indent);
    }
    return null;
  }

  private map(indent: number): YamlMap {
    const out: YamlMap = {};
    while (this.i < this.lines.length) {
      const l = this.lines[this.i];
      if (l.indent < indent) break;
      assert.ok(l.indent === indent, `line ${l.no}: unexpected indentation`);
      if (this.isItem(l)) break;
      const m = KEY_RE.exec(l.text);
      assert.ok(m, `line ${l.no}: expected "key: value", got ${l.text}`);
      const key = m[1].startsWith('"') ? JSON.parse(m[1]) : m[1];
      assert.ok(!(key in out), `line ${l.no}: duplicate key ${key}`);
      this.i++;
      out[key] = m[2] !== undefined && m[2] !== ""
        ? yamlScalar(m[2], l)
        : this.child(indent);
    }
    return out;
  }
}

/**
 * Reads the YAML subset the examples use (see above).
 *
 * @param text One or more `---`-separated documents.
 * @returns One value per non-empty document.
 * @throws {assert.AssertionError} On syntax outside the subset, a tab or a duplicate key.
 */
export function parseYaml(text: string): Yaml[] {
  const docs: YamlLine[][] = [[]];
  text.split("\n").forEach((raw, idx) => {
    if (/^---\s*$/.test(raw)) {
      docs.push([]);
      return;
    }
    assert.ok(!raw.includes("\t"), `line ${idx + 1}: tab`);
    const body = stripYamlComment(raw).trimEnd();
    if (body.trim() === "") return;
    const indent = body.length - body.trimStart().length;
    docs.at(-1)!.push({ indent, text: body.trimStart(), no: idx + 1 });
  });
  return docs.filter((d) => d.length > 0).map((lines) => {
    const p = new YamlParser(lines);
    const v = p.block(lines[0].indent);
    assert.equal(p.i, lines.length, `line ${lines[p.i]?.no}: not parsed`);
    return v;
  });
}

/** `v` as a map, or an assertion failure naming `what`. */
export function asMap(v: Yaml | undefined, what: string): YamlMap {
  assert.ok(
    v !== null && typeof v === "object" && !Array.isArray(v),
    `${what} is not a map`,
  );
  return v as YamlMap;
}

/** `v` as a list of maps, or an assertion failure naming `what`. */
export function asList(v: Yaml | undefined, what: string): YamlMap[] {
  assert.ok(Array.isArray(v), `${what} is not a list`);
  return v.map((x, i) => asMap(x, `${what}[${i}]`));
}

/**
 * The one Deployment in an example manifest's text (other documents, such
 * as a Secret or a NetworkPolicy, may sit beside it).
 */
export function parseDeployment(text: string, file: string): YamlMap {
  const docs = parseYaml(text);
  const deployments = docs.map((d) => asMap(d, file)).filter((d) =>
    d.kind === "Deployment"
  );
  assert.equal(deployments.length, 1, `${file}: one Deployment expected`);
  return deployments[0];
}

/** The example manifests: every `examples/*.yaml`, sorted. */
export function exampleFiles(): string[] {
  return [...Deno.readDirSync(`${ROOT}/examples`)]
    .filter((e) => e.isFile && e.name.endsWith(".yaml"))
    .map((e) => e.name).sort();
}

/** The one Deployment in `examples/<file>`. */
export async function loadExample(file: string): Promise<YamlMap> {
  return parseDeployment(
    await Deno.readTextFile(`${ROOT}/examples/${file}`),
    file,
  );
}

// ---------------------------------------------------------------------------
// systemd unit files: sections of `Key=Value` lines, comments (`#`, `;`),
// continuation lines ending in a backslash; a key may repeat.

/** A unit file: each section's keys and every value given for each, in order. */
export type Unit = Map<string, Map<string, string[]>>;

/**
 * Reads a systemd unit file.
 *
 * @param text The unit file.
 * @returns Its sections by name (without brackets).
 * @throws {assert.AssertionError} On a line that is neither a section, a setting nor a comment.
 */
export function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section: Map<string, string[]> | undefined;
  let pending = "";
  let pendingLine = 0;
  text.split("\n").forEach((raw, idx) => {
    const line = raw.trim();
    if (pending === "" && (line === "" || /^[#;]/.test(line))) return;
    if (pending === "") pendingLine = idx + 1;
    if (line.endsWith("\\")) {
      pending += line.slice(0, -1).trimEnd() + " ";
      return;
    }
    const full = pending + line;
    pending = "";
    const header = /^\[([^\]]+)\]$/.exec(full);
    if (header) {
      assert.ok(!unit.has(header[1]), `line ${pendingLine}: duplicate section`);
      section = new Map();
      unit.set(header[1], section);
      return;
    }
    const m = /^([A-Za-z][\w-]*)\s*=\s*(.*)$/.exec(full);
    assert.ok(m, `line ${pendingLine}: expected Key=Value, got ${full}`);
    assert.ok(section, `line ${pendingLine}: setting before any [Section]`);
    section.set(m[1], [...(section.get(m[1]) ?? []), m[2]]);
  });
  assert.equal(pending, "", "the file ends inside a continued line");
  return unit;
}
