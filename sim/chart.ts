/**
 * A timeline drawn in the terminal: one row per pod, time across, so that a
 * handover can be seen at a glance (where each workload ran, the cut, each
 * token issued). The renderer is generic and pure; {@linkcode timelineRows}
 * turns what a simulated run recorded into rows.
 *
 * @module
 */
import type { Grant, MainRun } from "./journal.ts";

/** A stretch of a row drawn with one glyph; where stretches overlap, the higher priority wins. */
export interface ChartSpan {
  /** Start, wall-clock ms. */
  from: number;
  /** End, wall-clock ms. */
  to: number;
  /** One character. */
  glyph: string;
  /** Higher wins. */
  priority: number;
}

/** Text written over a row at a moment (a token issued, a cut). */
export interface ChartMark {
  /** Wall-clock ms. */
  at: number;
  /** Short text, e.g. `T2`. */
  text: string;
}

/** One row of the chart. */
export interface ChartRow {
  /** Shown left of the row. */
  label: string;
  /** What the row shows over time. */
  spans: ChartSpan[];
  /** Marks drawn over the spans. */
  marks: ChartMark[];
}

/** Options for {@linkcode renderChart}. */
export interface ChartOptions {
  /** Wall-clock ms at the left edge (time 0 on the axis). */
  start: number;
  /** Wall-clock ms at the right edge. */
  end: number;
  /** Columns for the time axis; default 64. */
  width?: number;
}

const TICK_STEPS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600];

/**
 * Renders `rows` under a time axis in seconds; returns the lines. Each
 * column covers `(end - start) / width` ms and shows the highest-priority
 * span overlapping it (a space where none does); marks are written over
 * the spans at their column, shifted left if they would run off the edge.
 */
export function renderChart(rows: ChartRow[], o: ChartOptions): string[] {
  const width = o.width ?? 64;
  const span = Math.max(1, o.end - o.start);
  const colMs = span / width;
  const labelWidth = Math.max(0, ...rows.map((r) => r.label.length)) + 2;
  const pad = " ".repeat(labelWidth);

  const stepS = TICK_STEPS_S.find((s) => (s * 1000) / colMs >= 6) ?? 600;
  const axis = Array<string>(width + 6).fill(" ");
  const ticks = Array<string>(width).fill(" ");
  for (let s = 0; s * 1000 <= span; s += stepS) {
    const col = Math.min(width - 1, Math.round((s * 1000) / colMs));
    ticks[col] = "|";
    const label = `${s}s`;
    for (let i = 0; i < label.length; i++) axis[col + i] = label[i];
  }
  const lines = [
    pad + axis.join("").trimEnd(),
    pad + ticks.join("").trimEnd(),
  ];
  for (const row of rows) {
    const cells = Array<string>(width).fill(" ");
    for (let c = 0; c < width; c++) {
      const from = o.start + c * colMs;
      const to = from + colMs;
      let best: ChartSpan | undefined;
      for (const s of row.spans) {
        if (
          s.from < to && s.to > from && (!best || s.priority > best.priority)
        ) {
          best = s;
        }
      }
      if (best) cells[c] = best.glyph;
    }
    for (const m of row.marks) {
      let col = Math.floor((m.at - o.start) / colMs);
      col = Math.max(0, Math.min(col, width - m.text.length));
      for (let i = 0; i < m.text.length && col + i < width; i++) {
        cells[col + i] = m.text[i];
      }
    }
    lines.push(row.label.padEnd(labelWidth) + cells.join("").trimEnd());
  }
  return lines;
}

/** The glyphs {@linkcode timelineRows} uses, for the legend. */
export const GLYPHS = {
  leased: "█",
  restartWindow: "▒",
  idle: "·",
  lease: "━",
} as const;

/** One line explaining the glyphs of {@linkcode timelineRows}. */
export const LEGEND =
  `${GLYPHS.leased} workload running with the lease  ${GLYPHS.restartWindow} restarted without it (until the next probe)  ` +
  `${GLYPHS.idle} pod up, workload not running  T<n> token n issued  ✂ cut`;

/** What {@linkcode timelineRows} draws. */
export interface TimelineInput {
  /** Pods, in row order, with when each existed (wall ms; `until` undefined: to the end). */
  pods: { name: string; from: number; until?: number }[];
  /** Main-container runs (from the kubelet's record). */
  runs: MainRun[];
  /** Tokens issued. */
  grants: Grant[];
  /** Cuts or other faults, drawn on the pod's row. */
  cuts: { pod: string; at: number }[];
  /**
   * The server's view: who held the lease when (wall ms), drawn as an
   * extra row `lease` with the holder's last letter.
   */
  leases?: { pod: string; from: number; to: number }[];
  /** Right edge for open intervals. */
  end: number;
}

/** Rows for a pod timeline: one per pod, plus the server's view of the lease. */
export function timelineRows(input: TimelineInput): ChartRow[] {
  // A same-holder re-acquire repeats a grant; mark each token once.
  const seen = new Set<string>();
  const grants = input.grants.filter((g) => {
    const k = `${g.pod}:${g.epoch}:${g.token}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  const rows: ChartRow[] = input.pods.map((p) => ({
    label: p.name,
    spans: [
      {
        from: p.from,
        to: p.until ?? input.end,
        glyph: GLYPHS.idle,
        priority: 0,
      },
      ...input.runs.filter((r) => r.pod === p.name).map((r) => ({
        from: r.startedAt,
        to: r.endedAt ?? input.end,
        glyph: r.leased ? GLYPHS.leased : GLYPHS.restartWindow,
        priority: r.leased ? 2 : 1,
      })),
    ],
    marks: [
      ...grants.filter((g) => g.pod === p.name).map((g) => ({
        at: g.at,
        text: `T${g.token}`,
      })),
      ...input.cuts.filter((c) => c.pod === p.name).map((c) => ({
        at: c.at,
        text: "✂",
      })),
    ],
  }));
  if (input.leases) {
    rows.push({
      label: "server",
      spans: input.leases.map((l) => ({
        from: l.from,
        to: l.to,
        glyph: l.pod.slice(-1),
        priority: 1,
      })),
      marks: [],
    });
  }
  return rows;
}
