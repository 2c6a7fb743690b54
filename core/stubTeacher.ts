// The seed's deterministic stub teacher: a TEST DOUBLE that reads the answer key
// (Task.hints) and emits exactly the wire format a real model would, offline. Its yield
// is high but not guaranteed: a search that misses the fact makes it answer "unknown".
import { escapeRegExp, pyStrip, splitOnce } from './pystr';
import { assertTeacherTasks } from './differenceTasks';
import type { Task } from './types';
import { END, TOOL_RESULT, USER, renderCall } from './wire';

export type Teacher = (prompt: string) => string;

/** Every tool result seen so far, in order. */
export function observationsOf(prompt: string): string[] {
  return prompt.split(TOOL_RESULT).slice(1).map((chunk) => splitOnce(chunk, END)[0]);
}

/**
 * The value in the corpus's canonical clause "the {attr} of {ent} is {value}". The class
 * excludes the comma: one template continues ", a choice made during..." and a greedy
 * `[^.]+` would swallow it into the value.
 */
export function extractFact(observations: readonly string[], entity: string, attribute: string): string | null {
  const pattern = new RegExp(`the ${escapeRegExp(attribute)} of ${escapeRegExp(entity)} is ([^.,;]+)[.,;]`);
  for (const obs of observations) {
    const m = pattern.exec(obs);
    if (m) return pyStrip(m[1]!);
  }
  return null;
}

export class UnknownQuestionError extends Error {}

export interface StubTeacherOptions {
  /**
   * Searches with k = 1 when this says the fact's canonical clause is in the top hit of the
   * query (a recipe knob: one passage to copy from, no distractor value beside it); else
   * the seed's k = 2. Absent: always k = 2, as the seed's teacher.
   */
  topHitHolds?: (query: string, entity: string, attribute: string) => boolean;
  /**
   * After each search the next thought first restates the fact it found ("The {attr} of
   * {ent} is {value}."), a recipe knob: the value is then copied right after its own
   * entity and attribute (a local, induction-style copy) instead of from an observation
   * several turns back, and the expression copies the restated values. Absent: the seed's
   * thoughts.
   */
  restateFacts?: boolean;
  /**
   * A compare's last thought reads the calculator's sign before naming the winner
   * ("-9 is below zero, so B is larger."), a recipe knob: the answer is then copied from
   * the line above it, next to the word that decided it, instead of being chosen at
   * "Answer:" where a remembered winner competes with a sign several tokens back.
   */
  compareVerdict?: boolean;
  /**
   * The teacher as a grader's reference (evaluation's failure labels and span accuracy):
   * it may then follow a no-teacher task's key too (core/differenceTasks.ts). Never for a
   * demonstration: without it a teacher over such a task is refused.
   */
  reference?: boolean;
}

export function makeStubTeacher(tasks: readonly Task[], options: StubTeacherOptions = {}): Teacher {
  // The stub teacher never demonstrates a difference task: only a verifiable reward may teach one.
  if (!options.reference) assertTeacherTasks(tasks, 'stub teacher');
  const byQuestion = new Map<string, Task>();
  for (const t of tasks) byQuestion.set(t.question, t); // later duplicates win, as a dict
  return (prompt: string): string => {
    const afterUser = splitOnce(prompt, USER)[1];
    const question = afterUser === undefined ? '' : splitOnce(afterUser, END)[0];
    const task = byQuestion.get(question);
    if (!task) throw new UnknownQuestionError(`stub teacher: no answer key for question ${JSON.stringify(question)}`);
    const obs = observationsOf(prompt);
    const { queries, facts, op } = task.hints;

    // The fact the last search found, restated (restateFacts), when the last observation was a search's.
    const note = (): string => {
      const j = obs.length - 1;
      if (!options.restateFacts || j < 0 || j >= queries.length) return '';
      const [e, a] = facts[j]!;
      const v = extractFact([obs[j]!], e, a);
      return v === null ? '' : `The ${a} of ${e} is ${v}. `;
    };

    // Phase 1: one search per required fact, in order.
    if (obs.length < queries.length) {
      const i = obs.length;
      const [ent, attr] = facts[i]!;
      const k = options.topHitHolds?.(queries[i]!, ent, attr) ? 1 : 2;
      return `Thought: ${note()}I need the ${attr} of ${ent}. I'll search the corpus.\n${renderCall('search', { query: queries[i]!, k })}`;
    }

    const vals = facts.map(([e, a]) => extractFact(obs, e, a));
    if (vals.some((v) => v === null)) return 'Thought: The corpus did not give me the fact.\nAnswer: unknown';

    // Phase 2: one calculator call when the shape needs arithmetic.
    const nCalc = obs.length - queries.length;
    if (nCalc === 0 && op !== null) {
      const expr = op === 'double' ? `${vals[0]}*2` : op === 'sum' ? `${vals[0]}+${vals[1]}` : `${vals[0]}-${vals[1]}`;
      return `Thought: ${note()}Now I compute ${expr} with the calculator.\n${renderCall('calc', { expr })}`;
    }

    // Phase 3: synthesize.
    let answer: string;
    if (op === null) answer = vals[0]!;
    else if (op === 'compare') {
      const diff = pyStrip(obs[obs.length - 1]!);
      const names = task.hints.names!;
      answer = diff.startsWith('-') ? names[1] : names[0];
      if (options.compareVerdict) return `Thought: ${note()}${diff} is ${diff.startsWith('-') ? 'below' : 'above'} zero, so ${answer} is larger.\nAnswer: ${answer}`;
    } else answer = pyStrip(obs[obs.length - 1]!);
    return `Thought: ${note()}I have everything I need.\nAnswer: ${answer}`;
  };
}
