// Prepares a run folder's data: the world, the distilled transcripts the run trains on
// (the training pool minus every task that overlaps the held-out split), the held-out
// teacher transcripts (for held-out loss and span accuracy), and the tokenizer. Every
// file is written atomically, so a killed preparation leaves nothing half-written.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DistillStats, ToolEnv, TraceRow, distill, makeStubTeacher } from '../core/distill';
import { findOverlaps } from '../core/overlap';
import { BpeTokenizer, canonicalTokenizerJson, tokenizerConfig, tokenizerFromJsonText, trainBpe } from '../core/tokenizer';
import { PoolName, trainingPool } from '../core/trainingPool';
import type { Task } from '../core/types';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../core/world';
import { TRAINING_SEEDS, WorldId, freshTrainingTasks, topHitHolds, worldEnv, worldName } from '../core/worlds';
import { overlapKey } from '../core/overlap';
import type { Recipe } from './recipes';
import { writeFileAtomic, writeJsonAtomic, writeJsonlAtomic } from './files';

export const WORLD_SEED = 0;
export const SAMPLES_PER_TASK = 4;

export interface PreparedData {
  corpusSize: number;
  train: { tasks: Task[]; rows: TraceRow[]; excluded: number; yield: Record<string, { kept: number; tasks: number }> };
  /** Counterfactual-value training worlds (the recipe's augmentation), when it has one. */
  augment?: { worlds: string[]; tasks: number; rows: number; yield: Record<string, { kept: number; tasks: number }> };
  heldout: { tasks: Task[]; rows: TraceRow[]; yield: Record<string, { kept: number; tasks: number }> };
  overlap: { exact: number; swapped: number };
  tokenizer: BpeTokenizer;
  tokenizerSeconds: number;
}

export const dataFiles = (runDir: string) => ({
  trainTraces: path.join(runDir, 'data', 'train.traces.jsonl'),
  heldoutTraces: path.join(runDir, 'data', 'heldout.traces.jsonl'),
  trainTasks: path.join(runDir, 'data', 'train.tasks.jsonl'),
  tokenizer: path.join(runDir, 'tokenizer.json'),
});

