/**
 * A kubelet stand-in for the example manifests: what the kubelet and the
 * container runtime give each container of a pod (user and group ids,
 * supplementary groups, capabilities, its volumes with the owner and mode of
 * every file, which mounts are read-only), derived from the manifest alone,
 * and then the same laid out on this machine so the real helpers can run
 * under those ids (`setpriv`) on those files (bind mounts in a private mount
 * namespace, `unshare`).
 *
 * It exists because a pod that cannot read its API key sits in
 * `Init:CrashLoopBackOff`, and no static check of the YAML shows that: only
 * running the helper as the user it will run as, on files owned the way the
 * kubelet owns them, does.
 *
 * The rules modelled (Kubernetes 1.29+, containerd or CRI-O):
 * - user: the container's `runAsUser`, else the pod's, else the image's
 *   `USER`; group: `runAsGroup` likewise, else the image's group for that
 *   user (its `/etc/passwd`), else 0. Supplementary groups: the pod's
 *   `supplementalGroups` and `fsGroup`. `runAsNonRoot` with user 0 is
 *   refused (`CreateContainerConfigError`).
 * - capabilities: none for a non-root user (Kubernetes sets no ambient
 *   ones); for user 0 the runtime's default set minus `drop` plus `add`.
 * - `emptyDir`: a directory `root:root 0777`; with `fsGroup`,
 *   `root:<fsGroup> 2777` (setgid: new files get the group).
 * - `secret`, `configMap`: always mounted read-only; the volume directory
 *   0777, a `..<timestamp>` directory 0755 holding the files with
 *   `defaultMode` (default 0644), owned `root:root`, and the symlinks
 *   `..data` and `<key>` pointing at them; with `fsGroup`, every file and
 *   directory gets the group and the group-read bits (files `| 0440`,
 *   directories `| 2550`), as the kubelet's volume ownership pass does.
 *
 * Anything in a manifest outside this model (other volume kinds, `items`,
 * `subPath`, `envFrom`, other `valueFrom` sources) is an assertion failure,
 * so an example cannot drift into something the stand-in would misjudge.
 *
 * @module
 */
import assert from "node:assert/strict";
import { asList, asMap, type Yaml, type YamlMap } from "./readers.ts";

/** The user an image runs as when nothing overrides it, and its `/etc/passwd` groups. */
export interface ImageUser {
  /** The image's `USER` id. */
  uid: number;
  /** The image's `USER` group id. */
  gid: number;
  /** Primary group of each uid in the image's `/etc/passwd`, for a `runAsUser` override. */
  passwd: Record<number, number>;
}

/** The ids and privileges one container's processes get. */
export interface ContainerIds {
  /** Real and effective user id. */
  uid: number;
  /** Real and effective group id. */
  gid: number;
  /** Supplementary groups, sorted. */
  groups: number[];
  /** Effective capabilities, lower-case without `cap_` (e.g. `kill`). */
  caps: string[];
  /** `allowPrivilegeEscalation: false`: the no_new_privs bit. */
  noNewPrivs: boolean;
}

/** One file, directory or symlink of a volume, relative to the volume's root ("" is the root). */
export interface VolumeEntry {
  /** The path inside the volume; "" for its root directory. */
  path: string;
  /** What it is. */
  kind: "dir" | "file" | "symlink";
  /** Owner. */
  uid: number;
  /** Group. */
  gid: number;
  /** Permission bits including setgid; ignored for symlinks. */
  mode: number;
  /** A file's content. */
  content?: string;
  /** A symlink's target. */
  target?: string;
}

/** A volume of the pod as the kubelet sets it up. */
export interface VolumeView {
  /** The volume's name in the pod spec. */
  name: string;
  /** Its kind. */
  kind: "emptyDir" | "secret" | "configMap";
  /** Everything in it, parents before children. */
  entries: VolumeEntry[];
}

/** One volume mount of a container. */
export interface MountView {
  /** The volume's name. */
  volume: string;
  /** Where the container sees it. */
  mountPath: string;
  /** Whether writes fail with EROFS. */
  readOnly: boolean;
}

/** One container as the kubelet starts it. */
export interface ContainerView {
  /** The container's name. */
  name: string;
  /** An init container that runs to completion, a native sidecar, or a main container. */
  role: "init" | "sidecar" | "main";
  /** Its image. */
  image: string;
  /** Its `args`, if any (the berth image's entrypoint is the binary). */
  args: string[];
  /** Its `command`, if any (replacing the image's entrypoint). */
  command: string[];
  /** Its ids and privileges. */
  ids: ContainerIds;
  /** Why the kubelet would refuse to start it, if it would. */
  refused?: string;
  /** Its mounts. */
  mounts: MountView[];
  /** Its environment, downward-API fields resolved. */
  env: Record<string, string>;
  /** The liveness probe's exec argv or httpGet target, if any. */
  probe?: { exec: string[] } | { httpGet: { path: string; port: number } };
}

