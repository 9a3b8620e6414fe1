/**
 * How the benchmarks measure: one exec's wall time, CPU and peak RSS; a
 * running process's CPU and memory from `/proc`; medians; and the report
 * that prints every figure next to its floor, as a ratio, with the number of
 * runs behind it. Kept apart from the scenarios so each scenario says only
 * what it runs.
 *
 * @module
 */
import { median } from "../sim/stats.ts";

const TIME = "/usr/bin/time";

/** Whether GNU time is installed; without it peak RSS and CPU per exec come from polling `/proc`. */
export const hasTime: boolean = await Deno.stat(TIME).then(
  () => true,
  () => false,
);

/** One measured exec. */
export interface Exec {
  /** Spawn to exit, as the kubelet sees it, in milliseconds. */
  wallMs: number;
  /** Peak RSS in KiB (GNU time's `%M`, else a lower bound from polling VmHWM). */
  peakKiB: number | undefined;
}

/**
 * Runs `argv` once, with exactly `env` as its environment, and measures it.
 * GNU time's own exec adds about a millisecond to the wall time, for the
 * floor as much as for the subject.
 *
 * @param argv the program and its arguments
 * @param env the whole environment of the child
 * @returns the measured exec
 * @throws when the program exits non-zero (with its stderr)
 */
