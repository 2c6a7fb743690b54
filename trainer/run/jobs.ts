// The jobs the worker process (and the CLI, in-process) runs: SFT, GRPO and evaluation on a
// run folder; building a world, distilling trajectories and asking the student one question.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type {
  AskJobSpec,
  DistillJobSpec,
  EvalJobSpec,
  EvalJobSummary,
  EvalSplit,
  GrpoJobSpec,
  JobResult,
  PreparedTraces,
  SftJobSpec,
  SplitManifest,
  WorkerJobSpec,
  WorldJobSpec,
} from '../../core/protocol/worker';
import { runWorldJob } from './worldJob';
import { runDistillJob } from '../agent/distillJob';
import { runAskJob } from '../agent/askJob';
import { rollout } from '../../core/distill';
import { makeStubTeacher } from '../../core/stubTeacher';
import { WorldTask, loadedWorlds, splitManifest, worldEnv } from '../../core/worlds';
import { isHinted } from '../../core/worldSource';
import { sftOptionsFromJob } from '../../core/protocol/sftOptions';
import { BackendAsk, initBackend } from '../model/backend';
import { loadCheckpoint } from './checkpoint';
import { tokenizeTrace, toExample, type TrainExample } from '../sft/data';
import { checkWritableTarget, writeFileAtomic, writeJsonAtomic, toJsonl } from '../../store/files';
import { StackModel } from '../model/model';
import { dataFiles, loadTokenizer, readTraceRows } from '../sft/prepare';
import { type TeacherKnobs, stubTeacherOptions, teacherKnobsOf } from '../sft/recipes';
import { checkRunTokenizer, checkpointModelConfig, configModel, readRunConfig } from './runGuards';
import { MetricsWriter } from '../../store/runStore';
import { type JobHooks, UserError } from './jobRun';
import { evaluateModel, loadWorldTasks, splitTasks, trainingKeysOf } from './jobEval';
import { runSft } from '../sft/sft';
import { dropPreparedTokenizer, prepareSftRunData, preparedLine } from '../sft/tracesRun';
import { runGrpo } from '../grpo/grpo';
import { freshSpecOf, readWorldFolder, runSplits, splitsOfWorld, worldRecord } from '../../store/worldFolder';
import { CONFIG_FILE, EVAL_DIR, evalRowsFile, evalSummaryFile, METRICS_FILE } from '../../core/protocol/folders';

export type { JobHooks } from './jobRun';
export type { JobResult } from '../../core/protocol/worker';

/** Runs one job; the result's `kind` (and so its summary's type) is the spec's. */
export async function runJob(spec: SftJobSpec, hooks: JobHooks): Promise<JobResult<'sft'>>;
export async function runJob(spec: GrpoJobSpec, hooks: JobHooks): Promise<JobResult<'grpo'>>;
export async function runJob(spec: EvalJobSpec, hooks: JobHooks): Promise<JobResult<'eval'>>;
export async function runJob(spec: WorldJobSpec, hooks: JobHooks): Promise<JobResult<'world'>>;
export async function runJob(spec: DistillJobSpec, hooks: JobHooks): Promise<JobResult<'distill'>>;
export async function runJob(spec: AskJobSpec, hooks: JobHooks): Promise<JobResult<'ask'>>;
export async function runJob(spec: WorkerJobSpec, hooks: JobHooks): Promise<JobResult>;
export async function runJob(spec: WorkerJobSpec, hooks: JobHooks): Promise<JobResult> {
  if (spec.kind === 'world') return runWorldJob(spec, hooks);
  if (spec.kind === 'distill') return runDistillJob(spec, hooks);
  if (spec.kind === 'ask') return runAskJob(spec, hooks);
  if (spec.kind === 'sft') return runSftJob(spec, hooks);
  if (spec.kind === 'grpo') {
    const { kind: _kind, ...options } = spec;
    return runGrpo(options, hooks);
  }
  return runEval(spec.runDir, spec.split, spec.checkpoint ?? 'latest', spec.backend ?? 'auto', spec.limit, hooks, spec.world, spec.copyBias, spec.copyStop, spec.copyValues);
}

/**
 * An SFT job. Given `traces` alone (the editor's Train (SFT) on a distilled file), the run
 * folder is made from that file first, here in the worker (the extension host trains
 * nothing: not the tokenizer, not the held-out references), and the summary says how.
 */
