// Tails a run's metrics.jsonl: each poll reads only what was appended since the last one,
// keeps a line still being written for the next poll, and starts over when the file
// shrank (a resume cuts a torn last line) or was replaced. Node fs, no vscode.
import * as fs from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { LineSplitter, MetricRecord, isMetricRecord, parseMetricsLine } from '../../core/protocol/metrics';

export interface TailUpdate {
  /** New records (the last per (phase, step) wins downstream). */
  records: MetricRecord[];
  /** The file started over: drop what was read before. */
  reset: boolean;
  /** Lines that are not metrics lines (1-based numbers, with the reason). */
  problems: string[];
}

export class MetricsTail {
  private offset = 0;
  private ino = -1;
  private lineNo = 0;
  private splitter = new LineSplitter();
  private decoder = new StringDecoder('utf8');

  constructor(readonly file: string) {}

  /** Reads what was appended; null when nothing changed (or the file does not exist yet). */
  poll(): TailUpdate | null {
    let st: fs.Stats;
    try {
      st = fs.statSync(this.file);
    } catch {
      return null;
    }
    let reset = false;
    if (st.size < this.offset || (this.ino !== -1 && st.ino !== this.ino)) {
      this.offset = 0;
      this.lineNo = 0;
      this.splitter.reset();
      this.decoder = new StringDecoder('utf8');
      reset = true;
    }
    this.ino = st.ino;
    if (st.size === this.offset && !reset) return null;
    const fd = fs.openSync(this.file, 'r');
    let chunk: string;
    try {
      const len = st.size - this.offset;
      const buf = Buffer.alloc(len);
      let got = 0;
      while (got < len) {
        const n = fs.readSync(fd, buf, got, len - got, this.offset + got);
        if (n === 0) break;
        got += n;
      }
      this.offset += got;
      chunk = this.decoder.write(buf.subarray(0, got));
    } finally {
      fs.closeSync(fd);
    }
    const records: MetricRecord[] = [];
    const problems: string[] = [];
    for (const line of this.splitter.push(chunk)) {
      this.lineNo++;
      if (line.trim() === '') continue;
      const parsed = parseMetricsLine(line);
      if (parsed === null) problems.push(`line ${this.lineNo}: not a metrics line`);
      else if (isMetricRecord(parsed)) records.push(parsed);
    }
    return { records, reset, problems };
  }
}
