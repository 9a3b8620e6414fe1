/**
 * The example manifests run as a cluster would run them: what the kubelet
 * gives each container is derived from the YAML (tests/ship/kubelet.ts;
 * the model's own tests and the static readability checks are in
 * kubelet_model_test.ts), laid out on this machine as root, and run with the
 * real helpers under those ids: `acquire` against
 * a development server over HTTPS with the mounted key and CA, `renew`
 * adopting its lease, the main container's liveness probe as the main
 * container's user on its read-only mount, and `status` there as an
 * operator's `kubectl exec` would run it.
 *
 * @module
 */
import assert from "node:assert/strict";
import { startDevServer } from "../../lib/devserver/server.ts";
import { makeTestPki, opensslMissing } from "../support/tls.ts";
import { waitFor } from "../support/wait.ts";
import { API_KEY, BERTH_USER, derive } from "./cluster.ts";
import type { ContainerView } from "./kubelet.ts";
import { containerPid, nodeUnavailable, PodOnNode } from "./node.ts";
import {
  asList,
  asMap,
  exampleFiles,
  loadExample,
  type YamlMap,
} from "./readers.ts";

const EXAMPLES = exampleFiles();

const skip = nodeUnavailable() ?? opensslMissing();
if (skip !== undefined) {
  console.log(`skipped: running the examples under the kubelet's ids ${skip}`);
}

/** A long-running helper whose stderr lines are collected as they come. */
class Running implements AsyncDisposable {
  readonly lines: string[] = [];
  readonly child: Deno.ChildProcess;
  readonly #done: Promise<unknown>;
  code: number | undefined;

  constructor(cmd: Deno.Command) {
    const child = cmd.spawn();
    this.child = child;
    const err = (async () => {
      let partial = "";
      for await (
        const chunk of child.stderr.pipeThrough(new TextDecoderStream())
      ) {
        const parts = (partial + chunk).split("\n");
        partial = parts.pop() ?? "";
        this.lines.push(...parts);
      }
      if (partial) this.lines.push(partial);
    })();
    this.#done = Promise.all([
      err,
      child.stdout.cancel(),
      child.status.then((s) => (this.code = s.code)),
    ]);
  }

  line(re: RegExp): Promise<string> {
    return waitFor(
      () => {
        const hit = this.lines.find((l) => re.test(l));
        if (hit) return hit;
        if (this.code !== undefined) {
          throw new Error(
            `exited ${this.code} before ${re}:\n${this.lines.join("\n")}`,
          );
        }
      },
      { timeoutMs: 30_000, what: `a line matching ${re}` },
    );
  }

  async stop(): Promise<number> {
    if (this.code === undefined) {
      Deno.kill(containerPid(this.child), "SIGTERM");
    }
    await this.#done;
    return this.code!;
  }

  async [Symbol.asyncDispose]() {
    if (this.code === undefined) this.child.kill("SIGKILL");
    await this.#done;
  }
}

async function output(cmd: Deno.Command) {
  const out = await cmd.output();
  const dec = new TextDecoder();
  return {
    code: out.code,
    stdout: dec.decode(out.stdout),
    stderr: dec.decode(out.stderr),
  };
}

async function sha256Hex(s: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s));
  return new Uint8Array(d).toHex();
}

/** What running a pod produced; `failed` names the first step that did not work. */
interface PodRun {
  failed?: { container: string; step: string; code: number; log: string };
}

/**
 * Runs the pod the way the kubelet would: the init container to completion,
 * the sidecar until it adopted the lease, each main container's liveness
 * probe (and `status`, as `kubectl exec` would), then stops the sidecar.
 */