async function runSftJob(spec: SftJobSpec, hooks: JobHooks): Promise<JobResult<'sft'>> {
  // Only the SFT table's job fields reach the trainer (a spec's other fields are not SFT options).
  const options = sftOptionsFromJob(spec);
  if (spec.traces === undefined || spec.world !== undefined) return runSft({ runDir: spec.runDir, ...options }, hooks);
  hooks.log('info', `preparing ${spec.runDir} from ${spec.traces} (the trajectories copied, the tokenizer trained)`);
  let prepared: PreparedTraces;
  try {
    prepared = prepareSftRunData(spec.runDir, spec.traces);
  } catch (err) {
    throw new UserError(`cannot train on ${spec.traces}: ${(err as Error).message}`);
  }
  hooks.log('info', preparedLine(prepared));
  // A model's own tokenizer becomes the run's (the trainer writes it): the one just trained goes, data/ stays.
  if (spec.base !== undefined) dropPreparedTokenizer(spec.runDir);
  const { traces: _traces, ...rest } = options;
  const result = await runSft({ runDir: spec.runDir, ...rest }, hooks);
  return { ...result, summary: { ...result.summary, prepared } };
}

/**
 * `limit` tasks of a split taken shape by shape in turn (a lookup, a sum, a compare, ... then the
 * next of each), in the split's order: the first 20 of a world's held-out split held no lookup
 * (the tour's finding), so a limited Evaluate measured other shapes than the whole split.
 */
export function spreadByShape<T extends { task: { kind?: string } }>(tasks: readonly T[], limit: number | undefined): T[] {
  if (limit === undefined || limit >= tasks.length) return [...tasks];
  const byShape = new Map<string, number[]>();
  tasks.forEach((t, i) => {
    const k = t.task.kind ?? '';
    if (!byShape.has(k)) byShape.set(k, []);
    byShape.get(k)!.push(i);
  });
  const chosen: number[] = [];
  for (let round = 0; chosen.length < limit; round++) {
    for (const idx of byShape.values()) if (round < idx.length && chosen.length < limit) chosen.push(idx[round]!);
  }
  return chosen.sort((a, b) => a - b).map((i) => tasks[i]!);
}

