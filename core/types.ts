// Shared data shapes of the agent world (the seed's Passage and Task dataclasses).

export interface Passage {
  /** e.g. "doc-0003-0": fact index n (4 digits) and chunk index j. */
  readonly docId: string;
  readonly text: string;
}

/**
 * The four shapes a world builds and the teacher demonstrates, and `difference` (core/differenceTasks.ts):
 * a family no teacher demonstrates, only an RL pool and an evaluation split.
 */
export type TaskKind = 'lookup' | 'double' | 'sum' | 'compare' | 'difference';
export type TaskOp = null | 'double' | 'sum' | 'compare' | 'difference';

/** The shapes a world builds and a teacher demonstrates (`--shapes`, a fact table's settings), in order. */
export const TASK_SHAPES: readonly TaskKind[] = ['lookup', 'double', 'sum', 'compare'];

/** Every task kind, in the order figures list them: the shapes, then the no-teacher family. */
export const TASK_KINDS: readonly TaskKind[] = [...TASK_SHAPES, 'difference'];

/** The answer key. The real teacher never sees it; the stub teacher does. */
export interface TaskHints {
  readonly queries: string[];
  /** (entity, attribute) pairs; serialised as 2-element arrays (Python tuples). */
  readonly facts: [string, string][];
  readonly op: TaskOp;
  /** compare: [e1, e2]; difference: [A, B], A's value the larger. */
  readonly names?: [string, string];
}

export interface Task {
  readonly question: string;
  readonly gold: string;
  readonly kind: TaskKind;
  readonly hints: TaskHints;
}
