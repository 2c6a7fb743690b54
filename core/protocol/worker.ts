// Extension ↔ training worker messages (Node IPC, one JSON object per message). The
// extension spawns the worker by path and sends one `start`; the worker answers with
// started → (progress | metrics | log | checkpoint)* → done | failed. `cancel` may come at
// any time: the worker finishes the current step, writes a checkpoint and says `done`
// with `cancelled: true`. A `done` carries its job's kind and the summary typed for that
// kind (JobResult: what the trainer's jobs return and the CLI prints); a `metrics` message a
// metrics.jsonl record (./metrics.ts). Types and validators only: no Node, no DOM.
import { isObj } from './isObj';
import { GRPO_JOB_FIELDS, type GrpoJobOptions } from './grpoOptions';
import { SFT_JOB_FIELDS, type SftJobOptions } from './sftOptions';
import { isMetricRecord, type MetricRecord } from './metrics';

export type JobKind = 'sft' | 'grpo' | 'eval';

/** SFT of the student (`train sft`): the options the SFT table marks `job` (./sftOptions.ts). */
export interface SftJobSpec extends SftJobOptions {
  kind: 'sft';
  runDir: string;
}
/**
 * Evaluation splits: the seed's 50 held-out tasks (reported first), the run's training
 * tasks, and fresh worlds of reserved seeds (core/worlds.ts): `dev` for choosing recipes,
 * `fresh-values` (values resampled) and `fresh-entities` (new names) for measuring reading,
 * and `fresh-differences` (fresh-values' worlds asked "by how much is A larger than B", a
 * family no teacher demonstrates: what only RL's verifiable reward can teach).
 */
export const EVAL_SPLITS = ['heldout', 'train', 'dev', 'dev-entities', 'fresh-values', 'fresh-entities', 'fresh-differences'] as const;
export type EvalSplit = (typeof EVAL_SPLITS)[number];

export interface EvalJobSpec {
  kind: 'eval';
  runDir: string;
  split: EvalSplit;
  checkpoint?: string;
  backend?: string;
  limit?: number;
  /** Evaluate on this world folder's split instead of the run's own world. */
  world?: string;
  /** Decode with this copy bias instead of the model's own (trainer/model/modelConfig.ts copyBias). */
  copyBias?: number;
  /** Decode with the copy stop on or off instead of the model's own (trainer/model/modelConfig.ts copyStop). */
  copyStop?: boolean;
  /** Decode with the number copy on or off instead of the model's own (trainer/model/modelConfig.ts copyValues). */
  copyValues?: boolean;
}
/**
 * GRPO from an SFT run (docs/architecture.md, "GRPO defaults" for what is left out): the
 * options the table marks `job` (./grpoOptions.ts; `from` is not needed with resume).
 */
export interface GrpoJobSpec extends GrpoJobOptions {
  kind: 'grpo';
  runDir: string;
}
export type JobSpec = SftJobSpec | GrpoJobSpec | EvalJobSpec;

// ---- what a job reports when it ends (the `done` message; the CLI prints it as JSON) ----

/** Exact match on the tasks of one shape. */
export interface KindFigure {
  n: number;
  accuracy: number;
}
/** A learning-curve point: held-out (or dev) exact match at a training step. */
export interface AccuracyPoint {
  step: number;
  /** Seconds since the run started (SFT points carry it). */
  time?: number;
  accuracy: number;
}

/** `train sft`'s summary (trainer/sft/sft.ts). Keys are snake_case where they name a metric. */
export interface SftSummary {
  runDir: string;
  steps: number;
  /** Optimiser minutes across resumes (what the budget counts). */
  minutes: number;
  wallMinutes: number;
  backend: string;
  /** The last step's figures (absent when no step ran). */
  loss?: number;
  sup_acc?: number;
  /** The final held-out point (absent when the run was cancelled or measured none). */
  heldout_accuracy?: number;
  /** What that figure is: tasks evaluated, tasks the held-out split holds, the step measured. */
  heldout_n?: number;
  heldout_of?: number;
  heldout_step?: number;
  by_kind?: Record<string, KindFigure>;
  span_accuracy?: Record<string, number>;
  curve: AccuracyPoint[];
  dev_curve: AccuracyPoint[];
  /** A job given `traces` alone: how its run folder was made from that file before training. */
  prepared?: PreparedTraces;
}

/** A new SFT run folder made from a trajectories file (trainer/sft/tracesRun.ts), as the worker reports it. */
export interface PreparedTraces {
  runDir: string;
  tracesFile: string;
  /** Rows written to data/train.traces.jsonl. */
  trainRows: number;
  /** Rows left out because their task overlaps the held-out split. */
  excluded: number;
  /** Rows whose question is in no task list of the world (kept; not checked for overlap). */
  unknownTasks: number;
  heldoutRows: number;
  /** Where the world came from: the traces file's folder, or the default world (seed 0). */
  world: 'folder' | 'default';
  heldoutSource: 'folder' | 'stub teacher';
  vocabSize: number;
}

