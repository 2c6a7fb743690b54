// Evaluation inside a job: the eval job (trainer/run/jobs.ts) and the learning-curve points of
// SFT and GRPO run the student greedily and constrained on tasks (both cores: half of them
// in a worker thread), score teacher-forced span accuracy, and judge overlap against what
// the run trained on. Also the task files a run keeps (data/train.tasks.jsonl).
import * as fs from 'node:fs';
import * as tf from '@tensorflow/tfjs-core';
import type { Template } from '../../core/grammar';
import { overlapKey } from '../../core/overlap';
import { makeTaskPool } from '../../core/world';
import { rowToTask } from '../../core/worldRows';
import { SPAN_KINDS, SpanKind } from '../../core/spans';
import type { Tokenizer } from '../../core/tokenizer';
import { canonicalTokenizerJson } from '../../core/tokenizer';
import type { Task } from '../../core/types';
import { type LoadedWorlds, SEED_WORLD, SplitName, WorldId, WorldTask, freshSplitTasks, parseWorldName, worldEnv, worldTemplates } from '../../core/worlds';
import type { CallMask } from '../agent/agentRuntime';
import { AgentRuntime } from '../agent/agentRuntime';
import { TrainExample, UNSUPERVISED, padBatch } from '../sft/data';
import { EvalRow, EvalSummary, summarize } from '../agent/eval';
import { evaluateItems, startEvalShard } from '../agent/evalWorker';
import { InputError, readJsonlRows } from '../../store/files';
import { type JobHooks, UserError } from './jobRun';
import type { StackModel } from '../model/model';
import { autoThreads } from '../model/parallel';
import { modelPolicy, tokenizerCallMask } from '../agent/policy';
import type { TeacherKnobs } from '../sft/recipes';
import { type WorldSplits, freshWorldTasks } from '../../store/worldFolder';

/**
 * Overlap keys of a run's training tasks: plain (kind, facts) keys of every task, for the
 * held-out contract that holds in every world, and world-qualified ones ("values:7|key")
 * for the fresh splits, whose questions repeat the seed's with other values.
 */
export function trainingKeysOf(tasksFile: string, tasks: readonly Task[]): Set<string> {
  const keys = new Set<string>();
  const worlds = fs.existsSync(tasksFile)
    ? readJsonlRows(tasksFile).map(({ value }) => {
        const w = (value as { world?: unknown } | null)?.world;
        return typeof w === 'string' ? w : 'seed:0';
      })
    : [];
  tasks.forEach((t, i) => {
    const k = overlapKey(t);
    keys.add(k);
    keys.add(`${worlds[i] ?? 'seed:0'}|${k}`);
  });
  return keys;
}

/** Span accuracy, teacher-forced: per span kind, the share of target tokens the model's argmax gets right. */
export async function spanAccuracy(model: StackModel, examples: readonly TrainExample[]): Promise<Partial<Record<SpanKind, number>>> {
  const right = new Array<number>(SPAN_KINDS.length).fill(0);
  const total = new Array<number>(SPAN_KINDS.length).fill(0);
  for (const ex of examples) {
    const b = padBatch([ex], 2);
    const r = await model.evaluateAsync({ inputIds: b.inputIds, labels: b.labels, batch: 1, seq: b.seq }, { argmax: true });
    for (let t = 0; t < b.seq; t++) {
      const k = b.kinds[t]!;
      if (k === UNSUPERVISED) continue;
      total[k]!++;
      if (r.argmax![t] === b.labels[t]) right[k]!++;
    }
  }
  const out: Partial<Record<SpanKind, number>> = {};
  SPAN_KINDS.forEach((k, i) => {
    if (total[i]! > 0) out[k] = right[i]! / total[i]!;
  });
  return out;
}

export function loadTasks(file: string): Task[] {
  return readJsonlRows(file).map(({ value, where }) => {
    try {
      return rowToTask(value, where);
    } catch (err) {
      throw new InputError((err as Error).message);
    }
  });
}

/**
 * Task rows with the world each lives in (a "world" key; absent: the seed's; a user's world
 * must be among `loaded`, the worlds the caller read). Rows marked
 * `"derived": true` (a user's world's augmentation) live in worlds no folder keeps: left out,
 * as no tool could answer them here; they stay in the file for the overlap contract's readers.
 */
