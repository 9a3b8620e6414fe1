/**
 * Which processes are the workload by name (`BERTH_SIGNAL_TARGET`), on its
 * own because the kernel keeps only 15 bytes of a process name in `comm`, so
 * a name of that length may be the start of a longer one. Pure: it judges
 * what the process table shows.
 *
 * @module
 */
import { COMM_BYTES, type ProcessInfo } from "./proc.ts";

const encoder = new TextEncoder();

function basename(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

/**
 * Whether `p` is the workload named `target`, ignoring the exclusions. A
 * process is the target when its executable's basename is `target` (also
 * after it renamed itself), or its `comm` is `target` and cannot have been
 * cut: the kernel keeps 15 bytes of a name, so a `comm` of exactly 15 bytes
 * may be the start of a longer name (`worker-payments-1` and
 * `worker-payments-2` both show `worker-payments`). Such a process matches
 * only when its full name is known and is `target`: the basename of
 * `cmdline[0]` (a symlinked or copied binary), or of `cmdline[1]` or
 * `cmdline[2]` (a script the kernel started through its `#!` interpreter).
 *
 * @param p The process as the table shows it.
 * @param target The configured target name.
 * @returns True when `p` is the target.
 */
export function matchesTarget(p: ProcessInfo, target: string): boolean {
  if (target === "") return false;
  if (p.exe !== undefined && basename(p.exe) === target) return true;
  if (p.comm === target && encoder.encode(target).length < COMM_BYTES) {
    return true;
  }
  // A comm of 15 bytes may be the start of a longer name: confirm the full one.
  if (p.comm !== truncateComm(target)) return false;
  return (p.cmdline ?? []).some((a) => basename(a) === target);
}

/** `name` cut to what the kernel would keep in `comm` (decoded the way the process table decodes it). */
function truncateComm(name: string): string {
  const bytes = encoder.encode(name);
  if (bytes.length <= COMM_BYTES) return name;
  return new TextDecoder().decode(bytes.subarray(0, COMM_BYTES));
}
