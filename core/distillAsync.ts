// Distillation with an asynchronous teacher (an HTTP server, the student): the same loop as
// core/distill.ts's rollout/distill, byte for byte, plus what a remote or learned teacher
// needs: a teacher failure ends that rollout (counted by reason, never a crash), several
// requests in flight, progress, and cancellation. Output order stays deterministic: task
// order, then sample order, whatever order the requests finish in. With a world's tool list
// every call is checked against it before it runs (`off-tools`, issue 36).
import type { ToolEnv } from './env';
import { DEFAULT_MAX_STEPS, KindCounts, RolloutResult, TraceRow, keepSolved, rolloutSteps } from './distill';
import { assertTeacherTasks } from './differenceTasks';
import { AsyncTeacher, TeacherError } from './teachers/teacher';
import type { McpTool } from './tools/schemas';
import type { Task } from './types';
import { ASST, renderCallBody } from './wire';
import { toolCallViolation } from './worldTools';

export { TeacherConfigError, TeacherError, asyncTeacher, canonicalStep } from './teachers/teacher';
export type { AsyncTeacher, TeacherReply } from './teachers/teacher';

export interface AsyncRolloutResult extends RolloutResult {
  /** Null for a rollout that ran to its end; else why the teacher failed (the transcript stops there). */
  error: TeacherError | null;
  /** The teacher's raw replies in step order (teachers that report them). */
  raw: string[];
}

/**
 * The failure reason of a call outside the world's tool list (a tool it leaves out, an
 * argument its schema refuses): the call is not run and the rollout is not kept.
 */
export const OFF_TOOLS = 'off-tools';

/**
 * `rollout` with an async teacher; a TeacherError ends the rollout unsolved. `tools`: the
 * world's tool list, which every call must keep to (else TeacherError `off-tools`, the call
 * not run); without it the textbook's tools run as always.
 */
export async function rolloutAsync(
  task: Task,
  teacher: AsyncTeacher,
  env: ToolEnv,
  maxSteps = DEFAULT_MAX_STEPS,
  signal?: AbortSignal,
  tools?: readonly McpTool[] | null,
): Promise<AsyncRolloutResult> {
  const raw: string[] = [];
  // Any teacher's call, not only the HTTP teacher's: the grammar it was checked against
  // (if any) is the textbook's, which the world's list may narrow or leave calc out of.
  const steps = rolloutSteps(
    task,
    env,
    maxSteps,
    tools
      ? (action) => {
          const why = toolCallViolation(action.tool, action.args, tools);
          return why === null ? null : `${clip(renderCallBody(action.tool, action.args))}: ${why}`;
        }
      : undefined,
  );
  let next = steps.next();
  while (!next.done) {
    const { transcript, steps: n } = next.value;
    let generated: string;
    try {
      const reply = await teacher(transcript + ASST, signal);
      if (typeof reply === 'string') generated = reply;
      else {
        generated = reply.text;
        raw.push(reply.raw);
      }
    } catch (err) {
      if (!(err instanceof TeacherError)) throw err;
      return { transcript, solved: false, answer: null, steps: n, error: err, raw };
    }
    next = steps.next(generated);
  }
  const { refused, ...result } = next.value;
  return { ...result, error: refused === null ? null : new TeacherError(OFF_TOOLS, refused), raw };
}

const clip = (s: string, n = 160): string => (s.length > n ? `${s.slice(0, n)}...` : s);

/** A kept row: the seed's keys first, then `teacher_raw` when the teacher reports raw replies. */
export interface AsyncTraceRow extends TraceRow {
  teacher_raw?: string[];
}

export interface KindStats extends KindCounts {
  failed: number;
}

/** Structurally a DistillStats (perKind), plus totals and teacher failures by reason. */
export interface AsyncDistillStats {
  tasks: number;
  rollouts: number;
  solved: number;
  kept: number;
  /** Failed rollouts by TeacherError reason ('timeout', 'http 500', 'refusal', 'malformed', ...). */
  failed: Record<string, number>;
  /** The first message seen per failure reason (what the server said). */
  failureExamples: Record<string, string>;
  perKind: Record<string, KindStats>;
  /** Stopped by the signal: only tasks whose every sample finished are counted and kept. */
  cancelled: boolean;
}

