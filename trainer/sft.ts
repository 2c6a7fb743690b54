// Supervised fine-tuning of the student: the loop, the recipe (copy weights, curriculum),
// metrics per step in metrics.jsonl, held-out loss, checkpoints (atomic), --resume, and
// held-out accuracy at points of the budget (the learning curve).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { overlapKey } from '../core/overlap';
import { SPAN_KINDS, SpanKind } from '../core/spans';
import type { BpeTokenizer } from '../core/tokenizer';
import { canonicalTokenizerJson, tokenizerHash } from '../core/tokenizer';
import type { Task } from '../core/types';
import { TASK_FACTS, makeTaskPool } from '../core/world';
import { SEED_WORLD, allTasksOf, SplitName, WorldId, WorldTask, freshSplitTasks, parseWorldName, splitManifest, worldEnv, worldTemplates } from '../core/worlds';
import type { Template } from '../core/grammar';
import type { CallMask } from './agentRuntime';
import { AgentRuntime } from './agentRuntime';
import { AdapterInfo, BackendAsk, BackendInfo, initBackend } from './backend';
import { latestCheckpoint, loadCheckpoint, saveCheckpoint } from './checkpoint';
import { TrainExample, UNSUPERVISED, cutAfterEachTurn, firstTurnOnly, padBatch, toExample, tokenizeTrace } from './data';
import * as tf from '@tensorflow/tfjs-core';
import { EvalRow, EvalSummary, summarize } from './eval';
import { evaluateItems, startEvalShard } from './evalWorker';
import { autoThreads } from './parallel';
import { InputError, writeJsonAtomic } from './files';
import { ModelConfig, PRESETS, PresetName, StackModel, presetConfig } from './model';
import { Trainer } from './optim';
import { DataOrder, DataOrderState } from './dataOrder';
import { modelPolicy, tokenizerCallMask } from './policy';
import { dataFiles, ensureRunData, loadTokenizer, readJsonlRows, readTraceRows } from './prepare';
import { DEFAULT_KEEP_CHECKPOINTS, DivergenceGuard, checkSftConfig, checkpointModelConfig, ignoredOnResume, readRunConfig, resumeStateOf, saveGuarded } from './runGuards';
import { DEFAULT_RECIPE, Recipe, TeacherKnobs, getRecipe, phaseAt } from './recipes';
import { CONFIG_FILE, METRICS_FILE, MetricsWriter, reopenMetricsForResume } from './runStore';
import type { MetricRecord } from '../core/protocol/metrics';
import type { AccuracyPoint, JobResult, SftSummary } from '../core/protocol/worker';
import { taskFromRow, type TaskRowLike } from './taskRows';
import { WorldSplits, readWorldFolder, runSplits, worldRecord } from './worldFolder';

export interface JobHooks {
  started(backend: string): void;
  progress(phase: string, done: number, total: number, message?: string): void;
  metrics(record: MetricRecord): void;
  log(level: 'info' | 'warn' | 'error', message: string): void;
  checkpoint(step: number, path: string): void;
  isCancelled(): boolean;
}

export interface SftOptions {
  runDir: string;
  preset?: string;
  recipe?: string;
  backend?: string;
  steps?: number;
  minutes?: number;
  resume?: boolean;
  seed?: number;
  /** Continued SFT: start from this SFT run's latest checkpoint, data and tokenizer. */
  from?: string;
  /** Seconds between checkpoints (default 120). */
  checkpointEverySeconds?: number;
  /** Budget fractions at which held-out accuracy is measured (default [0.5, 1]). */
  evalPoints?: number[];
  /** Held-out tasks per accuracy point (default all; 0: no accuracy points). */
  evalLimit?: number;
  /** Optimiser steps between held-out loss measurements (default: 10 per run, at least every 25). */
  heldoutEvery?: number;
  /** Data-parallel worker threads ('auto' default). */
  parallel?: number | 'auto';
  /** Complete checkpoints kept (default 5; 0: all); latest and those an eval used are never pruned. */
  keepCheckpoints?: number;
  /** A user's world folder (docs/worlds.md) to build the run from; the run keeps a copy. */
  world?: string;
  /** With `world`: trajectories distilled elsewhere (e.g. an HTTP teacher) to train on. */
  traces?: string;
}

