// GRPO's pass-rate pre-screen: before the first step, sample a few tasks of the RL pool a
// few times each and predict the share of groups that will carry a gradient. A group of G
// rollouts of a task with pass rate p has a spread in correctness with probability
// 1 - p^G - (1-p)^G; flat groups teach nothing (and dynamic sampling drops them), so a
// share near 0 says before any update that RL has nothing to learn from this student on
// this pool. Pure functions, and the sampling in pieces that lets a stop in; trainer/grpo.ts
// samples the rollouts.
import type { TaskKind } from '../core/types';

/**
 * The probability that G rollouts drawn without replacement from `samples` of them, of which
 * `correct` were right, are all right: C(correct, G) / C(samples, G). As a U-statistic it is
 * an unbiased estimate of p^G for any samples >= G (plugging p = correct/samples in is not).
 */
export function allOfGroup(correct: number, samples: number, group: number): number {
  if (
    !Number.isInteger(correct) ||
    !Number.isInteger(samples) ||
    !Number.isInteger(group) ||
    correct < 0 ||
    correct > samples ||
    group < 1 ||
    group > samples
  ) {
    throw new RangeError(`allOfGroup: need 0 <= correct <= samples and 1 <= group <= samples (got ${correct}, ${samples}, ${group})`);
  }
  let q = 1;
  for (let i = 0; i < group; i++) q *= (correct - i) / (samples - i);
  return Math.max(0, q);
}

/** The unbiased estimate of 1 - p^G - (1-p)^G for one task from `correct` of `samples` right. */
export function informativeShareOf(correct: number, samples: number, group: number): number {
  return 1 - allOfGroup(correct, samples, group) - allOfGroup(samples - correct, samples, group);
}

/** The textbook formula with a known pass rate: the share of groups of G with a spread. */
export function informativeShareAt(passRate: number, group: number): number {
  return 1 - passRate ** group - (1 - passRate) ** group;
}

export interface PrescreenFigure {
  tasks: number;
  /** Mean pass rate over the screened rollouts. */
  passRate: number;
  /** Predicted share of groups of G with a spread in correctness (mean of the per-task estimates). */
  informativeShare: number;
}

export interface PrescreenSummary extends PrescreenFigure {
  /** Rollouts per screened task. */
  samples: number;
  /** The run's group size G the prediction is for. */
  group: number;
  byKind: Partial<Record<TaskKind, PrescreenFigure>>;
  /** Tasks dynamic sampling is expected to draw per informative group (1 / share; null at share 0). */
  drawsPerGroup: number | null;
}

/** The pre-screen's figures from each screened task's kind and number of correct rollouts. */
export function summarisePrescreen(results: readonly { kind: TaskKind; correct: number }[], samples: number, group: number): PrescreenSummary {
  const figure = (rows: readonly { correct: number }[]): PrescreenFigure => ({
    tasks: rows.length,
    passRate: rows.reduce((a, r) => a + r.correct, 0) / Math.max(1, rows.length * samples),
    informativeShare: rows.reduce((a, r) => a + informativeShareOf(r.correct, samples, group), 0) / Math.max(1, rows.length),
  });
  const all = figure(results);
  const byKind: Partial<Record<TaskKind, PrescreenFigure>> = {};
  for (const kind of [...new Set(results.map((r) => r.kind))].sort()) byKind[kind] = figure(results.filter((r) => r.kind === kind));
  return { ...all, samples, group, byKind, drawsPerGroup: all.informativeShare > 0 ? 1 / all.informativeShare : null };
}

/** One line for the log: the prediction, by shape, and what it means for a step (maxDraws null: dynamic sampling off). */
export function formatPrescreen(s: PrescreenSummary, tasksPerStep: number, maxDraws: number | null): string {
  const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
  const kinds = Object.entries(s.byKind)
    .map(([k, f]) => `${k} ${pct(f.informativeShare)} (pass ${pct(f.passRate)}, ${f.tasks})`)
    .join(', ');
  const head = `pre-screen: ${s.tasks} tasks x ${s.samples} rollouts: pass rate ${pct(s.passRate)}, predicted informative groups ${pct(s.informativeShare)} at G = ${s.group}${kinds ? ` [${kinds}]` : ''}`;
  if (s.drawsPerGroup === null) return `${head}; no group is predicted to carry a gradient: RL has nothing to learn from this student on this pool`;
  if (maxDraws === null)
    return `${head}; about ${(tasksPerStep * s.informativeShare).toFixed(1)} of the ${tasksPerStep} groups per step will train (dynamic sampling off)`;
  const need = tasksPerStep * s.drawsPerGroup;
  const cap = need > maxDraws ? `, above the cap of ${maxDraws}: steps will train on fewer groups` : ` (cap ${maxDraws})`;
  return `${head}; about ${need.toFixed(1)} tasks drawn per step for ${tasksPerStep} informative groups${cap}`;
}

/**
 * `items` sampled a piece at a time, `stop()` asked before each piece (it yields to the event
 * loop, where a signal's handler runs); null when it said stop. A piece grows while it samples
 * in under half of `targetMs` (bigger batches sample faster) and shrinks when it takes longer,
 * so a stop waits about `targetMs` at any model size and load. Each rollout carries its own
 * seed, so the pieces sample what one call over all of them would.
 */
export async function sampleInPieces<I, E>(
  items: readonly I[],
  sample: (xs: readonly I[]) => Promise<E[]>,
  stop: () => Promise<boolean>,
  piece: { min: number; max: number; targetMs: number },
): Promise<E[] | null> {
  const out: E[] = [];
  let size = piece.min;
  for (let at = 0; at < items.length;) {
    if (await stop()) return null;
    const t0 = Date.now();
    const xs = items.slice(at, at + size);
    for (const e of await sample(xs)) out.push(e);
    at += xs.length;
    const ms = Date.now() - t0;
    if (ms < piece.targetMs / 2) size = Math.min(piece.max, size * 2);
    else if (ms > piece.targetMs) size = Math.max(piece.min, Math.floor(size / 2));
  }
  return out;
}
