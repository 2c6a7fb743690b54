// The curves panel's model, without a browser: a run's records merged as they arrive (the
// last record per (phase, step) wins, as readers of metrics.jsonl must), and the charts to
// draw: which series (lines; a std band is two edges that are not series), and the
// "no gradient" regions where every GRPO group had zero reward spread.
import { MetricRecord, recordKey } from '../../core/protocol/metrics';
import type { CurriculumPhaseView, RunMeta } from '../../core/protocol/panels';

export interface RunInput {
  id: string;
  label: string;
  records: readonly MetricRecord[];
  /** What the run's config.json says about it (its kind, its recipe's curriculum), when the extension sent it. */
  meta?: RunMeta | null;
}

/** A vertical mark at a step: where an SFT recipe's curriculum moved to its next phase. */
export interface Marker {
  runId: string;
  runIndex: number;
  x: number;
  label: string;
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
  /** The x axis: SFT steps and GRPO steps are two counts, never one axis. */
  xLabel: string;
  yLabel: string;
  series: SeriesSpec[];
  regions: Region[];
  markers: Marker[];
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
  /** What the chart's title names when this line has data (a title names only what is drawn). */
  name?: string;
}
interface ChartDef {
  id: string;
  title: string;
  yLabel: string;
  /** Whose steps the x axis counts. */
  axis: 'sft' | 'grpo';
  /** Which runs the chart draws: SFT runs, GRPO runs, or any (default: any run with the lines' phase). */
  runs?: 'sft' | 'grpo';
  lines: LineDef[];
  band?: { phase: string; mean: string; std: string };
  zeroStd?: boolean;
  /** Mark where the recipe's curriculum changed phase. */
  phases?: boolean;
  note?: string;
  yMin?: number;
  yMax?: number;
}

const heldout = (r: MetricRecord) => r['split'] === undefined || r['split'] === 'heldout';
const onSplit = (split: string) => (r: MetricRecord) => r['split'] === split;

/** The accuracy lines of an evaluated run: held-out is the seed's split; dev and fresh-values are fresh worlds (does it read, or remember?). */
const ACCURACY_LINES: LineDef[] = [
  { phase: 'eval', key: 'accuracy', suffix: '', role: 'line', where: heldout, name: 'held-out' },
  { phase: 'eval', key: 'accuracy', suffix: ' · dev', role: 'dashed', where: onSplit('dev'), name: 'dev' },
  { phase: 'eval', key: 'accuracy', suffix: ' · fresh-values', role: 'dashed', where: onSplit('fresh-values'), name: 'fresh values' },
];