/** What {@linkcode derivePod} needs besides the manifest. */
export interface DeriveOptions {
  /** The user each image runs as (its `USER`) and its `/etc/passwd` groups. */
  imageUser: (image: string) => ImageUser;
  /** The content of each Secret the pod mounts, by name and key. */
  secrets: Record<string, Record<string, string>>;
  /** The content of each ConfigMap the pod mounts, by name and key. */
  configMaps: Record<string, Record<string, string>>;
  /** The downward API's `metadata.name` and `metadata.uid` of the pod. */
  pod: { name: string; uid: string };
}

/** A pod as the kubelet runs it. */
export interface PodView {
  /** The pod's namespace (the Deployment's). */
  namespace: string;
  /** Its volumes. */
  volumes: VolumeView[];
  /** Its containers: init containers in order, then the main containers. */
  containers: ContainerView[];
}

/** The capabilities containerd and CRI-O give a container by default. */
const DEFAULT_CAPS = [
  "chown",
  "dac_override",
  "fsetid",
  "fowner",
  "mknod",
  "net_raw",
  "setgid",
  "setuid",
  "setfcap",
  "setpcap",
  "net_bind_service",
  "sys_chroot",
  "kill",
  "audit_write",
];

/** The `..<timestamp>` directory the kubelet's atomic writer puts Secret and ConfigMap files in. */
const PROJECTED_DATA_DIR = "..2026_01_01_00_00_00.000000001";

function num(v: Yaml | undefined, what: string): number | undefined {
  if (v === undefined) return undefined;
  assert.ok(Number.isInteger(v) && (v as number) >= 0, `${what}: ${v}`);
  return v as number;
}

function securityContextOf(c: YamlMap): YamlMap {
  return c.securityContext === undefined
    ? {}
    : asMap(c.securityContext, "securityContext");
}

function deriveIds(
  c: YamlMap,
  podSc: YamlMap,
  o: DeriveOptions,
): { ids: ContainerIds; refused?: string } {
  const sc = securityContextOf(c);
  const image = o.imageUser(String(c.image));
  const runAsUser = num(sc.runAsUser, "runAsUser") ??
    num(podSc.runAsUser, "pod runAsUser");
  const uid = runAsUser ?? image.uid;
  const gid = num(sc.runAsGroup, "runAsGroup") ??
    num(podSc.runAsGroup, "pod runAsGroup") ??
    (runAsUser === undefined ? image.gid : image.passwd[uid] ?? 0);
  const supplemental = podSc.supplementalGroups === undefined
    ? []
    : (podSc.supplementalGroups as Yaml[]).map((g) => num(g, "group")!);
  const fsGroup = num(podSc.fsGroup, "fsGroup");
  const groups = [...new Set([...supplemental, ...(fsGroup ? [fsGroup] : [])])]
    .sort((a, b) => a - b);
  let caps: string[] = [];
  if (uid === 0) {
    const spec = sc.capabilities === undefined
      ? {}
      : asMap(sc.capabilities, "capabilities");
    const names = (v: Yaml | undefined) =>
      ((v ?? []) as Yaml[]).map((x) => String(x).toLowerCase());
    const drop = names(spec.drop);
    caps = drop.includes("all")
      ? []
      : DEFAULT_CAPS.filter((x) => !drop.includes(x));
    for (const a of names(spec.add)) if (!caps.includes(a)) caps.push(a);
  }
  const nonRoot = sc.runAsNonRoot ?? podSc.runAsNonRoot;
  return {
    ids: {
      uid,
      gid,
      groups,
      caps: caps.sort(),
      noNewPrivs: sc.allowPrivilegeEscalation === false,
    },
    refused: nonRoot === true && uid === 0
      ? "container has runAsNonRoot and would run as root"
      : undefined,
  };
}

function projected(
  name: string,
  kind: "secret" | "configMap",
  data: Record<string, string>,
  defaultMode: number,
  fsGroup: number | undefined,
): VolumeView {
  const gid = fsGroup ?? 0;
  const dirMode = (m: number) => fsGroup === undefined ? m : m | 0o2550;
  const fileMode = fsGroup === undefined ? defaultMode : defaultMode | 0o440;
  const entries: VolumeEntry[] = [
    { path: "", kind: "dir", uid: 0, gid, mode: dirMode(0o777) },
    {
      path: PROJECTED_DATA_DIR,
      kind: "dir",
      uid: 0,
      gid,
      mode: dirMode(0o755),
    },
  ];
  for (const [key, content] of Object.entries(data)) {
    entries.push({
      path: `${PROJECTED_DATA_DIR}/${key}`,
      kind: "file",
      uid: 0,
      gid,
      mode: fileMode,
      content,
    });
  }
  entries.push({
    path: "..data",
    kind: "symlink",
    uid: 0,
    gid,
    mode: 0o777,
    target: PROJECTED_DATA_DIR,
  });
  for (const key of Object.keys(data)) {
    entries.push({
      path: key,
      kind: "symlink",
      uid: 0,
      gid,
      mode: 0o777,
      target: `..data/${key}`,
    });
  }
  return { name, kind, entries };
}

