// The run folder (docs/architecture.md, "The run folder"): one run = one folder, readable at any
// moment, even after a crash. metrics.jsonl gets one JSON object per line, each written
// with a single append; a reader tolerates a last line still being written; a writer
// never rewrites a line (a resume only cuts a torn last line and appends a marker).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { InputError, checkWritableTarget, ensureDir, errnoText, exists, processAlive, readInputText } from './files';
import { RUN_LOCK_FILE } from '../core/protocol/folders';

// The line types and the tolerant parsing are shared with the panels (no Node there).
import { MetricRecord, MetricsLine, latestRecords, parseMetricsText } from '../core/protocol/metrics';
export type { MetricRecord, MetricsLine, Phase, ResumeEvent } from '../core/protocol/metrics';
export { latestRecords };
/** Parses metrics text; a last line without its newline that does not parse is ignored. */
export const parseMetrics = parseMetricsText;

export class MetricsWriter {
  private fd: number;
  private readonly onClose: (() => void) | undefined;

  constructor(readonly file: string, onClose?: () => void) {
    this.onClose = onClose;
    // Never open a FIFO or a device for appending (the open would block, or write elsewhere).
    checkWritableTarget(file);
    ensureDir(path.dirname(file));
    try {
      this.fd = fs.openSync(file, 'a+');
    } catch (err) {
      throw new InputError(`cannot write ${file}: ${errnoText(err)}`);
    }
    // A torn last line (a crash mid-write) gets its newline, so our first record stands on its own line.
    const size = fs.fstatSync(this.fd).size;
    if (size > 0) {
      const last = Buffer.alloc(1);
      fs.readSync(this.fd, last, 0, 1, size - 1);
      if (last[0] !== 0x0a) fs.writeSync(this.fd, '\n');
    }
  }

  /** One line, one write(2) on an O_APPEND descriptor: readers never see half a record from us. */
  append(line: MetricsLine): void {
    fs.writeSync(this.fd, JSON.stringify(line) + '\n');
  }

  close(): void {
    if (this.fd >= 0) {
      fs.closeSync(this.fd);
      this.onClose?.();
    }
    this.fd = -1;
  }
}

/**
 * Holds a run folder for one training job: two jobs (two `--resume`s) would interleave the
 * run's metrics and checkpoints. A lock whose process is gone (kill -9) is taken over. Jobs
 * of one process (the editor's worker threads) are not told apart: the editor runs one job a run.
 */
export function lockRun(runDir: string): () => void {
  const file = path.join(runDir, RUN_LOCK_FILE);
  ensureDir(runDir);
  const mine = JSON.stringify({ pid: process.pid, started: new Date().toISOString() });
  for (let attempt = 0; ; attempt++) {
    try {
      fs.writeFileSync(file, mine, { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw new InputError(`cannot lock ${runDir}: ${errnoText(err)}`);
    }
    let holder: { pid?: unknown; started?: unknown } = {};
    try {
      holder = JSON.parse(fs.readFileSync(file, 'utf8')) as typeof holder;
    } catch {
      /* unreadable: a lock torn by a crash, taken over */
    }
    const pid = typeof holder.pid === 'number' ? holder.pid : -1;
    if (pid > 0 && pid !== process.pid && processAlive(pid)) {
      throw new InputError(`${runDir} is being trained by another job (pid ${pid}, since ${String(holder.started)}): two jobs on one run would interleave its metrics and checkpoints; wait for it or cancel it (a stale lock: remove ${file})`);
    }
    fs.rmSync(file, { force: true });
  }
  const release = (): void => {
    process.removeListener('exit', release);
    try {
      if (fs.readFileSync(file, 'utf8') === mine) fs.rmSync(file, { force: true });
    } catch {
      /* already gone */
    }
  };
  process.on('exit', release);
  return release;
}


/**
 * Prepares metrics.jsonl for a resumed run: cuts a torn last line (a crash mid-write) and
 * appends `{"event": "resume", "step": N}`.
 */
export function reopenMetricsForResume(file: string, step: number, onClose?: () => void): MetricsWriter {
  if (exists(file)) {
    checkWritableTarget(file);
    const text = readInputText(file, 'the metrics', 1024 * 1024 * 1024, () => undefined);
    if (text.length > 0 && !text.endsWith('\n')) {
      fs.truncateSync(file, Buffer.byteLength(text.slice(0, text.lastIndexOf('\n') + 1), 'utf8'));
    }
  }
  const w = new MetricsWriter(file, onClose);
  w.append({ event: 'resume', step });
  return w;
}

export function readMetricsFile(file: string): MetricRecord[] {
  if (!exists(file)) return [];
  return latestRecords(parseMetrics(readInputText(file, 'the metrics', 1024 * 1024 * 1024, () => undefined)).lines);
}
