// Compare Runs (issue 35): the runs of a workspace as one results table — kind, recipe,
// steps, minutes, the figure per split (held-out, the fresh splits when evaluated) and
// held-out per task shape — and two runs' evaluations of one split side by side (the tasks
// one solves and the other does not). Built from what the Runs view reads (runFolders.ts
// readRun: config.json, metrics.jsonl, eval/SPLIT.json) and the inspector's parser of eval
// rows (core/transcript/trajectories.ts parseSource); no reader of its own. No vscode.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CompareFigure, CompareRow, CompareTable, TaskDiff, TaskDiffRow, TaskSide } from '../core/protocol/panels';
import { parseSource, type ParsedRow } from '../core/transcript/trajectories';
import { TASK_KINDS } from '../core/types';
import type { RunInfo } from './runFolders';

const SPLIT_ORDER = ['heldout', 'dev', 'dev-entities', 'fresh-values', 'fresh-entities', 'fresh-differences', 'train'];
const SHAPE_ORDER: readonly string[] = TASK_KINDS;

const byOrder = (order: readonly string[]) => (a: string, b: string): number => {
  const ia = order.indexOf(a);
  const ib = order.indexOf(b);
  return (ia < 0 ? order.length : ia) - (ib < 0 ? order.length : ib) || a.localeCompare(b);
};

/** One run's row: its evaluations, and held-out from its final training point when no evaluation measured it. */
export function compareRow(r: RunInfo): CompareRow {
  const figures: CompareFigure[] = r.evals
    .filter((e) => e.accuracy !== null)
    .map((e) => ({
      split: e.split,
      accuracy: e.accuracy!,
      n: e.n,
      of: e.of ?? null,
      step: e.step ?? null,
      source: 'evaluate' as const,
      byKind: e.byKind ?? {},
    }));
  const held = r.heldoutFigure;
  if (!figures.some((f) => f.split === 'heldout') && held) {
    figures.push({ split: 'heldout', accuracy: held.accuracy, n: held.n, of: held.of ?? null, step: held.step ?? null, source: held.source, byKind: held.byKind ?? {} });
  }
  figures.sort((a, b) => byOrder(SPLIT_ORDER)(a.split, b.split));
  // A GRPO run beside its SFT start, per split measured on both (runFolders.ts rlComparison).
  for (const s of r.rl?.splits ?? []) {
    const f = figures.find((x) => x.split === s.split);
    if (f) f.start = s.start;
  }
  return {
    dir: r.dir,
    name: r.name,
    kind: r.kind,
    recipe: r.recipe ?? null,
    status: r.status,
    steps: r.step,
    minutes: r.minutes ?? null,
    from: r.rl ? path.basename(r.rl.from) : null,
    figures,
    rowSplits: r.evals.filter((e) => e.rowsFile !== null).map((e) => e.split),
  };
}

/** The table of `runs` (in the order given): one row each, the splits and shapes any of them has. */
export function compareTable(runs: readonly RunInfo[]): CompareTable {
  const rows = runs.map(compareRow);
  const splits = [...new Set(rows.flatMap((r) => r.figures.map((f) => f.split)))].sort(byOrder(SPLIT_ORDER));
  const shapes = [...new Set(rows.flatMap((r) => r.figures.filter((f) => f.split === 'heldout').flatMap((f) => Object.keys(f.byKind))))].sort(byOrder(SHAPE_ORDER));
  return { rows, splits, shapes };
}

const sideOf = (r: ParsedRow | undefined): TaskSide =>
  r ? { answer: r.summary.answer, solved: r.summary.solved, failure: r.summary.failure } : { answer: null, solved: null, failure: null };

/** A task's identity across two runs' rows of one split: its question and gold (a fresh split's worlds can ask one question twice). */
const taskKey = (r: ParsedRow): string => `${r.summary.question}\u0000${r.summary.gold ?? ''}`;

/**
 * Two runs' rows of one split side by side: the tasks A solves and B does not, and the
 * reverse, with both answers and B's failure; counts of tasks both or neither solve, and of
 * tasks only one of them evaluated (a limited evaluation).
 */
export function taskDiff(split: string, a: { name: string; rows: readonly ParsedRow[] }, b: { name: string; rows: readonly ParsedRow[] }): TaskDiff {
  const bRows = new Map<string, ParsedRow>();
  for (const r of b.rows) bRows.set(taskKey(r), r);
  const onlyA: TaskDiffRow[] = [];
  const onlyB: TaskDiffRow[] = [];
  let both = 0;
  let neither = 0;
  let matched = 0;
  const seen = new Set<string>();
  for (const ra of a.rows) {
    const key = taskKey(ra);
    const rb = bRows.get(key);
    if (!rb || seen.has(key)) continue;
    seen.add(key);
    matched++;
    const sa = ra.summary.solved === true;
    const sb = rb.summary.solved === true;
    const row: TaskDiffRow = { question: ra.summary.question, gold: ra.summary.gold, kind: ra.summary.kind, a: sideOf(ra), b: sideOf(rb) };
    if (sa && sb) both++;
    else if (!sa && !sb) neither++;
    else (sa ? onlyA : onlyB).push(row);
  }
  const unmatched = a.rows.length + b.rows.length - 2 * matched;
  return { split, a: a.name, b: b.name, onlyA, onlyB, both, neither, unmatched: Math.max(0, unmatched) };
}

/** A run's eval rows of one split (eval/SPLIT.jsonl), parsed by the inspector's parser; [] when it has none. */
export function readEvalRows(rowsFile: string | null): ParsedRow[] {
  if (rowsFile === null) return [];
  let text: string;
  try {
    text = fs.readFileSync(rowsFile, 'utf8');
  } catch {
    return [];
  }
  return parseSource(text, false).rows;
}
