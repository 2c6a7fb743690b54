// Training pools. The seed's split trains on 200 tasks; a small student learns from
// optimiser steps, so the pool may be enlarged from the world's fact table with every
// lookup/double/sum/compare combination — but never with a held-out question, and never
// with a task that overlaps one (same kind, same unordered facts: "A + B" vs "B + A").
import { overlapKey } from './overlap';
import type { Task } from './types';
import { Fact, TASK_FACTS } from './world';
import { allTasksOf } from './worlds';

export type PoolName = 'seed' | 'enlarged';

/** Every task the four shapes can make from the fact table, in a fixed order. */
export function allTasks(facts: readonly Fact[] = TASK_FACTS): Task[] {
  return allTasksOf(facts);
}

export interface TrainingPool {
  tasks: Task[];
  /** Training tasks left out because they overlap a held-out task. */
  excluded: Task[];
}

/**
 * The tasks a run trains on: the seed's train split ('seed') or every combination
 * ('enlarged'), minus everything that overlaps the held-out split, de-duplicated by question.
 */
export function trainingPool(name: PoolName, train: readonly Task[], heldout: readonly Task[]): TrainingPool {
  const heldKeys = new Set(heldout.map(overlapKey));
  const candidates = name === 'seed' ? train : [...train, ...allTasks()];
  const seen = new Set<string>();
  const tasks: Task[] = [];
  const excluded: Task[] = [];
  for (const t of candidates) {
    if (seen.has(t.question)) continue;
    seen.add(t.question);
    (heldKeys.has(overlapKey(t)) ? excluded : tasks).push(t);
  }
  return { tasks, excluded };
}
