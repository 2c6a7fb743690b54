// The curves panel's live feed: extension/training.ts publishes every `metrics` message of
// a running worker here (and the end of the job), so an open Training Curves panel adds
// the run and re-reads its metrics.jsonl at once instead of waiting for its next poll.
import * as vscode from 'vscode';
import type { MetricRecord } from '../../core/protocol/metrics';

export interface LiveMetricsEvent {
  runDir: string;
  /** The worker's record; null when the job ended. */
  record: MetricRecord | null;
}

const emitter = new vscode.EventEmitter<LiveMetricsEvent>();
export const onLiveMetrics = emitter.event;

/** Runs whose job is running now (a run folder per job). */
export const liveRuns = new Set<string>();

export function publishLiveMetrics(runDir: string, record: MetricRecord): void {
  liveRuns.add(runDir);
  emitter.fire({ runDir, record });
}

export function publishJobEnded(runDir: string): void {
  liveRuns.delete(runDir);
  emitter.fire({ runDir, record: null });
}
