// What the base-model run tests read from a run folder: its SFT losses, and a copy of it as a
// run killed before its first checkpoint.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CONFIG_FILE, DATA_DIR, METRICS_FILE, RUN_WORLD_DIR, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE } from '../../core/protocol/folders';

/** The loss of every SFT step in a run's metrics.jsonl, in order. */
export function sftLosses(runDir: string): number[] {
  return fs
    .readFileSync(path.join(runDir, METRICS_FILE), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"phase":"sft"'))
    .map((l) => (JSON.parse(l) as { loss: number }).loss);
}

export const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** A run as a kill before its first checkpoint leaves it: its config, tokenizer, data and world, no checkpoints or metrics. */
export function copyAsKilledBeforeCheckpoint(runDir: string, to: string): void {
  fs.mkdirSync(to);
  for (const f of [CONFIG_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE, DATA_DIR, RUN_WORLD_DIR]) fs.cpSync(path.join(runDir, f), path.join(to, f), { recursive: true });
}
