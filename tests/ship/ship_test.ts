/**
 * Static checks of what ships without running it (no Docker engine and no
 * cluster here): the Dockerfile builds the binary with the compile task's
 * permission flags on a runtime base that can run it, and the example
 * manifests wire the helpers the way the webhook does. Each check is one a
 * user would hit as a broken image or pod if it regressed.
 *
 * @module
 */
import assert from "node:assert/strict";
import { compileArgs, PERMISSION_SET, TARGETS } from "../../scripts/compile.ts";

const ROOT = decodeURIComponent(new URL("../..", import.meta.url).pathname)
  .replace(/\/+$/, "");

// ---------------------------------------------------------------------------
// Dockerfile parsing: instructions with continuation lines joined and
// comment lines dropped, grouped by stage.

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

interface Stage {
  image: string;
  name?: string;
  platform?: string;
  instructions: Instruction[];
}

function parseDockerfile(text: string): Stage[] {
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
function shellWords(cmd: string): string[] {
  const words: string[] = [];
  for (const m of cmd.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g)) {
    words.push(m[1] ?? m[2] ?? m[3]);
  }
  return words;
}

/**
 * The permission-related flags of a deno command line, in order: what the
 * program may do once compiled. Anything else (output path, target) may
 * differ between the image and a release without changing behaviour.
 */
function permissionFlags(argv: string[]): string[] {
  return argv.filter((a) =>
    /^(-A|--allow-all|-P|--permission-set|--no-prompt)(=.*)?$/.test(a) ||
    /^--(allow|deny|ignore)-[\w-]+(=.*)?$/.test(a) ||
    /^-[RWNEIS](=.*)?$/.test(a)
  );
}

/** Each `deno ...` invocation in a shell command, as its words after `deno`. */
function denoInvocations(cmd: string): string[][] {
  return cmd.split(/;|&&|\|\||\n/).map((part) => shellWords(part.trim()))
    .filter((w) => w[0] === "deno").map((w) => w.slice(1));
}