/** `train grpo`'s summary (trainer/grpo/grpo.ts). */
export interface GrpoSummary {
  runDir: string;
  /** The SFT run it started from. */
  from: string;
  steps: number;
  minutes: number;
  wallMinutes: number;
  backend: string;
  reward_mean?: number;
  heldout_accuracy_before?: number;
  heldout_accuracy?: number;
  /** What the final figure is: tasks evaluated, tasks the held-out split holds, the step measured. */
  heldout_n?: number;
  heldout_of?: number;
  heldout_step?: number;
  by_kind?: Record<string, KindFigure>;
  /** Per step: the share of groups whose rewards were all equal (no gradient). */
  frac_reward_zero_std: number[];
  /** Steps (this session) whose batch held no group to learn from, so the policy was not updated. */
  no_update_steps?: number;
  /** The rollouts' solved share, averaged over this session's steps (what made the groups flat: all right or all wrong). */
  rollout_accuracy?: number;
  /** Wall minutes outside the budget (`minutes` counts rollouts and updates only): the pre-screen and the held-out evaluations. */
  prescreen_minutes?: number;
  eval_minutes?: number;
  curve: AccuracyPoint[];
  /** Why the run stopped itself before its budget (every group flat for --stop-flat steps in a row). */
  stopped_flat?: string;
  /** What the run learnt from (grpo or rft), its pool and seed: what its baselines must share. */
  objective?: string;
  pool?: string;
  seed?: number;
}

/** How an evaluated split was made: world kind, world seeds, task count (and a user's world). */
export interface SplitManifest {
  kind: string;
  seeds: number[];
  tasks: number;
  world?: unknown;
}

/** `eval`'s summary (trainer/run/jobs.ts; eval/<split>.json plus the checkpoint it used). */
export interface EvalJobSummary {
  split: string;
  accuracy: number;
  n: number;
  by_kind: Record<string, KindFigure>;
  /** Failed tasks per failure kind (docs/architecture.md, "Eval rows"). */
  failures: Record<string, number>;
  span_accuracy: Record<string, number>;
  contaminated: number;
  steps_mean: number;
  worlds?: SplitManifest;
  /** Tasks the split holds (n is fewer with a limit). */
  of?: number;
  checkpoint: string;
  step: number;
  /** The copy bias the student decoded with, when it had one (trainer/model/modelConfig.ts copyBias). */
  copy_bias?: number;
  /** The copy bias also ended copied names (trainer/model/modelConfig.ts copyStop). */
  copy_stop?: boolean;
  /** The copy bias also copied numbers (trainer/model/modelConfig.ts copyValues). */
  copy_values?: boolean;
}

/** The summary each job kind ends with. */
export interface JobSummaries {
  sft: SftSummary;
  grpo: GrpoSummary;
  eval: EvalJobSummary;
}
export type JobSummary = JobSummaries[JobKind];

/**
 * How a job ended: the one shape runSft, runGrpo, runEval and runJob return, the worker
 * sends as `done` and the extension receives (a union on `kind`, so a reader of
 * `summary` knows its fields).
 */
export type JobResult<K extends JobKind = JobKind> = {
  [P in K]: { kind: P; cancelled: boolean; summary: JobSummaries[P] };
}[K];

/** extension → worker */
export type ToWorker = { type: 'start'; job: JobSpec } | { type: 'cancel' };

/** worker → extension */
export type FromWorker =
  | { type: 'started'; job: JobSpec; backend: string; pid: number }
  | { type: 'progress'; phase: string; done: number; total: number; message?: string }
  | { type: 'metrics'; record: MetricRecord }
  | { type: 'log'; level: 'info' | 'warn' | 'error'; message: string }
  | { type: 'checkpoint'; step: number; path: string }
  | ({ type: 'done' } & JobResult)
  | { type: 'failed'; error: string };

const optNum = (v: unknown): boolean => v === undefined || (typeof v === 'number' && Number.isFinite(v) && v >= 0);
const optStr = (v: unknown): boolean => v === undefined || typeof v === 'string';

