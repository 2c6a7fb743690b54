// Evaluation: the student, greedy and constrained, through the real loop on every task of
// a split. Exact match overall and per shape, mean steps, a failure taxonomy by the first
// step where the student departs from the teacher, teacher-forced accuracy per span kind,
// and contamination (evaluated tasks that overlap the run's training data).
import { DEFAULT_MAX_STEPS, normalize, rollout } from '../../core/distill';
import { pyStrip } from '../../core/pystr';
import { FAILURE_KINDS, FAILURE_MEANINGS, type FailureKind } from '../../core/protocol/panels';
import { ToolEnv } from '../../core/env';
import { overlapKey } from '../../core/overlap';
import { SPAN_KINDS, SpanKind } from '../../core/spans';
import { makeStubTeacher } from '../../core/stubTeacher';
import { stubTeacherOptions, type TeacherKnobs } from '../sft/recipes';
import type { Task } from '../../core/types';
import { assistantTurns, parseAssistantStep } from '../../core/wire';
import { isHinted } from '../../core/worldSource';
import { SEED_WORLD, WorldId, seedGoldOf, worldName } from '../../core/worlds';
import { parentGoldOf } from '../../core/derivedWorlds';
import { AgentRuntime, Episode, EpisodeOptions } from './agentRuntime';

/**
 * The first real mistake of a failed trajectory, where it departs from the teacher's: a
 * `search` that did not return a fact the task needs (another query or k that returned it is
 * no departure), a `calc` whose result is not the teacher's, `early_answer` (answered where
 * the teacher called a tool), `extra_call` (called a tool where the teacher answered),
 * `final` (a wrong answer where the teacher answered), `not_in_question` (a wrong answer that
 * names an entity of the world the question does not name, where it answered), `format`,
 * `out_of_steps`; and `memorised` (a fresh world's question answered with the seed world's
 * value while the fresh world's gold differs), which takes precedence.
 */
export type Failure = FailureKind;
export const FAILURES: readonly Failure[] = FAILURE_KINDS;
export { FAILURE_MEANINGS };
export const STEP_PENALTY = 0.05;

/** The eval row contract (eval/<split>.jsonl). */
export interface EvalRow {
  question: string;
  gold: string;
  answer: string | null;
  solved: boolean;
  kind: string;
  failure: Failure | null;
  steps: number;
  reward: number;
  text: string;
  /** Per token: 1 where the policy generated it (so viewers can tell harness text apart). */
  generated: number[];
  /** The world the task lives in ("seed:0", "values:1000003", ...). */
  world: string;
}

export interface EvalSummary {
  split: string;
  accuracy: number;
  n: number;
  by_kind: Record<string, { n: number; accuracy: number }>;
  failures: Record<Failure, number>;
  span_accuracy: Partial<Record<SpanKind, number>>;
  contaminated: number;
  steps_mean: number;
  /** How the split is made: world kind, world seeds, task count. */
  worlds?: { kind: string; seeds: number[]; tasks: number };
}

/** reward = exact match - 0.05 * steps / max_steps (the seed's verifiable reward). */
export function reward(solved: boolean, steps: number, maxSteps = DEFAULT_MAX_STEPS): number {
  return (solved ? 1 : 0) - (STEP_PENALTY * steps) / maxSteps;
}

interface TeacherStep {
  kind: 'tool' | 'malformed' | 'final';
  tool?: string;
  call?: string;
  answer?: string;
  /** A tool step's result, as the transcript shows it. */
  observation?: string;
}

export { assistantTurns } from '../../core/wire';

const TOOL_RESULT_RE = /<\|tool_result\|>([\s\S]*?)<\|end\|>/g;

function teacherSteps(text: string): TeacherStep[] {
  const results = [...text.matchAll(TOOL_RESULT_RE)].map((m) => m[1]!);
  let tools = 0;
  return assistantTurns(text).map((t) => {
    const a = parseAssistantStep(t);
    if (a.kind === 'tool') {
      const observation = results[tools++];
      return { kind: 'tool', tool: a.tool, call: JSON.stringify([a.tool, a.args]), ...(observation !== undefined ? { observation } : {}) };
    }
    if (a.kind === 'final') return { kind: 'final', answer: a.answer };
    return { kind: 'malformed' };
  });
}

