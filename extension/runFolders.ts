// What lies in a workspace's runs folder, read from the files (docs/architecture.md "The run folder"):
// world folders (corpus.jsonl + task splits, and the *.traces.jsonl distilled into them) and
// run folders (config.json, metrics.jsonl, checkpoints/, eval/). The Runs view and the
// pickers of Train, Evaluate and Resume read it. Every reader tolerates a run being written
// (a torn last metrics line, a missing file) and never throws for one bad folder. No vscode.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseMetricsText } from '../core/protocol/metrics';
import { type Figure, figureShort, figureTooltip, heldoutFigures } from '../core/figures';
import type { KindFigure } from '../core/protocol/worker';
import { CHECKPOINTS_DIR, CONFIG_FILE, CORPUS_FILE, DATA_DIR, EVAL_DIR, evalRowsFile, LATEST_POINTER, METRICS_FILE, SOURCE_FILE, TRACES_SUFFIX } from '../core/protocol/folders';
import { isObj } from '../core/protocol/isObj';

export type RunStatus = 'live' | 'finished' | 'cancelled' | 'failed' | 'stopped' | 'new';

export interface DatasetInfo {
  file: string;
  rows: number;
}

export interface WorldInfo {
  dir: string;
  name: string;
  datasets: DatasetInfo[];
}

export interface EvalInfo {
  split: string;
  file: string;
  rowsFile: string | null;
  accuracy: number | null;
  n: number | null;
  /** Tasks the split holds, and the checkpoint step evaluated (evaluations since issue 35 record both). */
  of?: number;
  step?: number;
  /** Solved of evaluated per task shape (the summary's by_kind). */
  byKind?: Record<string, KindFigure>;
}

export interface RunInfo {
  dir: string;
  name: string;
  kind: string;
  preset: string | null;
  /** The Hugging Face model folder the run started from (config.json's base), with its LoRA as "r 8, alpha 16"; absent for a preset's run. */
  base?: { dir: string; lora: string | null } | null;
  backend: string | null;
  /** Steps trained so far (last metrics record of the run's own phase). */
  step: number | null;
  /** The budget as the run recorded it. */
  budget: { steps?: number; minutes?: number } | null;
  /** Minutes the budget counted so far (the last record's time of the run's own phase), null before its first step. */
  minutes?: number | null;
  /** The SFT recipe's name (config.json recipe.name); null for a GRPO run or a run that records none. */
  recipe?: string | null;
  /** The latest held-out exact match (an eval record of metrics.jsonl, or eval/heldout.json). */
  heldout: number | null;
  /**
   * The held-out figures that name what they are (a training job's final point, each
   * Evaluate), oldest first; the Runs view shows the last and says which it is.
   */
  heldoutFigures?: Figure[];
  /** `heldout` named: null while the last held-out point is one in the middle of training. */
  heldoutFigure?: Figure | null;
  checkpoints: string[];
  evals: EvalInfo[];
  status: RunStatus;
  /** The traces file an editor-started SFT run was prepared from (data/source.json). */
  trainedOn: string | null;
  /** An RL run (GRPO or RFT): its SFT start and each split's figure before and after. */
  rl?: RlComparison;
}

/** An RL run beside the SFT run it started from. */
export interface RlComparison {
  from: string;
  objective: string;
  pool: string;
  /** Per split measured on both: the start's figure (its Evaluate, or the RL run's step-0 point) and the run's. */
  splits: { split: string; start: number; after: number }[];
}

/**
 * The figures an RL run shares with its SFT start, per split: the start's from its own
 * evaluations (eval/SPLIT.json) or the RL run's step-0 held-out point, the run's from its
 * latest evaluation or its final point. Splits measured on one side only are left out.
 */