export const CHART_DEFS: readonly ChartDef[] = [
  {
    id: 'sft-loss',
    title: 'SFT loss',
    yLabel: 'loss',
    axis: 'sft',
    lines: [
      { phase: 'sft', key: 'loss', suffix: '', role: 'line', name: 'training batches' },
      { phase: 'sft', key: 'heldout_loss', suffix: ' · held-out', role: 'dashed', name: 'held-out transcripts' },
    ],
    phases: true,
  },
  {
    id: 'sft-acc',
    title: 'Supervised-token accuracy',
    yLabel: 'sup_acc',
    axis: 'sft',
    lines: [{ phase: 'sft', key: 'sup_acc', suffix: '', role: 'line' }],
    phases: true,
    yMin: 0,
    yMax: 1,
  },
  {
    id: 'heldout-acc',
    title: 'Accuracy (exact match)',
    yLabel: 'accuracy',
    axis: 'sft',
    runs: 'sft',
    lines: ACCURACY_LINES,
    phases: true,
    yMin: 0,
    yMax: 1,
  },
  {
    // A GRPO run counts its own steps from 1: its accuracy gets its own axis, not the SFT run's.
    id: 'grpo-heldout-acc',
    title: 'Accuracy during GRPO (exact match)',
    yLabel: 'accuracy',
    axis: 'grpo',
    runs: 'grpo',
    lines: ACCURACY_LINES,
    note: 'x is the GRPO step (step 0: the SFT student it started from, before any update).',
    yMin: 0,
    yMax: 1,
  },
  {
    id: 'grpo-reward',
    title: 'GRPO reward (mean ± std)',
    yLabel: 'reward',
    axis: 'grpo',
    lines: [{ phase: 'grpo', key: 'reward_mean', suffix: '', role: 'line' }],
    band: { phase: 'grpo', mean: 'reward_mean', std: 'reward_std' },
  },
  {
    id: 'grpo-zero-std',
    title: 'Groups with zero reward spread (frac_reward_zero_std)',
    yLabel: 'share of groups',
    axis: 'grpo',
    lines: [{ phase: 'grpo', key: 'frac_reward_zero_std', suffix: '', role: 'line' }],
    zeroStd: true,
    note: 'Shaded: every group had the same reward for all its members, so every advantage is 0 and the step has no gradient.',
    yMin: 0,
    yMax: 1,
  },
  {
    id: 'grpo-kl',
    title: 'KL to the reference policy',
    yLabel: 'kl',
    axis: 'grpo',
    lines: [{ phase: 'grpo', key: 'kl', suffix: '', role: 'line' }],
    note: 'A step without an update (no group with a spread) has no KL point.',
  },
  {
    id: 'grpo-clip',
    title: 'Clip ratio',
    yLabel: 'clip_ratio',
    axis: 'grpo',
    lines: [{ phase: 'grpo', key: 'clip_ratio', suffix: '', role: 'line' }],
    note: 'With one optimisation pass per batch (the default) the ratio is always 1, so this stays 0 unless --epochs-per-batch > 1.',
  },
  {
    id: 'grpo-len',
    title: 'Completion length',
    yLabel: 'tokens',
    axis: 'grpo',
    lines: [{ phase: 'grpo', key: 'completion_len', suffix: '', role: 'line' }],
  },
];

/** Whether a run is a GRPO run: its config says so, or its records have GRPO steps. */
export function isGrpoRun(run: RunInput): boolean {
  if (run.meta?.kind) return run.meta.kind === 'grpo';
  return run.records.some((r) => r.phase === 'grpo');
}

export const AXIS_LABELS = { sft: 'SFT step', grpo: 'GRPO step' } as const;

/**
 * Where an SFT run's curriculum moved to its next phase: the first step whose record's
 * `curriculum` index differs from the step before, labelled with the phase from the run's
 * recipe ("phase 2 of 2: all turns, batch 2") or, without it, from the record ("phase 2, batch 2").
 */
export function phaseBoundaries(records: readonly MetricRecord[], curriculum?: readonly CurriculumPhaseView[]): { step: number; index: number; label: string }[] {
  const out: { step: number; index: number; label: string }[] = [];
  let prev: number | null = null;
  for (const r of records) {
    if (r.phase !== 'sft') continue;
    const idx = r['curriculum'];
    if (typeof idx !== 'number' || !Number.isInteger(idx)) continue;
    if (prev !== null && idx !== prev) out.push({ step: r.step, index: idx, label: phaseLabel(idx, curriculum, r['batch']) });
    prev = idx;
  }
  return out;
}

const TURNS: Record<string, string> = { first: 'first turns only', each: 'each turn apart', all: 'whole transcripts' };

export function phaseLabel(index: number, curriculum: readonly CurriculumPhaseView[] | undefined, batch: unknown): string {
  const p = curriculum?.[index];
  if (p) return `phase ${index + 1} of ${curriculum!.length}: ${TURNS[p.turns] ?? p.turns}, batch ${p.batch}`;
  return `phase ${index + 1}${typeof batch === 'number' ? `, batch ${batch}` : ''}`;
}

/** The chart's title: its name and, for charts of named lines, the names of those drawn. */
function titleOf(def: ChartDef, drawn: ReadonlySet<string>): string {
  const names = def.lines.map((l) => l.name).filter((n): n is string => n !== undefined && drawn.has(n));
  if (!def.lines.some((l) => l.name !== undefined) || def.id.startsWith('sft-')) return def.title;
  return names.length ? `${def.title}: ${names.join(', ')}` : def.title;
}

/**
 * What the legend and the note say about a held-out loss line: measured every N steps, and
 * when it ends before the run's last step, where and why (no held-out transcripts after it
 * are not the reason; the run stopped measuring it: its metrics hold no point after).
 */