export function loadWorldTasks(file: string, loaded: LoadedWorlds): WorldTask[] {
  return readJsonlRows(file)
    .filter(({ value }) => (value as { derived?: unknown } | null)?.derived !== true)
    .map(({ value, where }) => {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InputError(`${where}: expected a task row`);
      const row = value as { world?: unknown };
      let world = SEED_WORLD;
      if (row.world !== undefined) {
        try {
          world = parseWorldName(String(row.world), loaded);
        } catch (err) {
          throw new InputError(`${where}: "world": ${(err as Error).message}`);
        }
      }
      try {
        return { task: rowToTask(row, where), world };
      } catch (err) {
        throw new InputError((err as Error).message);
      }
    });
}

/**
 * Evaluates a model greedily and constrained on tasks, each in its own world (tasks
 * without one live in the seed's); the learning-curve points and the eval job share it.
 */
export async function evaluateModel(
  model: StackModel,
  tokenizer: Tokenizer,
  tasks: readonly (Task | WorldTask)[],
  split: string,
  trainingKeys: ReadonlySet<string>,
  spanExamples: readonly TrainExample[],
  hooks: Pick<JobHooks, 'progress' | 'isCancelled'>,
  threads: number | 'auto' = 'auto',
  teacher: TeacherKnobs = {},
): Promise<{ rows: EvalRow[]; summary: EvalSummary; threads: number }> {
  const items: WorldTask[] = tasks.map((t) => ('task' in t ? t : { task: t, world: SEED_WORLD }));
  const policy = modelPolicy(model, tokenizer.vocabSize);
  // One token mask per grammar: a user's world's tool list may narrow it (core/worldTools.ts).
  const masks = new Map<readonly Template[], CallMask>();
  const maskFor = (world: WorldId): CallMask => {
    const templates = worldTemplates(world);
    let m = masks.get(templates);
    if (!m) masks.set(templates, (m = tokenizerCallMask(tokenizer, templates)));
    return m;
  };
  const runtimeFor = (part: readonly WorldTask[]) => new AgentRuntime(policy, tokenizer, worldEnv(part[0]!.world), maskFor(part[0]!.world));
  // Both cores: the second half of the tasks in a worker thread while this one does the first.
  const extra = threads === 'auto' ? Math.min(1, autoThreads()) : Math.max(0, threads - 1);
  const cut = extra > 0 && items.length >= 8 ? Math.ceil(items.length / 2) : items.length;
  // Progress counts the whole split: this thread's tasks and the second thread's together.
  let mineDone = 0;
  let otherDone = 0;
  const report = () => hooks.progress(`eval ${split}`, mineDone + otherDone, items.length, undefined);
  const shard =
    cut < items.length
      ? startEvalShard(model, canonicalTokenizerJson(tokenizer), tf.getBackend(), items.slice(cut), split, trainingKeys, teacher, (done) => {
          otherDone = done;
          report();
        })
      : null;
  const mine = await evaluateItems(
    runtimeFor,
    shard ? items.slice(0, cut) : items,
    split,
    trainingKeys,
    (done) => {
      mineDone = done;
      report();
    },
    hooks.isCancelled,
    teacher,
  );
  const rows = [...mine.rows];
  let contaminated = mine.contaminated;
  if (shard) {
    if (hooks.isCancelled()) shard.stop();
    const other = await shard.result;
    rows.push(...other.rows);
    contaminated += other.contaminated;
  }
  const spans = await spanAccuracy(model, spanExamples);
  return { rows, summary: summarize(split, rows, contaminated, spans), threads: shard ? 2 : 1 };
}

/** The tasks of an evaluation split: the seed world's heldout or train, or a fresh split's worlds. */
export function splitTasks(split: SplitName, trainingTasks: readonly WorldTask[], world?: WorldSplits): WorldTask[] {
  if (split === 'heldout')
    return world ? world.heldout.map((task) => ({ task, world: world.id })) : makeTaskPool(0).heldout.map((task) => ({ task, world: SEED_WORLD }));
  if (split === 'train') return [...trainingTasks];
  if (world?.world) {
    if (split === 'dev') {
      if (world.dev.length === 0) throw new UserError(`the world in ${world.world.dir} has no dev split (dev.jsonl is empty or missing)`);
      return world.dev.map((task) => ({ task, world: world.id }));
    }
    if (split === 'fresh-values' || split === 'fresh-entities' || split === 'dev-entities' || split === 'fresh-differences') {
      try {
        return freshWorldTasks(world.world, split).tasks;
      } catch (err) {
        throw new UserError((err as Error).message);
      }
    }
    throw new UserError(
      `--split ${split} is not a split of this run's world ${world.world.manifest?.name ?? world.world.dir} (its splits: heldout, dev, dev-entities, train, fresh-values, fresh-entities, fresh-differences)`,
    );
  }
  return freshSplitTasks(split);
}
