// What lies in a workspace's runs folder, read from the files (docs/architecture.md "The run folder"):
// world folders (corpus.jsonl + task splits, and the *.traces.jsonl distilled into them) and
// run folders (config.json, metrics.jsonl, checkpoints/, eval/). The Runs view and the
// pickers of Train, Evaluate and Resume read it. Every reader tolerates a run being written
// (a torn last metrics line, a missing file) and never throws for one bad folder. No vscode.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseMetricsText } from '../core/protocol/metrics';

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
}

export interface RunInfo {
  dir: string;
  name: string;
  kind: string;
  preset: string | null;
  backend: string | null;
  /** Steps trained so far (last metrics record of the run's own phase). */
  step: number | null;
  /** The budget as the run recorded it. */
  budget: { steps?: number; minutes?: number } | null;
  /** The latest held-out exact match (an eval record of metrics.jsonl, or eval/heldout.json). */
  heldout: number | null;
  checkpoints: string[];
  evals: EvalInfo[];
  status: RunStatus;
  /** The traces file an editor-started SFT run was prepared from (data/source.json). */
  trainedOn: string | null;
}

const readJson = (file: string): Record<string, unknown> | null => {
  try {
    const v = JSON.parse(fs.readFileSync(file, 'utf8')) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
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

export const isWorldFolder = (dir: string): boolean => fs.existsSync(path.join(dir, 'corpus.jsonl'));
export const isRunFolder = (dir: string): boolean => fs.existsSync(path.join(dir, 'config.json'));

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
    names = fs.readdirSync(dir).filter((n) => n.endsWith('.traces.jsonl'));
  } catch {
    /* gone */
  }
  return names.sort().map((n) => ({ file: path.join(dir, n), rows: countRows(path.join(dir, n)) }));
}

/** Checkpoint names, oldest first ("step-12", ...; "latest" is a pointer, left out). */
export function checkpointsOf(runDir: string): string[] {
  return dirs(path.join(runDir, 'checkpoints'))
    .filter((n) => /^step-\d+$/.test(n))
    .sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)));
}

export const hasCheckpoint = (runDir: string): boolean =>
  fs.existsSync(path.join(runDir, 'checkpoints', 'latest')) || checkpointsOf(runDir).length > 0;

/**
 * One run folder. `outcome` is how a job the editor ran on it ended (remembered by the
 * extension); without it the status comes from the files: a final held-out evaluation or a
 * step budget reached is finished, a checkpoint without either is stopped.
 */
export function readRun(dir: string, outcome?: RunStatus, live = false): RunInfo {
  const config = readJson(path.join(dir, 'config.json')) ?? {};
  const kind = typeof config['kind'] === 'string' ? config['kind'] : 'run';
  const backendRec = config['backend'];
  const backend =
    typeof backendRec === 'object' && backendRec !== null && typeof (backendRec as Record<string, unknown>)['used'] === 'string'
      ? ((backendRec as Record<string, unknown>)['used'] as string)
      : null;
  const budgetRec = config['budget'];
  const budget = typeof budgetRec === 'object' && budgetRec !== null ? (budgetRec as { steps?: number; minutes?: number }) : null;
  let step: number | null = null;
  let heldout: number | null = null;
  let finalEval = false;
  let elapsed = 0;
  try {
    const { lines } = parseMetricsText(fs.readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8'));
    for (const l of lines) {
      const rec = l as Record<string, unknown>;
      if (rec['phase'] === kind && typeof rec['step'] === 'number') {
        step = rec['step'];
        if (typeof rec['time'] === 'number') elapsed = rec['time'];
      }
      if (rec['phase'] === 'eval' && rec['split'] === 'heldout' && typeof rec['accuracy'] === 'number') {
        heldout = rec['accuracy'];
        if (rec['final'] === true) finalEval = true;
      }
    }
  } catch {
    /* no metrics yet */
  }
  const evals: EvalInfo[] = [];
  try {
    for (const n of fs.readdirSync(path.join(dir, 'eval')).filter((f) => f.endsWith('.json')).sort()) {
      const s = readJson(path.join(dir, 'eval', n));
      const split = n.slice(0, -'.json'.length);
      const rowsFile = path.join(dir, 'eval', `${split}.jsonl`);
      evals.push({
        split,
        file: path.join(dir, 'eval', n),
        rowsFile: fs.existsSync(rowsFile) ? rowsFile : null,
        accuracy: typeof s?.['accuracy'] === 'number' ? s['accuracy'] : null,
        n: typeof s?.['n'] === 'number' ? s['n'] : null,
      });
    }
  } catch {
    /* no evaluations yet */
  }
  const heldEval = evals.find((e) => e.split === 'heldout');
  if (heldout === null && heldEval?.accuracy !== undefined) heldout = heldEval.accuracy;
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
  const source = readJson(path.join(dir, 'data', 'source.json'));
  return {
    dir,
    name: path.basename(dir),
    kind,
    preset: typeof config['preset'] === 'string' ? config['preset'] : null,
    backend,
    step,
    budget,
    heldout,
    checkpoints,
    evals,
    status,
    trainedOn: typeof source?.['traces'] === 'string' ? source['traces'] : null,
  };
}

export function listRunFolders(runsDir: string): string[] {
  return dirs(runsDir)
    .map((name) => path.join(runsDir, name))
    .filter(isRunFolder)
    .sort()
    .reverse();
}

/** A run that a Resume can continue: it has a checkpoint and has not reached its budget. */
export const isResumable = (r: RunInfo): boolean =>
  (r.kind === 'sft' || r.kind === 'grpo') && r.status !== 'finished' && r.status !== 'live' && r.checkpoints.length > 0;

export const percent = (x: number): string => `${(100 * x).toFixed(1)}%`;

/** The reading splits beside held-out: a student that remembers instead of reading shows it there. */
const READING_SPLITS = ['fresh-values', 'fresh-entities'] as const;

/** "sft · tiny · wasm · finished · held-out 34.0% · fresh-values 30.2% · fresh-entities 8.0%" */
export function describeRun(r: RunInfo): string {
  const parts = [r.kind, r.preset, r.backend, r.status === 'stopped' ? `stopped at step ${r.step ?? 0}` : r.status];
  if (r.heldout !== null) parts.push(`held-out ${percent(r.heldout)}`);
  for (const split of READING_SPLITS) {
    const e = r.evals.find((x) => x.split === split);
    if (e?.accuracy !== null && e?.accuracy !== undefined) parts.push(`${split} ${percent(e.accuracy)}`);
  }
  return parts.filter((p): p is string => !!p).join(' · ');
}