export function rlComparison(config: Record<string, unknown>, lines: readonly Record<string, unknown>[], evals: readonly EvalInfo[], startEvals: readonly EvalInfo[]): RlComparison | undefined {
  const from = config['from'] as { run?: unknown } | undefined;
  if (config['kind'] !== 'grpo' || typeof from?.run !== 'string') return undefined;
  const grpo = (config['grpo'] ?? {}) as Record<string, unknown>;
  const held = lines.filter((l) => l['phase'] === 'eval' && l['split'] === 'heldout' && typeof l['accuracy'] === 'number');
  const before = held.find((l) => l['step'] === 0)?.['accuracy'] as number | undefined;
  const last = held.filter((l) => l['step'] !== 0).at(-1)?.['accuracy'] as number | undefined;
  const splits: RlComparison['splits'] = [];
  const names = [...new Set(['heldout', ...evals.map((e) => e.split), ...startEvals.map((e) => e.split)])];
  names.sort((a, b) => (a === 'heldout' ? -1 : b === 'heldout' ? 1 : a.localeCompare(b)));
  for (const split of names) {
    const start = startEvals.find((e) => e.split === split)?.accuracy ?? (split === 'heldout' ? before : undefined);
    const after = evals.find((e) => e.split === split)?.accuracy ?? (split === 'heldout' ? last : undefined);
    if (typeof start === 'number' && typeof after === 'number') splits.push({ split, start, after });
  }
  return { from: from.run, objective: typeof grpo['objective'] === 'string' ? grpo['objective'] : 'grpo', pool: typeof grpo['pool'] === 'string' ? grpo['pool'] : 'train', splits };
}

/** The evaluations (eval/SPLIT.json) a run folder holds, in split order. */
function evalsOf(dir: string): EvalInfo[] {
  const evals: EvalInfo[] = [];
  try {
    for (const n of fs.readdirSync(path.join(dir, EVAL_DIR)).filter((f) => f.endsWith('.json')).sort()) {
      const s = readJson(path.join(dir, EVAL_DIR, n));
      const split = n.slice(0, -'.json'.length);
      const rowsFile = path.join(dir, EVAL_DIR, evalRowsFile(split));
      evals.push({
        split,
        file: path.join(dir, EVAL_DIR, n),
        rowsFile: fs.existsSync(rowsFile) ? rowsFile : null,
        accuracy: typeof s?.['accuracy'] === 'number' ? s['accuracy'] : null,
        n: typeof s?.['n'] === 'number' ? s['n'] : null,
        ...(typeof s?.['of'] === 'number' ? { of: s['of'] } : {}),
        ...(typeof s?.['step'] === 'number' ? { step: s['step'] } : {}),
        ...(isKindFigures(s?.['by_kind']) ? { byKind: s['by_kind'] } : {}),
      });
    }
  } catch {
    /* no evaluations yet */
  }
  return evals;
}

const isKindFigures = (v: unknown): v is Record<string, KindFigure> =>
  typeof v === 'object' &&
  v !== null &&
  !Array.isArray(v) &&
  Object.values(v).every((f) => typeof f === 'object' && f !== null && typeof (f as KindFigure).n === 'number' && typeof (f as KindFigure).accuracy === 'number');

/** A JSON object file, or null when it is missing, unreadable or not an object. */
export const readJson = (file: string): Record<string, unknown> | null => {
  try {
    const v = JSON.parse(fs.readFileSync(file, 'utf8')) as unknown;
    return isObj(v) ? v : null;
  } catch {
    return null;
  }
};

const dirs = (dir: string): string[] => {
  try {
    return fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return [];
  }
};

/** Non-blank lines of a file (a trajectory count), or 0 when it cannot be read. */
export function countRows(file: string): number {
  try {
    let n = 0;
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) if (line.trim() !== '') n++;
    return n;
  } catch {
    return 0;
  }
}

export const isWorldFolder = (dir: string): boolean => fs.existsSync(path.join(dir, CORPUS_FILE));
export const isRunFolder = (dir: string): boolean => fs.existsSync(path.join(dir, CONFIG_FILE));

export function listWorlds(runsDir: string): WorldInfo[] {
  return dirs(runsDir)
    .map((name) => path.join(runsDir, name))
    .filter((d) => isWorldFolder(d) && !isRunFolder(d))
    .sort()
    .reverse()
    .map((dir) => ({ dir, name: path.basename(dir), datasets: datasetsIn(dir) }));
}

