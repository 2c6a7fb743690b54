// Multi-turn GRPO from an SFT student (the seed's grpo_agent_step, batched over tasks). Per
// step: G sampled rollouts per task through the real loop, reward = exact match - a step
// penalty (configurable, audited before the run), group-relative advantages, groups with no
// spread skipped and counted, the clipped surrogate with a k3 KL to the frozen SFT policy on
// the ids carried from sampling, one token mean over the batch's generated tokens. Text the
// harness wrote never enters the loss. Pre-flight checks refuse a run that cannot learn.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { overlapKey } from '../../core/overlap';
import {
  RewardSpec,
  RewardSpecError,
  ZERO_ADVANTAGE,
  completionFromTranscript,
  formatRewardSpec,
  groupAdvantages,
  parseRewardSpec,
  scoreCompletion,
} from '../../core/reward';
import { type Tokenizer, canonicalTokenizerJson, tokenizerHash } from '../../core/tokenizer';
import type { Task } from '../../core/types';
import { makeTaskPool } from '../../core/world';
import { type LoadedWorld, WORLD_COPY, hasRunWorld, runSplits, runWorld, worldDifferencePool, worldRecord } from '../../store/worldFolder';
import { type LoadedWorlds, RL_POOL_PER_SHAPE, RL_POOL_WORLDS, ReservedWorldError, SEED_WORLD, TRAINING_SEEDS, WorldTask, evaluationEntityNames, freshDifferencePool, freshTrainingTasks, loadedWorlds, splitManifest, worldEnv, worldName, worldTemplates } from '../../core/worlds';
import { AgentRuntime, Episode } from '../agent/agentRuntime';
import { type LoadedCheckpoint, latestCheckpoint, loadCheckpoint, saveCheckpoint } from '../run/checkpoint';
import { TrainExample, toExample, tokenizeTrace } from '../sft/data';
import { EvalSummary } from '../agent/eval';
import { INPUT_LIMITS, InputError, readInputBytes, writeFileAtomic, writeJsonAtomic } from '../../store/files';
import { Batch, IGNORE, ModelConfig, StackModel, makeRng } from '../model/model';
import { Trainer } from '../model/optim';
import { teacherKnobsOf } from '../sft/recipes';
import { RolloutItem, rolloutOptions } from '../model/parallel';
import { modelPolicy, tokenizerCallMask } from '../agent/policy';
import { type PreflightReport, formatPreflight, runPreflight } from './preflight';
import { Stopped, dataFiles, derivedWorldTasks, loadTokenizer, readTraceRows, worldEvaluationNames } from '../sft/prepare';
import { DivergenceGuard, checkGrpoConfig, checkpointModelConfig, configModel, readRunConfig, resumeStateOf } from '../run/runGuards';
import type { MetricsWriter } from '../../store/runStore';
import {
  GRPO_OPTION_DEFAULTS,
  RL_OBJECTIVES,
  RL_POOLS,
  SCALE_REWARDS,
  grpoConfigSettings,
  type GrpoConfigSettings,
  type GrpoTableOptions,
  type RlObjective,
  type RlPool,
  type ScaleRewards,
} from '../../core/protocol/grpoOptions';
import type { MetricRecord } from '../../core/protocol/metrics';
import type { AccuracyPoint, GrpoSummary, JobResult } from '../../core/protocol/worker';
import { type BackendRecord, CODE_VERSION, type JobHooks, RunCheckpoints, RunClock, UserError, backendRecord, cancelRequested, openMetrics, previousRunConfig, startBackend } from '../run/jobRun';
import { evaluateModel, loadWorldTasks } from '../run/jobEval';
import type { BackendInfo } from '../model/backend';
import {
  PRESCREEN_DEFAULTS,
  defaultPrescreenTasks,
  formatPrescreen,
  formatVerdict,
  prescreenVerdict,
  sampleInPieces,
  summarisePrescreen,
  type PrescreenResult,
  type PrescreenSummary,
  type PrescreenVerdict,
} from './prescreen';
import { RevisitQueue, drawRound, revisitStateProblem } from './revisit';
import { teacherEpisode } from './guide';
import { CONFIG_FILE, METRICS_FILE, RUN_WORLD_DIR, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE } from '../../core/protocol/folders';

/**
 * The Contract's defaults (docs/architecture.md, "GRPO defaults"): the option table's
 * (core/protocol/grpoOptions.ts), and what no option sets.
 */
export const GRPO_DEFAULTS = {
  ...GRPO_OPTION_DEFAULTS,
  /** Consecutive steps with every group flat before the run says so. */
  flatlineSteps: 5,
  maxTurnTokens: 160,
  /** Rollouts per micro-batch of the update (gradient accumulation). */
  microBatchRows: 8,
  /** Under dynamic sampling, at most this many tasks drawn per step for each task kept. */
  maxDrawsPerTask: 3,
  /** Tasks the revisit queue holds at most (the most recently informative). */
  revisitQueue: 64,
};

/**
 * A GRPO run's options: the table's (core/protocol/grpoOptions.ts: the CLI flags, the job
 * spec and the editor settings are derived from it) and what only code sets.
 */
export interface GrpoOptions extends GrpoTableOptions {
  runDir: string;
  /** Data-parallel worker threads ('auto' default; the CLI's --threads N is N - 1 of them). */
  parallel?: number | 'auto';
  /** Flat steps in a row before the run says so in words. */
  flatlineSteps?: number;
}

export { RL_OBJECTIVES, RL_POOLS, SCALE_REWARDS, type RlObjective, type RlPool, type ScaleRewards };

/**
 * The tasks RL draws from. 'train': the SFT run's own (in-distribution: a sampled copy of
 * the gradient SFT already gave). 'fresh-values' / 'fresh-entities': training worlds of
 * their own seeds (core/worlds.ts TRAINING_SEEDS, never an evaluation split's), with the
 * overlap contract kept in every world; 'fresh-entities' worlds were never distilled, so
 * only the verifiable reward can teach them. 'fresh-differences': the RL value worlds asked a
 * family no teacher demonstrates (core/differenceTasks.ts), apart from its evaluation split.
 */
export function rlTaskPool(pool: RlPool, trainTasksFile: string, heldout: readonly Task[], opts: { balanceCompares?: boolean; loaded?: LoadedWorlds } = {}): WorldTask[] {
  if (pool === 'train') {
    return fs.existsSync(trainTasksFile) ? loadWorldTasks(trainTasksFile, opts.loaded ?? new Map()) : makeTaskPool(0).train.map((task) => ({ task, world: SEED_WORLD }));
  }
  if (pool === 'fresh-differences') return freshDifferencePool();
  const heldKeys = new Set(heldout.map(overlapKey));
  const kind = pool === 'fresh-values' ? 'values' : 'entities';
  const first = pool === 'fresh-values' ? TRAINING_SEEDS.rlValues : TRAINING_SEEDS.rlEntities;
  const out: WorldTask[] = [];
  for (let i = 0; i < RL_POOL_WORLDS; i++) {
    const world = { kind, seed: first + i } as const;
    for (const task of freshTrainingTasks(world, RL_POOL_PER_SHAPE, heldKeys, opts)) out.push({ task, world });
  }
  return out;
}

/**
 * A user's fact world's fresh pools: RL_POOL_WORLDS worlds derived from its own table with
 * the RL training seeds (new values; new names too for 'fresh-entities', drawn apart from
 * every name of the world's fresh-entities split), RL_POOL_PER_SHAPE tasks of each shape
 * from each, none a held-out or dev task's facts (trainer/sft/prepare.ts derivedWorldTasks, which
 * the SFT augmentation draws through too, asserts that no evaluation name is in the pool).
 * 'fresh-differences': the same value worlds asked the no-teacher family (store/worldFolder.ts).
 */
