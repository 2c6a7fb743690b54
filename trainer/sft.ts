// Supervised fine-tuning of the student: the loop, the recipe (copy weights, curriculum),
// metrics per step in metrics.jsonl, held-out loss, checkpoints (atomic), --resume, and
// held-out accuracy at points of the budget (the learning curve).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ToolEnv } from '../core/env';
import { overlapKey } from '../core/overlap';
import { SPAN_KINDS, SpanKind } from '../core/spans';
import type { BpeTokenizer } from '../core/tokenizer';
import { tokenizerHash } from '../core/tokenizer';
import type { Task } from '../core/types';
import { buildCorpus, makeTaskPool } from '../core/world';
import { AgentRuntime } from './agentRuntime';
import { BackendAsk, BackendInfo, initBackend } from './backend';
import { latestCheckpoint, loadCheckpoint, saveCheckpoint } from './checkpoint';
import { TrainExample, UNSUPERVISED, cutAfterEachTurn, firstTurnOnly, padBatch, toExample, tokenizeTrace } from './data';
import { EvalSummary, evaluateTasks } from './eval';
import { InputError, writeJsonAtomic } from './files';
import { ModelConfig, PRESETS, PresetName, StackModel, makeRng, presetConfig } from './model';
import { Trainer } from './optim';
import { modelPolicy, tokenizerCallMask } from './policy';
import { dataFiles, ensureRunData, loadTokenizer, readJsonlRows, readTraceRows } from './prepare';
import { DEFAULT_KEEP_CHECKPOINTS, DivergenceGuard, checkSftConfig, checkpointModelConfig, ignoredOnResume, readRunConfig, resumeStateOf, saveGuarded } from './runGuards';
import { DEFAULT_RECIPE, Recipe, getRecipe, phaseAt } from './recipes';
import { CONFIG_FILE, METRICS_FILE, MetricsWriter, reopenMetricsForResume } from './runStore';
import { taskFromRow, type TaskRowLike } from './taskRows';

export interface JobHooks {
  started(backend: string): void;
  progress(phase: string, done: number, total: number, message?: string): void;
  metrics(record: Record<string, unknown>): void;
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
}

export const CODE_VERSION = typeof __AGENT_LAB_VERSION__ === 'string' ? __AGENT_LAB_VERSION__ : 'dev';
declare const __AGENT_LAB_VERSION__: string | undefined;

interface RunConfig {
  kind: 'sft';
  preset: PresetName;
  recipe: Recipe;
  model: ModelConfig;
  params: number;
  backend: { asked: string; used: string; note?: string };
  seed: number;
  budget: { steps?: number; minutes?: number };
  optimiser: Record<string, unknown>;
  data: { trainExamples: number; firstTurnExamples: number; dropped: number; dropRate: number; taskCounts: Record<string, number>; heldoutTasks: number };
  tokenizer: { sha256: string; vocabSize: number };
  /** --eval-limit as given at the start (a resume keeps it unless given again). */
  evalLimit?: number;
  codeVersion: string;
  created: string;
}

export class UserError extends Error {}

const RESUME_STATE = 'trainer_state';

