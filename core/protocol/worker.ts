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

export type JobKind = 'sft' | 'grpo' | 'eval' | 'world' | 'distill' | 'ask';

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
/** A job on a run folder: training and evaluation (the Runs view and the curves follow it). */
export type JobSpec = SftJobSpec | GrpoJobSpec | EvalJobSpec;
export type RunJobKind = JobSpec['kind'];

/**
 * A world folder built (`agent-lab world`): from a fact table, from documents and a tasks
 * file, or, given neither, the textbook's world (docs/worlds.md).
 */
export interface WorldJobSpec {
  kind: 'world';
  /** The new world folder; one that holds anything is refused, nothing written. */
  out: string;
  facts?: string;
  docs?: string;
  tasks?: string;
  /** An MCP tool list narrowing search/calc (docs/worlds.md, "Tools"). */
  tools?: string;
  seed?: number;
  /** The textbook's world: distractor passages, training and held-out task counts. */
  distractors?: number;
  train?: number;
  heldout?: number;
  /** A user's world: `train=N,heldout=N,dev=N` and the task shapes (`--split`, `--shapes`). */
  split?: string;
  shapes?: string;
}

/** The teachers a distillation can use: the stub, an OpenAI-compatible server, a run's student. */
export const DISTILL_TEACHERS = ['stub', 'http', 'student'] as const;
export type DistillTeacher = (typeof DISTILL_TEACHERS)[number];
export const DISTILL_SPLITS = ['train', 'heldout', 'dev'] as const;
export type DistillSplit = (typeof DISTILL_SPLITS)[number];

/**
 * Trajectories distilled from a teacher (`agent-lab distill`) into `out`, a file that must
 * not exist yet (unless `overwrite`). The HTTP teacher's key is never part of a job: the worker reads it from
 * its environment (core/teachers/http.ts API_KEY_ENV), as the CLI does.
 */
export interface DistillJobSpec {
  kind: 'distill';
  split: DistillSplit;
  out: string;
  /** A world folder; absent: the textbook's world of `seed` with `distractors`. */
  world?: string;
  seed?: number;
  distractors?: number;
  teacher?: DistillTeacher;
  samples?: number;
  /** Also the seed's role split (query writer and synthesizer files beside `out`). */
  roles?: boolean;
  /** Replace `out` (and the role files) when they are regular files: `agent-lab distill --out FILE`, where the user named the file. */
  overwrite?: boolean;
  /** The HTTP teacher. */
  teacherUrl?: string;
  teacherModel?: string;
  temperature?: number;
  maxTokens?: number;
  timeoutMs?: number;
  retries?: number;
  concurrency?: number;
  /** The student teacher: its run folder, checkpoint and backend. */
  run?: string;
  checkpoint?: string;
  backend?: string;
}

/** One question put to a run's student through the real loop (`agent-lab run`). */
export interface AskJobSpec {
  kind: 'ask';
  runDir: string;
  question: string;
  /** Search this world folder instead of the run's own world. */
  world?: string;
  checkpoint?: string;
  backend?: string;
}

/** The jobs that make inputs or answer a question rather than train a run. */
export type ToolJobSpec = WorldJobSpec | DistillJobSpec | AskJobSpec;
/** Every job the worker runs: the editor's one road to the trainer. */
export type WorkerJobSpec = JobSpec | ToolJobSpec;

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

/** A built world folder: what it holds, and the lines `agent-lab world` prints. */
export interface WorldJobSummary {
  out: string;
  passages: number;
  train: number;
  heldout: number;
  /** A user's world's dev split (absent for the textbook's). */
  dev?: number;
  lines: string[];
}

/** A distillation: the file written, tasks finished, trajectories kept, and the lines `agent-lab distill` prints. */
export interface DistillJobSummary {
  out: string;
  tasks: number;
  kept: number;
  /** Tasks with no kept trajectory, by reason (no_hints, wrong_answer, off_tools, a teacher's failure). */
  unsolved: Record<string, number>;
  lines: string[];
}

/** One step of an asked trajectory, as `agent-lab run` prints it. */
export interface AskStep {
  kind: string;
  text: string;
  guard?: string;
  truncated?: boolean;
  observation?: string;
}

/** The student's answer to one question and its trajectory. */
export interface AskJobSummary {
  question: string;
  answer: string | null;
  steps: number;
  outOfSteps: boolean;
  contextFull: boolean;
  /** The whole transcript in the wire format. */
  text: string;
  record: AskStep[];
  /** The checkpoint that answered (`step-N`) and the student's context in tokens. */
  checkpoint: string;
  context: number;
}