/** What classifyFailure may know of the task beyond the two trajectories. */
export interface FailureContext {
  /** The task: its hinted facts (a search that returned one is no departure) and its question. */
  task?: Task;
  /** True when `name` is an entity of the world (e.g. its corpus says "the ... of NAME is"). */
  isEntity?: (name: string) => boolean;
}

/** True when `answer` names an entity of the world that the question does not name. */
function namesOtherEntity(answer: string | null, ctx: FailureContext): boolean {
  if (answer === null || !ctx.task || !ctx.isEntity) return false;
  const name = pyStrip(answer).replace(/\.+$/, '');
  if (name === '' || !ctx.isEntity(name)) return false;
  const named = ctx.task.hints.names ?? ctx.task.hints.facts.map(([e]) => e);
  if (named.some((n) => normalize(n) === normalize(name))) return false;
  return !ctx.task.question.includes(name);
}

/**
 * The first real mistake of a failed trajectory (null when solved): where the student first
 * departs from the teacher's, except that a search whose result holds a fact the task needs
 * (not yet found; any query, any k) and a calc with the teacher's result are not departures,
 * and a wrong answer naming an entity the question does not is `not_in_question`.
 */
export function classifyFailure(ep: Episode, teacherTranscript: string, ctx: FailureContext = {}): Failure | null {
  if (ep.solved) return null;
  const teacher = teacherSteps(teacherTranscript);
  const needed = ctx.task?.hints.facts ?? [];
  const found = new Set<number>();
  /** Marks the needed facts `observation` states; true when one was new. */
  const finds = (observation: string | undefined): boolean => {
    if (observation === undefined) return false;
    let fresh = false;
    needed.forEach(([e, a], j) => {
      if (!found.has(j) && observation.includes(`the ${a} of ${e} is `)) {
        found.add(j);
        fresh = true;
      }
    });
    return fresh;
  };
  const answered = (otherwise: Failure): Failure => (namesOtherEntity(ep.answer, ctx) ? 'not_in_question' : otherwise);
  // The teacher's step the student is at: its searches are one per needed fact, so once the
  // student holds every needed fact the teacher's searches left are passed over.
  let j = 0;
  for (let i = 0; i < ep.record.length; i++, j++) {
    const s = ep.record[i]!;
    if (s.kind === 'malformed' || s.truncated) return 'format';
    if (s.kind === 'forced') return 'out_of_steps';
    while (needed.length > 0 && found.size === needed.length && teacher[j]?.kind === 'tool' && teacher[j]!.tool === 'search') j++;
    const t = teacher[j];
    if (!t) return ep.outOfSteps ? 'out_of_steps' : answered('final');
    const sameCall = s.kind === 'tool' && t.kind === 'tool' && JSON.stringify([s.tool, s.args]) === t.call;
    if (sameCall) {
      finds(s.observation);
      continue;
    }
    if (t.kind === 'tool') {
      if (s.kind === 'final') return answered('early_answer');
      if (t.tool === 'search' && s.tool === 'search' && finds(s.observation)) continue;
      if (t.tool === 'calc' && s.tool === 'calc' && s.observation !== undefined && t.observation !== undefined && normalize(s.observation) === normalize(t.observation)) continue;
      return t.tool === 'calc' ? 'calc' : 'search';
    }
    // The teacher answered here.
    return s.kind === 'final' ? answered('final') : 'extra_call';
  }
  return ep.outOfSteps ? 'out_of_steps' : answered('final');
}

/** An entity test over a corpus: some passage says "the ... of NAME is" (cached per name). */
export function corpusEntities(env: ToolEnv): (name: string) => boolean {
  const seen = new Map<string, boolean>();
  return (name) => {
    let v = seen.get(name);
    if (v === undefined) {
      const clause = ` of ${name} is `;
      v = env.retriever.passages.some((p) => p.text.includes(clause));
      seen.set(name, v);
    }
    return v;
  };
}

/**
 * The answer a student that remembers instead of reading would give: the seed world's gold for
 * a textbook world's question, the parent table's for a value world derived from a user's
 * table; null where there is none (the seed world itself, a user's own world).
 */
function memorisedGoldOf(task: Task, world: WorldId): string | null {
  if (world.kind === 'values' || world.kind === 'entities') return seedGoldOf(task);
  if (world.kind !== 'custom') return null;
  const parent = world.rows.parent;
  // As in the textbook's fresh-entities split, new names have no remembered answer to give.
  return parent?.kind === 'values' ? parentGoldOf(task, parent.facts) : null;
}

