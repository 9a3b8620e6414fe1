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
 * only when its full name is known and is `target`. The full name is the
 * first of these whose start is that `comm`: the basename of `cmdline[0]`
 * (the name it was started by: a symlink's, even to a binary of a longer
 * name); the executable's basename (an argv the process rewrote); for a
 * script the kernel started through its `#!` interpreter (whose name is not
 * that `comm`), the basename of `cmdline[1]`, or of `cmdline[2]` after the
 * interpreter's one argument. An argument that merely names the target
 * (`worker-payments-2 --peer worker-payments-1`) is never the full name.
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
  const gaveName = (path: string) => truncateComm(basename(path)) === p.comm;
  const [argv0, ...rest] = p.cmdline ?? [];
  // The name it was started by (a symlink's, even to a versioned binary).
  if (argv0 !== undefined && gaveName(argv0)) return basename(argv0) === target;
  // Its argv rewritten: the executable's own name is the full name (and it
  // is not the target's, or the first rule would have said so).
  if (p.exe !== undefined && gaveName(p.exe)) return false;
  // An interpreter: the script's path is its first or second argument, the
  // first of them whose start is the comm.
  const script = rest.slice(0, 2).find(gaveName);
  return script !== undefined && basename(script) === target;
}

/** `name` cut to what the kernel would keep in `comm` (decoded the way the process table decodes it). */
function truncateComm(name: string): string {
  const bytes = encoder.encode(name);
  if (bytes.length <= COMM_BYTES) return name;
  return new TextDecoder().decode(bytes.subarray(0, COMM_BYTES));
}