const dockerfile = parseDockerfile(
  await Deno.readTextFile(`${ROOT}/Dockerfile`),
);
const denoJson = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`)) as {
  permissions?: Record<string, unknown>;
  tasks?: Record<string, string>;
};
const builder = dockerfile[0];
const runtime = dockerfile.at(-1)!;

Deno.test("permissionFlags picks out permission flags and nothing else", () => {
  assert.deepEqual(
    permissionFlags([
      "compile",
      "-q",
      "-P=berth-acquire",
      "--allow-net",
      "-R=/x",
      "-A",
      "--target",
      "x",
      "main.ts",
    ]),
    ["-P=berth-acquire", "--allow-net", "-R=/x", "-A"],
  );
});

Deno.test("compile task and binary both use only the deno.json permission set", () => {
  assert.ok(
    denoJson.permissions?.[PERMISSION_SET],
    `deno.json has no permission set ${JSON.stringify(PERMISSION_SET)}`,
  );
  const task = denoJson.tasks?.compile;
  assert.ok(task, "deno.json has no compile task");
  const [invocation, ...others] = denoInvocations(task);
  assert.equal(others.length, 0, `compile task runs more than deno: ${task}`);
  assert.equal(invocation[0], "run");
  assert.equal(invocation.at(-1), "scripts/compile.ts");
  const expected = [`-P=${PERMISSION_SET}`];
  assert.deepEqual(permissionFlags(invocation), expected);
  const args = compileArgs({
    target: TARGETS[0],
    output: "/out/b",
    config: "/src/deno.json",
    entry: "/src/main.ts",
  });
  assert.equal(args[0], "compile");
  assert.deepEqual(permissionFlags(args), expected);
  // A compiled binary writes its code cache at run time unless told not to;
  // the image's root file system is read-only.
  assert.ok(args.includes("--no-code-cache"), args.join(" "));
  assert.equal(args[args.indexOf("--target") + 1], TARGETS[0]);
});

Deno.test("the Dockerfile compiles with the compile task's permission flags", () => {
  const runs = builder.instructions.filter((i) => i.keyword === "RUN");
  const invocations = runs.flatMap((r) => denoInvocations(r.args));
  const compiles = invocations.filter((w) =>
    w[0] === "compile" || (w[0] === "task" && w.includes("compile"))
  );
  assert.ok(
    compiles.length > 0,
    "the build stage neither runs `deno task compile` nor `deno compile`",
  );
  const taskFlags = permissionFlags(
    denoInvocations(denoJson.tasks?.compile ?? "")[0] ?? [],
  );
  for (const w of compiles) {
    if (w[0] === "task") {
      // The task itself is checked above; the Dockerfile must add nothing.
      assert.deepEqual(permissionFlags(w), [], w.join(" "));
    } else {
      assert.deepEqual(permissionFlags(w), taskFlags, w.join(" "));
      assert.ok(w.includes("--no-code-cache"), w.join(" "));
    }
  }
  // Every release target can be built into an image.
  const buildText = runs.map((r) => r.args).join("\n");
  for (const t of TARGETS) assert.ok(buildText.includes(t), `missing ${t}`);
});

Deno.test("the Dockerfile's builder is a pinned Deno image of the tested version", () => {
  assert.ok(dockerfile.length >= 2, "not a multi-stage build");
  const m = /^denoland\/deno:([\w.-]+)(@sha256:[0-9a-f]{64})?$/.exec(
    builder.image,
  );
  assert.ok(m, `builder ${builder.image} is not denoland/deno:<tag>`);
  const version = /(\d+\.\d+\.\d+)/.exec(m[1])?.[1];
  assert.ok(version, `builder tag ${m[1]} names no exact Deno version`);
  assert.equal(version, Deno.version.deno);
  assert.ok(builder.name, "the build stage has no name to copy from");
});

Deno.test("the runtime image has glibc, runs as 65532 and has the binary as entrypoint", () => {
  // distroless "cc" = glibc + libgcc; "static" and "base" lack what the
  // compiled Deno binary links against.
  assert.match(
    runtime.image,
    /^gcr\.io\/distroless\/cc-debian\d+(:[\w.-]+)?(@sha256:[0-9a-f]{64})?$/,
  );
  const kw = (k: string) => runtime.instructions.filter((i) => i.keyword === k);
  assert.deepEqual(
    kw("RUN").map((i) => i.args),
    [],
    "RUN in the runtime stage needs a shell the image must not have",
  );
  const users = kw("USER");
  assert.equal(users.length, 1);
  assert.match(users[0].args, /^65532(:65532)?$/);
  const entry = kw("ENTRYPOINT");
  assert.equal(entry.length, 1);
  // Exec form: no shell wraps the binary, so args: ["renew"] reach it and
  // SIGTERM goes to it directly.
  assert.deepEqual(JSON.parse(entry[0].args), ["/berth-acquire"]);
  assert.deepEqual(kw("CMD"), [], "a CMD would be replaced by args anyway");
  const copies = kw("COPY").filter((i) =>
    i.args.startsWith(`--from=${builder.name} `)
  );
  assert.equal(copies.length, 1);
  assert.equal(shellWords(copies[0].args).at(-1), "/berth-acquire");
});

Deno.test(".dockerignore lets through every file the build stage copies", async () => {
  const kept = new Set(
    (await Deno.readTextFile(`${ROOT}/.dockerignore`)).split("\n")
      .map((l) => l.trim()).filter((l) => l.startsWith("!"))
      .map((l) => l.slice(1).replace(/\/+$/, "")),
  );
  const sources = builder.instructions.filter((i) =>
    i.keyword === "COPY" && !i.args.startsWith("--from")
  ).flatMap((i) => shellWords(i.args).slice(0, -1));
  assert.ok(sources.length > 0);
  for (const s of sources) {
    assert.ok(kept.has(s.replace(/\/+$/, "")), `${s} is not in .dockerignore`);
  }
});

// ---------------------------------------------------------------------------
// A small YAML reader for the examples: block maps and sequences, plain,
// quoted and flow-sequence scalars, comments. It throws on anything else
// (anchors, block scalars, flow maps), so an example cannot silently drift
// into syntax the checks below would misread.

type Yaml = string | number | boolean | null | Yaml[] | { [k: string]: Yaml };
type YamlMap = { [k: string]: Yaml };

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

function parseYaml(text: string): Yaml[] {
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

// ---------------------------------------------------------------------------
// The examples.

const PROBE_ARGV = [
  "/berth/check",
  "check",
  "/berth/healthy",
  "--max-age",
  "30s",
];

function asMap(v: Yaml | undefined, what: string): YamlMap {
  assert.ok(
    v !== null && typeof v === "object" && !Array.isArray(v),
    `${what} is not a map`,
  );
  return v as YamlMap;
}

function asList(v: Yaml | undefined, what: string): YamlMap[] {
  assert.ok(Array.isArray(v), `${what} is not a list`);
  return v.map((x, i) => asMap(x, `${what}[${i}]`));
}

async function loadExample(file: string): Promise<YamlMap> {
  const docs = parseYaml(await Deno.readTextFile(`${ROOT}/examples/${file}`));
  const deployments = docs.map((d) => asMap(d, file)).filter((d) =>
    d.kind === "Deployment"
  );
  assert.equal(deployments.length, 1, `${file}: one Deployment expected`);
  return deployments[0];
}

interface Wiring {
  pod: YamlMap;
  acquire: YamlMap;
  sidecar: YamlMap;
  mains: YamlMap[];
  env(c: YamlMap): Map<string, YamlMap>;
}

/** The invariants every example shares: the webhook's wiring. */
function checkWiring(file: string, deployment: YamlMap): Wiring {
  const spec = asMap(deployment.spec, `${file} spec`);
  // The old pod must be gone before the new one starts (see the examples).
  assert.equal(asMap(spec.strategy, "strategy").type, "Recreate", file);
  const pod = asMap(asMap(spec.template, "template").spec, "pod spec");
  const inits = asList(pod.initContainers, "initContainers");
  const mains = asList(pod.containers, "containers");
  const names = inits.map((c) => c.name);
  const ai = names.indexOf("berth-acquire");
  const si = names.indexOf("berth-sidecar");
  assert.ok(ai >= 0 && si > ai, `${file}: berth-acquire, then berth-sidecar`);
  const acquire = inits[ai];
  const sidecar = inits[si];
  assert.deepEqual(acquire.args, ["acquire"]);
  assert.equal(acquire.restartPolicy, undefined, "acquire must run once");
  assert.deepEqual(sidecar.args, ["renew"]);
  assert.equal(sidecar.restartPolicy, "Always", "native sidecar");
  for (const c of [acquire, sidecar]) {
    assert.equal(c.command, undefined, "the image's ENTRYPOINT is the binary");
    assert.equal(c.image, acquire.image);
  }

  const volumes = new Map(
    asList(pod.volumes, "volumes").map((v) => [v.name as string, v]),
  );
  const mounts = (c: YamlMap): YamlMap[] =>
    c.volumeMounts === undefined ? [] : asList(c.volumeMounts, "volumeMounts");
  const stateMount = (c: YamlMap): YamlMap | undefined =>
    mounts(c).find((m) => m.mountPath === "/berth");
  const helperState = stateMount(acquire);
  assert.ok(helperState, `${file}: acquire has no /berth mount`);
  const stateVolume = volumes.get(helperState.name as string);
  assert.ok(stateVolume?.emptyDir !== undefined, "state volume is an emptyDir");
  for (const c of [acquire, sidecar]) {
    const m = stateMount(c);
    assert.equal(m?.name, helperState.name, `${c.name}: state volume`);
    assert.notEqual(m?.readOnly, true, `${c.name} writes the state volume`);
  }
  for (const c of mains) {
    const m: YamlMap | undefined = mounts(c).find((x) =>
      x.name === helperState.name
    );
    if (m) assert.equal(m.readOnly, true, `${c.name}: state must be read-only`);
  }

  const env = (c: YamlMap) => {
    const out = new Map<string, YamlMap>();
    for (const e of c.env === undefined ? [] : asList(c.env, "env")) {
      // The API server rejects a number here: values must be strings.
      if ("value" in e) {
        assert.equal(typeof e.value, "string", `${c.name} ${e.name}`);
      }
      out.set(e.name as string, e);
    }
    return out;
  };
  const value = (c: YamlMap, k: string) => env(c).get(k)?.value;
  for (const c of [acquire, sidecar]) {
    const e = env(c);
    for (
      const [k, path] of [
        ["POD_NAMESPACE", "metadata.namespace"],
        ["POD_NAME", "metadata.name"],
        ["POD_UID", "metadata.uid"],
      ]
    ) {
      const from = asMap(e.get(k)?.valueFrom, `${c.name} ${k}.valueFrom`);
      assert.equal(asMap(from.fieldRef, "fieldRef").fieldPath, path);
    }
    assert.ok(value(c, "BERTH_LEASE_NAME"), `${c.name}: lease name`);
    assert.equal(value(c, "BERTH_TTL_SECONDS"), "30");
    assert.match(String(value(c, "BERTH_API_SERVER")), /^https:\/\//);
    const mountedFrom = (path: string, kind: string) => {
      const m: YamlMap | undefined = mounts(c).find((m) =>
        path.startsWith(`${String(m.mountPath).replace(/\/+$/, "")}/`)
      );
      assert.ok(m, `${c.name}: ${path} is in no mounted volume`);
      assert.equal(m.readOnly, true, `${c.name}: ${m.name} read-only`);
      assert.ok(volumes.get(m.name as string)?.[kind], `${m.name}: ${kind}`);
    };
    mountedFrom(String(value(c, "BERTH_API_KEY_FILE")), "secret");
    mountedFrom(String(value(c, "BERTH_CA_BUNDLE_FILE")), "configMap");
    assert.equal(value(c, "BERTH_API_KEY"), undefined, "key only from a file");
  }
  // The sidecar adopts the init container's lease only if both compute the
  // same holder: they must be configured alike.
  const comparable = (c: YamlMap) =>
    [...env(c)].filter(([k]) => k !== "BERTH_HEALTH_ADDR")
      .map(([k, v]) => JSON.stringify([k, v])).sort();
  assert.deepEqual(comparable(sidecar), comparable(acquire));
  return { pod, acquire, sidecar, mains, env };
}

function checkTimings(probe: YamlMap) {
  assert.equal(probe.periodSeconds, 2);
  assert.equal(probe.timeoutSeconds, 1);
  assert.equal(probe.failureThreshold, 1);
  assert.equal(probe.terminationGracePeriodSeconds, 1);
}

function checkExecProbe(file: string, w: Wiring) {
  for (const c of w.mains) {
    const m: YamlMap | undefined = asList(
      c.volumeMounts,
      `${c.name} volumeMounts`,
    )
      .find((m) => m.mountPath === "/berth");
    assert.equal(m?.readOnly, true, `${file} ${c.name}: read-only /berth`);
    const probe = asMap(c.livenessProbe, `${c.name} livenessProbe`);
    assert.deepEqual(asMap(probe.exec, "exec").command, PROBE_ARGV);
    checkTimings(probe);
  }
}

Deno.test("examples/pod-probe.yaml is wired like the webhook", async () => {
  const w = checkWiring("pod-probe.yaml", await loadExample("pod-probe.yaml"));
  checkExecProbe("pod-probe.yaml", w);
  for (const c of [w.acquire, w.sidecar]) {
    assert.equal(w.env(c).get("BERTH_ENFORCE")?.value, "probe");
  }
});

Deno.test("examples/pod-signal.yaml can see and signal the workload", async () => {
  const w = checkWiring(
    "pod-signal.yaml",
    await loadExample("pod-signal.yaml"),
  );
  assert.equal(w.pod.shareProcessNamespace, true);
  const e = w.env(w.sidecar);
  assert.equal(e.get("BERTH_ENFORCE")?.value, "signal");
  assert.ok(e.get("BERTH_SIGNAL_TARGET")?.value, "empty target");
  assert.match(String(e.get("BERTH_ENFORCE_GRACE_SECONDS")?.value), /^\d+$/);
  // A different user id needs CAP_KILL to signal the workload.
  const caps = asMap(
    asMap(w.sidecar.securityContext, "securityContext").capabilities,
    "capabilities",
  );
  assert.ok((caps.add as Yaml[] | undefined)?.includes("KILL"), "CAP_KILL");
  // The probe stays as the backstop for a dead sidecar.
  checkExecProbe("pod-signal.yaml", w);
});

Deno.test("examples/pod-http-health.yaml probes the sidecar on an address the kubelet reaches", async () => {
  const w = checkWiring(
    "pod-http-health.yaml",
    await loadExample("pod-http-health.yaml"),
  );
  const addr = String(w.env(w.sidecar).get("BERTH_HEALTH_ADDR")?.value);
  const m = /^(\[[^\]]*\]|[^:]*):(\d+)$/.exec(addr);
  assert.ok(m, `BERTH_HEALTH_ADDR ${addr} is not host:port`);
  // The kubelet connects to the pod IP from the node: loopback is unreachable.
  assert.doesNotMatch(m[1], /^(127\.|localhost$|\[::1\]$)/);
  assert.equal(w.env(w.acquire).get("BERTH_HEALTH_ADDR"), undefined);
  for (const c of w.mains) {
    const probe = asMap(c.livenessProbe, `${c.name} livenessProbe`);
    assert.equal(probe.exec, undefined, "no exec probe without glibc");
    const get = asMap(probe.httpGet, "httpGet");
    assert.equal(get.host, undefined, "the kubelet must use the pod IP");
    assert.equal(get.port, Number(m[2]));
    assert.equal(get.path, "/healthz");
    checkTimings(probe);
  }
});

Deno.test("examples/pod-gate.yaml runs the workload under the gate, with a lead the gate can keep", async () => {
  const w = checkWiring("pod-gate.yaml", await loadExample("pod-gate.yaml"));
  checkExecProbe("pod-gate.yaml", w);
  const e = w.env(w.sidecar);
  const grace = Number(e.get("BERTH_ENFORCE_GRACE_SECONDS")?.value);
  const lead = Number(e.get("BERTH_ENFORCE_LEAD_SECONDS")?.value);
  assert.ok(lead >= grace + 1, `lead ${lead} < grace ${grace} + 1`);
  for (const c of w.mains) {
    const argv = c.command as string[];
    assert.deepEqual(
      argv.slice(0, 2),
      ["/berth/check", "gate"],
      String(c.name),
    );
    const sep = argv.indexOf("--");
    assert.ok(sep > 1 && sep < argv.length - 1, `${c.name}: -- COMMAND`);
    const g = argv.indexOf("--grace");
    assert.ok(g > 0 && g < sep, `${c.name}: --grace`);
    assert.equal(argv[g + 1], `${grace}s`, "the gate's grace is the sidecar's");
  }
});