export interface EvalOptions {
  split: string;
  /** The world of the tasks (default the seed's): for `memorised` and world-qualified contamination. */
  world?: WorldId;
  episode?: Partial<EpisodeOptions>;
  /** Overlap keys of the run's training tasks, for `contaminated`. */
  trainingKeys?: ReadonlySet<string>;
  /** Teacher-forced accuracy per span kind, computed by the caller (it needs the model). */
  spanAccuracy?: Partial<Record<SpanKind, number>>;
  onProgress?: (done: number, total: number, row: EvalRow) => void;
  isCancelled?: () => boolean;
  /** The run's recipe knobs on the reference teacher (its k), so a departure is judged against the teacher it learned from. */
  teacher?: TeacherKnobs;
}

export async function evaluateTasks(
  runtime: AgentRuntime,
  tasks: readonly Task[],
  env: ToolEnv,
  options: EvalOptions,
): Promise<{ rows: EvalRow[]; summary: EvalSummary }> {
  // The grader's reference (a no-teacher task's too): never shown to the student.
  const teacher = makeStubTeacher(tasks, { ...stubTeacherOptions(options.teacher ?? {}, env), reference: true });
  const isEntity = corpusEntities(env);
  const rows: EvalRow[] = [];
  let contaminated = 0;
  for (const task of tasks) {
    // Decoding never waits on I/O: a yield per task lets a signal or a cancel message in
    // (a training run's held-out points were deaf to Ctrl-C for their whole length).
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (options.isCancelled?.()) break;
    const ep = await runtime.runAsync(task, options.episode); // (async: webgpu decodes with async readbacks)
    // A question without an answer key (docs/worlds.md) has no reference steps: a wrong answer is 'final'.
    const ref = isHinted(task) ? rollout(task, teacher, env).transcript : '';
    const world = options.world ?? SEED_WORLD;
    let failure = classifyFailure(ep, ref, { task, isEntity });
    if (failure !== null) {
      const parentGold = memorisedGoldOf(task, world);
      if (parentGold !== null && parentGold !== task.gold && ep.answer !== null && normalize(ep.answer) === normalize(parentGold)) failure = 'memorised';
    }
    const maxSteps = options.episode?.maxSteps ?? DEFAULT_MAX_STEPS;
    const row: EvalRow = {
      question: task.question,
      gold: task.gold,
      answer: ep.answer,
      solved: ep.solved,
      kind: task.kind,
      failure,
      steps: ep.steps,
      reward: reward(ep.solved, ep.steps, maxSteps),
      text: ep.text,
      generated: ep.generated,
      world: worldName(world),
    };
    rows.push(row);
    // The seed world's held-out contract holds across worlds; a fresh world's task is
    // contaminated only when that same world's task was trained on.
    const key = world.kind === 'seed' ? overlapKey(task) : `${worldName(world)}|${overlapKey(task)}`;
    if (options.trainingKeys?.has(key)) contaminated++;
    options.onProgress?.(rows.length, tasks.length, row);
  }
  return { rows, summary: summarize(options.split, rows, contaminated, options.spanAccuracy ?? {}) };
}

export function summarize(
  split: string,
  rows: readonly EvalRow[],
  contaminated: number,
  spanAccuracy: Partial<Record<SpanKind, number>>,
): EvalSummary {
  const byKind: EvalSummary['by_kind'] = {};
  for (const r of rows) {
    const k = (byKind[r.kind] ??= { n: 0, accuracy: 0 });
    k.n++;
    k.accuracy += r.solved ? 1 : 0;
  }
  for (const k of Object.values(byKind)) k.accuracy = k.n ? k.accuracy / k.n : 0;
  const failures = Object.fromEntries(FAILURES.map((f) => [f, 0])) as Record<Failure, number>;
  for (const r of rows) if (r.failure) failures[r.failure]++;
  const span: Partial<Record<SpanKind, number>> = {};
  for (const k of SPAN_KINDS) if (k !== 'format' && spanAccuracy[k] !== undefined) span[k] = spanAccuracy[k];
  return {
    split,
    accuracy: rows.length ? rows.filter((r) => r.solved).length / rows.length : 0,
    n: rows.length,
    by_kind: byKind,
    failures,
    span_accuracy: span,
    contaminated,
    steps_mean: rows.length ? rows.reduce((a, r) => a + r.steps, 0) / rows.length : 0,
  };
}
