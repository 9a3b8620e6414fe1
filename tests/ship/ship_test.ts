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
import { compileArgs, sha256File, TARGETS } from "../../scripts/compile.ts";
import {
  asList,
  asMap,
  exampleFiles,
  loadExample,
  parseDockerfile,
  parseUnit,
  ROOT,
  shellWords,
  type Yaml,
  type YamlMap,
} from "./readers.ts";
import {
  EXIT_ACQUIRE_TIMEOUT,
  EXIT_CANCELLED,
  EXIT_CONFIG,
  EXIT_LEASE_LOST,
} from "../../lib/run/run_supervise.ts";
import {
  EXIT_CANNOT_EXECUTE,
  EXIT_COMMAND_NOT_FOUND,
} from "../../lib/gate/process_group.ts";
import { SHUTDOWN_SIGNALS as FORWARDED_SIGNALS } from "../../lib/cmd/signals.ts";
import {
  checkoutArgv,
  PERMISSION_SET,
  V8_FLAGS,
  V8_FLAGS_ARG,
} from "../../lib/cmd/self_argv.ts";
import { checkWrapperScript } from "../../lib/state/state_dir.ts";

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
  version?: string;
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

Deno.test("the binary and every deno run of the CLI get the same V8 flags", () => {
  assert.ok(V8_FLAGS.length > 0);
  const compile = compileArgs({
    target: TARGETS[0],
    output: "/out/b",
    config: "/src/deno.json",
    entry: "/src/main.ts",
  });
  const v8 = (argv: string[]) => argv.filter((a) => a.startsWith("--v8-flags"));
  assert.deepEqual(v8(compile), [V8_FLAGS_ARG]);
  assert.deepEqual(v8(checkoutArgv("/src", ["renew"])), [V8_FLAGS_ARG]);
  const wrapper = shellWords(
    checkWrapperScript(checkoutArgv("/src", []))
      .split("\n")[2],
  );
  assert.deepEqual(v8(wrapper), [V8_FLAGS_ARG]);
  // The tasks a user runs the CLI with from a checkout.
  for (const name of ["berth-acquire", "dev-server"]) {
    const task = denoJson.tasks?.[name];
    assert.ok(task, `deno.json has no ${name} task`);
    const [invocation] = denoInvocations(task);
    assert.deepEqual(v8(invocation), [V8_FLAGS_ARG], task);
    assert.deepEqual(permissionFlags(invocation), [`-P=${PERMISSION_SET}`]);
  }
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
      assert.ok(w.includes(V8_FLAGS_ARG), w.join(" "));
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

Deno.test(".dockerignore lets through every file the build copies", async () => {
  const kept = new Set(
    (await Deno.readTextFile(`${ROOT}/.dockerignore`)).split("\n")
      .map((l) => l.trim()).filter((l) => l.startsWith("!"))
      .map((l) => l.slice(1).replace(/\/+$/, "")),
  );
  const sources = dockerfile.flatMap((stage) => stage.instructions).filter((
    i,
  ) => i.keyword === "COPY" && !i.args.startsWith("--from"))
    .flatMap((i) => shellWords(i.args).slice(0, -1));
  assert.ok(sources.length > 0);
  for (const s of sources) {
    assert.ok(kept.has(s.replace(/\/+$/, "")), `${s} is not in .dockerignore`);
  }
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
    assert.equal(
      probe.exec,
      undefined,
      "the httpGet example uses no exec probe",
    );
    const get = asMap(probe.httpGet, "httpGet");
    assert.equal(get.host, undefined, "the kubelet must use the pod IP");
    assert.equal(get.port, Number(m[2]));
    assert.equal(get.path, "/healthz");
    checkTimings(probe);
  }
});

// ---------------------------------------------------------------------------
// What every example asks of the cluster for the helpers: a pinned image and
// resources sized from what the helpers were measured to use.

/**
 * Peak RSS in MiB measured under `deno run` over HTTPS with a CA bundle
 * (docs/install.md, "Resources for the helpers"): `acquire` start to exit, and the sidecar's highest
 * at a heartbeat of 1 s (59.8 MiB with `--server-name`, through `node:https`,
 * the costlier path; docs/lease-client.md). The compiled binary embeds the
 * same runtime.
 */
const MEASURED_RSS_MIB = { acquire: 48, renew: 64 };

/** A Kubernetes memory quantity in MiB (`64Mi`, `1Gi`, `100M`). */
function mib(q: Yaml | undefined, what: string): number {
  const m = /^(\d+)(Ki|Mi|Gi|k|M|G)?$/.exec(String(q));
  assert.ok(m, `${what}: ${q} is not a memory quantity`);
  const unit: Record<string, number> = {
    "": 1 / 2 ** 20,
    Ki: 1 / 1024,
    Mi: 1,
    Gi: 1024,
    k: 1e3 / 2 ** 20,
    M: 1e6 / 2 ** 20,
    G: 1e9 / 2 ** 20,
  };
  return Number(m[1]) * unit[m[2] ?? ""];
}

for (const file of exampleFiles()) {
  Deno.test(`examples/${file}: the helpers' image is this release's, pinned by digest`, async () => {
    const w = checkWiring(file, await loadExample(file));
    const image = String(w.acquire.image);
    // The tag names the release; the digest is what the kubelet pulls.
    const m =
      /^[\w.:-]+(?:\/[\w.-]+)*\/berth-acquire:([\w.-]+)@sha256:[0-9a-f]{64}$/
        .exec(image);
    assert.ok(
      m,
      `${file}: ${image} is not <registry>/berth-acquire:<version>@sha256:<digest>`,
    );
    assert.equal(m[1], denoJson.version, `${file}: tag of another release`);
  });

  Deno.test(`examples/${file}: every helper has requests and a memory limit above its measured RSS`, async () => {
    const w = checkWiring(file, await loadExample(file));
    for (
      const [c, rss] of [
        [w.acquire, MEASURED_RSS_MIB.acquire],
        [w.sidecar, MEASURED_RSS_MIB.renew],
      ] as [YamlMap, number][]
    ) {
      const r = asMap(c.resources, `${file} ${c.name} resources`);
      const req = asMap(r.requests, `${c.name} requests`);
      const lim = asMap(r.limits, `${c.name} limits`);
      assert.match(String(req.cpu), /^\d+m?$/, `${c.name}: cpu request`);
      // A CPU limit throttles the helper, and a throttled sidecar renews late.
      assert.equal(lim.cpu, undefined, `${c.name}: no CPU limit`);
      const request = mib(req.memory, `${c.name} requests.memory`);
      const limit = mib(lim.memory, `${c.name} limits.memory`);
      assert.ok(request >= rss, `${c.name}: request ${request} MiB < ${rss}`);
      assert.ok(
        limit >= 2 * rss,
        `${c.name}: limit ${limit} MiB leaves less than 2x its ${rss} MiB`,
      );
    }
  });
}

Deno.test("the license is Apache-2.0, named in the README and shipped in the image", async () => {
  // The SHA-256 of the license text as the Apache Software Foundation
  // publishes it (LICENSE-2.0.txt): the file is the standard text, unedited.
  assert.equal(
    await sha256File(`${ROOT}/LICENSE`),
    "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30",
  );
  const readme = await Deno.readTextFile(`${ROOT}/README.md`);
  assert.match(
    readme,
    /^## License\n\n.*Apache License, Version 2\.0.*\[`LICENSE`\]\(LICENSE\)/m,
  );
  const copies = runtime.instructions.filter((i) =>
    i.keyword === "COPY" && shellWords(i.args)[0] === "LICENSE"
  );
  assert.equal(copies.length, 1, "the runtime image carries LICENSE");
});

// ---------------------------------------------------------------------------
// The systemd unit for `run`.

/** systemd's time span syntax, as far as the unit uses it (`30s`, `1min`, `500ms`, bare seconds). */
function seconds(span: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|sec|min|m)?$/.exec(span.trim());
  assert.ok(m, `not a time span: ${span}`);
  const unit: Record<string, number> = {
    ms: 0.001,
    s: 1,
    sec: 1,
    min: 60,
    m: 60,
  };
  return Number(m[1]) * unit[m[2] ?? "s"];
}