export const CODE_VERSION = typeof __AGENT_LAB_VERSION__ === 'string' ? __AGENT_LAB_VERSION__ : 'dev';
declare const __AGENT_LAB_VERSION__: string | undefined;

interface RunConfig {
  kind: 'sft';
  /** Continued SFT: the run and checkpoint it started from. */
  from?: { run: string; checkpoint: string; step: number };
  preset: PresetName;
  recipe: Recipe;
  model: ModelConfig;
  params: number;
  backend: { asked: string; used: string; note?: string; adapter?: AdapterInfo };
  seed: number;
  budget: { steps?: number; minutes?: number };
  optimiser: Record<string, unknown>;
  splits: Record<string, { kind: string; seeds: number[]; tasks: number }>;
  data: { trainExamples: number; firstTurnExamples: number; dropped: number; dropRate: number; taskCounts: Record<string, number>; heldoutTasks: number };
  tokenizer: { sha256: string; vocabSize: number };
  /** --eval-limit as given at the start (a resume keeps it unless given again). */
  evalLimit?: number;
  /** A user's world (docs/worlds.md): its copy is the run's world/. */
  world?: ReturnType<typeof worldRecord>;
  codeVersion: string;
  created: string;
}

export class UserError extends Error {}

const RESUME_STATE = 'trainer_state';
/** Dev tasks per learning-curve point (one fresh world's 50). */
const DEV_POINT_TASKS = 50;

/** Where a training example comes from: the seed world or a fresh (augmentation) world. */
type Origin = 'seed' | 'fresh';
const TASK_KINDS = ['lookup', 'double', 'sum', 'compare'] as const;

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

/** Mean token loss over examples (unweighted), no gradients. */
export async function heldoutLoss(model: StackModel, examples: readonly TrainExample[]): Promise<number> {
  let ce = 0;
  let n = 0;
  for (const ex of examples) {
    const b = padBatch([ex], 2);
    const r = await model.evaluateAsync({ inputIds: b.inputIds, labels: b.labels, batch: 1, seq: b.seq });
    ce += r.ceSum;
    n += r.supervised;
  }
  return n ? ce / n : 0;
}

export function loadTasks(file: string): Task[] {
  return readJsonlRows(file).map(({ value, where }) => {
    try {
      return taskFromRow(value as TaskRowLike, where);
    } catch (err) {
      throw new InputError((err as Error).message);
    }
  });
}