export function datasetsIn(dir: string): DatasetInfo[] {
  let names: string[] = [];
  try {
    names = fs.readdirSync(dir).filter((n) => n.endsWith(TRACES_SUFFIX));
  } catch {
    /* gone */
  }
  return names.sort().map((n) => ({ file: path.join(dir, n), rows: countRows(path.join(dir, n)) }));
}

/** A dataset row's hover: what the file holds and what to do with it (the tour's item 10: the hover was only its path). */
export function datasetTooltipLines(d: DatasetInfo, modified: Date | null): string[] {
  const name = path.basename(d.file);
  const heldout = name.startsWith('heldout');
  return [
    `${name}: ${d.rows} ${d.rows === 1 ? 'trajectory' : 'trajectories'}${heldout ? ' of the held-out tasks (never trained on)' : ' distilled by the teacher from the training tasks'}`,
    ...(modified ? [`written ${modified.toISOString().replace('T', ' ').slice(0, 16)} UTC`] : []),
    heldout ? 'Open it to read the teacher on the tasks the student is judged on.' : 'Click to open it; Inspect shows each trajectory as step cards; "Train on These Trajectories" (its play button) trains a student on it.',
    d.file,
  ];
}

/** Checkpoint names, oldest first ("step-12", ...; "latest" is a pointer, left out). */
export function checkpointsOf(runDir: string): string[] {
  return dirs(path.join(runDir, CHECKPOINTS_DIR))
    .filter((n) => /^step-\d+$/.test(n))
    .sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)));
}

export const hasCheckpoint = (runDir: string): boolean =>
  fs.existsSync(path.join(runDir, CHECKPOINTS_DIR, LATEST_POINTER)) || checkpointsOf(runDir).length > 0;

/**
 * One run folder. `outcome` is how a job the editor ran on it ended (remembered by the
 * extension); without it the status comes from the files: a final held-out evaluation or a
 * step budget reached is finished, a checkpoint without either is stopped.
 */
