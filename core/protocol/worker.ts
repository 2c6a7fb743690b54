// Extension ↔ training worker messages (Node IPC, one JSON object per message). The
// extension spawns the worker by path and sends one `start`; the worker answers with
// started → (progress | metrics | log | checkpoint)* → done | failed. `cancel` may come at
// any time: the worker finishes the current step, writes a checkpoint and says `done`
// with `cancelled: true`. Types and validators only: no Node, no DOM.
import { isObj } from './isObj';

export type JobKind = 'sft' | 'grpo' | 'eval';

export interface SftJobSpec {
  kind: 'sft';
  runDir: string;
  preset?: string;
  recipe?: string;
  backend?: string;
  steps?: number;
  minutes?: number;
  resume?: boolean;
  /** Held-out tasks per accuracy point during training (default all 50). */
  evalLimit?: number;
  /** A user's world folder to build the run from (docs/worlds.md). */
  world?: string;
}
/**
 * Evaluation splits: the seed's 50 held-out tasks (reported first), the run's training
 * tasks, and fresh worlds of reserved seeds (core/worlds.ts): `dev` for choosing recipes,
 * `fresh-values` (values resampled) and `fresh-entities` (new names) for measuring reading.
 */
export const EVAL_SPLITS = ['heldout', 'train', 'dev', 'fresh-values', 'fresh-entities'] as const;
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
}
/** GRPO from an SFT run (docs/architecture.md, "GRPO defaults" for what is left out). */
export interface GrpoJobSpec {
  kind: 'grpo';
  runDir: string;
  /** The SFT run folder (not needed with resume). */
  from?: string;
  backend?: string;
  steps?: number;
  minutes?: number;
  resume?: boolean;
  groupSize?: number;
  tasksPerStep?: number;
  temperature?: number;
  maxSteps?: number;
  reward?: string;
  klBeta?: number;
  lr?: number;
  evalEvery?: number;
  evalLimit?: number;
  systemPrompt?: string;
  /** Seconds between checkpoints (default 120; 0: after every step). */
  checkpointEverySeconds?: number;
}
export type JobSpec = SftJobSpec | GrpoJobSpec | EvalJobSpec;

/** extension → worker */
export type ToWorker = { type: 'start'; job: JobSpec } | { type: 'cancel' };

/** worker → extension */
export type FromWorker =
  | { type: 'started'; job: JobSpec; backend: string; pid: number }
  | { type: 'progress'; phase: string; done: number; total: number; message?: string }
  | { type: 'metrics'; record: Record<string, unknown> }
  | { type: 'log'; level: 'info' | 'warn' | 'error'; message: string }
  | { type: 'checkpoint'; step: number; path: string }
  | { type: 'done'; cancelled: boolean; summary: Record<string, unknown> }
  | { type: 'failed'; error: string };

const optNum = (v: unknown): boolean => v === undefined || (typeof v === 'number' && Number.isFinite(v) && v >= 0);
const optStr = (v: unknown): boolean => v === undefined || typeof v === 'string';

/** Validates a job spec; returns an error message naming the bad field, or null. */
export function checkJobSpec(v: unknown): string | null {
  if (!isObj(v)) return 'job must be an object';
  if (typeof v['runDir'] !== 'string' || v['runDir'] === '') return 'job.runDir must be a non-empty string';
  if (v['kind'] === 'sft') {
    for (const k of ['preset', 'recipe', 'backend', 'world']) if (!optStr(v[k])) return `job.${k} must be a string`;
    for (const k of ['steps', 'minutes', 'evalLimit']) if (!optNum(v[k])) return `job.${k} must be a non-negative number`;
    if (v['resume'] !== undefined && typeof v['resume'] !== 'boolean') return 'job.resume must be a boolean';
    return null;
  }
  if (v['kind'] === 'grpo') {
    for (const k of ['from', 'backend', 'reward', 'systemPrompt']) if (!optStr(v[k])) return `job.${k} must be a string`;
    for (const k of ['steps', 'minutes', 'groupSize', 'tasksPerStep', 'temperature', 'maxSteps', 'klBeta', 'lr', 'evalEvery', 'evalLimit', 'checkpointEverySeconds']) {
      if (!optNum(v[k])) return `job.${k} must be a non-negative number`;
    }
    if (v['resume'] !== undefined && typeof v['resume'] !== 'boolean') return 'job.resume must be a boolean';
    if (v['from'] === undefined && v['resume'] !== true) return 'job.from (the SFT run folder) is required unless resuming';
    return null;
  }
  if (v['kind'] === 'eval') {
    if (!EVAL_SPLITS.includes(v['split'] as EvalSplit)) return `job.split must be one of ${EVAL_SPLITS.join(', ')}`;
    for (const k of ['checkpoint', 'backend', 'world']) if (!optStr(v[k])) return `job.${k} must be a string`;
    if (!optNum(v['limit'])) return 'job.limit must be a non-negative number';
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
      return isObj(v['record']) ? ok(v as FromWorker) : bad('bad metrics');
    case 'log':
      return ['info', 'warn', 'error'].includes(v['level'] as string) && typeof v['message'] === 'string'
        ? ok(v as FromWorker) : bad('bad log');
    case 'checkpoint':
      return typeof v['step'] === 'number' && typeof v['path'] === 'string' ? ok(v as FromWorker) : bad('bad checkpoint');
    case 'done':
      return typeof v['cancelled'] === 'boolean' && isObj(v['summary']) ? ok(v as FromWorker) : bad('bad done');
    case 'failed':
      return typeof v['error'] === 'string' ? ok(v as FromWorker) : bad('bad failed');
    default:
      return bad(`unknown message type ${JSON.stringify(v['type'])}`);
  }
}
