// Contamination between splits: a held-out task overlaps the training data when a
// training task has the same kind and the same UNORDERED set of facts ("A + B" and
// "B + A" overlap). The seed's default split has 2 exact and 2 operand-swapped overlaps.
import type { Task } from './types';

export function overlapKey(task: Task): string {
  // A task with no answer key (a docs world's question without hints, docs/worlds.md) has
  // no facts to compare: it overlaps only the same question.
  if (task.hints.facts.length === 0) return `${task.kind}\u0001\u0003${task.question}`;
  const facts = task.hints.facts.map(([e, a]) => `${e}\u0000${a}`).sort();
  return `${task.kind}\u0001${facts.join('\u0002')}`;
}

export interface OverlapReport {
  /** Held-out tasks whose question appears verbatim in train. */
  exact: Task[];
  /** Held-out tasks that overlap train without being verbatim (e.g. swapped operands). */
  swapped: Task[];
}

export function findOverlaps(train: readonly Task[], heldout: readonly Task[]): OverlapReport {
  const keys = new Set(train.map(overlapKey));
  const questions = new Set(train.map((t) => t.question));
  const exact: Task[] = [];
  const swapped: Task[] = [];
  for (const t of heldout) {
    if (!keys.has(overlapKey(t))) continue;
    (questions.has(t.question) ? exact : swapped).push(t);
  }
  return { exact, swapped };
}