async function runPod(deployment: YamlMap): Promise<PodRun> {
  await using pki = await makeTestPki({
    names: ["berth-api.berth-system.svc"],
  });
  const probeView = derive(deployment);
  await using server = await startDevServer({
    tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
    apiKeys: [`${probeView.namespace}:${await sha256Hex(API_KEY)}`],
  });
  const pod = derive(deployment, await Deno.readTextFile(pki.caCert));
  await using node = await PodOnNode.create(pod);
  const serverEnv = (c: ContainerView): Record<string, string> => {
    if (!c.env.BERTH_API_SERVER) return {};
    const url = new URL(c.env.BERTH_API_SERVER);
    const out: Record<string, string> = {
      BERTH_API_SERVER: `https://127.0.0.1:${server.port}${
        url.pathname.replace(/\/$/, "")
      }`,
      BERTH_SERVER_NAME: c.env.BERTH_SERVER_NAME ?? url.hostname,
    };
    // The kubelet reaches the pod IP; here a free loopback port stands in.
    if (c.env.BERTH_HEALTH_ADDR) out.BERTH_HEALTH_ADDR = "127.0.0.1:0";
    return out;
  };
  const sidecars: Running[] = [];
  let healthUrl: string | undefined;
  try {
    for (const c of pod.containers.filter((c) => c.role !== "main")) {
      const cmd = node.command(c, node.berthArgv(c.args), serverEnv(c));
      if (c.role === "init") {
        const r = await output(cmd);
        if (r.code !== 0) {
          return {
            failed: {
              container: c.name,
              step: c.args.join(" "),
              code: r.code,
              log: r.stderr,
            },
          };
        }
        continue;
      }
      const s = new Running(cmd);
      sidecars.push(s);
      await s.line(/msg="adopted the lease/);
      if (c.env.BERTH_HEALTH_ADDR) {
        const l = await s.line(/msg="serving \/healthz/);
        healthUrl = /url=(\S+)/.exec(l)?.[1];
      }
    }
    for (const c of pod.containers.filter((c) => c.role === "main")) {
      // A main container under the gate has no probe: the gate's verdict,
      // the probe's own, is what lets its workload run.
      const gate = c.command[1] === "gate"
        ? {
          exec: [c.command[0], "check", "/berth/healthy", "--max-age", "30s"],
        }
        : undefined;
      const probe = c.probe ?? gate;
      assert.ok(probe, `${c.name}: no liveness probe`);
      if ("exec" in probe) {
        const r = await output(node.command(c, probe.exec));
        if (r.code !== 0) {
          return {
            failed: {
              container: c.name,
              step: "liveness probe",
              code: r.code,
              log: r.stdout + r.stderr,
            },
          };
        }
        // What an operator runs: `kubectl exec POD -c MAIN -- /berth/check
        // status /berth`, as the main container's user, on its read-only mount.
        const binary = probe.exec[0];
        const status = await output(
          node.command(c, [
            binary,
            "status",
            binary.replace(/\/[^/]+$/, ""),
            "--json",
          ]),
        );
        const view = status.code === 0 ? JSON.parse(status.stdout) : undefined;
        if (view?.marker.verdict !== "OK" || view?.fencingToken !== 1) {
          return {
            failed: {
              container: c.name,
              step: "status",
              code: status.code,
              log: status.stdout + status.stderr,
            },
          };
        }
      } else {
        assert.ok(healthUrl, "no sidecar serves /healthz");
        const res = await fetch(new URL(probe.httpGet.path, healthUrl));
        const body = await res.text();
        if (res.status !== 200) {
          return {
            failed: {
              container: c.name,
              step: "httpGet probe",
              code: res.status,
              log: body,
            },
          };
        }
      }
    }
    for (const s of sidecars) {
      const code = await s.stop();
      if (code !== 0) {
        return {
          failed: {
            container: "sidecar",
            step: "shutdown",
            code,
            log: s.lines.join("\n"),
          },
        };
      }
    }
    return {};
  } finally {
    for (const s of sidecars) await s[Symbol.asyncDispose]();
  }
}

for (const file of EXAMPLES) {
  Deno.test({
    name: `${file} runs under the kubelet's ids: acquire, renew, the probe`,
    ignore: skip !== undefined,
    async fn() {
      const r = await runPod(await loadExample(file));
      assert.equal(r.failed, undefined, JSON.stringify(r.failed, null, 2));
    },
  });
}

/** pod-probe.yaml with its key volume's `defaultMode` (and the pod's `fsGroup`) changed. */
async function variant(mode: number, fsGroup?: number): Promise<YamlMap> {
  const d = await loadExample("pod-probe.yaml");
  const spec = asMap(asMap(asMap(d.spec, "spec").template, "t").spec, "pod");
  for (const v of asList(spec.volumes, "volumes")) {
    if (v.secret) asMap(v.secret, "secret").defaultMode = mode;
  }
  if (fsGroup !== undefined) {
    spec.securityContext = {
      ...asMap(spec.securityContext ?? {}, "sc"),
      fsGroup,
    };
  }
  return d;
}

Deno.test({
  name:
    "a key mounted 0440 without fsGroup leaves acquire unable to read it: exit 1, Init:CrashLoopBackOff",
  ignore: skip !== undefined,
  async fn() {
    const r = await runPod(await variant(0o440));
    assert.equal(r.failed?.container, "berth-acquire", JSON.stringify(r));
    assert.equal(r.failed?.code, 1);
    assert.match(r.failed?.log ?? "", /API key file/);
    assert.match(r.failed?.log ?? "", /permission denied|not readable/i);
  },
});

Deno.test({
  name: "0440 with the pod's fsGroup set to the helpers' group also works",
  ignore: skip !== undefined,
  async fn() {
    const r = await runPod(await variant(0o440, BERTH_USER.gid));
    assert.equal(r.failed, undefined, JSON.stringify(r.failed, null, 2));
  },
});
