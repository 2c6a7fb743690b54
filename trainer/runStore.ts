// The run folder (DESIGN.md, "The run folder"): one run = one folder, readable at any
// moment, even after a crash. metrics.jsonl gets one JSON object per line, each written
// with a single append; a reader tolerates a last line still being written; a writer
// never rewrites a line (a resume only cuts a torn last line and appends a marker).
import * as fs from 'node:fs';
import * as path from 'node:path';

export type Phase = 'sft' | 'grpo' | 'eval';
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

export const METRICS_FILE = 'metrics.jsonl';
export const CONFIG_FILE = 'config.json';

export class MetricsWriter {
  private fd: number;

  constructor(readonly file: string) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    this.fd = fs.openSync(file, 'a');
  }

  /** One line, one write(2) on an O_APPEND descriptor: readers never see half a record from us. */
  append(line: MetricsLine): void {
    fs.writeSync(this.fd, JSON.stringify(line) + '\n');
  }

  close(): void {
    if (this.fd >= 0) fs.closeSync(this.fd);
    this.fd = -1;
  }
}

/**
 * Prepares metrics.jsonl for a resumed run: cuts a torn last line (a crash mid-write) and
 * appends `{"event": "resume", "step": N}`.
 */
export function reopenMetricsForResume(file: string, step: number): MetricsWriter {
  if (fs.existsSync(file)) {
    const text = fs.readFileSync(file, 'utf8');
    if (text.length > 0 && !text.endsWith('\n')) {
      fs.truncateSync(file, Buffer.byteLength(text.slice(0, text.lastIndexOf('\n') + 1), 'utf8'));
    }
  }
  const w = new MetricsWriter(file);
  w.append({ event: 'resume', step });
  return w;
}

/** Parses metrics text; a last line without its newline that does not parse is ignored. */
export function parseMetrics(text: string): { lines: MetricsLine[]; badLines: number[] } {
  const lines: MetricsLine[] = [];
  const badLines: number[] = [];
  const raw = text.split('\n');
  raw.forEach((l, i) => {
    if (l.trim() === '') return;
    try {
      const v = JSON.parse(l) as unknown;
      if (typeof v === 'object' && v !== null && !Array.isArray(v)) lines.push(v as MetricsLine);
      else badLines.push(i + 1);
    } catch {
      // The last line may still be being written.
      if (i !== raw.length - 1) badLines.push(i + 1);
    }
  });
  return { lines, badLines };
}

/** The last record per (phase, step), in step order per phase (what a resumed run reads as). */
export function latestRecords(lines: readonly MetricsLine[]): MetricRecord[] {
  const byKey = new Map<string, MetricRecord>();
  for (const l of lines) {
    if (!('phase' in l) || typeof l.step !== 'number') continue;
    byKey.delete(`${l.phase}:${l.step}`);
    byKey.set(`${l.phase}:${l.step}`, l as MetricRecord);
  }
  return [...byKey.values()].sort((a, b) => (a.phase === b.phase ? a.step - b.step : a.phase < b.phase ? -1 : 1));
}

export function readMetricsFile(file: string): MetricRecord[] {
  if (!fs.existsSync(file)) return [];
  return latestRecords(parseMetrics(fs.readFileSync(file, 'utf8')).lines);
}