function deriveVolume(
  v: YamlMap,
  fsGroup: number | undefined,
  o: DeriveOptions,
): VolumeView {
  const name = String(v.name);
  const kinds = Object.keys(v).filter((k) => k !== "name");
  assert.equal(kinds.length, 1, `volume ${name}: one source`);
  const kind = kinds[0];
  if (kind === "emptyDir") {
    return {
      name,
      kind,
      entries: [{
        path: "",
        kind: "dir",
        uid: 0,
        gid: fsGroup ?? 0,
        mode: fsGroup === undefined ? 0o777 : 0o2777,
      }],
    };
  }
  assert.ok(kind === "secret" || kind === "configMap", `${name}: ${kind}`);
  const src = asMap(v[kind], `volume ${name}`);
  for (const k of Object.keys(src)) {
    assert.ok(
      ["secretName", "name", "defaultMode"].includes(k),
      `volume ${name}: ${k} is not modelled`,
    );
  }
  const ref = String(kind === "secret" ? src.secretName : src.name);
  const data = (kind === "secret" ? o.secrets : o.configMaps)[ref];
  assert.ok(data, `no content given for ${kind} ${ref}`);
  const mode = num(src.defaultMode, `${name} defaultMode`) ?? 0o644;
  assert.ok(mode <= 0o777, `${name}: defaultMode ${mode.toString(8)}`);
  return projected(name, kind, data, mode, fsGroup);
}

function deriveEnv(
  c: YamlMap,
  namespace: string,
  o: DeriveOptions,
): Record<string, string> {
  assert.equal(c.envFrom, undefined, `${c.name}: envFrom is not modelled`);
  const env: Record<string, string> = {};
  for (const e of c.env === undefined ? [] : asList(c.env, "env")) {
    const name = String(e.name);
    if (e.valueFrom === undefined) {
      env[name] = String(e.value ?? "");
      continue;
    }
    const from = asMap(e.valueFrom, `${name}.valueFrom`);
    const path = asMap(from.fieldRef, `${name}.fieldRef`).fieldPath;
    const fields: Record<string, string> = {
      "metadata.namespace": namespace,
      "metadata.name": o.pod.name,
      "metadata.uid": o.pod.uid,
    };
    assert.ok(String(path) in fields, `${name}: fieldRef ${path}`);
    env[name] = fields[String(path)];
  }
  return env;
}

function deriveProbe(c: YamlMap): ContainerView["probe"] {
  if (c.livenessProbe === undefined) return undefined;
  const p = asMap(c.livenessProbe, `${c.name} livenessProbe`);
  if (p.exec !== undefined) {
    return {
      exec: (asMap(p.exec, "exec").command as Yaml[]).map(String),
    };
  }
  const get = asMap(p.httpGet, `${c.name}: exec or httpGet`);
  assert.equal(typeof get.port, "number", `${c.name}: numeric probe port`);
  return { httpGet: { path: String(get.path), port: get.port as number } };
}

/**
 * What the kubelet gives every container of the Deployment's pod template.
 *
 * @param deployment The parsed Deployment.
 * @param o The images' users, the Secrets' and ConfigMaps' content, the pod's name and uid.
 * @returns The pod as the kubelet would run it.
 * @throws {assert.AssertionError} On anything outside the model (see the module doc).
 */
export function derivePod(deployment: YamlMap, o: DeriveOptions): PodView {
  const namespace = String(
    asMap(deployment.metadata, "metadata").namespace ?? "default",
  );
  const template = asMap(
    asMap(deployment.spec, "spec").template,
    "template",
  );
  const pod = asMap(template.spec, "pod spec");
  const podSc = securityContextOf(pod);
  const fsGroup = num(podSc.fsGroup, "fsGroup");
  const volumes = asList(pod.volumes, "volumes").map((v) =>
    deriveVolume(v, fsGroup, o)
  );
  const byName = new Map(volumes.map((v) => [v.name, v]));
  const container = (c: YamlMap, role: ContainerView["role"]) => {
    const mounts =
      (c.volumeMounts === undefined
        ? []
        : asList(c.volumeMounts, "volumeMounts")).map((m) => {
          assert.equal(m.subPath, undefined, `${c.name}: subPath`);
          const v = byName.get(String(m.name));
          assert.ok(v, `${c.name}: no volume ${m.name}`);
          return {
            volume: v.name,
            mountPath: String(m.mountPath).replace(/\/+$/, ""),
            readOnly: m.readOnly === true || v.kind !== "emptyDir",
          };
        });
    return {
      name: String(c.name),
      role,
      image: String(c.image),
      args: c.args === undefined ? [] : (c.args as Yaml[]).map(String),
      command: c.command === undefined ? [] : (c.command as Yaml[]).map(String),
      ...deriveIds(c, podSc, o),
      mounts,
      env: deriveEnv(c, namespace, o),
      probe: deriveProbe(c),
    };
  };
  return {
    namespace,
    volumes,
    containers: [
      ...(pod.initContainers === undefined
        ? []
        : asList(pod.initContainers, "initContainers")).map((c) =>
          container(c, c.restartPolicy === "Always" ? "sidecar" : "init")
        ),
      ...asList(pod.containers, "containers").map((c) => container(c, "main")),
    ],
  };
}