export function worldRlTaskPool(w: LoadedWorld, pool: 'fresh-values' | 'fresh-entities' | 'fresh-differences'): WorldTask[] {
  if (!w.facts || !w.manifest) throw new UserError(`--pool ${pool} derives worlds from a fact table: ${w.manifest?.name ?? w.dir} has none (a documents world, or built before worlds kept facts.json): use --pool train`);
  if (pool === 'fresh-differences') {
    try {
      return worldDifferencePool(w, Array.from({ length: RL_POOL_WORLDS }, (_, i) => TRAINING_SEEDS.rlValues + i), RL_POOL_PER_SHAPE);
    } catch (err) {
      if (err instanceof InputError) throw new UserError(err.message);
      throw err;
    }
  }
  const kind = pool === 'fresh-values' ? 'values' : 'entities';
  const first = pool === 'fresh-values' ? TRAINING_SEEDS.rlValues : TRAINING_SEEDS.rlEntities;
  const evalNames = worldEvaluationNames(w);
  const out: WorldTask[] = [];
  for (let i = 0; i < RL_POOL_WORLDS; i++) {
    const { id, tasks } = derivedWorldTasks(w, { kind, seed: first + i }, RL_POOL_PER_SHAPE, evalNames, `RL pool world ${kind}:${first + i} of ${w.dir}`);
    for (const task of tasks) out.push({ task, world: id });
  }
  return out;
}

/** The pool's entity names against the fresh-entities split's new names (printed by bench/grpo.ts). */
export interface PoolNames {
  pool: number;
  evaluation: number;
  /** Always 0: a shared name is refused before anything runs. */
  shared: number;
}

/** Counts the RL pool's names and throws on any the fresh-entities evaluation split uses. */
export function poolEvaluationNames(pool: readonly WorldTask[], evaluation: ReadonlySet<string>): PoolNames {
  const names = new Set(pool.flatMap(({ task }) => task.hints.facts.map(([e]) => e)));
  const shared = [...names].filter((n) => evaluation.has(n));
  if (shared.length) throw new UserError(`the RL task pool names ${shared.length} entities of the fresh-entities evaluation split (e.g. "${shared[0]}"): it may not be trained on`);
  return { pool: names.size, evaluation: evaluation.size, shared: 0 };
}

/**
 * Advantages of the kept groups: (r - group mean) / (std + 1e-6), with the group's std
 * ('group', the seed's), the std of every kept reward ('batch': a group whose spread is a
 * step-penalty difference of 0.005 gets a small advantage, not +-1), or none ('none').
 */
export function scaleAdvantages(groups: readonly (readonly number[])[], scale: ScaleRewards): number[][] {
  const all = groups.flat();
  const mean = all.reduce((a, b) => a + b, 0) / Math.max(1, all.length);
  const batchStd = Math.sqrt(all.reduce((a, r) => a + (r - mean) * (r - mean), 0) / Math.max(1, all.length));
  return groups.map((rewards) => {
    if (scale === 'group') return groupAdvantages(rewards).advantages;
    const m = rewards.reduce((a, b) => a + b, 0) / Math.max(1, rewards.length);
    return rewards.map((r) => (scale === 'batch' ? (r - m) / (batchStd + 1e-6) : r - m));
  });
}

interface GrpoConfig {
  kind: 'grpo';
  from: { run: string; checkpoint: string; step: number };
  model: ModelConfig;
  preset?: string;
  params: number;
  backend: BackendRecord;
  seed: number;
  budget: { steps?: number; minutes?: number };
  /** The option table's config.json settings (core/protocol/grpoOptions.ts GrpoConfigSettings). */
  grpo: GrpoConfigSettings;
  optimiser: Record<string, unknown>;
  data: { rlTasks: number; pool: RlPool; rlWorlds: number; taskCounts: Record<string, number>; heldoutTasks: number; names?: PoolNames };
  splits: Record<string, { kind: string; seeds: number[]; tasks: number }>;
  tokenizer: { sha256: string; vocabSize: number };
  preflight: { name: string; ok: boolean; detail: string }[];
  /** The pass-rate pre-screen, when one ran (by default, or --prescreen N). */
  prescreen?: PrescreenSummary;
  /** Its verdict: whether the groups are predicted to carry a gradient, and if not why. */
  prescreenVerdict?: PrescreenVerdict;
  /** The verdict failed and --force ran the run anyway. */
  forced?: boolean;
  /** The verdict failed and the run did not start: no step was trained (a new start replaces this folder's run). */
  refused?: boolean;
  codeVersion: string;
  created: string;
}

const RESUME_STATE = 'grpo_state';

/** A pre-flight check failed: the run did not start (not bad usage; the evidence is the message). */
export class PreflightRefusal extends UserError {}

/** Rollouts of one step and what the update needs from them. */
export interface Rollout {
  episode: Episode;
  reward: number;
  correct: boolean;
  advantage: number;
}

/**
 * The batch of a GRPO update: the kept rollouts' ids as sampled; a label at t is ids[t+1]
 * exactly where the policy generated ids[t+1] (harness text never), with its sequence's advantage.
 */
export function rolloutBatch(rollouts: readonly Pick<Rollout, 'episode' | 'advantage'>[]): { batch: Batch; advantages: Float32Array } {
  const seq = Math.max(2, ...rollouts.map((r) => r.episode.ids.length));
  const rows = rollouts.length;
  const inputIds = new Int32Array(rows * seq);
  const labels = new Int32Array(rows * seq).fill(IGNORE);
  const advantages = new Float32Array(rows * seq);
  rollouts.forEach((r, i) => {
    const { ids, generated } = r.episode;
    for (let t = 0; t < ids.length; t++) inputIds[i * seq + t] = ids[t]!;
    for (let t = 0; t + 1 < ids.length; t++) {
      if (generated[t + 1] === 1) {
        labels[i * seq + t] = ids[t + 1]!;
        advantages[i * seq + t] = r.advantage;
      }
    }
  });
  return { batch: { inputIds, labels, batch: rows, seq }, advantages };
}

/**
 * RFT's targets for one step: the verified-correct rollouts of every kept group (a wrong one
 * never, however high its reward from step counts), as sampled.
 */
export function rftTargets(groups: readonly { members: readonly Rollout[] }[]): Rollout[] {
  return groups.flatMap((g) => g.members.filter((m) => m.correct));
}

/**
 * RFT's update batches: the rollouts' sampled ids, labelled where the policy generated the
 * next id (cross-entropy there; harness text never), with no policy-gradient fields. The ids
 * are the episode's own: re-tokenizing the text could give other ids than were sampled.
 */
export function rftBatches(rollouts: readonly Rollout[], rows: number): Batch[] {
  return microBatches(rollouts, rows).map((m) => m.batch);
}

/** Rollouts sorted by length, in micro-batches of at most `rows` (less padding, bounded memory). */
export function microBatches(rollouts: readonly Pick<Rollout, 'episode' | 'advantage'>[], rows: number): ReturnType<typeof rolloutBatch>[] {
  const sorted = [...rollouts].sort((a, b) => a.episode.ids.length - b.episode.ids.length);
  const out: ReturnType<typeof rolloutBatch>[] = [];
  for (let i = 0; i < sorted.length; i += rows) out.push(rolloutBatch(sorted.slice(i, i + rows)));
  return out;
}

/** In words: why every group had zero spread, from what the step measured. */
export function flatlineMessage(steps: number, accuracy: number, rewardStd: number, temperature: number, reward: string): string {
  const causes: string[] = [];
  if (accuracy >= 0.999) causes.push(`the tasks are too easy for the policy (it solved ${(100 * accuracy).toFixed(0)}% of its rollouts)`);
  else if (accuracy <= 0.001) causes.push('the tasks are too hard for the policy (no rollout was solved)');
  else causes.push('each task is either always or never solved by the policy');
  if (temperature < 0.5) causes.push(`the temperature (${temperature}) is too low for rollouts to differ`);
  causes.push(`the reward (${reward}) gives no spread between these rollouts — run \`agent-lab audit-reward --reward "${reward}"\``);
  return (
    `frac_reward_zero_std has been 1.0 for ${steps} steps: within every group all rollouts scored the same ` +
    `(reward_std ${rewardStd.toFixed(4)}), so every advantage is 0 and GRPO is taking no gradient. Likely causes: ${causes.join('; ')}.`
  );
}

/**
 * The run's GRPO settings: its own on resume, else the options over the Contract's defaults
 * (the pool's default depends on the SFT run's world);
 * each checked (a UserError naming the bad one), the reward parsed.
 */
