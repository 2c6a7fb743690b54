// Generate ReAct trajectories with a teacher, keep the solved ones (rejection sampling),
// de-duplicated per task — the seed's distill.py. The teacher is injected.
import { assertTeacherTasks } from './differenceTasks';
import { floatToBigInt, isIntegerFloat, pyFloatRepr, pyParseFloat } from './pyfloat';
import { pyRstripChars, pySplitWhitespace, pyStrip, splitOnce } from './pystr';
import { SYSTEM_PROMPT, ToolEnv } from './env';
import type { Teacher } from './stubTeacher';
import type { Task, TaskKind } from './types';
import { ASST, END, SYS, USER, parseAssistantStep, renderToolResult } from './wire';

export { SYSTEM_PROMPT, ToolEnv } from './env';
export { makeStubTeacher } from './stubTeacher';
export type { Teacher } from './stubTeacher';

export const DEFAULT_MAX_STEPS = 6;

/** Verifier-side normalisation so '4042', ' 4042 ', '4042.0' all match (the seed's). */
export function normalize(s: string | null | undefined): string {
  if (s === null || s === undefined) return '';
  const t = pyRstripChars(pyStrip(s), '.');
  const f = pyParseFloat(t);
  if (f !== null) return isIntegerFloat(f) ? floatToBigInt(f).toString() : pyFloatRepr(f);
  return pySplitWhitespace(t.toLowerCase()).join(' ');
}

/** The system + user prefix every trajectory starts with (SFT and RL must render it identically). */
export function renderPrompt(question: string, systemPrompt = SYSTEM_PROMPT): string {
  return `${SYS}${systemPrompt}${END}${USER}${question}${END}`;
}

export interface RolloutResult {
  transcript: string;
  solved: boolean;
  /** The final answer, when the trajectory reached one. */
  answer: string | null;
  steps: number;
}

/** Where a trajectory stands between teacher steps: what the teacher continues, and the steps taken. */
export interface RolloutState {
  transcript: string;
  steps: number;
}

/**
 * One ReAct trajectory as a coroutine, the one loop of the sync and the async teacher alike:
 * it yields its state before each step and is sent the teacher's text; real tools answer,
 * until an answer or `maxSteps`. `refuse` may stop it at a call (the call not run, the
 * trajectory unsolved), with the reason it returns.
 */
export function* rolloutSteps(
  task: Task,
  env: ToolEnv,
  maxSteps = DEFAULT_MAX_STEPS,
  refuse?: (action: Extract<ReturnType<typeof parseAssistantStep>, { kind: 'tool' }>) => string | null,
): Generator<RolloutState, RolloutResult & { refused: string | null }, string> {
  const state: RolloutState = { transcript: renderPrompt(task.question, env.systemPrompt), steps: 0 };
  for (let s = 0; s < maxSteps; s++) {
    state.steps++;
    const generated = yield state;
    const stepText = splitOnce(generated, END)[0];
    const action = parseAssistantStep(stepText);
    if (refuse && action.kind === 'tool') {
      const why = refuse(action);
      if (why !== null) return { transcript: state.transcript, solved: false, answer: null, steps: state.steps, refused: why };
    }
    state.transcript += `${ASST}${stepText}${END}`;
    if (action.kind === 'final') {
      return { transcript: state.transcript, solved: normalize(action.answer) === normalize(task.gold), answer: action.answer, steps: state.steps, refused: null };
    }
    state.transcript += renderToolResult(env.runTool(action));
  }
  return { transcript: state.transcript, solved: false, answer: null, steps: state.steps, refused: null };
}

/** One ReAct trajectory: the teacher emits a step, real tools answer, until an answer. */
export function rollout(task: Task, teacher: Teacher, env: ToolEnv, maxSteps = DEFAULT_MAX_STEPS): RolloutResult {
  const steps = rolloutSteps(task, env, maxSteps);
  let next = steps.next();
  while (!next.done) next = steps.next(teacher(next.value.transcript + ASST));
  const { transcript, solved, answer, steps: n } = next.value;
  return { transcript, solved, answer, steps: n };
}

export interface TraceRow {
  task: string;
  text: string;
  kind: TaskKind;
}

export interface DistillStats {
  /** Rollouts attempted / solved / kept (after de-duplication), per task kind. */
  perKind: Record<string, KindCounts>;
}

/** Counts of one task kind's rollouts (DistillStats.perKind); `failed` where a teacher can fail. */
export interface KindCounts {
  tasks: number;
  rollouts: number;
  solved: number;
  kept: number;
  failed?: number;
}

/**
 * Rejection sampling's rule for one task's finished rollouts, sync and async alike: the
 * solved ones, each transcript once, counted into `counts` (a failed rollout, `error` set,
 * is counted and never kept).
 */
export function keepSolved<R extends RolloutResult & { error?: unknown }>(results: readonly R[], counts: KindCounts | null): R[] {
  if (counts) counts.tasks++;
  const seen = new Set<string>();
  const kept: R[] = [];
  for (const r of results) {
    if (counts) counts.rollouts++;
    if (r.error) {
      if (counts) counts.failed = (counts.failed ?? 0) + 1;
      continue;
    }
    if (!r.solved) continue;
    if (counts) counts.solved++;
    if (seen.has(r.transcript)) continue;
    seen.add(r.transcript);
    kept.push(r);
    if (counts) counts.kept++;
  }
  return kept;
}

/** Rejection sampling: `samplesPerTask` rollouts per task, keep solved ones, de-duplicated per task. */
export function distill(
  tasks: readonly Task[],
  teacher: Teacher,
  env: ToolEnv,
  samplesPerTask = 4,
  stats?: DistillStats,
): TraceRow[] {
  // Whatever the teacher, a no-teacher family never becomes SFT data (core/differenceTasks.ts).
  assertTeacherTasks(tasks, 'distill');
  const kept: TraceRow[] = [];
  for (const task of tasks) {
    const results = Array.from({ length: samplesPerTask }, () => rollout(task, teacher, env));
    const counts = stats ? (stats.perKind[task.kind] ??= { tasks: 0, rollouts: 0, solved: 0, kept: 0 }) : null;
    for (const r of keepSolved(results, counts)) kept.push({ task: task.question, text: r.transcript, kind: task.kind });
  }
  return kept;
}
