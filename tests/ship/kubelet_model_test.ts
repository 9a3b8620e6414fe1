/**
 * The kubelet stand-in's model on its own, with no root needed: ids,
 * groups and file modes derived as the kubelet derives them, and each
 * example checked by the permission bits alone (can each helper read its
 * API key and CA bundle; does any workload container mount the key).
 * tests/ship/kubelet_process_test.ts confirms the same on real files as root.
 *
 * @module
 */
import assert from "node:assert/strict";
import { whyUnreadable } from "./access.ts";
import { BERTH_USER, derive } from "./cluster.ts";
import type { ContainerView, PodView } from "./kubelet.ts";
import { asList, asMap, exampleFiles, loadExample } from "./readers.ts";

/** The volume and the path in it where container `c` finds `file`, if it does. */
function locate(pod: PodView, c: ContainerView, file: string) {
  const m = c.mounts.find((m) => file.startsWith(`${m.mountPath}/`));
  if (!m) return undefined;
  const volume = pod.volumes.find((v) => v.name === m.volume)!;
  return { volume, path: file.slice(m.mountPath.length + 1) };
}

const helpers = (pod: PodView) =>
  pod.containers.filter((c) => c.role !== "main");

Deno.test("the stand-in derives ids, groups and file modes the way the kubelet does", async () => {
  const d = await loadExample("pod-signal.yaml");
  const pod = derive(d);
  const byName = new Map(pod.containers.map((c) => [c.name, c]));
  assert.deepEqual(byName.get("berth-acquire")?.ids, {
    uid: BERTH_USER.uid,
    gid: BERTH_USER.gid,
    groups: [],
    caps: [],
    noNewPrivs: true,
  });
  // runAsUser 0 on the berth image: distroless's root group, and only KILL.
  assert.deepEqual(byName.get("berth-sidecar")?.ids, {
    uid: 0,
    gid: 0,
    groups: [],
    caps: ["kill"],
    noNewPrivs: true,
  });
  assert.equal(byName.get("nginx")?.ids.uid, 101);
  const state = pod.volumes.find((v) => v.kind === "emptyDir")!;
  assert.deepEqual(state.entries.map((e) => [e.uid, e.gid, e.mode]), [[
    0,
    0,
    0o777,
  ]]);
  // With fsGroup the kubelet hands every volume to the group.
  const spec = asMap(asMap(asMap(d.spec, "spec").template, "t").spec, "pod");
  spec.securityContext = { fsGroup: 2000 };
  for (const v of asList(spec.volumes, "volumes")) {
    if (v.secret) asMap(v.secret, "secret").defaultMode = 0o400;
  }
  const grouped = derive(d);
  for (const c of grouped.containers) assert.deepEqual(c.ids.groups, [2000]);
  const key = grouped.volumes.find((v) => v.kind === "secret")!;
  const file = key.entries.find((e) => e.kind === "file")!;
  assert.deepEqual([file.uid, file.gid, file.mode], [0, 2000, 0o440]);
  assert.equal(
    grouped.volumes.find((v) => v.kind === "emptyDir")!.entries[0].mode,
    0o2777,
  );
  // runAsNonRoot on a root user is refused before anything runs.
  const acquire = asList(spec.initContainers, "init")[0];
  asMap(acquire.securityContext, "sc").runAsUser = 0;
  assert.match(String(derive(d).containers[0].refused), /runAsNonRoot/);
});

Deno.test("the readability model: owner, group and other bits, through the Secret's symlinks", () => {
  const pod = derive({
    metadata: { namespace: "shop" },
    spec: {
      template: {
        spec: {
          volumes: [{
            name: "k",
            secret: { secretName: "berth-api-key", defaultMode: 0o440 },
          }],
          containers: [{ name: "c", image: "x" }],
        },
      },
    },
  });
  const v = pod.volumes[0];
  const ids = {
    uid: 65532,
    gid: 65532,
    groups: [],
    caps: [],
    noNewPrivs: true,
  };
  assert.match(
    String(whyUnreadable(ids, v, "api-key")),
    /cannot read .*0:0 0440/,
  );
  assert.equal(whyUnreadable({ ...ids, uid: 0 }, v, "api-key"), undefined);
  assert.equal(whyUnreadable({ ...ids, groups: [0] }, v, "api-key"), undefined);
  assert.equal(
    whyUnreadable({ ...ids, caps: ["dac_override"] }, v, "api-key"),
    undefined,
  );
  assert.match(String(whyUnreadable(ids, v, "nope")), /does not exist/);
});

for (const file of exampleFiles()) {
  Deno.test(`${file}: every helper can read its API key and CA bundle as the kubelet mounts them`, async () => {
    const pod = derive(await loadExample(file));
    for (const c of pod.containers) {
      assert.equal(c.refused, undefined, `${c.name}: ${c.refused}`);
    }
    for (const c of helpers(pod)) {
      for (const name of ["BERTH_API_KEY_FILE", "BERTH_CA_BUNDLE_FILE"]) {
        const at = locate(pod, c, c.env[name]);
        assert.ok(at, `${c.name}: ${name} is on no mount`);
        const why = whyUnreadable(c.ids, at.volume, at.path);
        assert.equal(why, undefined, `${file} ${c.name} ${name}: ${why}`);
      }
    }
    // The workload never sees the key: no main container mounts the Secret.
    const secretVolumes = pod.volumes.filter((v) => v.kind === "secret")
      .map((v) => v.name);
    for (const c of pod.containers.filter((c) => c.role === "main")) {
      for (const m of c.mounts) {
        assert.ok(
          !secretVolumes.includes(m.volume),
          `${c.name} mounts ${m.volume}`,
        );
      }
    }
  });
}