function grpoSettings(
  o: GrpoOptions,
  previous: GrpoConfig | null,
  defaultPool: RlPool,
): { g: GrpoConfig['grpo']; pool: RlPool; objective: RlObjective; scaleRewards: ScaleRewards; dynamicSampling: boolean; maxDraws: number; revisit: boolean; rewardSpec: RewardSpec } {
  const g = previous?.grpo ?? grpoConfigSettings(o, { pool: defaultPool, maxDraws: GRPO_DEFAULTS.maxDrawsPerTask * (o.tasksPerStep ?? GRPO_DEFAULTS.tasksPerStep) });
  // Runs written before these settings existed keep the behaviour they had.
  const pool: RlPool = g.pool ?? 'train';
  const scaleRewards: ScaleRewards = g.scaleRewards ?? 'group';
  const dynamicSampling = g.dynamicSampling ?? false;
  const maxDraws = g.maxDraws ?? g.tasksPerStep;
  const revisit = g.revisit ?? false;
  const objective: RlObjective = g.objective ?? 'grpo';
  if (!RL_OBJECTIVES.includes(objective)) throw new UserError(`GRPO: objective must be one of ${RL_OBJECTIVES.join(', ')} (got ${String(objective)})`);
  if (objective === 'rft' && g.guide) throw new UserError("GRPO: --objective rft learns from the student's own verified rollouts only: --guide (the stub teacher's transcripts) does not apply");
  if (!RL_POOLS.includes(pool)) throw new UserError(`GRPO: pool must be one of ${RL_POOLS.join(', ')} (got ${String(pool)})`);
  if (!SCALE_REWARDS.includes(scaleRewards)) throw new UserError(`GRPO: scale-rewards must be one of ${SCALE_REWARDS.join(', ')} (got ${String(scaleRewards)})`);
  if (!Number.isInteger(maxDraws) || maxDraws < g.tasksPerStep) throw new UserError(`GRPO: max-draws must be an integer >= tasks per step (${g.tasksPerStep}), got ${maxDraws}`);
  for (const [k, v] of Object.entries({ groupSize: g.groupSize, tasksPerStep: g.tasksPerStep, maxSteps: g.maxSteps, epochsPerBatch: g.epochsPerBatch })) {
    if (!Number.isInteger(v) || v < 1) throw new UserError(`GRPO: ${k} must be a positive integer (got ${v})`);
  }
  if (!(g.clip > 0 && g.clip < 1)) throw new UserError(`GRPO: clip must be in (0, 1) (got ${g.clip})`);
  if (!(g.klBeta >= 0)) throw new UserError(`GRPO: KL beta must be >= 0 (got ${g.klBeta})`);
  if (!(g.lr > 0)) throw new UserError(`GRPO: lr must be > 0 (got ${g.lr})`);
  if (o.prescreenSamples !== undefined && o.prescreenSamples < g.groupSize) {
    throw new UserError(`GRPO: prescreen-samples must be >= the group size (${g.groupSize}) to predict a group's spread, got ${o.prescreenSamples}`);
  }
  let rewardSpec: RewardSpec;
  try {
    rewardSpec = parseRewardSpec(g.reward);
  } catch (err) {
    if (err instanceof RewardSpecError) throw new UserError(err.message);
    throw err;
  }
  return { g, pool, objective, scaleRewards, dynamicSampling, maxDraws, revisit, rewardSpec };
}

/**
 * A new GRPO run carries the SFT run's tokenizer and data (and its world) so eval and the
 * panels read it alone. Copied through the checked reader: a FIFO or a device in the SFT
 * run must not hang the copy. Every source is read before anything is written: a refused
 * copy leaves no half-made run folder.
 */
function copySftRunFiles(fromRun: string, runDir: string): void {
  const fromFiles = dataFiles(fromRun);
  const files = dataFiles(runDir);
  const copies = (
    [
      ...[TOKENIZER_FILE, TOKENIZER_CONFIG_FILE].map((f) => [path.join(fromRun, f), path.join(runDir, f)]),
      [fromFiles.trainTasks, files.trainTasks],
      [fromFiles.trainTraces, files.trainTraces],
      [fromFiles.heldoutTraces, files.heldoutTraces],
      // A user's world (docs/worlds.md) travels with the run, so eval finds it again.
      ...(hasRunWorld(fromRun) ? WORLD_COPY.map((f) => [path.join(fromRun, RUN_WORLD_DIR, f), path.join(runDir, RUN_WORLD_DIR, f)]) : []),
    ] as [string, string][]
  )
    .filter(([src]) => fs.existsSync(src))
    .map(([src, dst]) => [dst, readInputBytes(src, 'the SFT run file', INPUT_LIMITS.data)] as const);
  for (const [dst, bytes] of copies) writeFileAtomic(dst, bytes);
}

/**
 * A run the pre-screen refused keeps its config.json (the prediction and the verdict, for a
 * reader) but trained nothing: a new start in the same folder replaces it, a resume is refused.
 */
function forgetRefusedRun(runDir: string, resume: boolean | undefined): void {
  const existing = readRunConfig(runDir);
  if (!existing || existing.config['kind'] !== 'grpo' || existing.config['refused'] !== true) return;
  if (resume) throw new UserError(`--resume: the pre-screen refused the run in ${runDir} before step 1; start it again without --resume (with the suggested change, or --force)`);
  for (const f of [CONFIG_FILE, METRICS_FILE]) fs.rmSync(path.join(runDir, f), { force: true });
}

type Settings = ReturnType<typeof grpoSettings>;

/** Where a GRPO run starts: its settings, and the SFT run whose checkpoint is the starting policy and the frozen reference. Nothing written yet. */
interface GrpoStart {
  runDir: string;
  configFile: string;
  previous: GrpoConfig | null;
  s: Settings;
  seed: number;
  fromRun: string;
  fromRead: { file: string; config: Record<string, unknown> };
  fromConfig: { kind?: string; model?: ModelConfig; preset?: string; tokenizer?: { sha256?: string } };
  refCk: LoadedCheckpoint;
  tokenizer: Tokenizer;
  cfg: ModelConfig;
  sha: string;
}

function grpoStart(o: GrpoOptions): GrpoStart {
  const runDir = path.resolve(o.runDir);
  const configFile = path.join(runDir, CONFIG_FILE);
  forgetRefusedRun(runDir, o.resume);
  const previous = previousRunConfig(runDir, 'grpo', o.resume, checkGrpoConfig, 'refuse') as GrpoConfig | null;

  const fromRun = previous ? previous.from.run : o.from ? path.resolve(o.from) : null;
  if (!fromRun) throw new UserError('GRPO needs --from SFT_RUN (the SFT run folder whose student it starts from)');
  // A fact world (the textbook's or a user's table) has fresh pools; a documents world only its own training tasks.
  const fromWorld = hasRunWorld(fromRun) ? runWorld(fromRun) : null;
  const defaultPool: RlPool = fromWorld && !fromWorld.facts ? 'train' : GRPO_DEFAULTS.pool;
  const s = grpoSettings(o, previous, defaultPool);
  const seed = previous?.seed ?? o.seed ?? 0;
  const fromConfigFile = path.join(fromRun, CONFIG_FILE);
  const fromRead = readRunConfig(fromRun);
  if (!fromRead) throw new UserError(`--from ${fromRun}: not a run folder (no ${CONFIG_FILE})`);
  const fromConfig = fromRead.config as GrpoStart['fromConfig'];
  const fromModel = configModel(fromRead.config, fromConfigFile);
  if (!fromModel) throw new UserError(`--from ${fromRun}: ${CONFIG_FILE} describes no trained model (kind ${String(fromConfig.kind ?? 'unknown')})`);
  const fromWhich = previous ? `step-${previous.from.step}` : (o.fromCheckpoint ?? 'latest');
  if (fromWhich !== 'latest' && !/^step-\d+$/.test(fromWhich)) throw new UserError(`--from-checkpoint must be 'latest' or 'step-N' (got '${fromWhich}')`);
  let refCk;
  try {
    refCk = loadCheckpoint(fromRun, fromWhich);
  } catch (err) {
    throw new InputError(`--from ${fromRun}: cannot load its checkpoint: ${(err as Error).message}`);
  }
  const tokenizer = loadTokenizer(fromRun);
  // The model is the checkpoint's (its validated header); config.json must agree.
  const cfg = checkpointModelConfig(refCk, { model: fromModel, what: fromConfigFile }, tokenizer);
  return { runDir, configFile, previous, s, seed, fromRun, fromRead, fromConfig, refCk, tokenizer, cfg, sha: tokenizerHash(tokenizer) };
}