/** Builds the default world and distills it with the stub teacher into `runDir`. */
export function prepareRunData(
  runDir: string,
  pool: PoolName,
  log: (line: string) => void = () => {},
  recipe: Pick<Recipe, 'augment' | 'teacherTopHit'> = {},
): PreparedData {
  const augment = recipe.augment;
  const teacherFor = (tasks: Task[], env: ToolEnv) => makeStubTeacher(tasks, recipe.teacherTopHit ? { topHitHolds: topHitHolds(env) } : {});
  log(`building the world (seed ${WORLD_SEED})`);
  const corpus = buildCorpus(WORLD_SEED);
  const split = makeTaskPool(WORLD_SEED);
  writeJsonlAtomic(path.join(runDir, 'world', 'corpus.jsonl'), corpus.map(passageToRow));
  writeJsonlAtomic(path.join(runDir, 'world', 'train.jsonl'), split.train.map(taskToRow));
  writeJsonlAtomic(path.join(runDir, 'world', 'heldout.jsonl'), split.heldout.map(taskToRow));

  const training = trainingPool(pool, split.train, split.heldout);
  log(`distilling with the stub teacher: ${training.tasks.length} training tasks (${pool} pool, ${training.excluded.length} overlapping held-out excluded), ${split.heldout.length} held-out`);
  const env = new ToolEnv(corpus);
  const run = (tasks: Task[]) => {
    const stats: DistillStats = { perKind: {} };
    const rows = distill(tasks, teacherFor(tasks, env), env, SAMPLES_PER_TASK, stats);
    const y: Record<string, { kept: number; tasks: number }> = {};
    for (const [k, s] of Object.entries(stats.perKind)) y[k] = { kept: s.kept, tasks: s.tasks };
    return { rows, y };
  };
  const tr = run(training.tasks);
  const he = run(split.heldout);
  // Augmentation: fresh training worlds, each distilled against its own corpus. Their rows
  // and tasks carry a "world" key (extra keys come after the seed's); the overlap contract
  // holds in every world: no task with a held-out task's (kind, facts) is kept.
  const augRows: (TraceRow & { world: string })[] = [];
  const augTasks: (ReturnType<typeof taskToRow> & { world: string })[] = [];
  let augmentInfo: PreparedData['augment'];
  if (augment && augment.worlds > 0 && augment.share > 0) {
    const heldKeys = new Set(split.heldout.map(overlapKey));
    const y: Record<string, { kept: number; tasks: number }> = {};
    const names: string[] = [];
    for (let i = 0; i < augment.worlds; i++) {
      const id: WorldId = { kind: 'values', seed: TRAINING_SEEDS.augment + i };
      const tasks = freshTrainingTasks(id, augment.perShape, heldKeys);
      const stats: DistillStats = { perKind: {} };
      const rows = distill(tasks, teacherFor(tasks, worldEnv(id)), worldEnv(id), 1, stats);
      for (const [k, s2] of Object.entries(stats.perKind)) {
        const e = (y[k] ??= { kept: 0, tasks: 0 });
        e.kept += s2.kept;
        e.tasks += s2.tasks;
      }
      names.push(worldName(id));
      for (const r of rows) augRows.push({ ...r, world: worldName(id) });
      for (const t of tasks) augTasks.push({ ...taskToRow(t), world: worldName(id) });
    }
    augmentInfo = { worlds: names, tasks: augTasks.length, rows: augRows.length, yield: y };
    log(`augmentation: ${augRows.length} transcripts from ${names.length} counterfactual-value worlds (${names[0]} .. ${names[names.length - 1]})`);
  }
  const files = dataFiles(runDir);
  writeJsonlAtomic(files.trainTraces, [...tr.rows, ...augRows]);
  writeJsonlAtomic(files.heldoutTraces, he.rows);
  writeJsonlAtomic(files.trainTasks, [...training.tasks.map(taskToRow), ...augTasks]);

  log('training the tokenizer on the world');
  const t0 = Date.now();
  // The tokenizer sees the world's text only (passages and teacher transcripts); it is not
  // a model, and held-out questions cut into rare pieces would only add noise to eval.
  const tokenizer = trainBpe([...corpus.map((p) => p.text), ...tr.rows.map((r) => r.text), ...he.rows.map((r) => r.text)]);
  const tokenizerSeconds = (Date.now() - t0) / 1000;
  writeFileAtomic(files.tokenizer, canonicalTokenizerJson(tokenizer));
  writeJsonAtomic(path.join(runDir, 'tokenizer_config.json'), tokenizerConfig());
  const overlaps = findOverlaps(split.train, split.heldout);
  return {
    corpusSize: corpus.length,
    train: { tasks: training.tasks, rows: tr.rows, excluded: training.excluded.length, yield: tr.y },
    ...(augmentInfo ? { augment: augmentInfo } : {}),
    heldout: { tasks: split.heldout, rows: he.rows, yield: he.y },
    overlap: { exact: overlaps.exact.length, swapped: overlaps.swapped.length },
    tokenizer,
    tokenizerSeconds,
  };
}

export function readJsonl<T>(file: string): T[] {
  const text = fs.readFileSync(file, 'utf8');
  const out: T[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    try {
      out.push(JSON.parse(line) as T);
    } catch (err) {
      throw new Error(`${file}:${i + 1}: not JSON (${(err as Error).message})`);
    }
  });
  return out;
}

export function loadTokenizer(runDir: string): BpeTokenizer {
  const file = dataFiles(runDir).tokenizer;
  return tokenizerFromJsonText(fs.readFileSync(file, 'utf8'));
}
