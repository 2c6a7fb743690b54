// metrics.jsonl lines (docs/architecture.md, Contracts: metrics.jsonl), typed once with their
// validators, for every reader that cannot import store/runStore.ts (Node): the curves
// panel's extension side (which tails the file) and its webview (which builds series).
// The semantics are runStore's: a last line without its newline that does not parse is
// still being written and is ignored; readers keep the last record per (phase, step).
// Types, validators and pure parsing only: no Node or DOM imports.
import { isObj } from './isObj';

export type Phase = 'sft' | 'grpo' | 'eval';
export const PHASES: readonly Phase[] = ['sft', 'grpo', 'eval'];

export interface MetricRecord {
  phase: Phase;
  step: number;
  /** Seconds since the run started (across resumes). */
  time: number;
  [key: string]: unknown;
}
export interface ResumeEvent {
  event: 'resume';
  step: number;
  [key: string]: unknown;
}
export type MetricsLine = MetricRecord | ResumeEvent;

const isStep = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

export function isMetricRecord(v: unknown): v is MetricRecord {
  return (
    isObj(v) &&
    PHASES.includes(v['phase'] as Phase) &&
    isStep(v['step']) &&
    typeof v['time'] === 'number' &&
    Number.isFinite(v['time'])
  );
}

export function isResumeEvent(v: unknown): v is ResumeEvent {
  return isObj(v) && v['event'] === 'resume' && isStep(v['step']);
}

/** One line of metrics.jsonl: a record, a resume event, or null (blank, not JSON, another shape). */
export function parseMetricsLine(line: string): MetricsLine | null {
  if (line.trim() === '') return null;
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return null;
  }
  return isMetricRecord(v) || isResumeEvent(v) ? v : null;
}

/**
 * Parses a whole metrics.jsonl text. `badLines` (1-based) are lines that are neither a
 * record nor a resume event, except a torn last line (no newline after it yet).
 */
export function parseMetricsText(text: string): { lines: MetricsLine[]; badLines: number[] } {
  const lines: MetricsLine[] = [];
  const badLines: number[] = [];
  const raw = text.split('\n');
  raw.forEach((l, i) => {
    if (l.trim() === '') return;
    const parsed = parseMetricsLine(l);
    if (parsed) lines.push(parsed);
    else if (i !== raw.length - 1) badLines.push(i + 1);
  });
  return { lines, badLines };
}

/**
 * The identity of a record for a reader that merges lines as they arrive: (phase, step), and
 * for accuracy points the split too (a held-out and a train point at the same step are two
 * measurements, not a rewrite).
 */
export function recordKey(r: MetricRecord): string {
  return r.phase === 'eval' && typeof r['split'] === 'string' ? `${r.phase}:${r.step}:${r['split']}` : `${r.phase}:${r.step}`;
}

/** The last record per (phase, step), in step order per phase (what a resumed run reads as). */
export function latestRecords(lines: readonly MetricsLine[]): MetricRecord[] {
  const byKey = new Map<string, MetricRecord>();
  for (const l of lines) {
    if (!isMetricRecord(l)) continue;
    const key = `${l.phase}:${l.step}`;
    byKey.delete(key);
    byKey.set(key, l);
  }
  return [...byKey.values()].sort((a, b) => (a.phase === b.phase ? a.step - b.step : a.phase < b.phase ? -1 : 1));
}

/**
 * Splits a stream of appended text into complete lines; the unfinished tail is kept until
 * its newline arrives (a tailing reader never parses half a record).
 */
export class LineSplitter {
  private pending = '';

  push(chunk: string): string[] {
    const text = this.pending + chunk;
    const cut = text.lastIndexOf('\n');
    if (cut < 0) {
      this.pending = text;
      return [];
    }
    this.pending = text.slice(cut + 1);
    return text.slice(0, cut).split('\n');
  }

  /** What arrived after the last newline (a line still being written). */
  get partial(): string {
    return this.pending;
  }

  reset(): void {
    this.pending = '';
  }
}
