// The run folder (docs/architecture.md, "The run folder"): one run = one folder, readable at any
// moment, even after a crash. metrics.jsonl gets one JSON object per line, each written
// with a single append; a reader tolerates a last line still being written; a writer
// never rewrites a line (a resume only cuts a torn last line and appends a marker).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { InputError, checkWritableTarget, ensureDir, errnoText, exists, readInputText } from './files';

// The line types and the tolerant parsing are shared with the panels (no Node there).
import { MetricRecord, MetricsLine, latestRecords, parseMetricsText } from '../core/protocol/metrics';
export type { MetricRecord, MetricsLine, Phase, ResumeEvent } from '../core/protocol/metrics';
export { latestRecords };
/** Parses metrics text; a last line without its newline that does not parse is ignored. */
export const parseMetrics = parseMetricsText;

export const METRICS_FILE = 'metrics.jsonl';
export const CONFIG_FILE = 'config.json';

export class MetricsWriter {
  private fd: number;

  constructor(readonly file: string) {
    // Never open a FIFO or a device for appending (the open would block, or write elsewhere).
    checkWritableTarget(file);
    ensureDir(path.dirname(file));
    try {
      this.fd = fs.openSync(file, 'a');
    } catch (err) {
      throw new InputError(`cannot write ${file}: ${errnoText(err)}`);
    }
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
  if (exists(file)) {
    checkWritableTarget(file);
    const text = readInputText(file, 'the metrics', 1024 * 1024 * 1024, () => undefined);
    if (text.length > 0 && !text.endsWith('\n')) {
      fs.truncateSync(file, Buffer.byteLength(text.slice(0, text.lastIndexOf('\n') + 1), 'utf8'));
    }
  }
  const w = new MetricsWriter(file);
  w.append({ event: 'resume', step });
  return w;
}

export function readMetricsFile(file: string): MetricRecord[] {
  if (!exists(file)) return [];
  return latestRecords(parseMetrics(readInputText(file, 'the metrics', 1024 * 1024 * 1024, () => undefined)).lines);
}