/** The pre-flight checks, before any rollout and before anything is written: a failed one refuses the run. */
function grpoPreflight(st: GrpoStart, hooks: JobHooks): PreflightReport {
  const preflight = runPreflight({
    sftTracesFile: dataFiles(st.fromRun).trainTraces,
    // Unset: what the rollouts render, the prompt of the SFT run's world.
    systemPrompt: st.s.g.systemPrompt ?? worldEnv(runSplits(st.fromRun).id).systemPrompt,
    tokenizer: st.tokenizer,
    ...(st.fromConfig.tokenizer?.sha256 ? { tokenizerSha: { expected: st.fromConfig.tokenizer.sha256, actual: st.sha } } : {}),
    reward: st.s.rewardSpec,
    temperature: st.s.g.temperature,
    groupSize: st.s.g.groupSize,
    maxSteps: st.s.g.maxSteps,
  });
  const preflightText = formatPreflight(preflight);
  if (!preflight.ok) throw new PreflightRefusal(`GRPO refused to start: a pre-flight check failed (nothing was rolled out).\n${preflightText}`);
  for (const line of preflightText.split('\n')) hooks.log('info', line);
  return preflight;
}

/** The run's tasks: the RL pool, what the student was trained on (for contamination), and the held-out split. */
interface GrpoTasks {
  split: ReturnType<typeof runSplits>;
  rlTasks: WorldTask[];
  trainingKeys: Set<string>;
  poolNames: PoolNames;
  heldExamples: TrainExample[];
}

/** The RL pool of the run's world, refused where it shares a name with an evaluation split or a task with the held-out one. */
function grpoTasks(st: GrpoStart): GrpoTasks {
  const { pool, g } = st.s;
  const files = dataFiles(st.runDir);
  // The SFT run's world: the textbook's, or a user's copied into world/.
  const split = runSplits(st.runDir);
  let rlTasks: WorldTask[];
  try {
    rlTasks =
      split.world && pool !== 'train'
        ? worldRlTaskPool(split.world, pool)
        : rlTaskPool(pool, files.trainTasks, split.heldout, { balanceCompares: g.balanceCompares ?? false, loaded: loadedWorlds([split.id]) });
  } catch (err) {
    if (err instanceof ReservedWorldError) throw new UserError(err.message);
    throw err;
  }
  // Contamination is judged against everything the student was trained on: the SFT data and the RL pool.
  const sftTasks = fs.existsSync(files.trainTasks) ? loadWorldTasks(files.trainTasks, loadedWorlds([split.id])) : split.train.map((task) => ({ task, world: split.id }));
  const trainingKeys = new Set<string>();
  for (const { task, world } of [...sftTasks, ...rlTasks]) {
    trainingKeys.add(overlapKey(task));
    trainingKeys.add(`${worldName(world)}|${overlapKey(task)}`);
  }
  const leaked = split.heldout.filter((t) => trainingKeys.has(overlapKey(t)));
  const poolNames = poolEvaluationNames(rlTasks, split.world ? worldEvaluationNames(split.world) : evaluationEntityNames());
  if (leaked.length) throw new UserError(`the RL task pool overlaps the held-out split (${leaked.length} tasks, e.g. ${JSON.stringify(leaked[0]!.question)})`);
  const heldRows = fs.existsSync(files.heldoutTraces) ? readTraceRows(files.heldoutTraces) : [];
  const heldExamples = heldRows
    .map((r) => toExample(tokenizeTrace(r.text, st.tokenizer), st.cfg.maxSeq, { copyWeight: 1 }))
    .filter((e): e is TrainExample => e !== null);
  return { split, rlTasks, trainingKeys, poolNames, heldExamples };
}

/** The policy being trained, its optimiser and where the run stands (a resume's step, or step 0). */
interface GrpoPolicy {
  reference: StackModel;
  model: StackModel;
  opt: Trainer;
  step: number;
  elapsedBefore: number;
  metrics: MetricsWriter;
  revisitState: number[];
}

/**
 * The policy at the run's step: the SFT policy for a new run (its config.json written), the
 * latest checkpoint's on resume, the SFT policy again when a run was killed before its first.
 */
function openGrpoPolicy(o: GrpoOptions, st: GrpoStart, t: GrpoTasks, backend: BackendInfo, preflight: PreflightReport, hooks: JobHooks): GrpoPolicy {
  const { previous, cfg, refCk, runDir } = st;
  const reference = StackModel.fromWeights(cfg, refCk.weights);
  const makeTrainer = (m: StackModel) =>
    new Trainer(m, { lr: st.s.g.lr, weightDecay: 0, clip: 1, warmupSteps: st.s.g.warmupSteps ?? GRPO_DEFAULTS.warmupSteps, schedule: 'constant', parallel: o.parallel ?? 'auto' });
  if (previous && latestCheckpoint(runDir) === null) {
    // Killed before its first checkpoint: start again from the SFT policy (step 0).
    const model = StackModel.fromWeights(cfg, refCk.weights);
    const opt = makeTrainer(model);
    const metrics = openMetrics(runDir, 0);
    hooks.log('warn', 'the run had no checkpoint yet: GRPO starts again from the SFT policy at step 0');
    return { reference, model, opt, step: 0, elapsedBefore: 0, metrics, revisitState: [] };
  }
  if (previous) {
    const ck = loadCheckpoint(runDir, 'latest');
    const model = StackModel.fromWeights(checkpointModelConfig(ck, { model: cfg, what: `the SFT checkpoint ${refCk.dir}` }, st.tokenizer), ck.weights);
    const opt = makeTrainer(model);
    if (ck.optimizer) opt.importState(ck.optimizer);
    const state = resumeStateOf(ck, RESUME_STATE);
    let revisitState: number[] = [];
    const savedQueue = (ck.extra[RESUME_STATE] as Record<string, unknown> | undefined)?.['revisit'];
    if (savedQueue !== undefined) {
      const problem = revisitStateProblem(savedQueue, t.rlTasks.length);
      if (problem) throw new InputError(`checkpoint ${ck.dir}: checkpoint.json: extra.${RESUME_STATE}.revisit ${problem}`);
      revisitState = savedQueue as number[];
    }
    const metrics = openMetrics(runDir, state.step);
    hooks.log('info', `resumed GRPO at step ${state.step}`);
    return { reference, model, opt, step: state.step, elapsedBefore: state.elapsed, metrics, revisitState };
  }
  const model = StackModel.fromWeights(cfg, refCk.weights);
  const opt = makeTrainer(model);
  writeJsonAtomic(st.configFile, newGrpoConfig(o, st, t, model, opt, backend, preflight));
  return { reference, model, opt, step: 0, elapsedBefore: 0, metrics: openMetrics(runDir, null), revisitState: [] };
}

/** A new run's config.json: what it starts from, its settings, its pool and splits, the pre-flight. */
function newGrpoConfig(o: GrpoOptions, st: GrpoStart, t: GrpoTasks, model: StackModel, opt: Trainer, backend: BackendInfo, preflight: PreflightReport): GrpoConfig {
  const { split, rlTasks } = t;
  const taskCounts: Record<string, number> = {};
  for (const { task } of rlTasks) taskCounts[task.kind] = (taskCounts[task.kind] ?? 0) + 1;
  return {
    kind: 'grpo',
    from: { run: st.fromRun, checkpoint: st.refCk.name, step: st.refCk.step },
    model: st.cfg,
    ...(st.fromConfig.preset ? { preset: st.fromConfig.preset } : {}),
    params: model.paramCount(),
    backend: backendRecord(backend),
    seed: st.seed,
    budget: grpoBudget(o, null),
    grpo: { ...st.s.g, reward: formatRewardSpec(st.s.rewardSpec) },
    optimiser: { ...opt.optim },
    data: {
      rlTasks: rlTasks.length,
      pool: st.s.pool,
      rlWorlds: [...new Set(rlTasks.map((x) => worldName(x.world)))].length,
      taskCounts,
      heldoutTasks: split.heldout.length,
      names: t.poolNames,
    },
    splits: split.world ? { heldout: { kind: 'custom', seeds: [split.id.seed], tasks: split.heldout.length } } : { heldout: { kind: 'seed', seeds: [0], tasks: split.heldout.length }, ...splitManifest() },
    // The SFT run's record of its world (the folder it came from), else this run's copy.
    ...(split.world ? { world: (st.fromRead.config['world'] as ReturnType<typeof worldRecord> | undefined) ?? worldRecord(split.world) } : {}),
    tokenizer: { sha256: st.sha, vocabSize: st.tokenizer.vocabSize },
    preflight: preflight.checks.map(({ name, ok, detail }) => ({ name, ok, detail })),
    codeVersion: CODE_VERSION,
    created: new Date().toISOString(),
  };
}