export async function measureExec(
  argv: string[],
  env: Record<string, string>,
): Promise<Exec> {
  const full = hasTime ? [TIME, "-f", "%M", ...argv] : argv;
  const t0 = performance.now();
  const child = new Deno.Command(full[0], {
    args: full.slice(1),
    env,
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let polled: number | undefined;
  let done = false;
  const status = child.status.then((s) => {
    done = true;
    return s;
  });
  if (!hasTime) {
    while (!done) {
      try {
        polled = Math.max(polled ?? 0, memKiB(child.pid).hwm);
      } catch { /* exited */ }
      await new Promise((r) => setTimeout(r, 1));
    }
  }
  const [s, err] = await Promise.all([
    status,
    new Response(child.stderr).text(),
  ]);
  const wallMs = performance.now() - t0;
  if (!s.success) throw new Error(`${argv.join(" ")} failed: ${err}`);
  const peakKiB = hasTime ? Number(err.trim().split("\n").at(-1)) : polled;
  return { wallMs, peakKiB };
}

/**
 * The mean CPU (user + system) of one exec of `argv`, from `n` execs in a
 * row under one GNU time: its total is exact to 10 ms, so the mean is exact
 * to 10 ms / n, where per-exec readings would each be rounded to 10 ms. The
 * loop's shell is counted too (a few hundred microseconds per exec, the
 * same for the floor). `undefined` without GNU time.
 *
 * @param argv the program and its arguments
 * @param env the whole environment of every exec
 * @param n how many execs
 * @returns CPU seconds per exec
 * @throws when an exec exits non-zero
 */
export async function cpuPerExec(
  argv: string[],
  env: Record<string, string>,
  n: number,
): Promise<number | undefined> {
  if (!hasTime) return undefined;
  const loop =
    `i=0; while [ "$i" -lt ${n} ]; do "$@" >/dev/null || exit 1; i=$((i+1)); done`;
  const out = await new Deno.Command(TIME, {
    args: ["-f", "%U %S", "sh", "-c", loop, "sh", ...argv],
    env,
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`${argv.join(" ")} failed: ${err}`);
  const [user, sys] = err.trim().split("\n").at(-1)!.split(" ").map(Number);
  return (user + sys) / n;
}

/** CPU seconds (user + system, all threads) of a process so far, from `/proc/<pid>/stat` (10 ms ticks). */
export function cpuSeconds(pid: number): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

/**
 * A process's CPU time, to the nanosecond, from each thread's
 * `/proc/<pid>/task/<tid>/schedstat`. `/proc/<pid>/stat` counts exited
 * threads too but only in 10 ms ticks, too coarse for a program that uses a
 * few milliseconds a minute; so the tracker samples every live thread every
 * second and keeps the last value of each, which loses only what a thread
 * used in its last second (Deno's blocking-pool threads idle 10 s before
 * they exit).
 */
export class CpuTracker implements Disposable {
  readonly #seen = new Map<string, number>();
  readonly #timer: ReturnType<typeof setInterval>;

  /** Starts sampling `pid` at once and every second until disposed. */
  constructor(readonly pid: number) {
    this.sample();
    this.#timer = setInterval(() => this.sample(), 1000);
  }

  /** Reads every live thread's CPU time now. */
  sample(): void {
    try {
      for (const t of Deno.readDirSync(`/proc/${this.pid}/task`)) {
        try {
          const text = Deno.readTextFileSync(
            `/proc/${this.pid}/task/${t.name}/schedstat`,
          );
          this.#seen.set(t.name, Number(text.split(" ")[0]));
        } catch { /* the thread exited */ }
      }
    } catch { /* the process exited */ }
  }

  /** CPU seconds of every thread seen so far, as of now. */
  seconds(): number {
    this.sample();
    let ns = 0;
    for (const v of this.#seen.values()) ns += v;
    return ns / 1e9;
  }

  [Symbol.dispose](): void {
    clearInterval(this.#timer);
  }
}

/** Resident and peak resident memory of a process, in KiB, from `/proc/<pid>/status`. */
export function memKiB(
  pid: number,
): { rss: number; hwm: number; anon: number; file: number } {
  const st = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kib = (field: string) =>
    Number(new RegExp(`${field}:\\s+(\\d+)`).exec(st)?.[1]);
  return {
    rss: kib("VmRSS"),
    hwm: kib("VmHWM"),
    // What the process itself allocated, apart from the runtime's
    // executable and other files paged in (shared, clean, reclaimable).
    anon: kib("RssAnon"),
    file: kib("RssFile"),
  };
}

/** Median, minimum and maximum of a sample. */
export interface Stats {
  median: number;
  min: number;
  max: number;
}

/** The {@linkcode Stats} of `xs` (not empty). */
export function stats(xs: number[]): Stats {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
}

/** `n` with `digits` decimals, or `n/a`. */
export function fmt(n: number | undefined, digits = 1): string {
  return n === undefined || !Number.isFinite(n) ? "n/a" : n.toFixed(digits);
}

/** One figure of the report: a measured value, its floor, and how many runs (or events) stand behind it. */
export interface Row {
  /** What was measured, e.g. "`check` exec, wall median". */
  figure: string;
  /** The value for berth-acquire. */
  value: number | undefined;
  /** The floor's value, measured in the same run. */
  floor: number | undefined;
  /** Unit of both, e.g. "ms", "MiB", "CPU s/h". */
  unit: string;
  /** What the floor is. */
  floorName: string;
  /** The number of runs, samples or renewals behind the figure, e.g. "30 runs". */
  runs: string;
  /** Decimals to print; default 1. */
  digits?: number;
  /** The target for the ratio, e.g. 1.15, printed next to it. */
  target?: number;
}

/** Collects {@linkcode Row}s and prints them as one markdown table ready for docs/benchmarks.md. */
export class Report {
  readonly rows: Row[] = [];

  /** Adds a row and prints it at once, so a long run shows progress. */
  add(row: Row): void {
    this.rows.push(row);
    console.log(
      `  ${row.figure}: ${cell(row.value, row)} vs ${
        cell(row.floor, row)
      } (${row.floorName}) = ${ratio(row.value, row.floor)} (${row.runs})`,
    );
  }

  /** The markdown table of every row so far. */
  markdown(): string {
    const lines = [
      "| figure | berth-acquire | floor | ratio (target) | runs |",
      "| --- | --- | --- | --- | --- |",
    ];
    for (const r of this.rows) {
      const target = r.target === undefined ? "" : ` (≤ ${r.target}x)`;
      lines.push(
        `| ${r.figure} | ${cell(r.value, r)} | ${
          cell(r.floor, r)
        } (${r.floorName}) | ${ratio(r.value, r.floor)}${target} | ${r.runs} |`,
      );
    }
    return lines.join("\n");
  }
}

function cell(n: number | undefined, r: Row): string {
  return `${fmt(n, r.digits ?? 1)} ${r.unit}`;
}

/** `a / b` as `1.23x`, or `n/a`. */
export function ratio(a: number | undefined, b: number | undefined): string {
  return a === undefined || b === undefined || b === 0 || !Number.isFinite(a)
    ? "n/a"
    : `${(a / b).toFixed(2)}x`;
}