/** Validates a job spec; returns an error message naming the bad field, or null. */
export function checkJobSpec(v: unknown): string | null {
  if (!isObj(v)) return 'job must be an object';
  if (typeof v['runDir'] !== 'string' || v['runDir'] === '') return 'job.runDir must be a non-empty string';
  if (v['kind'] === 'sft') {
    for (const k of SFT_JOB_FIELDS.strings) if (!optStr(v[k])) return `job.${k} must be a string`;
    for (const k of SFT_JOB_FIELDS.numbers) if (!optNum(v[k])) return `job.${k} must be a non-negative number`;
    for (const k of SFT_JOB_FIELDS.flags) if (v[k] !== undefined && typeof v[k] !== 'boolean') return `job.${k} must be a boolean`;
    if (v['base'] === '') return 'job.base must be a folder path, not empty';
    if (v['lora'] !== undefined && v['base'] === undefined) return 'job.lora trains adapters on a frozen base model: job.base is needed too';
    if (v['from'] === '') return 'job.from must be an SFT run folder, not empty';
    // As `train sft --from`: the run it continues gives the weights, the data and the world.
    if (v['from'] !== undefined && v['base'] !== undefined) return 'job.base and job.from both give the starting weights: give one of them';
    if (v['from'] !== undefined && v['world'] !== undefined) return "job.from continues on that run's data and world: drop job.world";
    if (v['traces'] === '') return 'job.traces must be a trajectories file, not empty';
    if (v['traces'] !== undefined && (v['from'] !== undefined || v['resume'] === true)) return 'job.traces makes a new run from that file: drop job.from and job.resume';
    return null;
  }
  if (v['kind'] === 'grpo') {
    for (const k of GRPO_JOB_FIELDS.strings) if (!optStr(v[k])) return `job.${k} must be a string`;
    for (const k of GRPO_JOB_FIELDS.numbers) if (!optNum(v[k])) return `job.${k} must be a non-negative number`;
    for (const k of GRPO_JOB_FIELDS.flags) if (v[k] !== undefined && typeof v[k] !== 'boolean') return `job.${k} must be a boolean`;
    if (v['from'] === undefined && v['resume'] !== true) return 'job.from (the SFT run folder) is required unless resuming';
    return null;
  }
  if (v['kind'] === 'eval') {
    if (!EVAL_SPLITS.includes(v['split'] as EvalSplit)) return `job.split must be one of ${EVAL_SPLITS.join(', ')}`;
    for (const k of ['checkpoint', 'backend', 'world']) if (!optStr(v[k])) return `job.${k} must be a string`;
    if (!optNum(v['limit'])) return 'job.limit must be a non-negative number';
    if (!optNum(v['copyBias'])) return 'job.copyBias must be a non-negative number';
    if (v['copyStop'] !== undefined && typeof v['copyStop'] !== 'boolean') return 'job.copyStop must be true or false';
    if (v['copyValues'] !== undefined && typeof v['copyValues'] !== 'boolean') return 'job.copyValues must be true or false';
    return null;
  }
  return `job.kind must be 'sft', 'grpo' or 'eval', got ${JSON.stringify(v['kind'])}`;
}

/** A validated message, or why it was refused. */
export type Parsed<T> = { ok: true; message: T } | { ok: false; error: string };
const ok = <T>(message: T): Parsed<T> => ({ ok: true, message });
const bad = <T>(error: string): Parsed<T> => ({ ok: false, error });

export function parseToWorker(v: unknown): Parsed<ToWorker> {
  if (!isObj(v)) return bad('message must be an object');
  if (v['type'] === 'cancel') return ok({ type: 'cancel' });
  if (v['type'] === 'start') {
    const err = checkJobSpec(v['job']);
    return err ? bad(err) : ok({ type: 'start', job: v['job'] as JobSpec });
  }
  return bad(`unknown message type ${JSON.stringify(v['type'])}`);
}

export function parseFromWorker(v: unknown): Parsed<FromWorker> {
  if (!isObj(v) || typeof v['type'] !== 'string') return bad('message must be an object with a type');
  switch (v['type']) {
    case 'started':
      return typeof v['backend'] === 'string' && checkJobSpec(v['job']) === null ? ok(v as FromWorker) : bad('bad started');
    case 'progress':
      return typeof v['phase'] === 'string' && typeof v['done'] === 'number' && typeof v['total'] === 'number'
        ? ok(v as FromWorker) : bad('bad progress');
    case 'metrics':
      return isMetricRecord(v['record']) ? ok(v as FromWorker) : bad('bad metrics');
    case 'log':
      return ['info', 'warn', 'error'].includes(v['level'] as string) && typeof v['message'] === 'string'
        ? ok(v as FromWorker) : bad('bad log');
    case 'checkpoint':
      return typeof v['step'] === 'number' && typeof v['path'] === 'string' ? ok(v as FromWorker) : bad('bad checkpoint');
    case 'done':
      return typeof v['cancelled'] === 'boolean' && isJobSummary(v['kind'], v['summary']) ? ok(v as FromWorker) : bad('bad done');
    case 'failed':
      return typeof v['error'] === 'string' ? ok(v as FromWorker) : bad('bad failed');
    default:
      return bad(`unknown message type ${JSON.stringify(v['type'])}`);
  }
}

const isNum = (v: unknown): v is number => typeof v === 'number';

/**
 * Whether `v` is the summary a job of `kind` ends with: the fields every reader relies on
 * (the rest are figures a reader shows if present).
 */
export function isJobSummary(kind: unknown, v: unknown): v is JobSummary {
  if (!isObj(v)) return false;
  if (kind === 'sft' || kind === 'grpo') {
    return typeof v['runDir'] === 'string' && isNum(v['steps']) && isNum(v['minutes']) && typeof v['backend'] === 'string' && Array.isArray(v['curve']);
  }
  if (kind === 'eval') {
    return typeof v['split'] === 'string' && isNum(v['accuracy']) && isNum(v['n']) && isNum(v['step']) && typeof v['checkpoint'] === 'string' && isObj(v['by_kind']);
  }
  return false;
}
