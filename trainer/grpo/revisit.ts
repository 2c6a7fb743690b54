// GRPO's revisit queue: tasks whose last group had a spread in correctness are drawn again
// before new ones. On a pool the student mostly solves, a uniform draw rarely gives a group
// with spread (about 1 in 13 on the textbook default: docs/results.md, "The compare, drawn
// more often"), while a task that had spread sits at the edge of what the student can do and
// is likely to have it again; it leaves the queue once its group comes out flat (solved, or
// given up on). Pure: no Node, no model.

export class RevisitQueue {
  private items: number[];

  /** `capacity`: tasks held at most (the most recently informative); `items`: a saved state. */
  constructor(
    readonly capacity: number,
    items: readonly number[] = [],
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`revisit queue capacity must be a positive integer (got ${capacity})`);
    this.items = items.slice(-capacity);
  }

  get size(): number {
    return this.items.length;
  }

  /** Up to `n` tasks from the head (oldest first), skipping and keeping those in `exclude`; the taken leave the queue. */
  take(n: number, exclude: ReadonlySet<number>): number[] {
    const out: number[] = [];
    const rest: number[] = [];
    for (const ti of this.items) {
      if (out.length < n && !exclude.has(ti)) out.push(ti);
      else rest.push(ti);
    }
    this.items = rest;
    return out;
  }

  /** A drawn task's outcome: one with spread goes (back) to the tail; beyond capacity the oldest drop. */
  record(task: number, informative: boolean): void {
    this.items = this.items.filter((ti) => ti !== task);
    if (!informative) return;
    this.items.push(task);
    if (this.items.length > this.capacity) this.items.splice(0, this.items.length - this.capacity);
  }

  /** The queue, oldest first (what a checkpoint stores so a resumed run draws what it would have). */
  exportState(): number[] {
    return this.items.slice();
  }
}

/** A saved queue checked against the pool's size: null when sound, else what is wrong. */
export function revisitStateProblem(state: unknown, poolSize: number): string | null {
  if (!Array.isArray(state)) return 'must be an array of task indices';
  const bad = state.findIndex((v) => !Number.isSafeInteger(v) || (v as number) < 0 || (v as number) >= poolSize);
  if (bad >= 0) return `entry ${bad} (${JSON.stringify(state[bad])}) is not a task index below the pool's ${poolSize}`;
  if (new Set(state).size !== state.length) return 'holds a task twice';
  return null;
}

/**
 * The tasks of one round of a GRPO step: up to `want` from the queue's head (when revisiting),
 * then new tasks drawn uniformly (`uniform()` in [0, 1)) from a pool of `poolSize`, none
 * already `picked` this step; every task taken is added to `picked`.
 */
export function drawRound(queue: RevisitQueue | null, picked: Set<number>, want: number, poolSize: number, uniform: () => number): { round: number[]; revisited: number } {
  const round = queue ? queue.take(want, picked) : [];
  for (const ti of round) picked.add(ti);
  const revisited = round.length;
  while (round.length < want && picked.size < poolSize) {
    const ti = Math.floor(uniform() * poolSize);
    if (picked.has(ti)) continue;
    picked.add(ti);
    round.push(ti);
  }
  return { round, revisited };
}