/** Span accuracy, teacher-forced: per span kind, the share of target tokens the model's argmax gets right. */
export function spanAccuracy(model: StackModel, examples: readonly TrainExample[]): Partial<Record<SpanKind, number>> {
  const right = new Array<number>(SPAN_KINDS.length).fill(0);
  const total = new Array<number>(SPAN_KINDS.length).fill(0);
  for (const ex of examples) {
    const b = padBatch([ex], 2);
    const r = model.evaluate({ inputIds: b.inputIds, labels: b.labels, batch: 1, seq: b.seq }, { argmax: true });
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
export function heldoutLoss(model: StackModel, examples: readonly TrainExample[]): number {
  let ce = 0;
  let n = 0;
  for (const ex of examples) {
    const b = padBatch([ex], 2);
    const r = model.evaluate({ inputIds: b.inputIds, labels: b.labels, batch: 1, seq: b.seq });
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

/** Evaluates a model greedily and constrained on tasks; the learning-curve point and the eval job share it. */
export function evaluateModel(
  model: StackModel,
  tokenizer: BpeTokenizer,
  tasks: readonly Task[],
  split: string,
  trainingKeys: ReadonlySet<string>,
  spanExamples: readonly TrainExample[],
  hooks: Pick<JobHooks, 'progress' | 'isCancelled'>,
) {
  const env = new ToolEnv(buildCorpus());
  const runtime = new AgentRuntime(modelPolicy(model, tokenizer.vocabSize), tokenizer, env, tokenizerCallMask(tokenizer));
  const spans = spanAccuracy(model, spanExamples);
  return evaluateTasks(runtime, tasks, env, {
    split,
    trainingKeys,
    spanAccuracy: spans,
    onProgress: (done, total) => hooks.progress(`eval ${split}`, done, total),
    isCancelled: hooks.isCancelled,
  });
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
  hooks.log('info', `backend: ${backend.used}${backend.note ? ` (${backend.note})` : ''}`);
  return backend;
}

export async function runSft(o: SftOptions, hooks: JobHooks): Promise<{ cancelled: boolean; summary: Record<string, unknown> }> {
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
  const presetName = (previous?.preset ?? o.preset ?? 'tiny') as PresetName;
  if (!(presetName in PRESETS)) throw new UserError(`unknown preset '${presetName}' (known: ${Object.keys(PRESETS).join(', ')})`);
  const preset = PRESETS[presetName];
  let recipe: Recipe;
  try {
    recipe = previous?.recipe ?? getRecipe(o.recipe ?? DEFAULT_RECIPE);
  } catch (err) {
    throw new UserError((err as Error).message);
  }
  const seed = previous?.seed ?? o.seed ?? 0;

  if (o.resume && previous) {
    const ignored = ignoredOnResume(o as unknown as Record<string, unknown>, ['preset', 'recipe', 'steps', 'minutes', 'seed']);
    if (ignored.length) hooks.log('warn', `--resume keeps the run's own ${ignored.join(', ')} (config.json); the ones given are ignored`);
  }
  // Never writes over data/: data brought by hand is trained on as it is.
  ensureRunData(runDir, recipe.pool, (line) => hooks.log('info', line));
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
  const full: TrainExample[] = [];
  const first: TrainExample[] = [];
  const each: TrainExample[] = [];
  const wantsEach = recipe.curriculum.some((p) => p.turns === 'each');
  let dropped = 0;
  for (const r of trainRows) {
    const ex = toExample(tokenizeTrace(r.text, tokenizer), maxLen, weights);
    if (ex) full.push(ex);
    else dropped++;
    const f = toExample(tokenizeTrace(firstTurnOnly(r.text), tokenizer), maxLen, weights);
    if (f) first.push(f);
    if (wantsEach) {
      for (const cut of cutAfterEachTurn(r.text)) {
        const e = toExample(tokenizeTrace(cut, tokenizer), maxLen, weights);
        if (e) each.push(e);
      }
    }
  }
  if (trainRows.length === 0) throw new InputError(`${files.trainTraces} holds no transcript to train on`);
  if (full.length === 0) throw new InputError(`no training example of ${files.trainTraces} fits the context of ${maxLen} tokens (${trainRows.length} transcripts)`);
  const heldExamples = heldRows
    .map((r) => toExample(tokenizeTrace(r.text, tokenizer), maxLen, { copyWeight: 1 }))
    .filter((e): e is TrainExample => e !== null);
  const split = makeTaskPool(0);
  const trainingTasks = fs.existsSync(files.trainTasks) ? loadTasks(files.trainTasks) : split.train;
  const trainingKeys = new Set(trainingTasks.map(overlapKey));
  // The invariant the whole evaluation rests on: no held-out task (or its operand-swapped
  // twin) is in the training data. prepareRunData guarantees it; data brought by hand may not.
  const leaked = split.heldout.filter((t) => trainingKeys.has(overlapKey(t)));
  if (leaked.length > 0) {
    throw new UserError(
      `${files.trainTasks} holds ${leaked.length} task(s) that overlap the held-out split (e.g. ${JSON.stringify(leaked[0]!.question)}); ` +
        'training on them would contaminate evaluation',
    );
  }
  if (dropped) hooks.log('warn', `dropped ${dropped}/${trainRows.length} transcripts longer than ${maxLen} tokens (never truncated)`);

  // Model and optimiser, fresh or from the last checkpoint.
  let model: StackModel;
  let startStep = 0;
  let elapsedBefore = 0;
  let rngState = seed;
  const trainer = (m: StackModel) =>
    new Trainer(m, {
      lr: preset.lr,
      betas: preset.betas,
      weightDecay: preset.weightDecay,
      clip: preset.clip,
      warmupSteps: preset.warmupSteps,
      minLrRatio: preset.minLrRatio,
      schedule: 'cosine',
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
    rngState = st.rng ?? seed + startStep;
    metrics = reopenMetricsForResume(path.join(runDir, METRICS_FILE), startStep);
    hooks.log('info', `resumed from step ${startStep} (${(elapsedBefore / 60).toFixed(1)} min trained)`);
  } else {
    model = StackModel.create(cfg, seed);
    opt = trainer(model);
    metrics = new MetricsWriter(path.join(runDir, METRICS_FILE));
    const kindCounts: Record<string, number> = {};
    for (const t of trainingTasks) kindCounts[t.kind] = (kindCounts[t.kind] ?? 0) + 1;
    const config: RunConfig = {
      kind: 'sft',
      preset: presetName,
      recipe,
      model: cfg,
      params: model.paramCount(),
      backend: { asked: backend.asked, used: backend.used, ...(backend.note ? { note: backend.note } : {}) },
      seed,
      budget: o.steps !== undefined ? { steps: o.steps } : { minutes: o.minutes ?? preset.minutes },
      optimiser: { ...opt.optim },
      data: {
        trainExamples: full.length,
        firstTurnExamples: first.length,
        dropped,
        dropRate: trainRows.length ? dropped / trainRows.length : 0,
        taskCounts: kindCounts,
        heldoutTasks: split.heldout.length,
      },
      tokenizer: { sha256: tokenizerHash(tokenizer), vocabSize: tokenizer.vocabSize },
      ...(o.evalLimit !== undefined ? { evalLimit: o.evalLimit } : {}),
      codeVersion: CODE_VERSION,
      created: new Date().toISOString(),
    };
    writeJsonAtomic(configFile, config);
  }
  const budget = previous?.budget ?? (o.steps !== undefined ? { steps: o.steps } : { minutes: o.minutes ?? preset.minutes });
  const totalSteps = budget.steps;
  const budgetMs = (budget.minutes ?? 0) * 60_000;
  hooks.log(
    'info',
    `SFT: preset ${presetName} (${model.paramCount()} parameters), recipe ${recipe.name}, ` +
      (totalSteps !== undefined ? `${totalSteps} steps` : `${budget.minutes} minutes`) +
      `, ${full.length} examples, ${opt.workers.threads} extra worker thread(s)`,
  );

  const rng = makeRng(rngState);
  const orders = new Map<string, { order: number[]; at: number }>();
  const sample = (pool: TrainExample[], key: string, n: number): TrainExample[] => {
    let s = orders.get(key);
    const out: TrainExample[] = [];
    while (out.length < n) {
      if (!s || s.at >= s.order.length) {
        const order = pool.map((_, i) => i);
        for (let i = order.length - 1; i > 0; i--) {
          const j = Math.floor(rng.uniform() * (i + 1));
          [order[i], order[j]] = [order[j]!, order[i]!];
        }
        s = { order, at: 0 };
        orders.set(key, s);
      }
      out.push(pool[s.order[s.at++]!]!);
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
  let lastRecord: Record<string, unknown> = {};
  const curve: { step: number; time: number; accuracy: number }[] = [];

  const divergence = new DivergenceGuard(runDir);
  const checkpoint = async () => {
    const p = await saveGuarded(
      runDir,
      () =>
        saveCheckpoint(runDir, step, model, opt, {
          [RESUME_STATE]: { step, elapsed: elapsed(), rng: Math.floor(rng.uniform() * 2 ** 31) },
        }),
      hooks,
      o.keepCheckpoints ?? DEFAULT_KEEP_CHECKPOINTS,
    );
    lastCheckpoint = Date.now();
    if (p) hooks.checkpoint(step, p);
  };
  const accuracyPoint = (final: boolean): EvalSummary => {
    const tasks = evalLimit ? split.heldout.slice(0, evalLimit) : split.heldout;
    const { summary } = evaluateModel(model, tokenizer, tasks, 'heldout', trainingKeys, heldExamples, hooks);
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
      const pool = phase.turns === 'first' ? first : phase.turns === 'each' ? each : full;
      const batch = padBatch(sample(pool, phase.turns, phase.batch), 2);
      const t0 = Date.now();
      const r = opt.step(batch, { progress: totalSteps !== undefined ? undefined : progress });
      const dt = Date.now() - t0;
      trainMs += dt;
      step = r.step;
      const rec: Record<string, unknown> = {
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
      if (step % heldoutEvery === 0 && heldExamples.length) rec['heldout_loss'] = heldoutLoss(model, heldExamples);
      metrics.append(rec as { phase: 'sft'; step: number; time: number });
      hooks.metrics(rec);
      lastRecord = rec;
      divergence.observe(r, step); // throws after MAX_NONFINITE_STEPS in a row (no checkpoint of NaN weights)
      if (totalSteps !== undefined) hooks.progress('sft', step, totalSteps, `loss ${r.loss.toFixed(3)}`);
      else hooks.progress('sft', Math.round(elapsed()), Math.round(budgetMs / 1000), `step ${step}, loss ${r.loss.toFixed(3)}`);
      if (Date.now() - lastCheckpoint >= ckEvery) await checkpoint();
      if (nextEval < evalPoints.length && evalPoints[nextEval]! < 1 && progressOf(step) >= evalPoints[nextEval]!) {
        nextEval++;
        await checkpoint();
        accuracyPoint(false);
      }
    }
    await checkpoint();
    let final: EvalSummary | null = null;
    if (!cancelled && evalPoints.includes(1) && !hooks.isCancelled()) final = accuracyPoint(true);
    const summary = {
      runDir,
      steps: step,
      minutes: elapsed() / 60,
      wallMinutes: (Date.now() - startedAt) / 60000,
      backend: backend.used,
      loss: lastRecord['loss'],
      sup_acc: lastRecord['sup_acc'],
      ...(final ? { heldout_accuracy: final.accuracy, by_kind: final.by_kind, span_accuracy: final.span_accuracy } : {}),
      curve,
    };
    return { cancelled, summary };
  } finally {
    metrics.close();
    opt.dispose();
    model.dispose();
  }
}
