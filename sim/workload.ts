/**
 * The simulated main container: a tiny bash program that appends one line
 * per tick to its pod's journal, `<pod> <token> <wall-ms> <restart>`, with
 * the fencing token it reads from the state volume at that moment. The
 * journals are the evidence the chaos tests and the demo judge the helper
 * by: who wrote when, with which token.
 *
 * It is bash, not Deno, on purpose: in signal mode the sidecar must find it
 * by name and never signals copies of its own executable (deno), and a
 * script's `comm` is the script file's name. It sleeps with `read -t` on a
 * stdin that is never written, so it forks nothing that could outlive it.
 *
 * @module
 */

/** The name the workload is installed and found under (its `comm`), the signal target. */
export const WORKLOAD_NAME = "workload";

/** The program; configured by the `SIM_*` variables the pod simulator sets. */
export const WORKLOAD_SCRIPT = `#!/bin/bash
# Simulated main container: appends "<pod> <token> <wall-ms> <restart>"
# to $SIM_JOURNAL every $SIM_INTERVAL seconds, reading the fencing token from
# $SIM_STATE_DIR/token (0 when unreadable) before every line.
pod=$SIM_POD
journal=$SIM_JOURNAL
state=$SIM_STATE_DIR
restart=$SIM_RESTART
interval=\${SIM_INTERVAL:-0.025}
while :; do
  token=
  { read -r token < "$state/token"; } 2>/dev/null
  [[ $token =~ ^[0-9]+$ ]] || token=0
  us=\${EPOCHREALTIME//[!0-9]/}
  printf '%s %s %s %s\\n' "$pod" "$token" "$((us / 1000))" "$restart" >> "$journal"
  read -r -t "$interval" -u 0 _
  # stdin at EOF returns at once (status 1): fall back to sleep.
  (($? > 128)) || sleep "$interval"
done
`;

/**
 * Writes the workload into `dir` as an executable named
 * {@linkcode WORKLOAD_NAME} and returns its path.
 */
export async function installWorkload(dir: string): Promise<string> {
  const path = `${dir.replace(/\/+$/, "")}/${WORKLOAD_NAME}`;
  await Deno.writeTextFile(path, WORKLOAD_SCRIPT, { mode: 0o755 });
  await Deno.chmod(path, 0o755);
  return path;
}

/** One journal line: what one workload wrote at one moment. */
export interface JournalLine {
  /** The pod whose workload wrote it. */
  pod: string;
  /** The fencing token the workload read from its state volume (0: none). */
  token: number;
  /** Wall-clock ms when it was written. */
  at: number;
  /** The container's restart count (0 for the first run), which tells runs apart. */
  restart: number;
}

/**
 * Parses journal text; a torn last line (a workload killed mid-write) is
 * skipped, any other malformed line throws, because a journal the analysis
 * cannot read must not pass as a clean one.
 */
export function parseJournal(text: string): JournalLine[] {
  const out: JournalLine[] = [];
  const lines = text.split("\n");
  const last = lines.length - 1;
  lines.forEach((line, i) => {
    if (line === "") return;
    const m = /^(\S+) (\d+) (\d+) (\d+)$/.exec(line);
    if (!m) {
      if (i === last) return;
      throw new Error(
        `malformed journal line ${i + 1}: ${JSON.stringify(line)}`,
      );
    }
    out.push({
      pod: m[1],
      token: Number(m[2]),
      at: Number(m[3]),
      restart: Number(m[4]),
    });
  });
  return out;
}
