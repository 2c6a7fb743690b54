// Compare Runs' table as text, without a browser (issue 35): one row per run — name, kind,
// recipe (a GRPO run: "GRPO from <its SFT start>"), steps, minutes, the figure per split
// ("36.0% (18/50)") and held-out per shape ("5/10") — and the pair a diff may use.
import type { CompareFigure, CompareRow, CompareTable } from '../../core/protocol/panels';

export const splitName = (split: string): string => (split === 'heldout' ? 'held-out' : split);

/** "36.0% (18/50)", "35.0% (7/20 of 55)"; "—" when the run has none. */
export function figureCell(f: CompareFigure | undefined): string {
  if (!f) return '—';
  const pct = `${(100 * f.accuracy).toFixed(1)}%`;
  // A GRPO run's change from its SFT start, in points.
  const d = f.start !== undefined ? 100 * (f.accuracy - f.start) : null;
  const delta = d !== null ? ` ${d >= 0 ? '+' : '−'}${Math.abs(d).toFixed(1)}` : '';
  if (f.n === null) return `${pct}${delta}`;
  return `${pct} (${Math.round(f.accuracy * f.n)}/${f.n}${f.of !== null && f.of !== f.n ? ` of ${f.of}` : ''})${delta}`;
}

/** A figure's tooltip: which evaluation made it, at which checkpoint. */
export function figureTitle(f: CompareFigure | undefined): string {
  if (!f) return 'not evaluated on this split';
  const start = f.start !== undefined ? `; its SFT start: ${(100 * f.start).toFixed(1)}% (the change in points after the figure)` : '';
  return `${f.source === 'evaluate' ? 'Evaluate' : 'end of training'}${f.step !== null ? `, step-${f.step}` : ''}${start}`;
}

/** "5/10": a shape's solved of evaluated; "—" when the figure has no such shape. */
export function shapeCell(f: CompareFigure | undefined, shape: string): string {
  const k = f?.byKind[shape];
  return k ? `${Math.round(k.accuracy * k.n)}/${k.n}` : '—';
}

export interface TableText {
  head: string[];
  rows: { dir: string; cells: string[]; titles: string[] }[];
}

export function tableText(t: CompareTable): TableText {
  const head = ['run', 'kind', 'recipe', 'steps', 'minutes', ...t.splits.map(splitName), ...t.shapes.map((s) => `held-out ${s}`)];
  const rows = t.rows.map((r: CompareRow) => {
    const fig = (split: string) => r.figures.find((f) => f.split === split);
    const held = fig('heldout');
    const recipe = r.kind === 'grpo' ? (r.from ? `from ${r.from}` : '—') : (r.recipe ?? '—');
    const cells = [
      r.name,
      r.kind,
      recipe,
      r.steps === null ? '—' : String(r.steps),
      r.minutes === null ? '—' : r.minutes.toFixed(1),
      ...t.splits.map((s) => figureCell(fig(s))),
      ...t.shapes.map((s) => shapeCell(held, s)),
    ];
    const titles = [
      `${r.dir} (${r.status})`,
      '',
      '',
      'the last step trained',
      'minutes the budget counted (optimiser time; evaluations apart)',
      ...t.splits.map((s) => figureTitle(fig(s))),
      ...t.shapes.map(() => figureTitle(held)),
    ];
    return { dir: r.dir, cells, titles };
  });
  return { head, rows };
}

/** The splits two runs both have per-task rows of (what a side-by-side can compare). */
export function commonRowSplits(t: CompareTable, a: string, b: string): string[] {
  const ra = t.rows.find((r) => r.dir === a)?.rowSplits ?? [];
  const rb = t.rows.find((r) => r.dir === b)?.rowSplits ?? [];
  return ra.filter((s) => rb.includes(s));
}
