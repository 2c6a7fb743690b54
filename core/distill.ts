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

/** One ReAct trajectory: the teacher emits a step, real tools answer, until an answer. */
export function rollout(task: Task, teacher: Teacher, env: ToolEnv, maxSteps = DEFAULT_MAX_STEPS): RolloutResult {
  let transcript = renderPrompt(task.question, env.systemPrompt);
  let solved = false;
  let answer: string | null = null;
  let steps = 0;
  for (let s = 0; s < maxSteps; s++) {
    steps++;
    const generated = teacher(transcript + ASST);
    const stepText = splitOnce(generated, END)[0];
    const action = parseAssistantStep(stepText);
    transcript += `${ASST}${stepText}${END}`;
    if (action.kind === 'final') {
      answer = action.answer;
      solved = normalize(action.answer) === normalize(task.gold);
      break;
    }
    transcript += renderToolResult(env.runTool(action));
  }
  return { transcript, solved, answer, steps };
}

export interface TraceRow {
  task: string;
  text: string;
  kind: TaskKind;
}

export interface DistillStats {
  /** Rollouts attempted / solved / kept (after de-duplication), per task kind. */
  perKind: Record<string, { tasks: number; rollouts: number; solved: number; kept: number }>;
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
    const seen = new Set<string>();
    const k = stats ? (stats.perKind[task.kind] ??= { tasks: 0, rollouts: 0, solved: 0, kept: 0 }) : null;
    if (k) k.tasks++;
    for (let i = 0; i < samplesPerTask; i++) {
      const { transcript, solved } = rollout(task, teacher, env);
      if (k) {
        k.rollouts++;
        if (solved) k.solved++;
      }
      if (solved && !seen.has(transcript)) {
        seen.add(transcript);
        kept.push({ task: task.question, text: transcript, kind: task.kind });
        if (k) k.kept++;
      }
    }
  }
  return kept;
}