export function readRun(dir: string, outcome?: RunStatus, live = false): RunInfo {
  const config = readJson(path.join(dir, CONFIG_FILE)) ?? {};
  // A job still preparing its data has no config.json yet: its folder's name says its kind (sft-…, grpo-…).
  const kind = typeof config['kind'] === 'string' ? config['kind'] : (/^(sft|grpo)-/.exec(path.basename(dir))?.[1] ?? 'run');
  const backendRec = config['backend'];
  const backend =
    typeof backendRec === 'object' && backendRec !== null && typeof (backendRec as Record<string, unknown>)['used'] === 'string'
      ? ((backendRec as Record<string, unknown>)['used'] as string)
      : null;
  const budgetRec = config['budget'];
  const budget = typeof budgetRec === 'object' && budgetRec !== null ? (budgetRec as { steps?: number; minutes?: number }) : null;
  let step: number | null = null;
  let stepTime: number | null = null;
  let heldout: number | null = null;
  let finalEval = false;
  let elapsed = 0;
  let figures: Figure[] = [];
  let current: Figure | null = null;
  let metricLines: Record<string, unknown>[] = [];
  try {
    const { lines } = parseMetricsText(fs.readFileSync(path.join(dir, METRICS_FILE), 'utf8'));
    metricLines = lines as Record<string, unknown>[];
    figures = heldoutFigures(lines as Record<string, unknown>[]);
    for (const l of lines) {
      const rec = l as Record<string, unknown>;
      if (rec['phase'] === kind && typeof rec['step'] === 'number') {
        step = rec['step'];
        if (typeof rec['time'] === 'number') elapsed = stepTime = rec['time'];
      }
      if (rec['phase'] === 'eval' && rec['split'] === 'heldout' && typeof rec['accuracy'] === 'number') {
        heldout = rec['accuracy'];
        current = heldoutFigures([rec])[0] ?? null;
        if (rec['final'] === true) finalEval = true;
      }
    }
  } catch {
    /* no metrics yet */
  }
  const evals = evalsOf(dir);
  const heldEval = evals.find((e) => e.split === 'heldout');
  if (heldout === null && heldEval?.accuracy !== undefined && heldEval.accuracy !== null) {
    heldout = heldEval.accuracy;
    if (heldEval.n !== null) {
      current = { split: 'heldout', accuracy: heldEval.accuracy, n: heldEval.n, source: 'evaluate', ...(heldEval.of !== undefined ? { of: heldEval.of } : {}), ...(heldEval.step !== undefined ? { step: heldEval.step } : {}) };
    }
  }
  const checkpoints = checkpointsOf(dir);
  const budgetDone =
    budget !== null &&
    ((budget.steps !== undefined && step !== null && step >= budget.steps) ||
      (budget.minutes !== undefined && elapsed >= budget.minutes * 60 - 1));
  let status: RunStatus;
  if (live) status = 'live';
  else if (outcome && outcome !== 'live') status = outcome;
  else if (finalEval || budgetDone) status = 'finished';
  else status = checkpoints.length > 0 || hasCheckpoint(dir) ? 'stopped' : 'new';
  const source = readJson(path.join(dir, DATA_DIR, SOURCE_FILE));
  return {
    dir,
    name: path.basename(dir),
    kind,
    preset: typeof config['preset'] === 'string' ? config['preset'] : null,
    base: baseOf(config),
    backend,
    step,
    budget,
    minutes: stepTime !== null ? stepTime / 60 : null,
    recipe: typeof config['recipe'] === 'object' && config['recipe'] !== null && typeof (config['recipe'] as Record<string, unknown>)['name'] === 'string' ? ((config['recipe'] as Record<string, unknown>)['name'] as string) : typeof config['recipe'] === 'string' ? config['recipe'] : null,
    heldout,
    heldoutFigures: figures,
    heldoutFigure: current,
    checkpoints,
    evals,
    status,
    trainedOn: typeof source?.['traces'] === 'string' ? source['traces'] : null,
    ...(kind === 'grpo' ? withRl(config, metricLines, evals) : {}),
  };
}

function withRl(config: Record<string, unknown>, lines: readonly Record<string, unknown>[], evals: readonly EvalInfo[]): { rl?: RlComparison } {
  const from = (config['from'] as { run?: unknown } | undefined)?.run;
  const rl = rlComparison(config, lines, evals, typeof from === 'string' ? evalsOf(from) : []);
  return rl ? { rl } : {};
}