/** The run's budget: a resume's own, else --minutes, else --steps (default 60). */
function grpoBudget(o: GrpoOptions, previous: GrpoConfig | null): { steps?: number; minutes?: number } {
  return previous?.budget ?? (o.minutes !== undefined ? { minutes: o.minutes } : { steps: o.steps ?? GRPO_DEFAULTS.steps });
}

export async function runGrpo(o: GrpoOptions, hooks: JobHooks): Promise<JobResult<'grpo'>> {
  const st = grpoStart(o);
  const preflight = grpoPreflight(st, hooks);
  const backend = await startBackend(o.backend ?? st.previous?.backend.asked ?? 'auto', hooks);
  // The run folder carries the SFT run's tokenizer and data so eval and the panels read it alone.
  if (!st.previous) copySftRunFiles(st.fromRun, st.runDir);
  const tasks = grpoTasks(st);
  const policy = openGrpoPolicy(o, st, tasks, backend, preflight, hooks);
  const run = new GrpoLoop(o, hooks, st, tasks, policy, backend);
  try {
    return await run.run();
  } catch (err) {
    // Stopped in the pre-screen (before step 1, no checkpoint): this run's own files go, the
    // SFT run's copies stay (a retry rewrites them), so the same command starts it again.
    if (err instanceof Stopped && !st.previous) for (const f of [st.configFile, path.join(st.runDir, METRICS_FILE)]) fs.rmSync(f, { force: true });
    throw err;
  } finally {
    policy.metrics.close();
    policy.opt.dispose();
    policy.model.dispose();
    policy.reference.dispose();
  }
}

/** A step's draws: every rollout, and the groups the update learns from. */
interface StepDraws {
  rollouts: Rollout[];
  /** Groups with reward spread (RFT: with a correct rollout): the update's batch. */
  keptGroups: { task: Task; members: Rollout[] }[];
  groupsFlat: number;
  groupsDropped: number;
  drawn: number;
  revisited: number;
  guided: number;
  groupStds: number[];
}

/** The loop of a GRPO (or RFT) run: the pre-screen, the steps, the held-out points and the summary. */
class GrpoLoop {
  private readonly g: Settings['g'];
  private readonly rft: boolean;
  private readonly budget: { steps?: number; minutes?: number };
  private readonly budgetMs: number;
  private readonly runtime: AgentRuntime;
  private readonly tokenizerJson: string;
  private readonly teacherKnobs: ReturnType<typeof teacherKnobsOf>;
  private readonly evalLimit: number | undefined;
  private readonly clock: RunClock;
  private readonly divergence: DivergenceGuard;
  private readonly queue: RevisitQueue;
  private readonly checkpoints: RunCheckpoints;
  private step: number;
  private flatRun = 0;
  private cancelled = false;
  private stoppedFlat: string | undefined;
  private readonly zeroStdCurve: number[] = [];
  private readonly curve: AccuracyPoint[] = [];
  private lastRewardMean: number | undefined;
  // For the finish message (issue 35): steps that updated nothing, the rollouts' solved share,
  // and the wall time outside the budget (the pre-screen, the evaluations).
  private noUpdateSteps = 0;
  private solvedSum = 0;
  private prescreenMs = 0;
  private evalMs = 0;

  constructor(
    private readonly o: GrpoOptions,
    private readonly hooks: JobHooks,
    private readonly st: GrpoStart,
    private readonly t: GrpoTasks,
    private readonly p: GrpoPolicy,
    private readonly backend: BackendInfo,
  ) {
    this.g = st.s.g;
    this.rft = st.s.objective === 'rft';
    this.step = p.step;
    this.budget = grpoBudget(o, st.previous);
    this.budgetMs = (this.budget.minutes ?? 0) * 60_000;
    this.runtime = new AgentRuntime(modelPolicy(p.model, st.tokenizer.vocabSize), st.tokenizer, worldEnv(t.split.id), tokenizerCallMask(st.tokenizer, worldTemplates(t.split.id)));
    this.tokenizerJson = canonicalTokenizerJson(st.tokenizer);
    this.teacherKnobs = teacherKnobsOf(st.fromRead.config['recipe']);
    this.evalLimit = o.evalLimit ?? st.previous?.grpo.evalLimit;
    this.clock = new RunClock(p.elapsedBefore); // rollout and update time: evaluations are not counted in the budget
    this.divergence = new DivergenceGuard(st.runDir);
    this.queue = new RevisitQueue(GRPO_DEFAULTS.revisitQueue, p.revisitState);
    this.checkpoints = new RunCheckpoints(st.runDir, hooks, { everySeconds: o.checkpointEverySeconds, keep: o.keepCheckpoints }, () =>
      saveCheckpoint(st.runDir, this.step, p.model, p.opt, {
        [RESUME_STATE]: { step: this.step, elapsed: this.elapsed(), ...(st.s.revisit ? { revisit: this.queue.exportState() } : {}) },
      }),
    );
  }

  private elapsed(): number {
    return this.clock.elapsed();
  }

  private done(): boolean {
    return this.budget.steps !== undefined ? this.step >= this.budget.steps : this.elapsed() * 1000 >= this.budgetMs;
  }

  private checkpoint(): Promise<void> {
    return this.checkpoints.write(this.step);
  }

  private logStart(): void {
    const { g, rft, budget } = this;
    const { pool, scaleRewards, dynamicSampling, maxDraws, revisit, rewardSpec } = this.st.s;
    this.hooks.log(
      'info',
      `${rft ? "RFT (rejection-sampling fine-tuning on the student's verified rollouts)" : 'GRPO'} from ${this.st.fromRun} (${this.st.refCk.name}): ${budget.steps !== undefined ? `${budget.steps} steps` : `${budget.minutes} minutes`}, ` +
        `${g.tasksPerStep} tasks x ${g.groupSize} rollouts per step at temperature ${g.temperature}, reward ${formatRewardSpec(rewardSpec)}, ` +
        `${this.t.rlTasks.length} RL tasks (pool ${pool}), ${rft ? 'each correct rollout an SFT target' : `advantages scaled by ${scaleRewards}`}` +
        `${dynamicSampling ? `, dynamic sampling (at most ${maxDraws} tasks drawn per step${rft ? ' until each kept group has a correct rollout' : ''})` : ''}` +
        `${g.balanceCompares && pool === 'fresh-values' ? ', compares balanced between the remembered winner and the other' : ''}` +
        `${revisit ? `, tasks with spread revisited (a queue of at most ${GRPO_DEFAULTS.revisitQueue})` : ''}` +
        `${g.guide ? ", all-wrong groups guided by the stub teacher's transcript" : ''}, ${this.p.opt.workers.threads} extra worker thread(s)`,
    );
  }

