// Shared data shapes of the agent world (the seed's Passage and Task dataclasses).

export interface Passage {
  /** e.g. "doc-0003-0": fact index n (4 digits) and chunk index j. */
  readonly docId: string;
  readonly text: string;
}

export type TaskKind = 'lookup' | 'double' | 'sum' | 'compare';
export type TaskOp = null | 'double' | 'sum' | 'compare';

/** The answer key. The real teacher never sees it; the stub teacher does. */
export interface TaskHints {
  readonly queries: string[];
  /** (entity, attribute) pairs; serialised as 2-element arrays (Python tuples). */
  readonly facts: [string, string][];
  readonly op: TaskOp;
  /** compare only: [e1, e2]. */
  readonly names?: [string, string];
}

export interface Task {
  readonly question: string;
  readonly gold: string;
  readonly kind: TaskKind;
  readonly hints: TaskHints;
}