export async function runEval(
  runDirArg: string,
  split: EvalSplit,
  which: string,
  backendAsk: string,
  limit: number | undefined,
  hooks: JobHooks,
  worldDir?: string,
  copyBias?: number,
  copyStop?: boolean,
  copyValues?: boolean,
): Promise<JobResult<'eval'>> {
  const runDir = path.resolve(runDirArg);
  const configFile = path.join(runDir, CONFIG_FILE);
  const run = readRunConfig(runDir);
  if (!run) throw new UserError(`${runDir} is not a run folder (no ${CONFIG_FILE})`);
  // Where the result goes is checked first: a metrics.jsonl that is a FIFO or a folder fails before eval/ is written.
  checkWritableTarget(path.join(runDir, METRICS_FILE));
  const configured = configModel(run.config, configFile);
  if (!configured) throw new UserError(`${configFile} describes no trained model (kind ${String(run.config['kind'] ?? 'unknown')}); train one first`);
  if (which !== 'latest' && !/^step-\d+$/.test(which)) throw new UserError(`--checkpoint must be 'latest' or 'step-N' (got '${which}')`);
  // The files first (a damaged one fails in a fraction of a second), then the backend.
  const ck = loadCheckpoint(runDir, which); // a damaged or NaN checkpoint: an InputError naming it
  const tokenizer = loadTokenizer(runDir);
  checkRunTokenizer(run.config, configFile, tokenizer);
  const trained = checkpointModelConfig(ck, { model: configured, what: configFile }, tokenizer);
  const cfg = { ...trained, ...(copyBias !== undefined ? { copyBias } : {}), ...(copyStop !== undefined ? { copyStop } : {}), ...(copyValues !== undefined ? { copyValues } : {}) };
  let backend;
  try {
    backend = await initBackend(backendAsk as BackendAsk);
  } catch (err) {
    throw new UserError((err as Error).message);
  }
  hooks.started(backend.used);
  const model = StackModel.fromWeights(cfg, ck.weights);
  try {
    const files = dataFiles(runDir);
    // The run's own world (config.json's "world", its copy in world/), or the folder --world names.
    const pool = worldDir !== undefined ? splitsOfWorld(readWorldFolder(worldDir)) : runSplits(runDir);
    const ownWorld = runSplits(runDir);
    const trainingTasks: WorldTask[] = fs.existsSync(files.trainTasks)
      ? loadWorldTasks(files.trainTasks, loadedWorlds([ownWorld.id]))
      : ownWorld.train.map((task) => ({ task, world: ownWorld.id }));
    if (split === 'train' && worldDir !== undefined) throw new UserError("--split train is the run's own training tasks: drop --world");
    const splitAll = splitTasks(split, trainingTasks, pool);
    const tasks = spreadByShape(splitAll, limit);
    const trainingKeys = trainingKeysOf(
      files.trainTasks,
      trainingTasks.map((t) => t.task),
    );
    // Span accuracy is teacher-forced on the teacher's transcripts: the run's own for the
    // seed world's splits, the stub teacher's (against each world's corpus) for fresh ones.
    // A GRPO run has no recipe of its own: its student learned the teacher of the SFT run it came from.
    const teacher = runTeacherKnobs(run.config);
    let traceTexts: string[];
    if ((split === 'heldout' && worldDir === undefined) || split === 'train') {
      const traceFile = split === 'heldout' ? files.heldoutTraces : files.trainTraces;
      traceTexts = fs.existsSync(traceFile) ? readTraceRows(traceFile).map((r) => r.text) : [];
    } else {
      // The teacher the run's recipe trained with (its k and thoughts), in the task's own world;
      // a question without hints (docs/worlds.md) has no answer key to follow. A no-teacher
      // task's (fresh-differences) is the grader's reference: a trajectory the student never saw.
      traceTexts = tasks
        .filter(({ task }) => isHinted(task))
        .slice(0, 50)
        .map(({ task, world }) => rollout(task, makeStubTeacher([task], { ...stubTeacherOptions(teacher, worldEnv(world)), reference: true }), worldEnv(world)).transcript);
    }
    const spanExamples = traceTexts
      .slice(0, limit ?? undefined)
      .map((text) => toExample(tokenizeTrace(text, tokenizer), cfg.maxSeq, { copyWeight: 1 }))
      .filter((e): e is TrainExample => e !== null);
    const evaluated = await evaluateModel(model, tokenizer, tasks, split, trainingKeys, spanExamples, hooks, 'auto', teacher);
    const rows = evaluated.rows;
    // fresh-differences is asked over fresh-values' worlds (store/worldFolder.ts freshWorldDifferenceTasks).
    const freshSpec = pool.world && (split === 'fresh-values' || split === 'fresh-entities' || split === 'dev-entities' || split === 'fresh-differences') ? freshSpecOf(pool.world, split === 'fresh-differences' ? 'fresh-values' : split) : undefined;
    const manifest: SplitManifest | undefined = pool.world
      ? split === 'train'
        ? undefined
        : freshSpec
          ? { kind: freshSpec.kind, seeds: freshSpec.seeds, tasks: tasks.length, world: worldRecord(pool.world) }
          : { kind: 'custom', seeds: [pool.id.seed], tasks: (split === 'dev' ? pool.dev : pool.heldout).length, world: worldRecord(pool.world) }
      : split === 'heldout'
        ? { kind: 'seed', seeds: [0], tasks: pool.heldout.length }
        : split === 'train'
          ? undefined
          : splitManifest()[split];
    // `of`: the split's size, so a limited evaluation says "20 of the 55" wherever it is shown.
    const summary = { ...evaluated.summary, ...(manifest ? { worlds: manifest } : {}), of: splitAll.length, ...(cfg.copyBias ? { copy_bias: cfg.copyBias, ...(cfg.copyStop ? { copy_stop: true } : {}), ...(cfg.copyValues ? { copy_values: true } : {}) } : {}) };
    writeFileAtomic(path.join(runDir, EVAL_DIR, evalRowsFile(split)), toJsonl(rows));
    // The file names its checkpoint too: a figure read back later says what it was measured on.
    writeJsonAtomic(path.join(runDir, EVAL_DIR, evalSummaryFile(split)), { ...summary, checkpoint: which, step: ck.step });
    const metrics = new MetricsWriter(path.join(runDir, METRICS_FILE));
    const rec = {
      phase: 'eval' as const,
      step: ck.step,
      time: Number(((ck.extra['trainer_state'] ?? ck.extra['grpo_state']) as { elapsed?: number } | undefined)?.elapsed ?? 0),
      split,
      accuracy: summary.accuracy,
      by_kind: summary.by_kind,
      n: summary.n,
      of: splitAll.length,
      checkpoint: which,
    };
    metrics.append(rec);
    metrics.close();
    hooks.metrics(rec);
    const jobSummary: EvalJobSummary = { ...summary, checkpoint: which, step: ck.step };
    return { kind: 'eval', cancelled: hooks.isCancelled(), summary: jobSummary };
  } finally {
    model.dispose();
  }
}

/**
 * The teacher a run's student imitated (its k, its thoughts): an SFT run's own recipe; a
 * GRPO run's, which has none, is that of the SFT run it started from (config.json "from").
 */
export function runTeacherKnobs(config: Record<string, unknown>): TeacherKnobs {
  return teacherKnobsOf(config['recipe'] ?? recipeOfSource(config));
}

function recipeOfSource(config: Record<string, unknown>): unknown {
  const from = config['from'];
  if (typeof from !== 'object' || from === null || typeof (from as { run?: unknown }).run !== 'string') return undefined;
  try {
    return readRunConfig((from as { run: string }).run)?.config['recipe'];
  } catch {
    return undefined; // the source run moved or is damaged: the seed's teacher, as before
  }
}