/** Task rows with the world each lives in (a "world" key; absent: the seed's). */
export function loadWorldTasks(file: string): WorldTask[] {
  return readJsonlRows(file).map(({ value, where }) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InputError(`${where}: expected a task row`);
    const row = value as TaskRowLike & { world?: unknown };
    let world = SEED_WORLD;
    if (row.world !== undefined) {
      try {
        world = parseWorldName(String(row.world));
      } catch (err) {
        throw new InputError(`${where}: "world": ${(err as Error).message}`);
      }
    }
    try {
      return { task: taskFromRow(row, where), world };
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
  tokenizer: BpeTokenizer,
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
  const shard = cut < items.length ? startEvalShard(model, canonicalTokenizerJson(tokenizer), tf.getBackend(), items.slice(cut), split, trainingKeys, teacher) : null;
  const mine = await evaluateItems(
    runtimeFor,
    shard ? items.slice(0, cut) : items,
    split,
    trainingKeys,
    (done) => hooks.progress(`eval ${split}`, done, shard ? cut : items.length, shard ? `(the other ${items.length - cut} tasks in a second thread)` : undefined),
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
  if (split === 'heldout') return world ? world.heldout.map((task) => ({ task, world: world.id })) : makeTaskPool(0).heldout.map((task) => ({ task, world: SEED_WORLD }));
  if (split === 'train') return [...trainingTasks];
  if (world?.world) {
    if (split === 'dev') {
      if (world.dev.length === 0) throw new UserError(`the world in ${world.world.dir} has no dev split (dev.jsonl is empty or missing)`);
      return world.dev.map((task) => ({ task, world: world.id }));
    }
    throw new UserError(`--split ${split} is made of fresh textbook worlds; this run's world is ${world.world.manifest?.name ?? world.world.dir} (its splits: heldout, dev, train)`);
  }
  return freshSplitTasks(split);
}

/** Picks the tfjs backend a job asked for, says which one runs (and why not a better one). */
export async function startBackend(ask: string, hooks: Pick<JobHooks, 'started' | 'log'>): Promise<BackendInfo> {
  let backend: BackendInfo;
  try {
    backend = await initBackend(ask as BackendAsk);
  } catch (err) {
    throw new UserError((err as Error).message);
  }
  hooks.started(backend.used);
  const a = backend.adapter;
  const adapter = a ? ` on ${a.vendor} ${a.architecture} (${a.description || a.device})${a.software ? ', a software adapter: slower than wasm' : ''}` : '';
  hooks.log('info', `backend: ${backend.used}${adapter}${backend.note ? ` (${backend.note})` : ''}`);
  return backend;
}

export async function runSft(o: SftOptions, hooks: JobHooks): Promise<JobResult<'sft'>> {
  const runDir = path.resolve(o.runDir);
  const configFile = path.join(runDir, CONFIG_FILE);
  const files = dataFiles(runDir);
  let previous: RunConfig | null = null;
  const existing = readRunConfig(runDir);
  if (existing && existing.config['kind'] === 'sft') {
    checkSftConfig(existing.config, configFile);
    previous = existing.config as unknown as RunConfig;
  }
  if (o.resume && !previous) throw new UserError(`--resume: ${runDir} has no SFT run to resume (no ${CONFIG_FILE} of kind sft)`);
  if (!o.resume && previous) {
    throw new UserError(`${runDir} already holds an SFT run; pass --resume to continue it, or choose another --run`);
  }
  // Continued SFT (--from RUN): a new run that starts from another SFT run's latest
  // checkpoint, on that run's data and tokenizer, at the learning rate that run ended with
  // (constant): "the same compute spent on more SFT", the baseline GRPO is compared with.
  let fromRun: { dir: string; config: RunConfig } | null = null;
  const fromDir = previous?.from?.run ?? (o.from !== undefined ? path.resolve(o.from) : undefined);
  if (fromDir !== undefined) {
    const fc = path.join(fromDir, CONFIG_FILE);
    const parsed = fs.existsSync(fc) ? (JSON.parse(fs.readFileSync(fc, 'utf8')) as Partial<RunConfig>) : null;
    if (!parsed || parsed.kind !== 'sft') throw new UserError(`--from ${fromDir}: not an SFT run folder (no ${CONFIG_FILE} of kind sft)`);
    fromRun = { dir: fromDir, config: parsed as RunConfig };
    if (!previous) {
      for (const f of ['tokenizer.json', 'tokenizer_config.json', 'data/train.traces.jsonl', 'data/heldout.traces.jsonl', 'data/train.tasks.jsonl']) {
        const src = path.join(fromDir, f);
        const dst = path.join(runDir, f);
        if (!fs.existsSync(src)) continue;
        if (fs.existsSync(dst)) throw new UserError(`--from: ${dst} exists; continued SFT never writes over data (choose a new --run)`);
        fs.mkdirSync(path.dirname(dst), { recursive: true });
        fs.copyFileSync(src, dst);
      }
    }
  }
  const presetName = (previous?.preset ?? fromRun?.config.preset ?? o.preset ?? 'tiny') as PresetName;
  if (!(presetName in PRESETS)) throw new UserError(`unknown preset '${presetName}' (known: ${Object.keys(PRESETS).join(', ')})`);
  const preset = PRESETS[presetName];
  let recipe: Recipe;
  try {
    recipe = previous?.recipe ?? fromRun?.config.recipe ?? getRecipe(o.recipe ?? DEFAULT_RECIPE);
  } catch (err) {
    throw new UserError((err as Error).message);
  }
  const seed = previous?.seed ?? o.seed ?? 0;

  if (o.resume && previous) {
    const ignored = ignoredOnResume(o as unknown as Record<string, unknown>, ['preset', 'recipe', 'steps', 'minutes', 'seed']);
    if (ignored.length) hooks.log('warn', `--resume keeps the run's own ${ignored.join(', ')} (config.json); the ones given are ignored`);
  }
  if (o.traces !== undefined && o.world === undefined) throw new UserError('--traces FILE trains on trajectories of a world: give --world DIR too');
  const source = o.world !== undefined ? { world: readWorldFolder(o.world), ...(o.traces !== undefined ? { traces: path.resolve(o.traces) } : {}) } : undefined;
  // Never writes over data/: data brought by hand is trained on as it is.
  ensureRunData(runDir, recipe.pool, (line) => hooks.log('info', line), recipe, source);
  const worldSplits = runSplits(runDir);
  const tokenizer = loadTokenizer(runDir);
  const cfg = presetConfig(presetName, tokenizer.vocabSize);
  // A resume's checkpoint is checked before the data is tokenized: damage fails at once.
  const resumeFrom = o.resume && latestCheckpoint(runDir) !== null ? loadCheckpoint(runDir, 'latest') : null;
  if (resumeFrom) checkpointModelConfig(resumeFrom, { model: cfg, what: `the run's preset ${presetName} with its tokenizer` }, tokenizer);
  const backend = await startBackend(o.backend ?? previous?.backend.asked ?? 'auto', hooks);

  const maxLen = cfg.maxSeq;
  const weights = { copyWeight: recipe.copyWeight, kindWeights: recipe.kindWeights };
  const trainRows = readTraceRows(files.trainTraces);
  const heldRows = fs.existsSync(files.heldoutTraces) ? readTraceRows(files.heldoutTraces) : [];
  // Pools by curriculum turns, origin (the seed world or a fresh training world) and shape,
  // so that the recipe's shape weights and augmentation share act at sampling time.
  const pools = new Map<string, TrainExample[]>();
  const poolKey = (turns: string, origin: Origin, kind: string) => `${turns}|${origin}|${kind}`;
  const addTo = (key: string, ex: TrainExample | null) => {
    if (!ex) return;
    const list = pools.get(key);
    if (list) list.push(ex);
    else pools.set(key, [ex]);
  };
  const wantsEach = recipe.curriculum.some((p) => p.turns === 'each');
  const wantsFirst = recipe.curriculum.some((p) => p.turns === 'first');
  let dropped = 0;
  let fullCount = 0;
  let firstCount = 0;
  for (const r of trainRows) {
    const origin: Origin = r.world === undefined || r.world === 'seed:0' ? 'seed' : 'fresh';
    const ex = toExample(tokenizeTrace(r.text, tokenizer), maxLen, weights);
    if (ex) fullCount++;
    else dropped++;
    addTo(poolKey('all', origin, r.kind), ex);
    if (wantsFirst) {
      const f = toExample(tokenizeTrace(firstTurnOnly(r.text), tokenizer), maxLen, weights);
      if (f) firstCount++;
      addTo(poolKey('first', origin, r.kind), f);
    }
    if (wantsEach) {
      for (const cut of cutAfterEachTurn(r.text)) addTo(poolKey('each', origin, r.kind), toExample(tokenizeTrace(cut, tokenizer), maxLen, weights));
    }
  }
  if (trainRows.length === 0) throw new InputError(`${files.trainTraces} holds no transcript to train on`);
  if (fullCount === 0) throw new InputError(`no training example of ${files.trainTraces} fits the context of ${maxLen} tokens (${trainRows.length} transcripts)`);
  const heldExamples = heldRows
    .map((r) => toExample(tokenizeTrace(r.text, tokenizer), maxLen, { copyWeight: 1 }))
    .filter((e): e is TrainExample => e !== null);
  const split = worldSplits;
  // Without a tasks file (data brought by hand), the training tasks are those the rows name:
  // every question the seed world's table can ask is known; others cannot be checked.
  const hasTasksFile = fs.existsSync(files.trainTasks);
  let trainingTasks: Task[];
  if (hasTasksFile) trainingTasks = loadTasks(files.trainTasks);
  else {
    // A user's world's run always has its tasks file (trainer/prepare.ts prepareWorldRunData).
    const byQuestion = new Map(allTasksOf(TASK_FACTS).map((t) => [t.question, t] as const));
    const named = [...new Set(trainRows.filter((r) => r.world === undefined || r.world === 'seed:0').map((r) => r.task))];
    trainingTasks = named.flatMap((q) => byQuestion.get(q) ?? []);
    const unknown = named.length - trainingTasks.length;
    if (unknown > 0) hooks.log('warn', `${unknown} of ${named.length} questions in ${files.trainTraces} are not the default world's: their overlap with the held-out split cannot be checked (no ${files.trainTasks})`);
  }
  const trainingKeys = trainingKeysOf(files.trainTasks, trainingTasks);
  // The invariant the whole evaluation rests on: no held-out task (or its operand-swapped
  // twin) is in the training data. prepareRunData guarantees it; data brought by hand may not.
  const leaked = split.heldout.filter((t) => trainingKeys.has(overlapKey(t)));
  if (leaked.length > 0) {
    throw new UserError(
      `${hasTasksFile ? files.trainTasks : files.trainTraces} holds ${leaked.length} task(s) that overlap the held-out split (e.g. ${JSON.stringify(leaked[0]!.question)}); ` +
        'training on them would contaminate evaluation',
    );
  }
  if (dropped) hooks.log('warn', `dropped ${dropped}/${trainRows.length} transcripts longer than ${maxLen} tokens (never truncated)`);

  // Model and optimiser, fresh or from the last checkpoint.
  let model: StackModel;
  let startStep = 0;
  let elapsedBefore = 0;
  let orderState: DataOrderState | null = null;
  let fromCheckpoint: { run: string; checkpoint: string; step: number } | null = null;
  // The budget: the run's own on resume; else the options; else the preset's default (a
  // step count where the preset has one, so that a default run is reproducible under load).
  const budget: { steps?: number; minutes?: number } =
    previous?.budget ??
    (o.steps !== undefined
      ? { steps: o.steps }
      : o.minutes !== undefined
        ? { minutes: o.minutes }
        : preset.steps !== undefined && !fromRun
          ? { steps: preset.steps }
          : { minutes: preset.minutes });
  const stepBudget = budget.steps;
  const trainer = (m: StackModel) =>
    new Trainer(m, {
      // A step budget decays the learning rate over its steps, as a time budget does over its minutes.
      ...(stepBudget !== undefined && !fromRun ? { totalSteps: stepBudget } : {}),
      lr: fromRun ? preset.lr * preset.minLrRatio : preset.lr,
      betas: preset.betas,
      weightDecay: preset.weightDecay,
      clip: preset.clip,
      warmupSteps: fromRun ? 0 : preset.warmupSteps,
      minLrRatio: preset.minLrRatio,
      schedule: fromRun ? 'constant' : 'cosine',
      parallel: o.parallel ?? 'auto',
    });
  let opt: Trainer;
  let metrics: MetricsWriter;
  if (o.resume && resumeFrom === null) {
    // Killed before its first checkpoint: nothing to continue from, so start again at step 0.
    model = StackModel.create(cfg, seed);
    opt = trainer(model);
    metrics = reopenMetricsForResume(path.join(runDir, METRICS_FILE), 0);
    hooks.log('warn', `${runDir} has no checkpoint yet (the run stopped before its first): starting again from step 0`);
  } else if (resumeFrom) {
    const ck = resumeFrom;
    model = StackModel.fromWeights(ck.config, ck.weights);
    opt = trainer(model);
    if (ck.optimizer) opt.importState(ck.optimizer);
    else hooks.log('warn', 'the checkpoint holds no optimiser state: AdamW restarts from zero moments');
    const st = resumeStateOf(ck, RESUME_STATE);
    startStep = st.step;
    elapsedBefore = st.elapsed;
    orderState = st.order;
    if (!orderState) hooks.log('warn', 'the checkpoint holds no data order (written by an older version): the order restarts from the seed');
    metrics = reopenMetricsForResume(path.join(runDir, METRICS_FILE), startStep);
    hooks.log('info', `resumed from step ${startStep} (${(elapsedBefore / 60).toFixed(1)} min trained)`);
  } else {
    if (fromRun) {
      let ck;
      try {
        ck = loadCheckpoint(fromRun.dir, 'latest');
      } catch (err) {
        throw new UserError(`--from ${fromRun.dir}: cannot load its checkpoint: ${(err as Error).message}`);
      }
      model = StackModel.fromWeights(cfg, ck.weights);
      fromCheckpoint = { run: fromRun.dir, checkpoint: ck.name, step: ck.step };
      hooks.log('info', `continued SFT from ${fromRun.dir} (${ck.name}) at a constant lr of ${preset.lr * preset.minLrRatio}`);
    } else model = StackModel.create(cfg, seed);
    opt = trainer(model);
    metrics = new MetricsWriter(path.join(runDir, METRICS_FILE));
    const kindCounts: Record<string, number> = {};
    for (const t of trainingTasks) kindCounts[t.kind] = (kindCounts[t.kind] ?? 0) + 1;
    const config: RunConfig = {
      kind: 'sft',
      ...(fromCheckpoint ? { from: fromCheckpoint } : {}),
      preset: presetName,
      recipe,
      model: cfg,
      params: model.paramCount(),
      backend: { asked: backend.asked, used: backend.used, ...(backend.note ? { note: backend.note } : {}), ...(backend.adapter ? { adapter: backend.adapter } : {}) },
      seed,
      budget,
      optimiser: { ...opt.optim },
      data: {
        trainExamples: fullCount,
        firstTurnExamples: firstCount,
        dropped,
        dropRate: trainRows.length ? dropped / trainRows.length : 0,
        taskCounts: kindCounts,
        heldoutTasks: split.heldout.length,
      },
      splits: split.world
        ? { heldout: { kind: 'custom', seeds: [split.id.seed], tasks: split.heldout.length }, dev: { kind: 'custom', seeds: [split.id.seed], tasks: split.dev.length } }
        : { heldout: { kind: 'seed', seeds: [0], tasks: split.heldout.length }, ...splitManifest() },
      // The folder the world came from (its copy is the run's world/).
      ...(split.world ? { world: worldRecord(source?.world ?? split.world) } : {}),
      tokenizer: { sha256: tokenizerHash(tokenizer), vocabSize: tokenizer.vocabSize },
      ...(o.evalLimit !== undefined ? { evalLimit: o.evalLimit } : {}),
      codeVersion: CODE_VERSION,
      created: new Date().toISOString(),
    };
    writeJsonAtomic(configFile, config);
  }
  const totalSteps = budget.steps;
  const budgetMs = (budget.minutes ?? 0) * 60_000;
  hooks.log(
    'info',
    `SFT: preset ${presetName} (${model.paramCount()} parameters), recipe ${recipe.name}, ` +
      (totalSteps !== undefined ? `${totalSteps} steps` : `${budget.minutes} minutes`) +
      `, ${fullCount} examples, ${opt.workers.threads} extra worker thread(s)`,
  );

  const order = orderState ? DataOrder.fromState(orderState) : new DataOrder(seed);
  const shapesOf = (turns: string, origin: Origin): [string, number][] => {
    const out: [string, number][] = [];
    for (const kind of TASK_KINDS) {
      const n = pools.get(poolKey(turns, origin, kind))?.length ?? 0;
      if (n === 0) continue;
      // No shape weights: the pool's natural mix (a shape's share is its example count).
      const w = recipe.shapeWeights ? (recipe.shapeWeights[kind] ?? 0) : n;
      if (w > 0) out.push([kind, w]);
    }
    return out;
  };
  const share = recipe.augment?.share ?? 0;
  const sample = (turns: string, n: number): TrainExample[] => {
    const out: TrainExample[] = [];
    for (let i = 0; i < n; i++) {
      let origin: Origin = share > 0 && order.uniform() < share ? 'fresh' : 'seed';
      if (shapesOf(turns, origin).length === 0) origin = origin === 'fresh' ? 'seed' : 'fresh';
      const kind = order.pick(shapesOf(turns, origin));
      const key = poolKey(turns, origin, kind);
      const pool = pools.get(key)!;
      out.push(pool[order.next(key, pool.length)]!);
    }
    return out;
  };

  // evalLimit 0: no accuracy points (a smoke run); otherwise that many held-out tasks each.
  const evalLimit = o.evalLimit ?? previous?.evalLimit;
  const evalPoints = evalLimit === 0 ? [] : [...(o.evalPoints ?? [0.5, 1])].sort((a, b) => a - b);
  let nextEval = 0;
  const startedAt = Date.now();
  let trainMs = 0; // time spent in optimiser steps this session (eval time excluded from the budget)
  const elapsed = () => elapsedBefore + trainMs / 1000;
  const progressOf = (step: number) =>
    totalSteps !== undefined ? step / Math.max(1, totalSteps) : (elapsed() * 1000) / Math.max(1, budgetMs);
  while (nextEval < evalPoints.length && evalPoints[nextEval]! <= progressOf(startStep) && evalPoints[nextEval]! < 1) nextEval++;
  const heldoutEvery = o.heldoutEvery ?? Math.max(25, Math.floor((totalSteps ?? 500) / 10));
  let lastCheckpoint = Date.now();
  const ckEvery = (o.checkpointEverySeconds ?? 120) * 1000;
  let step = startStep;
  let cancelled = false;
  let lastStep: { loss: number; sup_acc: number } | undefined;
  const curve: AccuracyPoint[] = [];
  const devCurve: AccuracyPoint[] = [];

  const divergence = new DivergenceGuard(runDir);
  const checkpoint = async () => {
    const p = await saveGuarded(
      runDir,
      () =>
        saveCheckpoint(runDir, step, model, opt, {
          [RESUME_STATE]: { step, elapsed: elapsed(), order: order.exportState() },
        }),
      hooks,
      o.keepCheckpoints ?? DEFAULT_KEEP_CHECKPOINTS,
    );
    lastCheckpoint = Date.now();
    if (p) hooks.checkpoint(step, p);
  };
  const accuracyPoint = async (final: boolean): Promise<EvalSummary> => {
    const tasks = (evalLimit ? split.heldout.slice(0, evalLimit) : split.heldout).map((task) => ({ task, world: split.id }));
    const { summary } = await evaluateModel(model, tokenizer, tasks, 'heldout', trainingKeys, heldExamples, hooks, 'auto', recipe);
    const rec = {
      phase: 'eval' as const,
      step,
      time: elapsed(),
      split: 'heldout',
      accuracy: summary.accuracy,
      by_kind: summary.by_kind,
      span_accuracy: summary.span_accuracy,
      failures: summary.failures,
      n: summary.n,
      final,
    };
    metrics.append(rec);
    hooks.metrics(rec);
    curve.push({ step, time: elapsed(), accuracy: summary.accuracy });
    hooks.log('info', `held-out exact match at step ${step}: ${(100 * summary.accuracy).toFixed(1)}% of ${summary.n}`);
    // Beside it, the first world of the dev split (fresh values: read, or remembered?); a user's world has its own dev split.
    const devPool: WorldTask[] = split.world ? split.dev.map((task) => ({ task, world: split.id })) : freshSplitTasks('dev');
    const devTasks = devPool.slice(0, Math.min(evalLimit ?? DEV_POINT_TASKS, DEV_POINT_TASKS));
    if (devTasks.length === 0) return summary;
    const dev = (await evaluateModel(model, tokenizer, devTasks, 'dev', trainingKeys, [], hooks, 'auto', recipe)).summary;
    const devRec = { phase: 'eval' as const, step, time: elapsed(), split: 'dev', accuracy: dev.accuracy, by_kind: dev.by_kind, failures: dev.failures, n: dev.n, final };
    metrics.append(devRec);
    hooks.metrics(devRec);
    devCurve.push({ step, time: elapsed(), accuracy: dev.accuracy });
    hooks.log('info', `dev exact match at step ${step}: ${(100 * dev.accuracy).toFixed(1)}% of ${dev.n} (memorised ${dev.failures.memorised})`);
    return summary;
  };

  try {
    while (progressOf(step) < 1) {
      // Steps are synchronous: yield so that a cancel (IPC message, Ctrl-C) can arrive.
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (hooks.isCancelled()) {
        cancelled = true;
        break;
      }
      const progress = progressOf(step);
      const { index, phase } = phaseAt(recipe, progress);
      const batch = padBatch(sample(phase.turns, phase.batch), 2);
      const t0 = Date.now();
      const r = await opt.stepAsync(batch, { progress: totalSteps !== undefined ? undefined : progress });
      const dt = Date.now() - t0;
      trainMs += dt;
      step = r.step;
      const rec: MetricRecord = {
        phase: 'sft',
        step,
        time: elapsed(),
        loss: r.loss,
        token_loss: r.tokenLoss,
        sup_acc: r.supervised ? r.correct / r.supervised : 0,
        lr: r.lr,
        tokens_per_s: dt > 0 ? (r.tokens * 1000) / dt : 0,
        grad_norm: r.gradNorm,
        curriculum: index,
        batch: phase.batch,
        backend: backend.used,
        ...(r.skipped ? { skipped: true } : {}),
      };
      if (step % heldoutEvery === 0 && heldExamples.length) rec['heldout_loss'] = await heldoutLoss(model, heldExamples);
      metrics.append(rec);
      hooks.metrics(rec);
      lastStep = { loss: r.loss, sup_acc: r.supervised ? r.correct / r.supervised : 0 };
      divergence.observe(r, step); // throws after MAX_NONFINITE_STEPS in a row (no checkpoint of NaN weights)
      if (totalSteps !== undefined) hooks.progress('sft', step, totalSteps, `loss ${r.loss.toFixed(3)}`);
      else hooks.progress('sft', Math.round(elapsed()), Math.round(budgetMs / 1000), `step ${step}, loss ${r.loss.toFixed(3)}`);
      if (Date.now() - lastCheckpoint >= ckEvery) await checkpoint();
      if (nextEval < evalPoints.length && evalPoints[nextEval]! < 1 && progressOf(step) >= evalPoints[nextEval]!) {
        nextEval++;
        await checkpoint();
        await accuracyPoint(false);
      }
    }
    await checkpoint();
    let final: EvalSummary | null = null;
    if (!cancelled && evalPoints.includes(1) && !hooks.isCancelled()) final = await accuracyPoint(true);
    const summary: SftSummary = {
      runDir,
      steps: step,
      minutes: elapsed() / 60,
      wallMinutes: (Date.now() - startedAt) / 60000,
      backend: backend.used,
      loss: lastStep?.loss,
      sup_acc: lastStep?.sup_acc,
      ...(final ? { heldout_accuracy: final.accuracy, by_kind: final.by_kind, span_accuracy: final.span_accuracy } : {}),
      curve,
      dev_curve: devCurve,
    };
    return { kind: 'sft', cancelled, summary };
  } finally {
    metrics.close();
    opt.dispose();
    model.dispose();
  }
}
