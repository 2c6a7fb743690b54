// Supervised fine-tuning of the student: the loop, the recipe (copy weights, curriculum),
// metrics per step in metrics.jsonl, held-out loss, checkpoints (atomic), --resume, and
// held-out accuracy at points of the budget (the learning curve).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { overlapKey } from '../../core/overlap';
import type { MetricRecord } from '../../core/protocol/metrics';
import { SFT_OPTION_DEFAULTS, type SftTableOptions } from '../../core/protocol/sftOptions';
import type { AccuracyPoint, JobResult, SftSummary } from '../../core/protocol/worker';
import { type Tokenizer, tokenizerHash, tokenizerKind } from '../../core/tokenizer';
import { TASK_KINDS, type Task } from '../../core/types';
import { TASK_FACTS } from '../../core/world';
import { WorldTask, allTasksOf, freshSplitTasks, splitManifest, worldName } from '../../core/worlds';
import type { BackendInfo } from '../model/backend';
import { type LoadedCheckpoint, latestCheckpoint, loadCheckpoint, saveCheckpoint } from '../run/checkpoint';
import { TrainExample, cutAfterEachTurn, firstTurnOnly, padBatch, toExample, tokenizeTrace } from './data';
import { DataOrder, DataOrderState } from './dataOrder';
import type { EvalSummary } from '../agent/eval';
import { InputError, writeJsonAtomic } from '../../store/files';
import { type HfModelFolder, type OwnTokenizer, checkBaseFolder, loadHfFolder, withAddedRows } from '../hf/hfModel';
import { LoraModel, LoraSpec, baseFiles, checkLoraRecord, parseLoraSpec } from '../model/lora';
import { evaluateModel, loadTasks, trainingKeysOf } from '../run/jobEval';
import {
  CODE_VERSION,
  type JobHooks,
  RunCheckpoints,
  RunClock,
  UserError,
  type BackendRecord,
  backendRecord,
  cancelRequested,
  openMetrics,
  previousRunConfig,
  startBackend,
} from '../run/jobRun';
import { ModelConfig, PRESETS, type Preset, PresetName, StackModel, presetConfig } from '../model/model';
import { Trainer } from '../model/optim';
import { OWN_NAMES_SUFFIX, type PreparedRecord, type WorldSource, dataFiles, ensureRunData, loadTokenizer, readPreparedRecord, readTraceRows } from './prepare';
import { Recipe, defaultRecipeName, getRecipe, phaseAt } from './recipes';
import { DivergenceGuard, checkRunTokenizer, checkSftConfig, checkpointModelConfig, configModel, ignoredOnResume, resumeStateOf } from '../run/runGuards';
import { type MetricsWriter } from '../../store/runStore';
import { WORLD_COPY, type WorldSplits, hasRunWorld, readWorldFolder, runSplits, worldRecord } from '../../store/worldFolder';
import { CONFIG_FILE, DATA_DIR, HELDOUT_TRACES_FILE, PREPARED_FILE, RUN_WORLD_DIR, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, TRAIN_TASKS_FILE, TRAIN_TRACES_FILE } from '../../core/protocol/folders';

/** An SFT run's options: the SFT option table's (core/protocol/sftOptions.ts) and the code's own. */
export interface SftOptions extends SftTableOptions {
  runDir: string;
  /** Data-parallel worker threads ('auto' default). */
  parallel?: number | 'auto';
}

interface RunConfig {
  kind: 'sft';
  /** Continued SFT: the run and checkpoint it started from. */
  from?: { run: string; checkpoint: string; step: number };
  /** The Hugging Face model folder it started from (--base). */
  base?: { dir: string; architecture: string; dtypes: string[]; params: number };
  /**
   * A LoRA run (--lora): the adapters' spec, the embedding ids that train in full beside them
   * (trainedRows: the wire specials added to the base's tokenizer) and how many parameters
   * train (the base's own stay frozen).
   */
  lora?: LoraSpec & { trainableParams: number };
  preset: PresetName;
  recipe: Recipe;
  model: ModelConfig;
  params: number;
  backend: BackendRecord;
  seed: number;
  budget: { steps?: number; minutes?: number };
  optimiser: Record<string, unknown>;
  splits: Record<string, { kind: string; seeds: number[]; tasks: number }>;
  data: { trainExamples: number; firstTurnExamples: number; dropped: number; dropRate: number; taskCounts: Record<string, number>; heldoutTasks: number; augmentation: { rows: number; worlds: number; ownNames: number } };
  /** `data`: what it was trained on (data/prepared.json); absent for a run made before it was recorded. */
  tokenizer: { sha256: string; vocabSize: number; data?: PreparedRecord['tokenizer'] };
  /** --eval-limit as given at the start (a resume keeps it unless given again). */
  evalLimit?: number;
  /** A user's world (docs/worlds.md): its copy is the run's world/. */
  world?: ReturnType<typeof worldRecord>;
  codeVersion: string;
  created: string;
}

const RESUME_STATE = 'trainer_state';
/** Dev tasks per learning-curve point (one fresh world's 50). */
const DEV_POINT_TASKS = 50;

/** Where a training example comes from: the seed world or a fresh (augmentation) world. */
type Origin = 'seed' | 'fresh';

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