export function heldoutLossNote(run: RunInput): string | null {
  const pts = pointsOf(run.records, 'sft', 'heldout_loss');
  if (pts.length === 0) return null;
  const steps = pointsOf(run.records, 'sft', 'loss');
  const last = steps.at(-1)?.x ?? 0;
  const every = pts.length >= 2 ? pts[1]!.x - pts[0]!.x : pts[0]!.x;
  const lastHeld = pts.at(-1)!.x;
  const base = `${run.label}: held-out loss is measured every ${every} steps on the held-out transcripts (the dashed line)`;
  // A non-finite loss is written as null (JSON has no NaN): the line has no point there.
  const nonFinite = run.records.filter((r) => r.phase === 'sft' && r.step > lastHeld && 'heldout_loss' in r && r['heldout_loss'] === null).map((r) => r.step);
  if (nonFinite.length) {
    return `${base}; from step ${nonFinite[0]} it is not a finite number (recorded as null in ${nonFinite.length} line${nonFinite.length === 1 ? '' : 's'}: the held-out loss overflowed), so the line stops at step ${lastHeld}.`;
  }
  const where = heldoutLossPlace(pts, steps);
  if (last - lastHeld <= every) return `${base}${where}.`;
  return `${base}${where}; its last point is step ${lastHeld}, the run's metrics hold none after it (the run trained on to step ${last}).`;
}

const fmtLoss = (x: number): string => (x >= 0.1 ? x.toFixed(2) : x.toPrecision(2));

/**
 * Where a held-out loss line goes that a reader may lose: a fall by 5x or more between two
 * points (the recipe's warm-up trains first turns only, and whole transcripts are scored), and
 * a line that ends far under the training batches' loss (the batches hold the recipe's harder
 * augmentation; the held-out transcripts are the seed world's own questions), drawn along the
 * bottom of the chart under the noisy batch line. '' when neither.
 */
function heldoutLossPlace(held: readonly Point[], batches: readonly Point[]): string {
  const parts: string[] = [];
  for (let i = 1; i < held.length; i++) {
    const [a, b] = [held[i - 1]!, held[i]!];
    if (a.y > 0 && b.y > 0 && a.y / b.y >= 5) {
      parts.push(`it falls from ${fmtLoss(a.y)} to ${fmtLoss(b.y)} between steps ${a.x} and ${b.x}`);
      break;
    }
  }
  const lastHeld = held.at(-1)!;
  const tail = batches.filter((p) => p.x > lastHeld.x / 2).map((p) => p.y).sort((x, y) => x - y);
  const median = tail.length ? tail[Math.floor(tail.length / 2)]! : NaN;
  if (Number.isFinite(median) && lastHeld.y < median / 4) {
    parts.push(
      `it ends at ${fmtLoss(lastHeld.y)}, under the training batches' median ${fmtLoss(median)} over the run's second half (the batches hold the recipe's harder augmentation, the held-out transcripts the seed world's own questions), so it runs along the bottom of the chart: its hollow points mark it`,
    );
  }
  return parts.length ? `; ${parts.join('; ')}` : '';
}