  /**
   * Samples a round's rollouts on every core: item i goes to thread i mod (workers + 1), so
   * each thread holds part of every group; each item's random stream is its own seed, so
   * the split does not change what is sampled.
   */
  private async sampleRollouts(items: readonly RolloutItem[]): Promise<Episode[]> {
    const local = (xs: readonly RolloutItem[]) =>
      this.runtime.runBatchAsync(xs.map((it) => ({ task: it.task, env: worldEnv(it.world), options: rolloutOptions(it) })));
    const pool = this.p.opt.pool;
    if (!pool || items.length < 2) return local(items);
    const parts = Math.min(pool.size + 1, items.length);
    const shards = Array.from({ length: parts }, (_, p) => items.filter((_, i) => i % parts === p));
    pool.startRollouts(this.p.model, this.tokenizerJson, shards.slice(1));
    let mine: Episode[];
    try {
      mine = await local(shards[0]!);
    } catch (err) {
      pool.finishRollouts(); // leave no worker pending
      throw err;
    }
    const all = [mine, ...pool.finishRollouts()];
    return items.map((_, i) => all[i % parts]![Math.floor(i / parts)]!);
  }

  /** `count` rollouts of RL task `ti` at the run's sampling settings, rollout k seeded by `seedOf(k)`. */
  private taskRollouts(ti: number, count: number, seedOf: (k: number) => number): RolloutItem[] {
    const { g } = this;
    const { task, world } = this.t.rlTasks[ti]!;
    return Array.from({ length: count }, (_, k) => ({
      task,
      world,
      options: {
        maxSteps: g.maxSteps,
        temperature: g.temperature,
        constrained: true,
        maxTurnTokens: GRPO_DEFAULTS.maxTurnTokens,
        ...(g.systemPrompt !== undefined ? { systemPrompt: g.systemPrompt } : {}),
      },
      randomSeed: seedOf(k),
    }));
  }

  /** A rollout's reward and verdict on its task. */
  private scored(episode: Episode, task: Task): Rollout {
    const score = scoreCompletion(completionFromTranscript(episode.text), task.gold, this.st.s.rewardSpec, this.g.maxSteps);
    return { episode, reward: score.total, correct: score.correct, advantage: 0 };
  }

  /**
   * The pass-rate pre-screen (trainer/grpo/prescreen.ts): `tasks` distinct tasks of the pool,
   * `samples` rollouts each, before step 1 and outside the budget; recorded in config.json.
   * Its seeds (offset 3571) are never a step's (offset 7919 per step), so it changes no step.
   */
  private async prescreen(tasks: number, samples: number): Promise<PrescreenSummary> {
    const { seed, runDir } = this.st;
    const { rlTasks } = this.t;
    const t0 = Date.now();
    const rng = makeRng(seed * 1_000_003 + 3571);
    const chosen: number[] = [];
    const picked = new Set<number>();
    while (chosen.length < Math.min(tasks, rlTasks.length)) {
      const ti = Math.floor(rng.uniform() * rlTasks.length);
      if (picked.has(ti)) continue;
      picked.add(ti);
      chosen.push(ti);
    }
    const results: PrescreenResult[] = [];
    // A round of at most 8 tasks at a time for progress, sampled in pieces of about a second:
    // a cancel is heard between pieces (8 tasks x 1024 samples in one call ran for minutes;
    // Stopped then, as there is no step to stop after).
    for (let at = 0; at < chosen.length; at += 8) {
      const round = chosen.slice(at, at + 8);
      this.hooks.progress('grpo pre-screen', at, chosen.length, `${at} of ${chosen.length} tasks screened`);
      const items = round.flatMap((ti, r) => this.taskRollouts(ti, samples, (k) => seed * 1_000_003 + 3571 + ((at + r) * samples + k) * 104_729));
      const threads = (this.p.opt.pool?.size ?? 0) + 1;
      const episodes = await sampleInPieces(items, (xs) => this.sampleRollouts(xs), () => cancelRequested(this.hooks), { min: threads, max: Math.max(64, threads), targetMs: 1000 });
      if (!episodes) {
        const left = `${runDir} holds only the SFT run's files copied for this run (no config.json): the same command starts it again`;
        throw new Stopped('the GRPO pre-screen', left);
      }
      round.forEach((ti, r) => {
        const task = rlTasks[ti]!.task;
        const scores = episodes.slice(r * samples, (r + 1) * samples).map((e) => this.scored(e, task));
        const correct = scores.filter((x) => x.correct).length;
        const rewardSpread = groupAdvantages(scores.map((x) => x.reward)).std >= ZERO_ADVANTAGE;
        results.push({ kind: task.kind, correct, rewardSpread });
      });
    }
    const summary: PrescreenSummary = { ...summarisePrescreen(results, samples, this.g.groupSize), ...(chosen.length === rlTasks.length ? { wholePool: true } : {}) };
    const { dynamicSampling, maxDraws } = this.st.s;
    this.hooks.log('info', `${formatPrescreen(summary, this.g.tasksPerStep, dynamicSampling ? maxDraws : null)} (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
    return summary;
  }

  /** The stub teacher's transcript of RL task `ti` as a scored group member, or null where it fails. */
  private guideMember(ti: number): Rollout | null {
    const { task, world } = this.t.rlTasks[ti]!;
    const episode = teacherEpisode(task, world, this.st.tokenizer, this.teacherKnobs, this.st.cfg.maxSeq, this.g.maxSteps);
    if (!episode) return null;
    const member = this.scored(episode, task);
    return member.correct ? member : null;
  }

  /** A held-out accuracy point (--eval-limit tasks of it; 0: none), outside the budget. */
  private async accuracyPoint(final: boolean): Promise<EvalSummary | null> {
    const { evalLimit, step } = this;
    const { split, trainingKeys, heldExamples } = this.t;
    if (evalLimit === 0) return null;
    const tasks = (evalLimit ? split.heldout.slice(0, evalLimit) : split.heldout).map((task) => ({ task, world: split.id }));
    const te = Date.now();
    const { summary } = await evaluateModel(this.p.model, this.st.tokenizer, tasks, 'heldout', trainingKeys, heldExamples.slice(0, tasks.length), this.hooks, 'auto', this.teacherKnobs);
    this.evalMs += Date.now() - te;
    const rec = { phase: 'eval' as const, step, time: this.elapsed(), split: 'heldout', accuracy: summary.accuracy, by_kind: summary.by_kind, failures: summary.failures, n: summary.n, of: split.heldout.length, final };
    this.p.metrics.append(rec);
    this.hooks.metrics(rec);
    this.curve.push({ step, accuracy: summary.accuracy });
    this.hooks.log('info', `held-out exact match at GRPO step ${step}: ${(100 * summary.accuracy).toFixed(1)}% on ${summary.n}${summary.n < split.heldout.length ? ` of the ${split.heldout.length}` : ''} held-out tasks`);
    return summary;
  }

  /**
   * The pre-screen (default: 10% of the rollouts the run may draw; --prescreen N; 0: none)
   * and its verdict, both recorded in config.json; a failed verdict refuses the run before
   * step 1 unless --force (recorded as forced).
   */
  private async screenAndJudge(): Promise<void> {
    const { o, hooks, g, budget } = this;
    const { pool, dynamicSampling, maxDraws } = this.st.s;
    const { rlTasks, split } = this.t;
    const { configFile, runDir, fromRun } = this.st;
    const drawsPerStep = dynamicSampling ? maxDraws : g.tasksPerStep;
    const sized = defaultPrescreenTasks({ steps: budget.steps ?? GRPO_DEFAULTS.steps, drawsPerStep, group: g.groupSize, poolSize: rlTasks.length });
    const tasks = o.prescreen ?? sized.tasks;
    const samples = o.prescreenSamples ?? g.groupSize;
    if (tasks === 0) {
      if (o.prescreen === undefined) {
        hooks.log('info', `pre-screen: skipped (10% of this run's ${sized.runRollouts} rollouts is under ${PRESCREEN_DEFAULTS.minTasks} tasks of ${g.groupSize}, too few to judge); --prescreen N runs one`);
      }
      return;
    }
    const cost = Math.min(tasks, rlTasks.length) * samples;
    hooks.log(
      'info',
      `pre-screen: ${Math.min(tasks, rlTasks.length)} tasks x ${samples} rollouts = ${cost} rollouts, ` +
        `${((100 * cost) / sized.runRollouts).toFixed(0)}% of the at most ${sized.runRollouts} the run's ${budget.steps ?? `${GRPO_DEFAULTS.steps} (a --minutes run is sized as)`} steps may draw (--prescreen 0: none)`,
    );
    const tp = Date.now();
    const screened = await this.prescreen(tasks, samples);
    this.prescreenMs += Date.now() - tp;
    const verdict = prescreenVerdict(screened, { pool, noFreshPools: Boolean(split.world && !split.world.facts), fromRun, dynamicSampling });
    const forced = !verdict.ok && o.force === true;
    const text = formatVerdict(verdict, forced);
    const written = JSON.parse(fs.readFileSync(configFile, 'utf8')) as GrpoConfig;
    writeJsonAtomic(configFile, { ...written, prescreen: screened, prescreenVerdict: verdict, ...(forced ? { forced: true } : {}), ...(!verdict.ok && !forced ? { refused: true } : {}) });
    if (!verdict.ok && !forced) {
      throw new PreflightRefusal(
        `GRPO refused to start: the pre-screen predicts groups without a spread in correctness (no step was trained; ${runDir}/${CONFIG_FILE} holds the prediction).\n` +
          `${formatPrescreen(screened, g.tasksPerStep, dynamicSampling ? maxDraws : null)}\n${text}`,
      );
    }
    hooks.log(verdict.ok ? 'info' : 'warn', text);
  }