/** "GRPO on pool fresh-entities from s0: held-out 88.0% → 90.0% (+2.0) · fresh-entities 58.2% → 63.0% (+4.8)" */
export function rlFigureLine(rl: RlComparison): string {
  const pts = (x: number) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)}`;
  const label = (s: string) => (s === 'heldout' ? 'held-out' : s);
  const figures = rl.splits.map((s) => `${label(s.split)} ${percent(s.start)} → ${percent(s.after)} (${pts(s.after - s.start)})`).join(' · ');
  return `${rl.objective === 'rft' ? 'RFT' : 'GRPO'} on pool ${rl.pool} from ${path.basename(rl.from)}: ${figures || 'no split measured on both yet'}`;
}

export function listRunFolders(runsDir: string): string[] {
  return dirs(runsDir)
    .map((name) => path.join(runsDir, name))
    .filter(isRunFolder)
    .sort()
    .reverse();
}

/**
 * The run folders of `runsDir` and the live jobs' folders there that have no config.json yet
 * (a job prepares its data before it writes one: half a minute of "No run yet" while training).
 */
export function listRunFoldersWithLive(runsDir: string, live: ReadonlySet<string>): string[] {
  const runs = listRunFolders(runsDir);
  const root = path.resolve(runsDir);
  const starting = [...live].filter((d) => path.dirname(path.resolve(d)) === root && !runs.includes(d) && fs.existsSync(d));
  return [...starting, ...runs].sort().reverse();
}

/** A run that a Resume can continue: it has a checkpoint and has not reached its budget. */
export const isResumable = (r: RunInfo): boolean =>
  (r.kind === 'sft' || r.kind === 'grpo') && r.status !== 'finished' && r.status !== 'live' && r.checkpoints.length > 0;

export const percent = (x: number): string => `${(100 * x).toFixed(1)}%`;

/** The reading splits beside held-out: a student that remembers instead of reading shows it there. */
const READING_SPLITS = ['fresh-values', 'fresh-entities', 'fresh-differences'] as const;

/** A run's held-out figure, named ("held-out 32.7% of 55 (Evaluate, step-1484)"); '' when it has none. */
export function heldoutShort(r: Pick<RunInfo, 'heldout' | 'heldoutFigure'>): string {
  if (r.heldoutFigure) return figureShort(r.heldoutFigure);
  return r.heldout !== null ? `held-out ${percent(r.heldout)}` : '';
}

/** config.json's `base` (a run started from a Hugging Face folder) and its `lora`, or null. */
function baseOf(config: Record<string, unknown>): RunInfo['base'] {
  const base = config['base'];
  if (typeof base !== 'object' || base === null || typeof (base as Record<string, unknown>)['dir'] !== 'string') return null;
  const lora = config['lora'] as Record<string, unknown> | undefined;
  const loraText = typeof lora === 'object' && lora !== null && typeof lora['r'] === 'number' ? `r ${lora['r']}, alpha ${String(lora['alpha'])}` : null;
  return { dir: (base as Record<string, unknown>)['dir'] as string, lora: loraText };
}

/** The model a run trained: its preset, or "SmolLM2-135M (LoRA)" for a Hugging Face folder (its preset then means nothing). */
export function runModelLabel(r: Pick<RunInfo, 'preset' | 'base'>): string | null {
  if (r.base) return `${path.basename(r.base.dir)}${r.base.lora ? ' (LoRA)' : ''}`;
  return r.preset;
}

/** "sft · tiny · wasm · finished · held-out 34.0% · fresh-values 30.2% · fresh-entities 8.0%" */
export function describeRun(r: RunInfo): string {
  const parts = [r.kind, runModelLabel(r), r.backend, r.status === 'stopped' ? `stopped at step ${r.step ?? 0}` : r.status];
  // The figure says which evaluation made it (one replacing another is never silent).
  const held = heldoutShort(r);
  if (held) parts.push(held);
  for (const split of READING_SPLITS) {
    const e = r.evals.find((x) => x.split === split);
    if (e?.accuracy !== null && e?.accuracy !== undefined) parts.push(`${split} ${percent(e.accuracy)}`);
  }
  // An RL run's lift over its SFT start, per split measured on both (the tooltip has the figures).
  if (r.rl?.splits.length) parts.push(`vs start ${r.rl.splits.map((x) => `${x.split === 'heldout' ? 'held-out' : x.split} ${x.after >= x.start ? '+' : ''}${(100 * (x.after - x.start)).toFixed(1)}`).join(', ')}`);
  return parts.filter((p): p is string => !!p).join(' · ');
}

/** The tooltip's figures: each held-out figure named in full (which evaluation, of how many tasks, which step, per shape). */
export function runFigureLines(r: RunInfo): string[] {
  const rl = r.rl ? [rlFigureLine(r.rl)] : [];
  const lines = figureTooltip(r.heldoutFigures ?? []);
  if (lines.length > 0) return [...rl, ...lines];
  return [...rl, r.heldout !== null ? `held-out exact match ${percent(r.heldout)}` : 'no held-out figure yet'];
}

/** An evaluation's line: "32.7% of 55 tasks at step-1484", "35.0% on 20 of the 55 tasks at step-1484". */
export function evalDescription(e: EvalInfo): string {
  if (e.accuracy === null) return 'no figure';
  const count = e.of !== undefined && e.n !== null && e.of !== e.n ? `on ${e.n} of the ${e.of} tasks` : `of ${e.n ?? '?'} tasks`;
  return `${percent(e.accuracy)} ${count}${e.step !== undefined ? ` at step-${e.step}` : ''}`;
}