export function newDistillStats(): AsyncDistillStats {
  return { tasks: 0, rollouts: 0, solved: 0, kept: 0, failed: {}, failureExamples: {}, perKind: {}, cancelled: false };
}

export interface DistillAsyncOptions {
  samplesPerTask?: number;
  /** Rollouts in flight at once (default 4); output order does not depend on it. */
  concurrency?: number;
  maxSteps?: number;
  /** Called as tasks complete (every sample of the task finished). */
  onProgress?: (tasksDone: number, tasksTotal: number) => void;
  /** Called for each failed rollout (for logs). */
  onFailure?: (task: Task, error: TeacherError) => void;
  /** Aborting stops new rollouts; the finished tasks' rows are returned. */
  signal?: AbortSignal;
  /** Filled in place. */
  stats?: AsyncDistillStats;
  /** The world's tool list (tools.json): a call outside it fails its rollout (`off-tools`), never run or kept. */
  tools?: readonly McpTool[] | null;
}

export const DEFAULT_CONCURRENCY = 4;

/**
 * Rejection sampling with an async teacher: `samplesPerTask` rollouts per task, keep the
 * solved ones, de-duplicated per task (as `distill`). A fatal TeacherError (no request can
 * succeed: a bad key, an unknown model) stops the run and is thrown.
 */
export async function distillAsync(
  tasks: readonly Task[],
  teacher: AsyncTeacher,
  env: ToolEnv,
  options: DistillAsyncOptions = {},
): Promise<AsyncTraceRow[]> {
  // Whatever the teacher, a no-teacher family never becomes SFT data (core/differenceTasks.ts).
  assertTeacherTasks(tasks, 'distill');
  const samples = options.samplesPerTask ?? 4;
  const concurrency = Math.max(1, Math.floor(options.concurrency ?? DEFAULT_CONCURRENCY));
  const maxSteps = options.maxSteps ?? DEFAULT_MAX_STEPS;
  const results: (AsyncRolloutResult | undefined)[][] = tasks.map(() => new Array<AsyncRolloutResult | undefined>(samples));
  const remaining = tasks.map(() => samples);
  const total = tasks.length * samples;
  let next = 0;
  let tasksDone = 0;
  let stop: unknown = null; // a fatal TeacherError or a crash: no new rollouts start
  const worker = async (): Promise<void> => {
    while (next < total && stop === null && !options.signal?.aborted) {
      const job = next++;
      const ti = Math.floor(job / samples);
      const task = tasks[ti]!;
      let r: AsyncRolloutResult;
      try {
        r = await rolloutAsync(task, teacher, env, maxSteps, options.signal, options.tools);
      } catch (err) {
        stop ??= err;
        return;
      }
      // Stopped mid-request by the signal: the task is unfinished (neither counted nor kept).
      if (options.signal?.aborted && r.error?.reason === 'cancelled') return;
      results[ti]![job % samples] = r;
      if (r.error) {
        options.onFailure?.(task, r.error);
        if (r.error.fatal) stop ??= r.error;
      }
      if (--remaining[ti]! === 0) options.onProgress?.(++tasksDone, tasks.length);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, Math.max(1, total)) }, worker));
  if (stop !== null) throw stop;

  const stats = options.stats ?? newDistillStats();
  stats.cancelled = remaining.some((n) => n > 0);
  const kept: AsyncTraceRow[] = [];
  tasks.forEach((task, ti) => {
    if (remaining[ti]! > 0) return;
    const k = (stats.perKind[task.kind] ??= { tasks: 0, rollouts: 0, solved: 0, kept: 0, failed: 0 });
    const finished = results[ti]!.filter((r): r is AsyncRolloutResult => r !== undefined);
    const before = { ...k };
    for (const r of keepSolved(finished, k)) kept.push({ task: task.question, text: r.transcript, kind: task.kind, ...(r.raw.length > 0 ? { teacher_raw: r.raw } : {}) });
    stats.tasks++;
    stats.rollouts += k.rollouts - before.rollouts;
    stats.solved += k.solved - before.solved;
    stats.kept += k.kept - before.kept;
    for (const r of finished) {
      if (!r.error) continue;
      stats.failed[r.error.reason] = (stats.failed[r.error.reason] ?? 0) + 1;
      stats.failureExamples[r.error.reason] ??= r.error.message;
    }
  });
  return kept;
}
