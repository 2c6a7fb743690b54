// The curves panel's model, without a browser: a run's records merged as they arrive (the
// last record per (phase, step) wins, as readers of metrics.jsonl must), and the charts to
// draw: which series (lines; a std band is two edges that are not series), and the
// "no gradient" regions where every GRPO group had zero reward spread.
import { MetricRecord, recordKey } from '../../core/protocol/metrics';

export interface RunInput {
  id: string;
  label: string;
  records: readonly MetricRecord[];
}

export interface Point {
  x: number;
  y: number;
}

export type SeriesRole = 'line' | 'dashed' | 'bandLow' | 'bandHigh';

export interface SeriesSpec {
  runId: string;
  /** Position of the run in the panel (its colour). */
  runIndex: number;
  label: string;
  role: SeriesRole;
  points: Point[];
}

export interface Region {
  runId: string;
  from: number;
  to: number;
}

export interface ChartSpec {
  id: string;
  title: string;
  yLabel: string;
  series: SeriesSpec[];
  regions: Region[];
  note: string | null;
  /** y axis bounds when the quantity has them (accuracies, shares). */
  yMin?: number;
  yMax?: number;
}

/** Adds `incoming` to `existing`: one record per (phase, step[, split]), the later one winning, sorted. */
export function mergeRecords(existing: readonly MetricRecord[], incoming: readonly MetricRecord[]): MetricRecord[] {
  const byKey = new Map<string, MetricRecord>();
  for (const r of existing) byKey.set(recordKey(r), r);
  for (const r of incoming) byKey.set(recordKey(r), r);
  return [...byKey.values()].sort((a, b) => (a.phase === b.phase ? a.step - b.step : a.phase < b.phase ? -1 : 1));
}

const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** (step, record[key]) for the records of `phase` that carry a finite number there. */
export function pointsOf(records: readonly MetricRecord[], phase: string, key: string, where?: (r: MetricRecord) => boolean): Point[] {
  const out: Point[] = [];
  for (const r of records) {
    if (r.phase !== phase || (where && !where(r))) continue;
    const v = r[key];
    if (finite(v)) out.push({ x: r.step, y: v });
  }
  return out;
}

/** Runs of consecutive points at 1.0 (every group with zero reward spread), widened by half a step. */
export function zeroStdRegions(points: readonly Point[], runId: string): Region[] {
  const out: Region[] = [];
  let from: number | null = null;
  let prev = 0;
  for (const p of points) {
    if (p.y >= 1 - 1e-9) {
      if (from === null) from = p.x;
      prev = p.x;
    } else if (from !== null) {
      out.push({ runId, from: from - 0.5, to: prev + 0.5 });
      from = null;
    }
  }
  if (from !== null) out.push({ runId, from: from - 0.5, to: prev + 0.5 });
  return out;
}

interface LineDef {
  phase: string;
  key: string;
  suffix: string;
  role: 'line' | 'dashed';
  where?: (r: MetricRecord) => boolean;
}
interface ChartDef {
  id: string;
  title: string;
  yLabel: string;
  lines: LineDef[];
  band?: { phase: string; mean: string; std: string };
  zeroStd?: boolean;
  note?: string;
  yMin?: number;
  yMax?: number;
}

const heldout = (r: MetricRecord) => r['split'] === undefined || r['split'] === 'heldout';
const onSplit = (split: string) => (r: MetricRecord) => r['split'] === split;

