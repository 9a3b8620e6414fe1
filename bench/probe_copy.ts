/**
 * What the probe's rewrite (lib/probe/) costs its every start: the copy
 * installed for any main image (interpreter and libraries loaded from the
 * state directory) against the plain copy of the same executable, both
 * started the same way, runs alternating. The `deno` executable stands in
 * for the compiled binary (it is linked the same way) and `deno --version`
 * is the workload: it starts the runtime and exits, so the loader's and the
 * libraries' share of the start is as large as it gets.
 *
 * The rewrite needs a state directory path of at most 7 bytes, so the copy
 * is installed into a fresh `/tmp/XX`, removed afterwards.
 *
 * Alone: `deno run -A bench/probe_copy.ts [RUNS]`.
 *
 * @module
 */
import { installPortableCheck } from "../lib/probe/install.ts";
import { StateDir } from "../lib/state/state_dir.ts";
import { baseEnv } from "../sim/cli.ts";
import { shortTempDir } from "../tests/support/short_dir.ts";
import { type Exec, measureExec, Report, stats } from "./measure.ts";

/** A fresh directory `/tmp/XX` (7 bytes), or an error when none is free. */
function shortDir(): string {
  const dir = shortTempDir();
  if (dir === undefined) {
    throw new Error("no free /tmp/XX directory for the rewritten probe");
  }
  return dir;
}

/**
 * Measures the rewritten copy against the plain copy: `n` runs each,
 * alternating, after one warm-up each; adds the wall median row (target
 * 1.05x) and the peak RSS median row to `report`.
 *
 * @param n Runs of each.
 * @param report Where the rows go.
 */
export async function benchProbeCopy(n: number, report: Report): Promise<void> {
  const dir = shortDir();
  try {
    const state = new StateDir(dir);
    const { companions } = await installPortableCheck(state, Deno.execPath());
    const plain = `${dir}/plain`;
    await Deno.copyFile(Deno.execPath(), plain);
    const env = baseEnv();
    const rewritten = [state.checkPath, "--version"];
    const copy = [plain, "--version"];
    await measureExec(rewritten, env);
    await measureExec(copy, env);
    const a: Exec[] = [];
    const b: Exec[] = [];
    for (let i = 0; i < n; i++) {
      a.push(await measureExec(rewritten, env));
      b.push(await measureExec(copy, env));
    }
    const runs = `${n} runs each, alternating`;
    const floorName = "plain copy of the same executable";
    const added = companions.reduce((s, c) => s + c.size, 0) / 1048576;
    report.add({
      figure: `probe copy for any image (\`deno --version\`; + ${
        added.toFixed(2)
      } MiB of loader and libraries), wall median`,
      value: stats(a.map((e) => e.wallMs)).median,
      floor: stats(b.map((e) => e.wallMs)).median,
      unit: "ms",
      floorName,
      runs,
      target: 1.05,
    });
    if (a.every((e) => e.peakKiB) && b.every((e) => e.peakKiB)) {
      report.add({
        figure: "probe copy for any image, peak RSS median",
        value: stats(a.map((e) => e.peakKiB!)).median / 1024,
        floor: stats(b.map((e) => e.peakKiB!)).median / 1024,
        unit: "MiB",
        floorName,
        runs,
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  const n = Number(Deno.args[0] ?? 30);
  const report = new Report();
  await benchProbeCopy(n, report);
  console.log(`\n${report.markdown()}`);
}