Deno.test("examples/berth-run.service runs `run` with a restart policy that follows its exit codes", async () => {
  const unit = parseUnit(
    await Deno.readTextFile(`${ROOT}/examples/berth-run.service`),
  );
  const service = unit.get("Service");
  assert.ok(service, "no [Service] section");
  const one = (k: string) => {
    const v = service.get(k);
    assert.ok(v?.length === 1, `${k}: exactly one value, got ${v}`);
    return v[0];
  };
  const numbers = (k: string) =>
    new Set(
      (service.get(k) ?? []).join(" ").split(/\s+/).filter(Boolean)
        .map(Number),
    );

  // `run` is the main process itself (no shell, no forking), so systemd's
  // signals reach it and its exit status is the unit's.
  assert.ok(["exec", "simple"].includes(one("Type")), one("Type"));
  const argv = shellWords(one("ExecStart"));
  assert.match(argv[0], /\/berth-acquire$/);
  assert.equal(argv[1], "run");
  const dashes = argv.indexOf("--");
  assert.ok(dashes > 1 && dashes < argv.length - 1, "run [flags] -- COMMAND");

  // The cgroup is killed when `run` is gone: the command, in a session of
  // its own, must never outlive it.
  assert.ok(["mixed", "control-group"].includes(one("KillMode")));
  assert.ok(
    (FORWARDED_SIGNALS as readonly string[]).includes(
      service.get("KillSignal")?.[0] ?? "SIGTERM",
    ),
    "the stop signal is one `run` forwards",
  );
  const reload = service.get("ExecReload")?.[0];
  if (reload) {
    const sig = /kill -(\w+) \$MAINPID$/.exec(reload)?.[1];
    assert.ok(sig && FORWARDED_SIGNALS.includes(`SIG${sig}` as Deno.Signal));
  }

  // Restart after a lost lease or an acquire timeout (a retry can succeed);
  // never after a configuration error or a command that cannot run.
  assert.equal(one("Restart"), "on-failure");
  assert.deepEqual(
    numbers("RestartPreventExitStatus"),
    new Set([EXIT_CONFIG, EXIT_CANNOT_EXECUTE, EXIT_COMMAND_NOT_FOUND]),
  );
  for (const retry of [EXIT_LEASE_LOST, EXIT_ACQUIRE_TIMEOUT]) {
    assert.ok(
      !numbers("SuccessExitStatus").has(retry),
      `${retry} must restart`,
    );
  }
  // A stop while waiting for the lease is not a failure.
  assert.ok(numbers("SuccessExitStatus").has(EXIT_CANCELLED));

  // systemd waits for the command's grace and the release (bounded at 5 s)
  // before it SIGKILLs the cgroup.
  const env = new Map(
    (service.get("Environment") ?? []).map((e) => {
      const i = e.indexOf("=");
      return [e.slice(0, i), e.slice(i + 1)] as const;
    }),
  );
  const grace = Number(env.get("BERTH_ENFORCE_GRACE_SECONDS") ?? "0");
  assert.ok(seconds(one("TimeoutStopSec")) > grace + 5, "TimeoutStopSec");
  // Outside a pod: an explicit holder and namespace, the key from a file.
  for (
    const k of [
      "BERTH_HOLDER_IDENTITY",
      "BERTH_LEASE_NAMESPACE",
      "BERTH_LEASE_NAME",
      "BERTH_TTL_SECONDS",
      "BERTH_API_KEY_FILE",
    ]
  ) {
    assert.ok(env.get(k), `${k} is not set`);
  }
  assert.equal(env.get("BERTH_API_KEY"), undefined, "the key only from a file");
  assert.match(String(env.get("BERTH_API_SERVER")), /^https:\/\//);
});

Deno.test("examples/pod-gate.yaml runs the workload under the gate, with a lead the gate can keep", async () => {
  const w = checkWiring("pod-gate.yaml", await loadExample("pod-gate.yaml"));
  for (const c of w.mains) {
    // The gate waits in place while the lease is elsewhere: an exec probe
    // would restart it into crash-loop back-off instead.
    assert.equal(c.livenessProbe, undefined, `${c.name}: no liveness probe`);
    const m = asList(c.volumeMounts, `${c.name} volumeMounts`)
      .find((m: YamlMap) => m.mountPath === "/berth");
    assert.equal(m?.readOnly, true, `${c.name}: read-only /berth`);
  }
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