export const CHART_DEFS: readonly ChartDef[] = [
  {
    id: 'sft-loss',
    title: 'SFT loss',
    yLabel: 'loss',
    lines: [
      { phase: 'sft', key: 'loss', suffix: '', role: 'line' },
      { phase: 'sft', key: 'heldout_loss', suffix: ' · held-out', role: 'dashed' },
    ],
  },
  {
    id: 'sft-acc',
    title: 'Supervised-token accuracy',
    yLabel: 'sup_acc',
    lines: [{ phase: 'sft', key: 'sup_acc', suffix: '', role: 'line' }],
    yMin: 0,
    yMax: 1,
  },
  {
    id: 'heldout-acc',
    title: 'Accuracy (exact match): held-out, dev, fresh values',
    yLabel: 'accuracy',
    // held-out is the seed's 50; dev and fresh-values are fresh worlds (does it read, or remember?).
    lines: [
      { phase: 'eval', key: 'accuracy', suffix: '', role: 'line', where: heldout },
      { phase: 'eval', key: 'accuracy', suffix: ' · dev', role: 'dashed', where: onSplit('dev') },
      { phase: 'eval', key: 'accuracy', suffix: ' · fresh-values', role: 'dashed', where: onSplit('fresh-values') },
    ],
    yMin: 0,
    yMax: 1,
  },
  {
    id: 'grpo-reward',
    title: 'GRPO reward (mean ± std)',
    yLabel: 'reward',
    lines: [{ phase: 'grpo', key: 'reward_mean', suffix: '', role: 'line' }],
    band: { phase: 'grpo', mean: 'reward_mean', std: 'reward_std' },
  },
  {
    id: 'grpo-zero-std',
    title: 'Groups with zero reward spread (frac_reward_zero_std)',
    yLabel: 'share of groups',
    lines: [{ phase: 'grpo', key: 'frac_reward_zero_std', suffix: '', role: 'line' }],
    zeroStd: true,
    note: 'Shaded: every group had the same reward for all its members, so every advantage is 0 and the step has no gradient.',
    yMin: 0,
    yMax: 1,
  },
  { id: 'grpo-kl', title: 'KL to the reference policy', yLabel: 'kl', lines: [{ phase: 'grpo', key: 'kl', suffix: '', role: 'line' }] },
  {
    id: 'grpo-clip',
    title: 'Clip ratio',
    yLabel: 'clip_ratio',
    lines: [{ phase: 'grpo', key: 'clip_ratio', suffix: '', role: 'line' }],
    note: 'With one optimisation pass per batch (the default) the ratio is always 1, so this stays 0 unless --epochs-per-batch > 1.',
  },
  {
    id: 'grpo-len',
    title: 'Completion length',
    yLabel: 'tokens',
    lines: [{ phase: 'grpo', key: 'completion_len', suffix: '', role: 'line' }],
  },
];

/** The charts that have data in at least one run, each with its series (one per run and line). */
export function buildCharts(runs: readonly RunInput[], hidden: ReadonlySet<string> = new Set()): ChartSpec[] {
  const charts: ChartSpec[] = [];
  for (const def of CHART_DEFS) {
    const series: SeriesSpec[] = [];
    const regions: Region[] = [];
    runs.forEach((run, runIndex) => {
      if (hidden.has(run.id)) return;
      if (def.band) {
        const lows: Point[] = [];
        const highs: Point[] = [];
        for (const r of run.records) {
          if (r.phase !== def.band.phase) continue;
          const m = r[def.band.mean];
          const s = r[def.band.std];
          if (finite(m) && finite(s)) {
            lows.push({ x: r.step, y: m - s });
            highs.push({ x: r.step, y: m + s });
          }
        }
        if (lows.length) {
          series.push({ runId: run.id, runIndex, label: `${run.label} − std`, role: 'bandLow', points: lows });
          series.push({ runId: run.id, runIndex, label: `${run.label} + std`, role: 'bandHigh', points: highs });
        }
      }
      for (const line of def.lines) {
        const points = pointsOf(run.records, line.phase, line.key, line.where);
        if (points.length === 0) continue;
        series.push({ runId: run.id, runIndex, label: `${run.label}${line.suffix}`, role: line.role, points });
        if (def.zeroStd) regions.push(...zeroStdRegions(points, run.id));
      }
    });
    if (!series.some((s) => s.role === 'line' || s.role === 'dashed')) continue;
    // A run's flat-line warning (written into its metrics line) is said under the chart it explains.
    const warnings = def.zeroStd ? flatlineWarnings(runs, hidden) : [];
    charts.push({
      id: def.id,
      title: def.title,
      yLabel: def.yLabel,
      series,
      regions,
      note: [def.note, ...warnings].filter((x): x is string => !!x).join('\n') || null,
      ...(def.yMin !== undefined ? { yMin: def.yMin } : {}),
      ...(def.yMax !== undefined ? { yMax: def.yMax } : {}),
    });
  }
  return charts;
}

/** The latest GRPO flat-line warning of each shown run: "<run>, step N: <sentence>". */
export function flatlineWarnings(runs: readonly RunInput[], hidden: ReadonlySet<string> = new Set()): string[] {
  const out: string[] = [];
  for (const run of runs) {
    if (hidden.has(run.id)) continue;
    const last = [...run.records].reverse().find((r) => r.phase === 'grpo' && typeof r['warning'] === 'string');
    if (last) out.push(`${run.label}, step ${last.step}: ${String(last['warning'])}`);
  }
  return out;
}

/** Series a reader counts: lines (a band's edges are not series). */
export function lineCount(chart: ChartSpec): number {
  return chart.series.filter((s) => s.role === 'line' || s.role === 'dashed').length;
}