/**
 * Continued SFT (--from RUN): a new run that starts from another SFT run's latest
 * checkpoint, on that run's data and tokenizer, at the learning rate that run ended with
 * (constant): "the same compute spent on more SFT", the baseline GRPO is compared with.
 * A new run copies that run's tokenizer and data (never over a file already there).
 */
function continuedFrom(runDir: string, previous: RunConfig | null, from: string | undefined): { dir: string; config: RunConfig } | null {
  const fromDir = previous?.from?.run ?? (from !== undefined ? path.resolve(from) : undefined);
  if (fromDir === undefined) return null;
  const fc = path.join(fromDir, CONFIG_FILE);
  const parsed = fs.existsSync(fc) ? (JSON.parse(fs.readFileSync(fc, 'utf8')) as Partial<RunConfig>) : null;
  if (!parsed || parsed.kind !== 'sft') throw new UserError(`--from ${fromDir}: not an SFT run folder (no ${CONFIG_FILE} of kind sft)`);
  if (!previous) {
    // A user's world travels with the run too: without it the run's splits would be the
    // textbook's, and its evaluations would ask another world's questions.
    const world = hasRunWorld(fromDir) ? WORLD_COPY.map((f) => path.join(RUN_WORLD_DIR, f)) : [];
    for (const f of [TOKENIZER_FILE, TOKENIZER_CONFIG_FILE, ...[TRAIN_TRACES_FILE, HELDOUT_TRACES_FILE, TRAIN_TASKS_FILE, PREPARED_FILE].map((f) => path.join(DATA_DIR, f)), ...world]) {
      const src = path.join(fromDir, f);
      const dst = path.join(runDir, f);
      if (!fs.existsSync(src)) continue;
      if (fs.existsSync(dst)) throw new UserError(`--from: ${dst} exists; continued SFT never writes over data (choose a new --run)`);
      fs.mkdirSync(path.dirname(dst), { recursive: true });
      fs.copyFileSync(src, dst);
    }
  }
  return { dir: fromDir, config: parsed as RunConfig };
}

/** Training examples by curriculum turns, origin and shape (keys from poolKey). */
export type ExamplePools = Map<string, TrainExample[]>;
export const poolKey = (turns: string, origin: Origin, kind: string) => `${turns}|${origin}|${kind}`;

/**
 * Pools by curriculum turns, origin (the seed world or a fresh training world) and shape,
 * so that the recipe's shape weights and augmentation share act at sampling time. A
 * transcript longer than the context is dropped (counted), never truncated.
 */
function examplePools(
  trainRows: ReturnType<typeof readTraceRows>,
  tokenizer: Tokenizer,
  maxLen: number,
  recipe: Recipe,
): { pools: ExamplePools; dropped: number; fullCount: number; firstCount: number } {
  const weights = {
    copyWeight: recipe.copyWeight,
    kindWeights: recipe.kindWeights,
    ...(recipe.copyKindWeights ? { copyKindWeights: recipe.copyKindWeights } : {}),
  };
  const pools: ExamplePools = new Map();
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
  return { pools, dropped, fullCount, firstCount };
}

/**
 * Draws a batch from the pools in the data order: the origin by the recipe's augmentation
 * share (the other one when a pool is empty), the shape by its weights, then the next
 * example of that pool (the order's state is what a resume continues).
 */