/** The charts that have data in at least one run, each with its series (one per run and line). */
export function buildCharts(runs: readonly RunInput[], hidden: ReadonlySet<string> = new Set()): ChartSpec[] {
  const charts: ChartSpec[] = [];
  for (const def of CHART_DEFS) {
    const series: SeriesSpec[] = [];
    const regions: Region[] = [];
    const markers: Marker[] = [];
    const drawn = new Set<string>();
    runs.forEach((run, runIndex) => {
      if (hidden.has(run.id)) return;
      if (def.runs && (def.runs === 'grpo') !== isGrpoRun(run)) return;
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
      let any = false;
      for (const line of def.lines) {
        const points = pointsOf(run.records, line.phase, line.key, line.where);
        if (points.length === 0) continue;
        any = true;
        if (line.name) drawn.add(line.name);
        // The held-out loss is measured every N steps, not each: the legend says so.
        const every = line.key === 'heldout_loss' && points.length >= 2 ? ` (every ${points[1]!.x - points[0]!.x} steps)` : '';
        series.push({ runId: run.id, runIndex, label: `${run.label}${line.suffix}${every}`, role: line.role, points });
        if (def.zeroStd) regions.push(...zeroStdRegions(points, run.id));
      }
      if (any && def.phases && !isGrpoRun(run)) {
        // Only where this chart has the run's points around it (an accuracy chart measured at step 124 and 303 has no step 59).
        const xs = series.filter((s) => s.runId === run.id).flatMap((s) => s.points.map((p) => p.x));
        const lo = Math.min(...xs);
        const hi = Math.max(...xs);
        for (const b of phaseBoundaries(run.records, run.meta?.curriculum)) if (b.step >= lo && b.step <= hi) markers.push({ runId: run.id, runIndex, x: b.step, label: b.label });
      }
    });
    if (!series.some((s) => s.role === 'line' || s.role === 'dashed')) continue;
    // A run's flat-line warning (written into its metrics line) is said under the chart it explains.
    const warnings = def.zeroStd ? flatlineWarnings(runs, hidden) : [];
    const lossNotes = def.id === 'sft-loss' ? runs.filter((r) => !hidden.has(r.id)).map(heldoutLossNote).filter((x): x is string => x !== null) : [];
    const phaseNote = markers.length ? 'Dotted verticals: the recipe’s curriculum moved to its next phase there (the examples change, so the loss jumps).' : undefined;
    charts.push({
      id: def.id,
      title: titleOf(def, drawn),
      xLabel: AXIS_LABELS[def.axis],
      yLabel: def.yLabel,
      series,
      regions,
      markers,
      note: [def.note, phaseNote, ...lossNotes, ...warnings].filter((x): x is string => !!x).join('\n') || null,
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

/**
 * An axis tick in few significant digits: 0.00003 is "3e-5", not "3.000000E-5"; 0.25 is
 * "0.25"; 1200 is "1200". `step` is the distance between the axis's ticks (the digits a
 * reader needs to tell two ticks apart).
 */
export function formatTick(value: number, step: number): string {
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return '0';
  const abs = Math.abs(value);
  const span = Math.abs(step) > 0 && Number.isFinite(step) ? Math.abs(step) : abs;
  if (abs >= 1e5 || abs < 1e-3) {
    // Scientific with the digits the tick spacing needs (at most 3 significant).
    const digits = Math.min(2, Math.max(0, Math.floor(Math.log10(abs)) - Math.floor(Math.log10(span))));
    const [m, e] = value.toExponential(digits).split('e');
    return `${trimZeros(m!)}e${Number(e)}`;
  }
  const decimals = Math.min(6, Math.max(0, -Math.floor(Math.log10(span) + 1e-9)));
  return trimZeros(value.toFixed(decimals));
}

function trimZeros(s: string): string {
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
}

/**
 * A run's chip: its last step and what the number counts, with a tooltip saying it in full
 * ("412 SFT steps, 6 evaluations; 418 lines read from metrics.jsonl").
 */
export function chipText(run: Pick<RunInput, 'records' | 'meta'>): { count: string; title: string } {
  const last = (phase: string) => run.records.filter((r) => r.phase === phase).at(-1)?.step;
  const grpo = last('grpo');
  const sft = last('sft');
  const evals = run.records.filter((r) => r.phase === 'eval').length;
  const parts: string[] = [];
  if (sft !== undefined) parts.push(`${sft} SFT step${sft === 1 ? '' : 's'}`);
  if (grpo !== undefined) parts.push(`${grpo} GRPO step${grpo === 1 ? '' : 's'}`);
  if (evals) parts.push(`${evals} evaluation${evals === 1 ? '' : 's'}`);
  const count = grpo !== undefined ? `GRPO step ${grpo}` : sft !== undefined ? `step ${sft}` : 'no steps yet';
  const recipe = run.meta?.recipe ? `; recipe ${run.meta.recipe}` : '';
  const title = `${parts.length ? parts.join(', ') : 'no metrics yet'}: ${run.records.length} record${run.records.length === 1 ? '' : 's'} read from metrics.jsonl${recipe}`;
  return { count, title };
}
