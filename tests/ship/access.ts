/**
 * Whether a process can read a file of a volume the kubelet laid out, by the
 * permission bits alone: the static half of the examples' readability check,
 * which runs everywhere; tests/ship/kubelet_process_test.ts confirms it on real
 * files as root.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { ContainerIds, VolumeEntry, VolumeView } from "./kubelet.ts";

/**
 * Whether a process with `ids` can read `path` in `volume` by the
 * permission bits alone (no mount flags): every directory on the way needs
 * search permission, the file read permission, symlinks inside the volume
 * are followed. It is the static half of the check, run everywhere; the
 * process-level test confirms it on real files as root.
 *
 * @param ids The reader's ids and capabilities.
 * @param volume The volume as the kubelet lays it out.
 * @param path The path inside the volume (no leading slash).
 * @returns `undefined` when readable, else why not.
 */
export function whyUnreadable(
  ids: ContainerIds,
  volume: VolumeView,
  path: string,
): string | undefined {
  const entries = new Map(volume.entries.map((e) => [e.path, e]));
  // Reading a file and searching a directory is all this checks: both are
  // granted outright by either DAC capability.
  const dac = ids.caps.includes("dac_override") ||
    ids.caps.includes("dac_read_search");
  const allowed = (e: VolumeEntry, bit: 4 | 1): boolean => {
    if (dac) return true;
    const shift = ids.uid === e.uid
      ? 6
      : ids.gid === e.gid || ids.groups.includes(e.gid)
      ? 3
      : 0;
    return ((e.mode >> shift) & bit) !== 0;
  };
  const describe = (e: VolumeEntry) =>
    `${e.path || "the volume root"} is ${e.uid}:${e.gid} ${
      e.mode.toString(8).padStart(4, "0")
    }, the reader ${ids.uid}:${ids.gid} groups [${ids.groups.join(",")}]`;
  let parts = path.split("/");
  let dir = "";
  for (let hops = 0; parts.length > 0; hops++) {
    assert.ok(hops < 40, `${path}: symlink loop`);
    const d = entries.get(dir);
    assert.ok(d?.kind === "dir", `${dir}: not a directory`);
    if (!allowed(d, 1)) return `cannot search ${describe(d)}`;
    const name = parts.shift()!;
    const p = dir === "" ? name : `${dir}/${name}`;
    const e = entries.get(p);
    if (e === undefined) return `${p} does not exist`;
    if (e.kind === "symlink") {
      parts = [...e.target!.split("/"), ...parts];
      continue;
    }
    if (parts.length === 0) {
      if (e.kind !== "file") return `${p} is not a file`;
      return allowed(e, 4) ? undefined : `cannot read ${describe(e)}`;
    }
    dir = p;
  }
  return `${path}: empty path`;
}