export function poolSampler(pools: ExamplePools, recipe: Recipe, order: DataOrder): (turns: string, n: number) => TrainExample[] {
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
  return (turns, n) => {
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
}

/** Where an SFT run starts: the options and a resumed or continued run's config.json made one. */
interface SftStart {
  runDir: string;
  configFile: string;
  files: ReturnType<typeof dataFiles>;
  /** A resumed run's config.json. */
  previous: RunConfig | null;
  /** Continued SFT: the run it continues (its tokenizer and data copied in). */
  fromRun: { dir: string; config: RunConfig } | null;
  /** --base: the Hugging Face model folder a new run starts from. */
  baseFolder: HfModelFolder | null;
  /** The model's own Hugging Face tokenizer: the run's, with the wire specials it lacked as new rows. */
  ownTokenizer: OwnTokenizer | null;
  loraSpec: LoraSpec | null;
  presetName: PresetName;
  preset: Preset;
  recipe: Recipe;
  seed: number;
  /** A user's world (--world) and the traces distilled from it (--traces). */
  source: WorldSource | undefined;
}

/**
 * The run's settings: the options checked against each other and against a resumed run's
 * config.json. Nothing is written but a continued run's copy of the data it continues on.
 */
function sftStart(o: SftOptions, hooks: JobHooks): SftStart {
  const runDir = path.resolve(o.runDir);
  const configFile = path.join(runDir, CONFIG_FILE);
  const files = dataFiles(runDir);
  const previous = previousRunConfig(runDir, 'sft', o.resume, checkSftConfig, 'ignore') as RunConfig | null;
  if (o.base !== undefined && (o.from !== undefined || previous?.from)) throw new UserError('--base and --from both give the starting weights: give one of them');
  // --base is checked before anything is written (a lab tokenizer must be the run's, already there; a model's own becomes the run's).
  if (o.lora !== undefined && o.base === undefined) throw new UserError('--lora trains adapters on a frozen base model: give --base HF_DIR too');
  let loraSpec: LoraSpec | null = null;
  if (o.lora !== undefined && !previous) {
    try {
      loraSpec = parseLoraSpec(o.lora);
    } catch (err) {
      throw new UserError((err as Error).message);
    }
  }
  const baseStart = !previous && o.base !== undefined ? checkBaseFolder(path.resolve(o.base), files.tokenizer) : null;
  const baseFolder = baseStart?.folder ?? null;
  const ownTokenizer = baseStart?.own ?? null;
  // LoRA over added rows: those rows train beside the adapters (PEFT's modules_to_save), the base's stay frozen.
  if (loraSpec && ownTokenizer?.added.length) loraSpec = { ...loraSpec, trainedRows: ownTokenizer.added.map((a) => a.id) };
  const fromRun = continuedFrom(runDir, previous, o.from);
  // A resumed or continued LoRA run trains its adapters on (checkpoint.json's base).
  const recordedLora = previous?.lora ?? fromRun?.config.lora;
  if (recordedLora) {
    try {
      loraSpec = checkLoraRecord(recordedLora, path.join(previous ? runDir : fromRun!.dir, CONFIG_FILE));
    } catch (err) {
      throw new InputError((err as Error).message);
    }
  }
  const presetName = (previous?.preset ?? fromRun?.config.preset ?? o.preset ?? SFT_OPTION_DEFAULTS.preset) as PresetName;
  if (!(presetName in PRESETS)) throw new UserError(`unknown preset '${presetName}' (known: ${Object.keys(PRESETS).join(', ')})`);
  let recipe: Recipe;
  try {
    // A user's world's run (--world, or a folder the editor prepared from a world's traces) has its own default.
    recipe = previous?.recipe ?? fromRun?.config.recipe ?? getRecipe(o.recipe ?? defaultRecipeName(o.world !== undefined || hasRunWorld(runDir)));
  } catch (err) {
    throw new UserError((err as Error).message);
  }
  const seed = previous?.seed ?? o.seed ?? SFT_OPTION_DEFAULTS.seed;

  if (o.resume && previous) {
    const ignored = ignoredOnResume(o as unknown as Record<string, unknown>, ['preset', 'recipe', 'steps', 'minutes', 'seed']);
    if (ignored.length) hooks.log('warn', `--resume keeps the run's own ${ignored.join(', ')} (config.json); the ones given are ignored`);
  }
  if (o.traces !== undefined && o.world === undefined) throw new UserError('--traces FILE trains on trajectories of a world: give --world DIR too');
  const source = o.world !== undefined ? { world: readWorldFolder(o.world), ...(o.traces !== undefined ? { traces: path.resolve(o.traces) } : {}) } : undefined;
  return { runDir, configFile, files, previous, fromRun, baseFolder, ownTokenizer, loraSpec, presetName, preset: PRESETS[presetName], recipe, seed, source };
}

/** The run's data, tokenizer and model shape. */
interface SftData {
  split: WorldSplits;
  tokenizer: Tokenizer;
  /** What the tokenizer was trained on (data/prepared.json), when recorded. */
  preparedTokenizer: PreparedRecord['tokenizer'] | undefined;
  cfg: ModelConfig;
  /** A resume's latest checkpoint, checked against the model. */
  resumeFrom: LoadedCheckpoint | null;
}

/** data/ made when missing (the world's splits, the stub teacher's traces, the tokenizer), then read. */
async function prepareSftData(o: SftOptions, st: SftStart, hooks: JobHooks): Promise<SftData> {
  const { runDir, configFile, previous, fromRun, baseFolder, ownTokenizer, presetName, recipe } = st;
  // Never writes over data/: data brought by hand is trained on as it is.
  await ensureRunData(
    runDir,
    recipe.pool,
    (line) => hooks.log('info', line),
    recipe,
    st.source,
    () => hooks.isCancelled(),
    ownTokenizer?.given,
  );
  const split = runSplits(runDir);
  const tokenizer = loadTokenizer(runDir);
  const preparedTokenizer = readPreparedRecord(runDir)?.tokenizer;
  // A resumed or continued run keeps the model it recorded: a preset may change between
  // versions (tiny gained previous-token tables), a run's weights do not.
  const recorded = previous
    ? configModel(previous as unknown as Record<string, unknown>, configFile)
    : fromRun
      ? configModel(fromRun.config as unknown as Record<string, unknown>, path.join(fromRun.dir, CONFIG_FILE))
      : null;
  if (previous) checkRunTokenizer(previous as unknown as Record<string, unknown>, configFile, tokenizer);
  const cfg = recorded ?? (baseFolder ? { ...baseFolder.model, vocab: ownTokenizer?.vocab ?? baseFolder.model.vocab } : presetConfig(presetName, tokenizer.vocabSize));
  // A resume's checkpoint is checked before the data is tokenized: damage fails at once.
  const resumeFrom = o.resume && latestCheckpoint(runDir) !== null ? loadCheckpoint(runDir, 'latest') : null;
  if (resumeFrom)
    checkpointModelConfig(
      resumeFrom,
      { model: cfg, what: recorded ? `the model in ${configFile}` : `the run's preset ${presetName} with its tokenizer` },
      tokenizer,
    );
  return { split, tokenizer, preparedTokenizer, cfg, resumeFrom };
}

/** The training examples in their pools, the held-out ones, and the tasks trained on. */
interface SftExamples {
  trainRows: ReturnType<typeof readTraceRows>;
  pools: ExamplePools;
  dropped: number;
  fullCount: number;
  firstCount: number;
  heldExamples: TrainExample[];
  trainingTasks: Task[];
  /** Overlap keys of the tasks trained on (what the evaluations report as contaminated). */
  trainingKeys: Set<string>;
}

/** The data tokenized into examples; refused when none fits or a training task is a held-out one. */
function sftExamples(st: SftStart, d: SftData, hooks: JobHooks): SftExamples {
  const { files, recipe } = st;
  const { tokenizer, split } = d;
  const maxLen = d.cfg.maxSeq;
  const trainRows = readTraceRows(files.trainTraces);
  const heldRows = fs.existsSync(files.heldoutTraces) ? readTraceRows(files.heldoutTraces) : [];
  const { pools, dropped, fullCount, firstCount } = examplePools(trainRows, tokenizer, maxLen, recipe);
  if (trainRows.length === 0) throw new InputError(`${files.trainTraces} holds no transcript to train on`);
  if (fullCount === 0)
    throw new InputError(`no training example of ${files.trainTraces} fits the context of ${maxLen} tokens (${trainRows.length} transcripts)`);
  const heldExamples = heldRows.map((r) => toExample(tokenizeTrace(r.text, tokenizer), maxLen, { copyWeight: 1 })).filter((e): e is TrainExample => e !== null);
  // Without a tasks file (data brought by hand), the training tasks are those the rows name:
  // every question the seed world's table can ask is known; others cannot be checked.
  const hasTasksFile = fs.existsSync(files.trainTasks);
  let trainingTasks: Task[];
  if (hasTasksFile) trainingTasks = loadTasks(files.trainTasks);
  else {
    // A user's world's run always has its tasks file (trainer/sft/prepare.ts prepareWorldRunData).
    const byQuestion = new Map(allTasksOf(TASK_FACTS).map((t) => [t.question, t] as const));
    const named = [...new Set(trainRows.filter((r) => r.world === undefined || r.world === 'seed:0').map((r) => r.task))];
    trainingTasks = named.flatMap((q) => byQuestion.get(q) ?? []);
    const unknown = named.length - trainingTasks.length;
    if (unknown > 0)
      hooks.log(
        'warn',
        `${unknown} of ${named.length} questions in ${files.trainTraces} are not the default world's: their overlap with the held-out split cannot be checked (no ${files.trainTasks})`,
      );
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
  return { trainRows, pools, dropped, fullCount, firstCount, heldExamples, trainingTasks, trainingKeys };
}

type SftBudget = { steps?: number; minutes?: number };

/**
 * The budget: the run's own on resume; else the options; else the preset's default (a step
 * count where the preset has one, so that a default run is reproducible under load).
 */
function sftBudget(o: SftOptions, st: SftStart): SftBudget {
  const { previous, preset, fromRun } = st;
  return (
    previous?.budget ??
    (o.steps !== undefined
      ? { steps: o.steps }
      : o.minutes !== undefined
        ? { minutes: o.minutes }
        : preset.steps !== undefined && !fromRun
          ? { steps: preset.steps }
          : { minutes: preset.minutes })
  );
}

/** The optimiser of the preset; continued SFT goes on at the learning rate its run ended with. */
function sftTrainer(o: SftOptions, st: SftStart, budget: SftBudget, m: StackModel | LoraModel): Trainer {
  const { preset, fromRun } = st;
  const stepBudget = budget.steps;
  return new Trainer(m, {
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
}

/**
 * Model and optimiser at the run's step. With LoRA, `model` is the net (merged weights:
 * evaluation and decoding read it) and `trainable` the adapters over it.
 */
interface SftModel {
  model: StackModel;
  trainable: StackModel | LoraModel;
  opt: Trainer;
  metrics: MetricsWriter;
  startStep: number;
  /** Optimiser seconds before this session (a resume's). */
  elapsedBefore: number;
  /** The data order a resume continues (null: from the seed). */
  orderState: DataOrderState | null;
}

/** Fresh (config.json written), from the last checkpoint, or again from step 0 when a resumed run has none. */
function openSftModel(o: SftOptions, st: SftStart, d: SftData, ex: SftExamples, budget: SftBudget, backend: BackendInfo, hooks: JobHooks): SftModel {
  if (o.resume && d.resumeFrom === null) return restartedSftModel(o, st, d, budget, hooks);
  if (d.resumeFrom) return resumedSftModel(o, st, d.resumeFrom, budget, hooks);
  const { model, trainable, fromCheckpoint } = startingSftModel(st, d, hooks);
  const opt = sftTrainer(o, st, budget, trainable);
  const metrics = openMetrics(st.runDir, null);
  writeJsonAtomic(st.configFile, newSftConfig(o, st, d, ex, { model, trainable, opt, fromCheckpoint }, budget, backend));
  return { model, trainable, opt, metrics, startStep: 0, elapsedBefore: 0, orderState: null };
}

/** A resumed run killed before its first checkpoint: nothing to continue from, so it starts again at step 0. */
function restartedSftModel(o: SftOptions, st: SftStart, d: SftData, budget: SftBudget, hooks: JobHooks): SftModel {
  const { previous, loraSpec, configFile, runDir, seed } = st;
  const { cfg } = d;
  let model: StackModel;
  let trainable: StackModel | LoraModel;
  if (loraSpec) {
    // A LoRA run starts again from its base (config.json's), with fresh adapters.
    const dir = previous?.base?.dir;
    if (!dir) throw new UserError(`${configFile}: a LoRA run without "base": start it again in a new --run`);
    const files = baseFiles(dir);
    const b = loadHfFolder(dir);
    model = StackModel.fromWeights(cfg, withAddedRows(b.model, b.weights, cfg.vocab));
    trainable = LoraModel.create(model, loraSpec, { dir, files }, seed);
  } else if (previous?.base && !previous.from) {
    // A full fine-tune of a base model starts again from the base (with its added rows), not from noise.
    const b = loadHfFolder(previous.base.dir);
    trainable = model = StackModel.fromWeights(cfg, withAddedRows(b.model, b.weights, cfg.vocab));
  } else trainable = model = StackModel.create(cfg, seed);
  const opt = sftTrainer(o, st, budget, trainable);
  const metrics = openMetrics(runDir, 0);
  hooks.log('warn', `${runDir} has no checkpoint yet (the run stopped before its first): starting again from step 0`);
  return { model, trainable, opt, metrics, startStep: 0, elapsedBefore: 0, orderState: null };
}

/** A resumed run at its latest checkpoint: weights, optimiser state, step, time trained and data order. */
function resumedSftModel(o: SftOptions, st: SftStart, ck: LoadedCheckpoint, budget: SftBudget, hooks: JobHooks): SftModel {
  let model: StackModel;
  let trainable: StackModel | LoraModel;
  if (ck.lora) {
    model = StackModel.fromWeights(ck.config, ck.lora.baseWeights);
    trainable = LoraModel.fromAdapters(model, ck.lora.spec, ck.lora.base, ck.lora.adapters);
  } else trainable = model = StackModel.fromWeights(ck.config, ck.weights);
  const opt = sftTrainer(o, st, budget, trainable);
  if (ck.optimizer) opt.importState(ck.optimizer);
  else hooks.log('warn', 'the checkpoint holds no optimiser state: AdamW restarts from zero moments');
  const state = resumeStateOf(ck, RESUME_STATE);
  const orderState = state.order;
  if (!orderState) hooks.log('warn', 'the checkpoint holds no data order (written by an older version): the order restarts from the seed');
  const metrics = openMetrics(st.runDir, state.step);
  hooks.log('info', `resumed from step ${state.step} (${(state.elapsed / 60).toFixed(1)} min trained)`);
  return { model, trainable, opt, metrics, startStep: state.step, elapsedBefore: state.elapsed, orderState };
}

/** A new run's model: the continued run's checkpoint (--from), a Hugging Face model (--base, with LoRA or not), or a fresh one of the preset. */
function startingSftModel(
  st: SftStart,
  d: SftData,
  hooks: JobHooks,
): { model: StackModel; trainable: StackModel | LoraModel; fromCheckpoint: RunConfig['from'] | null } {
  const { fromRun, baseFolder, ownTokenizer, loraSpec, preset, presetName, seed } = st;
  const { cfg } = d;
  if (fromRun) {
    let ck;
    try {
      ck = loadCheckpoint(fromRun.dir, 'latest');
    } catch (err) {
      throw new UserError(`--from ${fromRun.dir}: cannot load its checkpoint: ${(err as Error).message}`);
    }
    let model: StackModel;
    let trainable: StackModel | LoraModel;
    if (ck.lora) {
      // Continued LoRA: the same adapters trained further on the same frozen base.
      model = StackModel.fromWeights(cfg, ck.lora.baseWeights);
      trainable = LoraModel.fromAdapters(model, ck.lora.spec, ck.lora.base, ck.lora.adapters);
    } else trainable = model = StackModel.fromWeights(cfg, ck.weights);
    hooks.log('info', `continued SFT from ${fromRun.dir} (${ck.name}) at a constant lr of ${preset.lr * preset.minLrRatio}`);
    return { model, trainable, fromCheckpoint: { run: fromRun.dir, checkpoint: ck.name, step: ck.step } };
  }
  if (baseFolder) {
    const files = baseFiles(baseFolder.dir); // before reading: a folder changed meanwhile is refused at the next load
    const model = StackModel.fromWeights(cfg, withAddedRows(baseFolder.model, loadHfFolder(baseFolder.dir).weights, cfg.vocab));
    const trainable = loraSpec ? LoraModel.create(model, loraSpec, { dir: baseFolder.dir, files }, seed) : model;
    hooks.log(
      'info',
      `starting from ${baseFolder.dir} (${baseFolder.architecture}, ${baseFolder.params} parameters, ${baseFolder.dtypes.join('+')}), the optimiser settings of preset ${presetName}` +
        (ownTokenizer ? `; the model's own tokenizer (${ownTokenizer.added.length ? `${ownTokenizer.added.length} wire-format specials added as tokens ${ownTokenizer.added[0]!.id}..${ownTokenizer.added[ownTokenizer.added.length - 1]!.id}, their rows the mean of the others` : 'it holds the wire-format specials'})` : '') +
        (loraSpec ? `; LoRA r=${loraSpec.r} alpha=${loraSpec.alpha} on ${loraSpec.targets.join(',')}: ${(trainable as LoraModel).paramCount()} trainable parameters${trainedRowsText(cfg, loraSpec)}, the base frozen` : ''),
    );
    return { model, trainable, fromCheckpoint: null };
  }
  const model = StackModel.create(cfg, seed);
  return { model, trainable: model, fromCheckpoint: null };
}

/** A new run's config.json: what it starts from, its model, recipe, budget and optimiser, its data, splits and tokenizer. */
function newSftConfig(
  o: SftOptions,
  st: SftStart,
  d: SftData,
  ex: SftExamples,
  m: { model: StackModel; trainable: StackModel | LoraModel; opt: Trainer; fromCheckpoint: RunConfig['from'] | null },
  budget: SftBudget,
  backend: BackendInfo,
): RunConfig {
  const { fromRun, baseFolder, ownTokenizer, source } = st;
  const { split, tokenizer, preparedTokenizer } = d;
  const { trainable } = m;
  const kindCounts: Record<string, number> = {};
  for (const t of ex.trainingTasks) kindCounts[t.kind] = (kindCounts[t.kind] ?? 0) + 1;
  return {
    kind: 'sft',
    ...(m.fromCheckpoint ? { from: m.fromCheckpoint } : {}),
    ...(baseFolder ? { base: { dir: baseFolder.dir, architecture: baseFolder.architecture, dtypes: baseFolder.dtypes, params: baseFolder.params } } : {}),
    ...(fromRun?.config.base && !baseFolder ? { base: fromRun.config.base } : {}),
    ...(trainable instanceof LoraModel ? { lora: { ...trainable.spec, trainableParams: trainable.paramCount() } } : {}),
    preset: st.presetName,
    recipe: st.recipe,
    model: d.cfg,
    params: m.model.paramCount(),
    backend: backendRecord(backend),
    seed: st.seed,
    budget,
    optimiser: { ...m.opt.optim },
    data: {
      trainExamples: ex.fullCount,
      firstTurnExamples: ex.firstCount,
      dropped: ex.dropped,
      dropRate: ex.trainRows.length ? ex.dropped / ex.trainRows.length : 0,
      taskCounts: kindCounts,
      heldoutTasks: split.heldout.length,
      // What the recipe's augmentation drew (transcripts of other worlds than the run's own).
      augmentation: augmentationOf(ex.trainRows, split.world ? worldName(split.id) : 'seed:0'),
    },
    splits: split.world
      ? {
          heldout: { kind: 'custom', seeds: [split.id.seed], tasks: split.heldout.length },
          dev: { kind: 'custom', seeds: [split.id.seed], tasks: split.dev.length },
        }
      : { heldout: { kind: 'seed', seeds: [0], tasks: split.heldout.length }, ...splitManifest() },
    // The folder the world came from (its copy is the run's world/).
    // A continued run names the folder its start came from, not the copy it was handed.
    ...(split.world ? { world: source ? worldRecord(source.world) : (fromRun?.config.world ?? worldRecord(split.world)) } : {}),
    tokenizer: {
      sha256: tokenizerHash(tokenizer),
      vocabSize: tokenizer.vocabSize,
      ...(preparedTokenizer ? { data: preparedTokenizer } : {}),
      // A model's own tokenizer (absent kind: the lab's): where it came from and the wire specials added to it.
      ...(tokenizerKind(tokenizer) === 'hf' ? { kind: 'hf' as const, ...(ownTokenizer ? { base: ownTokenizer.file, added: ownTokenizer.added } : {}) } : {}),
    },
    ...(o.evalLimit !== undefined ? { evalLimit: o.evalLimit } : {}),
    codeVersion: CODE_VERSION,
    created: new Date().toISOString(),
  };
}

export async function runSft(o: SftOptions, hooks: JobHooks): Promise<JobResult<'sft'>> {
  const st = sftStart(o, hooks);
  const d = await prepareSftData(o, st, hooks);
  const backend = await startBackend(o.backend ?? st.previous?.backend.asked ?? SFT_OPTION_DEFAULTS.backend, hooks);
  const ex = sftExamples(st, d, hooks);
  const budget = sftBudget(o, st);
  const m = openSftModel(o, st, d, ex, budget, backend, hooks);
  hooks.log(
    'info',
    `SFT: preset ${st.presetName} (${m.model.paramCount()} parameters${m.trainable instanceof LoraModel ? `, ${m.trainable.paramCount()} trainable: LoRA` : ''}), recipe ${st.recipe.name}, ` +
      (budget.steps !== undefined ? `${budget.steps} steps` : `${budget.minutes} minutes`) +
      `, ${ex.fullCount} examples, ${m.opt.workers.threads} extra worker thread(s)`,
  );
  const run = new SftLoop(o, hooks, st, d, ex, m, budget, backend);
  try {
    return await run.run();
  } finally {
    m.metrics.close();
    m.opt.dispose();
    m.trainable.dispose(); // (LoRA: the adapters and the net)
  }
}

/** The loop of an SFT run: the steps, the held-out loss, the checkpoints, the accuracy points and the summary. */
class SftLoop {
  private readonly sample: (turns: string, n: number) => TrainExample[];
  private readonly order: DataOrder;
  private readonly totalSteps: number | undefined;
  private readonly budgetMs: number;
  private readonly evalLimit: number | undefined;
  /** Budget fractions of the accuracy points, ascending; nextEval is the first still to come. */
  private readonly evalPoints: number[];
  private nextEval = 0;
  private readonly heldoutEvery: number;
  private readonly clock: RunClock;
  private readonly divergence: DivergenceGuard;
  private readonly checkpoints: RunCheckpoints;
  private step: number;
  private cancelled = false;
  private lastStep: { loss: number; sup_acc: number } | undefined;
  private readonly curve: AccuracyPoint[] = [];
  private readonly devCurve: AccuracyPoint[] = [];

  constructor(
    o: SftOptions,
    private readonly hooks: JobHooks,
    private readonly st: SftStart,
    private readonly d: SftData,
    private readonly ex: SftExamples,
    private readonly m: SftModel,
    budget: SftBudget,
    private readonly backend: BackendInfo,
  ) {
    this.order = m.orderState ? DataOrder.fromState(m.orderState) : new DataOrder(st.seed);
    this.sample = poolSampler(ex.pools, st.recipe, this.order);
    this.totalSteps = budget.steps;
    this.budgetMs = (budget.minutes ?? 0) * 60_000;
    // evalLimit 0: no accuracy points (a smoke run); otherwise that many held-out tasks each.
    this.evalLimit = o.evalLimit ?? st.previous?.evalLimit;
    this.evalPoints = this.evalLimit === 0 ? [] : [...(o.evalPoints ?? SFT_OPTION_DEFAULTS.evalPoints)].sort((a, b) => a - b);
    this.clock = new RunClock(m.elapsedBefore); // optimiser time: evaluations are not counted in the budget
    // A resume skips the points its run measured before it stopped.
    const measured = (point: number | undefined) => point !== undefined && point <= this.progressOf(m.startStep) && point < 1;
    while (measured(this.evalPoints[this.nextEval])) this.nextEval++;
    this.heldoutEvery = o.heldoutEvery ?? Math.max(25, Math.floor((this.totalSteps ?? 500) / 10));
    this.step = m.startStep;
    this.divergence = new DivergenceGuard(st.runDir);
    this.checkpoints = new RunCheckpoints(st.runDir, hooks, { everySeconds: o.checkpointEverySeconds, keep: o.keepCheckpoints }, () =>
      saveCheckpoint(st.runDir, this.step, m.trainable, m.opt, { [RESUME_STATE]: { step: this.step, elapsed: this.elapsed(), order: this.order.exportState() } }),
    );
  }

  private elapsed(): number {
    return this.clock.elapsed();
  }

  /** The share of the budget done at `step`: of the steps, or of the minutes. */
  private progressOf(step: number): number {
    return this.totalSteps !== undefined ? step / Math.max(1, this.totalSteps) : (this.elapsed() * 1000) / Math.max(1, this.budgetMs);
  }

  private checkpoint(): Promise<void> {
    return this.checkpoints.write(this.step);
  }

  async run(): Promise<JobResult<'sft'>> {
    while (this.progressOf(this.step) < 1) {
      if (await cancelRequested(this.hooks)) {
        this.cancelled = true;
        break;
      }
      await this.runStep();
      if (this.checkpoints.due()) await this.checkpoint();
      const point = this.evalPoints[this.nextEval];
      if (point !== undefined && point < 1 && this.progressOf(this.step) >= point) {
        this.nextEval++;
        await this.checkpoint();
        await this.accuracyPoint(false);
      }
    }
    await this.checkpoint();
    let final: EvalSummary | null = null;
    if (!this.cancelled && this.evalPoints.includes(1) && !this.hooks.isCancelled()) final = await this.accuracyPoint(true);
    return { kind: 'sft', cancelled: this.cancelled, summary: this.summary(final) };
  }

  /** One optimiser step on a batch of the curriculum's phase: its metrics record (and held-out loss when due) and progress. */
  private async runStep(): Promise<void> {
    const { hooks, totalSteps } = this;
    const progress = this.progressOf(this.step);
    // Continued SFT (--from) picks up where its run ended: in the recipe's last phase, not
    // back at the first-turn warm-up, which would spend a quarter of its budget on solved turns.
    const { index, phase } = phaseAt(this.st.recipe, this.st.fromRun ? 1 : progress);
    const batch = padBatch(this.sample(phase.turns, phase.batch), 2);
    const t0 = Date.now();
    const r = await this.m.opt.stepAsync(batch, { progress: totalSteps !== undefined ? undefined : progress });
    const dt = Date.now() - t0;
    this.clock.add(dt);
    const step = (this.step = r.step);
    const rec: MetricRecord = {
      phase: 'sft',
      step,
      time: this.elapsed(),
      loss: r.loss,
      token_loss: r.tokenLoss,
      sup_acc: r.supervised ? r.correct / r.supervised : 0,
      lr: r.lr,
      tokens_per_s: dt > 0 ? (r.tokens * 1000) / dt : 0,
      // The step's tokens through the model and those the loss supervised (compute, compared by bench/grpo.ts).
      tokens: r.tokens,
      trained_tokens: r.supervised,
      grad_norm: r.gradNorm,
      curriculum: index,
      batch: phase.batch,
      backend: this.backend.used,
      ...(r.skipped ? { skipped: true } : {}),
    };
    if (step % this.heldoutEvery === 0 && this.ex.heldExamples.length) rec['heldout_loss'] = await heldoutLoss(this.m.model, this.ex.heldExamples);
    this.m.metrics.append(rec);
    hooks.metrics(rec);
    this.lastStep = { loss: r.loss, sup_acc: r.supervised ? r.correct / r.supervised : 0 };
    this.divergence.observe(r, step); // throws after MAX_NONFINITE_STEPS in a row (no checkpoint of NaN weights)
    if (totalSteps !== undefined) hooks.progress('sft', step, totalSteps, `loss ${r.loss.toFixed(3)}`);
    else hooks.progress('sft', Math.round(this.elapsed()), Math.round(this.budgetMs / 1000), `step ${step}, loss ${r.loss.toFixed(3)}`);
  }

  /** Held-out exact match at this step (a metrics record and a curve point), then the dev split's beside it. */
  private async accuracyPoint(final: boolean): Promise<EvalSummary> {
    const { hooks, step } = this;
    const { split, tokenizer } = this.d;
    const { trainingKeys, heldExamples } = this.ex;
    const recipe = this.st.recipe;
    const tasks = (this.evalLimit ? split.heldout.slice(0, this.evalLimit) : split.heldout).map((task) => ({ task, world: split.id }));
    const { summary } = await evaluateModel(this.m.model, tokenizer, tasks, 'heldout', trainingKeys, heldExamples, hooks, 'auto', recipe);
    const rec = {
      phase: 'eval' as const,
      step,
      time: this.elapsed(),
      split: 'heldout',
      accuracy: summary.accuracy,
      by_kind: summary.by_kind,
      span_accuracy: summary.span_accuracy,
      failures: summary.failures,
      n: summary.n,
      // The split's size: n is fewer with an eval limit (the figure says "50 of the 55").
      of: split.heldout.length,
      final,
    };
    this.m.metrics.append(rec);
    hooks.metrics(rec);
    this.curve.push({ step, time: this.elapsed(), accuracy: summary.accuracy });
    hooks.log('info', `held-out exact match at step ${step}: ${(100 * summary.accuracy).toFixed(1)}% on ${summary.n}${summary.n < split.heldout.length ? ` of the ${split.heldout.length}` : ''} held-out tasks`);
    // Beside it, the first world of the dev split (fresh values: read, or remembered?); a user's world has its own dev split.
    const devPool: WorldTask[] = split.world ? split.dev.map((task) => ({ task, world: split.id })) : freshSplitTasks('dev');
    const devTasks = devPool.slice(0, Math.min(this.evalLimit ?? DEV_POINT_TASKS, DEV_POINT_TASKS));
    if (devTasks.length === 0) return summary;
    const dev = (await evaluateModel(this.m.model, tokenizer, devTasks, 'dev', trainingKeys, [], hooks, 'auto', recipe)).summary;
    const devRec = {
      phase: 'eval' as const,
      step,
      time: this.elapsed(),
      split: 'dev',
      accuracy: dev.accuracy,
      by_kind: dev.by_kind,
      failures: dev.failures,
      n: dev.n,
      final,
    };
    this.m.metrics.append(devRec);
    hooks.metrics(devRec);
    this.devCurve.push({ step, time: this.elapsed(), accuracy: dev.accuracy });
    hooks.log('info', `dev exact match at step ${step}: ${(100 * dev.accuracy).toFixed(1)}% of ${dev.n} (memorised ${dev.failures.memorised})`);
    return summary;
  }

  private summary(final: EvalSummary | null): SftSummary {
    const { step, lastStep } = this;
    return {
      runDir: this.st.runDir,
      steps: step,
      minutes: this.elapsed() / 60,
      wallMinutes: this.clock.wallMinutes(),
      backend: this.backend.used,
      loss: lastStep?.loss,
      sup_acc: lastStep?.sup_acc,
      ...(final ? { heldout_accuracy: final.accuracy, heldout_n: final.n, heldout_of: this.d.split.heldout.length, heldout_step: step, by_kind: final.by_kind, span_accuracy: final.span_accuracy } : {}),
      curve: this.curve,
      dev_curve: this.devCurve,
    };
  }
}

/** The start line's note on a LoRA spec's trained rows: which ids, of the embedding and which head ('' when none). */
function trainedRowsText(cfg: ModelConfig, spec: LoraSpec): string {
  const ids = spec.trainedRows;
  if (!ids?.length) return '';
  const where = cfg.tiedHead === false ? 'the embedding and the head' : 'the embedding (the head tied to it)';
  return ` (the adapters and the ${ids.length} added rows ${ids[0]}..${ids[ids.length - 1]} of ${where}, ${ids.length * cfg.dModel * (cfg.tiedHead === false ? 2 : 1)} values; every original row frozen)`;
}

/** Transcripts of worlds other than the run's own in its training data: how many, from how many worlds. */
function augmentationOf(rows: readonly { world?: string }[], own: string): { rows: number; worlds: number; ownNames: number } {
  const worlds = new Set<string>();
  let n = 0;
  let ownNames = 0;
  for (const r of rows) {
    if (r.world === undefined || r.world === own || r.world === 'seed:0') continue;
    n++;
    if (r.world.endsWith(OWN_NAMES_SUFFIX)) ownNames++;
    else worlds.add(r.world);
  }
  return { rows: n, worlds: worlds.size, ownNames };
}
