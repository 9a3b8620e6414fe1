/**
 * What the example manifests assume about the cluster they run in and that
 * the YAML does not say: the users their images run as, and the Secret and
 * ConfigMap their header comments tell users to create. The static model
 * tests and the process-level runs derive the examples' pods from the same
 * facts.
 *
 * @module
 */
import assert from "node:assert/strict";
import { derivePod, type ImageUser, type PodView } from "./kubelet.ts";
import { parseDockerfile, ROOT, type YamlMap } from "./readers.ts";

/** The API key in the examples' Secret. */
export const API_KEY = "berth-test-key-0123456789";
/** The Secret the examples' header comments tell users to create. */
const SECRET: Record<string, Record<string, string>> = {
  "berth-api-key": { "api-key": `${API_KEY}\n` },
};

/** The berth image's user, from the Dockerfile's runtime stage (`USER 65532:65532`). */
function berthImageUser(text: string): ImageUser {
  const user = parseDockerfile(text).at(-1)!.instructions.find((i) =>
    i.keyword === "USER"
  );
  const m = /^(\d+):(\d+)$/.exec(user?.args ?? "");
  assert.ok(m, `the runtime stage's USER is not uid:gid: ${user?.args}`);
  const [uid, gid] = [Number(m[1]), Number(m[2])];
  // distroless's /etc/passwd: root, nonroot, nobody.
  return { uid, gid, passwd: { 0: 0, [uid]: gid, 65534: 65534 } };
}

/** The user the berth image runs as. */
export const BERTH_USER: ImageUser = berthImageUser(
  await Deno.readTextFile(`${ROOT}/Dockerfile`),
);

/**
 * The users of the examples' images. A main image whose user the examples
 * do not know (the user's own) runs here as 10001:10001, a user that owns
 * nothing and is in no group: whatever it can read, any user can.
 */
function imageUser(image: string): ImageUser {
  if (/\/berth-acquire[:@]/.test(image)) return BERTH_USER;
  if (image.startsWith("nginxinc/nginx-unprivileged:")) {
    return { uid: 101, gid: 101, passwd: { 0: 0, 101: 101 } };
  }
  return { uid: 10001, gid: 10001, passwd: { 0: 0, 10001: 10001 } };
}

/**
 * An example's pod as the kubelet runs it, with the examples' Secret and a
 * ConfigMap holding `caPem`.
 */
export function derive(deployment: YamlMap, caPem = "unused"): PodView {
  return derivePod(deployment, {
    imageUser,
    secrets: SECRET,
    configMaps: { "berth-ca": { "ca.crt": caPem } },
    pod: {
      name: "web-7f6c-j4n8x",
      uid: "8c21b044-0c5b-4d7e-9a51-2f0f3c1d7e11",
    },
  });
}