/** The summary each job kind ends with. */
export interface JobSummaries {
  sft: SftSummary;
  grpo: GrpoSummary;
  eval: EvalJobSummary;
  world: WorldJobSummary;
  distill: DistillJobSummary;
  ask: AskJobSummary;
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

/** Whether a job's result is a run job's (training or evaluation). */
export const isRunJobResult = (r: JobResult): r is JobResult<RunJobKind> => r.kind === 'sft' || r.kind === 'grpo' || r.kind === 'eval';

/** extension → worker */
export type ToWorker = { type: 'start'; job: WorkerJobSpec } | { type: 'cancel' };

/** worker → extension */
export type FromWorker =
  | { type: 'started'; job: WorkerJobSpec; backend: string; pid: number }
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
  if (v['kind'] === 'world' || v['kind'] === 'distill' || v['kind'] === 'ask') return checkToolJobSpec(v);
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
  return `job.kind must be one of sft, grpo, eval, world, distill, ask; got ${JSON.stringify(v['kind'])}`;
}

/** The fields of a job given as [name, type]; the first one of the wrong type is named. */
function fieldProblem(v: Record<string, unknown>, fields: Record<string, 'string' | 'number' | 'boolean'>, required: readonly string[]): string | null {
  for (const k of required) if (v[k] === undefined || v[k] === '') return `job.${k} is required`;
  for (const [k, type] of Object.entries(fields)) {
    const x = v[k];
    if (x === undefined) continue;
    if (type === 'string' && (typeof x !== 'string' || x === '')) return `job.${k} must be a non-empty string`;
    if (type === 'number' && !(typeof x === 'number' && Number.isFinite(x) && x >= 0)) return `job.${k} must be a non-negative number`;
    if (type === 'boolean' && typeof x !== 'boolean') return `job.${k} must be a boolean`;
  }
  return null;
}

function checkToolJobSpec(v: Record<string, unknown>): string | null {
  if (v['kind'] === 'world') {
    const p = fieldProblem(
      v,
      { out: 'string', facts: 'string', docs: 'string', tasks: 'string', tools: 'string', seed: 'number', distractors: 'number', train: 'number', heldout: 'number', split: 'string', shapes: 'string' },
      ['out'],
    );
    if (p) return p;
    if (v['facts'] !== undefined && (v['docs'] !== undefined || v['tasks'] !== undefined)) return 'job.facts and job.docs/job.tasks are two sources: give one';
    if ((v['docs'] === undefined) !== (v['tasks'] === undefined)) return 'job.docs and job.tasks go together (documents and their questions)';
    return null;
  }
  if (v['kind'] === 'distill') {
    // The key comes from the worker's environment; a job that carries one would put it in logs and messages.
    for (const k of Object.keys(v)) if (/key|token|secret|authorization/i.test(k)) return `job.${k}: a job never carries a credential (the HTTP teacher's key is read from the environment)`;
    const p = fieldProblem(
      v,
      {
        out: 'string', world: 'string', seed: 'number', distractors: 'number', samples: 'number', roles: 'boolean', overwrite: 'boolean', teacherUrl: 'string', teacherModel: 'string',
        temperature: 'number', maxTokens: 'number', timeoutMs: 'number', retries: 'number', concurrency: 'number', run: 'string', checkpoint: 'string', backend: 'string',
      },
      ['out'],
    );
    if (p) return p;
    if (!DISTILL_SPLITS.includes(v['split'] as DistillSplit)) return `job.split must be one of ${DISTILL_SPLITS.join(', ')}`;
    if (v['teacher'] !== undefined && !DISTILL_TEACHERS.includes(v['teacher'] as DistillTeacher)) return `job.teacher must be one of ${DISTILL_TEACHERS.join(', ')}`;
    if (v['teacher'] === 'student' && v['run'] === undefined) return 'job.run (the run whose student is the teacher) is required with teacher student';
    return null;
  }
  const p = fieldProblem(v, { runDir: 'string', question: 'string', world: 'string', checkpoint: 'string', backend: 'string' }, ['runDir', 'question']);
  return p;
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
    return err ? bad(err) : ok({ type: 'start', job: v['job'] as WorkerJobSpec });
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
  const isLines = (x: unknown): boolean => Array.isArray(x) && x.every((l) => typeof l === 'string');
  if (kind === 'world') return typeof v['out'] === 'string' && isNum(v['passages']) && isNum(v['train']) && isNum(v['heldout']) && isLines(v['lines']);
  if (kind === 'distill') return typeof v['out'] === 'string' && isNum(v['tasks']) && isNum(v['kept']) && isObj(v['unsolved']) && isLines(v['lines']);
  if (kind === 'ask') {
    return typeof v['question'] === 'string' && (v['answer'] === null || typeof v['answer'] === 'string') && isNum(v['steps']) && typeof v['text'] === 'string' && Array.isArray(v['record']) && typeof v['checkpoint'] === 'string';
  }
  return false;
}