  /**
   * A step's rollouts: rounds of draws, one without dynamic sampling; with it, more until the
   * step holds tasksPerStep informative groups or maxDraws tasks were drawn. Every rollout of a
   * round decodes in lockstep (batched KV-cache steps), each with its own random stream, seeded
   * by (seed, step, draw, rollout), so a resumed run samples what it would have.
   */
  private async drawStep(): Promise<StepDraws> {
    const { g, rft, step } = this;
    const { seed } = this.st;
    const { dynamicSampling, maxDraws, revisit } = this.st.s;
    const { rlTasks } = this.t;
    // Per-step randomness from (seed, step): a resumed run samples what it would have.
    const rng = makeRng(seed * 1_000_003 + (step + 1) * 7919);
    const picked = new Set<number>();
    const d: StepDraws = { rollouts: [], keptGroups: [], groupsFlat: 0, groupsDropped: 0, drawn: 0, revisited: 0, guided: 0, groupStds: [] };
    const cap = Math.min(dynamicSampling ? maxDraws : g.tasksPerStep, rlTasks.length);
    while (d.keptGroups.length < g.tasksPerStep && d.drawn < cap) {
      const want = Math.min(g.tasksPerStep - d.keptGroups.length, cap - d.drawn);
      // Tasks that had a spread last time come first (trainer/grpo/revisit.ts), then new draws.
      const { round, revisited: again } = drawRound(revisit ? this.queue : null, picked, want, rlTasks.length, () => rng.uniform());
      d.revisited += again;
      if (round.length === 0) break;
      const items: RolloutItem[] = round.flatMap((ti, r) =>
        this.taskRollouts(ti, g.groupSize, (k) => seed * 1_000_003 + (step + 1) * 7919 + ((d.drawn + r) * g.groupSize + k) * 104_729),
      );
      this.hooks.progress('grpo rollouts', 0, items.length, `step ${step + 1}${this.budget.steps !== undefined ? ` of ${this.budget.steps}` : ''}, ${d.drawn + round.length} tasks drawn`);
      const episodes = await this.sampleRollouts(items);
      round.forEach((ti, group) => {
        const task = rlTasks[ti]!.task;
        const members = episodes.slice(group * g.groupSize, (group + 1) * g.groupSize).map((episode) => this.scored(episode, task));
        const { std } = groupAdvantages(members.map((m) => m.reward));
        d.groupStds.push(std);
        // Dynamic sampling keeps a group only when its members differ in correctness (DAPO's
        // filter): a spread of step counts alone among all-wrong rollouts rewards answering
        // early, and a student on a pool it cannot solve learns just that (docs/results.md,
        // "Reading or remembering": the no-teacher scenario).
        // RFT keeps every group with a verified-correct rollout, spread or not: it imitates
        // successes, so an all-correct group teaches it as much as a mixed one.
        const informative = rft
          ? !dynamicSampling || members.some((m) => m.correct)
          : dynamicSampling
            ? members.some((m) => m.correct !== members[0]!.correct)
            : std >= ZERO_ADVANTAGE;
        if (std < ZERO_ADVANTAGE) d.groupsFlat++;
        // Every rollout wrong: the teacher's transcript takes the last one's place (trainer/grpo/guide.ts).
        const guidance = !informative && g.guide && d.keptGroups.length < g.tasksPerStep && members.every((m) => !m.correct) ? this.guideMember(ti) : null;
        // A guided task is revisited too: the next group says whether the student learnt it.
        if (revisit) this.queue.record(ti, informative || guidance !== null);
        if (guidance) {
          d.guided++;
          d.keptGroups.push({ task, members: [...members.slice(0, -1), guidance] });
        } else if (!informative) d.groupsDropped++;
        else if (d.keptGroups.length < g.tasksPerStep) d.keptGroups.push({ task, members });
        d.rollouts.push(...members);
      });
      d.drawn += round.length;
      // A yield, so that Ctrl-C or SIGTERM is heard between rounds: a round decodes without one.
      if (await cancelRequested(this.hooks)) break;
    }
    return d;
  }

  /**
   * The rollouts the update learns from: RFT's verified-correct ones; GRPO's kept groups with
   * their advantages set (and how many of those groups differ only in step counts).
   */
  private updateRollouts(keptGroups: StepDraws['keptGroups']): { kept: Rollout[]; stepsOnly: number } {
    if (this.rft) return { kept: rftTargets(keptGroups), stepsOnly: 0 };
    const advantages = scaleAdvantages(
      keptGroups.map((k) => k.members.map((m) => m.reward)),
      this.st.s.scaleRewards,
    );
    const kept: Rollout[] = [];
    let stepsOnly = 0;
    keptGroups.forEach(({ members }, i) => {
      members.forEach((m, j) => (m.advantage = advantages[i]![j]!));
      kept.push(...members);
      // Spread that comes only from step counts (every member equally right or wrong): the
      // group std normalisation gives it full weight, so it is worth watching.
      if (members.every((m) => m.correct === members[0]!.correct)) stepsOnly++;
    });
    return { kept, stepsOnly };
  }

  /** RFT's update: cross-entropy on the generated tokens of the correct rollouts (SFT on the student's own successes). */
  private async rftUpdate(kept: Rollout[]): Promise<Record<string, unknown>> {
    let update: Record<string, unknown> = {};
    const batches = rftBatches(kept, GRPO_DEFAULTS.microBatchRows);
    for (let e = 0; e < this.g.epochsPerBatch; e++) {
      const r = await this.p.opt.stepAsync(batches);
      this.divergence.observe(r, this.step + 1);
      update = { loss: r.loss, grad_norm: r.gradNorm, lr: r.lr, trained_tokens: r.supervised, rft_rollouts: kept.length };
    }
    return update;
  }

  /** GRPO's update: the clipped surrogate with a KL to the frozen SFT policy, one token mean over the batch. */
  private async grpoUpdate(kept: Rollout[]): Promise<Record<string, unknown>> {
    const { g } = this;
    // Micro-batches of similar lengths bound memory (wasm has 4 GB); their gradients add up
    // to the one token mean over the whole batch.
    const micro: { batch: Batch; advantages: Float32Array; ref: Float32Array; old: Float32Array | undefined }[] = [];
    for (const { batch, advantages } of microBatches(kept, GRPO_DEFAULTS.microBatchRows)) {
      // At the sampling temperature: the distribution the rollouts were drawn from.
      // (async: webgpu reads back asynchronously only; elsewhere these are the sync reads)
      const ref = (await this.p.reference.tokenLogprobsAsync(batch, g.temperature)).logp;
      const old = g.epochsPerBatch > 1 ? (await this.p.model.tokenLogprobsAsync(batch, g.temperature)).logp : undefined;
      micro.push({ batch, advantages, ref, old });
    }
    let kl = 0;
    let clipped = 0;
    let entropy = 0;
    let loss = 0;
    let gradNorm = 0;
    let lr = 0;
    let supervised = 0;
    for (let e = 0; e < g.epochsPerBatch; e++) {
      const r = await this.p.opt.stepAsync(micro.map((m) => ({ ...m.batch, pg: { advantages: m.advantages, refLogp: m.ref, oldLogp: m.old, clip: g.clip, beta: g.klBeta, temperature: g.temperature } })));
      supervised = r.supervised;
      if (e === 0) {
        kl = r.pg ? r.pg.klSum / Math.max(1, r.supervised) : 0;
        entropy = r.pg ? r.pg.entropySum / Math.max(1, r.supervised) : 0;
      }
      clipped += r.pg?.clipped ?? 0;
      loss = r.loss;
      gradNorm = r.gradNorm;
      lr = r.lr;
      this.divergence.observe(r, this.step + 1); // throws after MAX_NONFINITE_STEPS non-finite updates in a row
    }
    return { loss, kl, clip_ratio: clipped / Math.max(1, supervised * g.epochsPerBatch), entropy, grad_norm: gradNorm, lr, trained_tokens: supervised };
  }

  /** One step: draws, the update, its metrics record, the flat-line watch and the checkpoints. False: cancelled before the update. */
  private async runStep(): Promise<boolean> {
    const { g, rft, hooks } = this;
    const t0 = Date.now();
    const d = await this.drawStep();
    const { kept, stepsOnly } = this.updateRollouts(d.keptGroups);
    if (hooks.isCancelled()) return false;
    const tRoll = Date.now();
    const genTokens = d.rollouts.reduce((n, r) => n + r.episode.generated.reduce((a, b) => a + b, 0), 0);
    const update = kept.length === 0 ? {} : rft ? await this.rftUpdate(kept) : await this.grpoUpdate(kept);
    const tEnd = Date.now();
    this.clock.add(tEnd - t0);
    this.step++;
    const step = this.step;
    const rewards = d.rollouts.map((r) => r.reward);
    const groups = d.groupStds.length;
    const frac = groups ? d.groupsFlat / groups : 0;
    this.zeroStdCurve.push(frac);
    if (kept.length === 0) this.noUpdateSteps++;
    const rewardMean = rewards.reduce((a, b) => a + b, 0) / Math.max(1, rewards.length);
    const accuracy = d.rollouts.filter((r) => r.correct).length / Math.max(1, d.rollouts.length);
    this.solvedSum += accuracy;
    const rewardStd = d.groupStds.reduce((a, b) => a + b, 0) / Math.max(1, groups);
    const rec: MetricRecord = {
      phase: 'grpo',
      step,
      time: this.elapsed(),
      reward_mean: rewardMean,
      // TRL's reward_std: the mean over groups of the within-group std.
      reward_std: rewardStd,
      accuracy,
      frac_reward_zero_std: frac,
      skipped_groups: d.groupsFlat,
      groups,
      // Dynamic sampling: tasks drawn this step, and those dropped for having no spread.
      groups_drawn: d.drawn,
      groups_dropped: d.groupsDropped,
      groups_kept: d.keptGroups.length,
      groups_steps_only: stepsOnly,
      ...(this.st.s.revisit ? { groups_revisited: d.revisited, revisit_queue: this.queue.size } : {}),
      ...(g.guide ? { groups_guided: d.guided } : {}),
      gen_tokens: genTokens,
      completion_len: genTokens / Math.max(1, d.rollouts.length),
      steps_mean: d.rollouts.reduce((a, r) => a + r.episode.steps, 0) / Math.max(1, d.rollouts.length),
      ...(kept.length ? update : { kl: null, clip_ratio: null, entropy: null, update: false }),
      // Sampling throughput: the policy's generated tokens per second of rollout time.
      tokens_per_s: (genTokens * 1000) / Math.max(1, tRoll - t0),
      rollout_s: (tRoll - t0) / 1000,
      update_s: (tEnd - tRoll) / 1000,
      backend: this.backend.used,
    };
    this.watchFlat(rec, rft ? kept.length === 0 : frac === 1, accuracy, rewardStd);
    this.p.metrics.append(rec);
    hooks.metrics(rec);
    this.lastRewardMean = rewardMean;
    hooks.progress(
      'grpo',
      this.budget.steps !== undefined ? step : Math.round(this.elapsed()),
      this.budget.steps ?? Math.round(this.budgetMs / 1000),
      `step ${step}: reward ${rewardMean.toFixed(3)}, solved ${(100 * accuracy).toFixed(0)}%, ` +
        `flat groups ${d.groupsFlat}/${groups} (zero-spread ${(100 * frac).toFixed(0)}%), trained on ${d.keptGroups.length}`,
    );
    return true;
  }

  /**
   * Counts flat steps in a row (RFT learns from any correct rollout, flat group or not: its
   * dead step is one with none): says so in words every few, and stops the run at --stop-flat.
   */
  private watchFlat(rec: MetricRecord, flat: boolean, accuracy: number, rewardStd: number): void {
    const { g, rft } = this;
    if (flat) this.flatRun++;
    else this.flatRun = 0;
    const flatRun = this.flatRun;
    const flatAfter = this.o.flatlineSteps ?? GRPO_DEFAULTS.flatlineSteps;
    const stopFlat = g.stopFlat ?? 0;
    const flatText = () =>
      rft
        ? `no rollout was correct for ${flatRun} steps (solved ${(100 * accuracy).toFixed(0)}%), so RFT had nothing to imitate: SFT more, or an easier pool`
        : flatlineMessage(flatRun, accuracy, rewardStd, g.temperature, formatRewardSpec(this.st.s.rewardSpec));
    if (stopFlat > 0 && flatRun >= stopFlat) {
      this.stoppedFlat = `stopped after ${flatRun} fully flat steps in a row (--stop-flat ${stopFlat}; 0: never), checkpoint step-${this.step} kept: ${flatText()}`;
      rec['warning'] = this.stoppedFlat;
      rec['stopped'] = 'flat';
      this.hooks.log('warn', this.stoppedFlat);
    } else if (flatRun === flatAfter || (flatRun > flatAfter && flatRun % flatAfter === 0)) {
      const msg = flatText();
      rec['warning'] = msg;
      this.hooks.log('warn', msg);
    }
  }

  async run(): Promise<JobResult<'grpo'>> {
    const { hooks, g } = this;
    this.logStart();
    // Before the held-out point: a refused run should cost the screen and nothing else.
    if (!this.st.previous && !hooks.isCancelled()) await this.screenAndJudge();
    const before = this.st.previous ? null : await this.accuracyPoint(false);
    while (!this.done()) {
      if ((await cancelRequested(hooks)) || !(await this.runStep())) {
        this.cancelled = true;
        break;
      }
      if (this.stoppedFlat) break;
      if (this.checkpoints.due()) await this.checkpoint();
      if (g.evalEvery > 0 && this.step % g.evalEvery === 0 && !this.done()) {
        await this.checkpoint();
        await this.accuracyPoint(false);
      }
    }
    await this.checkpoint();
    const after = !this.cancelled && !hooks.isCancelled() ? await this.accuracyPoint(true) : null;
    return { kind: 'grpo', cancelled: this.cancelled, summary: this.summary(before, after) };
  }

  private summary(before: EvalSummary | null, after: EvalSummary | null): GrpoSummary {
    const { st, step } = this;
    return {
      runDir: st.runDir,
      from: st.fromRun,
      objective: st.s.objective,
      pool: st.s.pool,
      seed: st.seed,
      steps: step,
      minutes: this.elapsed() / 60,
      wallMinutes: this.clock.wallMinutes(),
      backend: this.backend.used,
      reward_mean: this.lastRewardMean,
      ...(before ? { heldout_accuracy_before: before.accuracy } : {}),
      ...(after ? { heldout_accuracy: after.accuracy, heldout_n: after.n, heldout_of: this.t.split.heldout.length, heldout_step: step, by_kind: after.by_kind } : {}),
      frac_reward_zero_std: this.zeroStdCurve,
      no_update_steps: this.noUpdateSteps,
      ...(this.zeroStdCurve.length ? { rollout_accuracy: this.solvedSum / this.zeroStdCurve.length } : {}),
      prescreen_minutes: this.prescreenMs / 60000,
      eval_minutes: this.evalMs / 60000,
      curve: this.curve,
      ...(this.stoppedFlat ? { stopped_flat: this.stoppedFlat } : {}),
    };
  }
}
