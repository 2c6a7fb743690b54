// One figure per run (issue 35): every held-out figure the editor shows (the finish message
// of a training job, the Evaluate result, the Runs view's line and tooltip) names its
// split, how many tasks it is of (and of how many the split holds), the checkpoint it was
// measured at and which evaluation made it, with the accuracy per question shape beside it.
// Pure (no Node, no vscode): the editor and the CLI print the same strings, and the unit
// tests read them directly.
import type { EvalJobSummary, GrpoSummary, KindFigure, SftSummary } from './protocol/worker';
import { TASK_KINDS } from './types';

/** An evaluation's figure on one split. */
export interface Figure {
  split: string;
  accuracy: number;
  /** Tasks evaluated. */
  n: number;
  /** Tasks the split holds (n is fewer when the evaluation was limited); absent when not recorded. */
  of?: number;
  /** The checkpoint step the figure was measured at. */
  step?: number;
  /** Which evaluation made it: a training job's last point, or Evaluate. */
  source: 'training' | 'evaluate';
  byKind?: Record<string, KindFigure>;
}

export const percent = (x: number): string => `${(100 * x).toFixed(1)}%`;

const SHAPE_ORDER: readonly string[] = TASK_KINDS;

/** "lookup 5/10, double 3/10, sum 0/28, compare 10/12": solved of evaluated, per shape. */
export function shapeLine(byKind: Record<string, KindFigure> | undefined): string {
  if (!byKind) return '';
  const kinds = Object.keys(byKind).sort((a, b) => {
    const ia = SHAPE_ORDER.indexOf(a);
    const ib = SHAPE_ORDER.indexOf(b);
    return (ia < 0 ? SHAPE_ORDER.length : ia) - (ib < 0 ? SHAPE_ORDER.length : ib) || (a < b ? -1 : a > b ? 1 : 0);
  });
  return kinds.map((k) => `${k} ${Math.round(byKind[k]!.accuracy * byKind[k]!.n)}/${byKind[k]!.n}`).join(', ');
}

export const splitLabel = (split: string): string => (split === 'heldout' ? 'held-out' : split);

/** "50 of the 55 held-out tasks" or "55 held-out tasks". */
export function taskCount(f: Pick<Figure, 'split' | 'n' | 'of'>): string {
  const name = splitLabel(f.split);
  return f.of !== undefined && f.of !== f.n ? `${f.n} of the ${f.of} ${name} tasks` : `${f.n} ${name} task${f.n === 1 ? '' : 's'}`;
}

const sourceName = (f: Figure): string => (f.source === 'evaluate' ? 'Evaluate' : 'end of training');

/** "held-out exact match 36.0% on 50 of the 55 held-out tasks at step-1484 (end of training)". */
export function figureText(f: Figure, withSource = true): string {
  return (
    `${splitLabel(f.split)} exact match ${percent(f.accuracy)} on ${taskCount(f)}` +
    (f.step !== undefined ? ` at step-${f.step}` : '') +
    (withSource ? ` (${sourceName(f)})` : '')
  );
}

/** The Runs view's short form: "held-out 32.7% of 55 (Evaluate, step-1484)", "held-out 36.0% on 50 of 55 (end of training, step-1484)". */
export function figureShort(f: Figure): string {
  const count = f.of !== undefined && f.of !== f.n ? `on ${f.n} of ${f.of}` : `of ${f.n}`;
  return `${splitLabel(f.split)} ${percent(f.accuracy)} ${count} (${sourceName(f)}${f.step !== undefined ? `, step-${f.step}` : ''})`;
}

/** The figure a training job's summary ends with, or null when it measured none. */
export function trainingFigure(s: SftSummary | GrpoSummary): Figure | null {
  if (typeof s.heldout_accuracy !== 'number') return null;
  return {
    split: 'heldout',
    accuracy: s.heldout_accuracy,
    n: s.heldout_n ?? sumN(s.by_kind),
    ...(s.heldout_of !== undefined ? { of: s.heldout_of } : {}),
    ...(s.heldout_step !== undefined ? { step: s.heldout_step } : { step: s.steps }),
    source: 'training',
    ...(s.by_kind ? { byKind: s.by_kind } : {}),
  };
}

function sumN(byKind: Record<string, KindFigure> | undefined): number {
  return Object.values(byKind ?? {}).reduce((a, k) => a + k.n, 0);
}

/** The figure of an Evaluate job. */
export function evaluateFigure(s: EvalJobSummary): Figure {
  return { split: s.split, accuracy: s.accuracy, n: s.n, ...(s.of !== undefined ? { of: s.of } : {}), step: s.step, source: 'evaluate', byKind: s.by_kind };
}

/**
 * The message a finished training job shows: steps, minutes, and its held-out figure with
 * what it is of, the checkpoint and the accuracy per shape (GRPO: before → after).
 */
export function trainingFinishMessage(kind: 'sft' | 'grpo', name: string, s: SftSummary | GrpoSummary, stepsDone: number): string {
  const head = `${kind.toUpperCase()} ${name} finished: ${stepsDone} steps in ${minutesText(kind, s)}`;
  const f = trainingFigure(s);
  const why = kind === 'grpo' ? grpoOutcomeText(s as GrpoSummary) : '';
  if (!f) return `${head} (No held-out evaluation in this run: Evaluate gives the figure.)${why ? ` ${why}` : ''}`;
  const before = 'heldout_accuracy_before' in s && typeof s.heldout_accuracy_before === 'number' ? `${percent(s.heldout_accuracy_before)} → ` : '';
  const shapes = shapeLine(f.byKind);
  const more = f.of !== undefined && f.of > f.n ? ` Evaluate measures all ${f.of}.` : '';
  return `${head} Held-out exact match ${before}${percent(f.accuracy)} on ${taskCount(f)} at step-${f.step}${shapes ? ` (${shapes})` : ''}.${more}${why ? ` ${why}` : ''}`;
}

/**
 * The minutes a run took, budget apart from the rest (issue 35: "a 3-minute budget took 4.1
 * minutes"): the budget counts optimiser time (SFT) or rollouts and updates (GRPO); the wall
 * time adds the pre-screen, the held-out evaluations, checkpoints and start-up.
 */
export function minutesText(kind: 'sft' | 'grpo', s: SftSummary | GrpoSummary): string {
  const m = (x: number) => `${x.toFixed(1)} min`;
  const counted = kind === 'grpo' ? 'of rollouts and updates' : 'of training';
  const rest = s.wallMinutes - s.minutes;
  if (!(rest >= 0.05)) return `${m(s.minutes)}.`;
  const g = s as GrpoSummary;
  if (kind === 'grpo' && (g.prescreen_minutes !== undefined || g.eval_minutes !== undefined)) {
    const pre = g.prescreen_minutes ?? 0;
    const ev = g.eval_minutes ?? 0;
    const other = Math.max(0, rest - pre - ev);
    const parts = [...(pre >= 0.05 ? [`pre-screen ${m(pre)}`] : []), ...(ev >= 0.05 ? [`held-out evaluations ${m(ev)}`] : []), ...(other >= 0.05 ? [`checkpoints and the rest ${m(other)}`] : [])];
    return `${m(s.minutes)} ${counted} (what the budget counts), ${m(s.wallMinutes)} in all: ${parts.join(', ')}.`;
  }
  return `${m(s.minutes)} ${counted} (what the budget counts), ${m(s.wallMinutes)} in all with the held-out evaluations and checkpoints.`;
}

/**
 * Why a GRPO run's held-out figure moved or not, from what its steps recorded: how many steps
 * had no group with a spread (so nothing was updated) and what made the groups flat (the
 * rollouts' solved share: all right, all wrong, or each task decided). '' when it cannot say.
 */
export function grpoOutcomeText(s: GrpoSummary): string {
  const steps = s.frac_reward_zero_std.length;
  if (steps === 0) return '';
  const idle = s.no_update_steps ?? s.frac_reward_zero_std.filter((f) => f >= 1).length;
  const unchanged =
    typeof s.heldout_accuracy_before === 'number' && typeof s.heldout_accuracy === 'number' && Math.abs(s.heldout_accuracy - s.heldout_accuracy_before) < 1e-9;
  const solved = s.rollout_accuracy;
  let cause = '';
  if (solved !== undefined) {
    const pct = `${(100 * solved).toFixed(0)}%`;
    if (solved >= 0.9) cause = `: the rollouts solved ${pct} of their tasks, so a group's rollouts were all right (a pool the student knows: a fresh pool, e.g. --pool fresh-values, has something to learn)`;
    else if (solved <= 0.1) cause = `: the rollouts solved ${pct} of their tasks, so a group's rollouts were all wrong (too hard for this student: SFT more first)`;
    else cause = `: the rollouts solved ${pct} of their tasks, but each task's rollouts agreed (a confident student: a hotter --temperature spreads them)`;
  }
  const zero = s.frac_reward_zero_std.reduce((a, b) => a + b, 0) / steps;
  // Mostly flat rewards explain it; rewards that differed while nothing trained were a spread of step counts alone (dropped).
  const share = zero >= 0.5 ? `mean frac_reward_zero_std ${zero.toFixed(2)}` : 'their rewards differed by step counts alone, which dynamic sampling drops';
  // "A group to learn from": one whose rollouts differed (in correctness, under dynamic sampling).
  if (idle === steps) return `${unchanged ? 'Unchanged: ' : ''}none of the ${steps} steps had a group to learn from (a group whose rollouts differed), so the policy was never updated (${share})${cause}.`;
  if (idle > 0) return `${unchanged ? 'Unchanged: ' : ''}${idle} of ${steps} steps had no group to learn from (a group whose rollouts differed), so nothing was updated on them (${share})${unchanged ? cause : ''}.`;
  return unchanged ? `Unchanged although every step updated the policy: ${steps} updates moved no held-out answer (more steps, or --tasks 16 for more groups per update).` : '';
}

/** The message Evaluate ends with: the figure, its shapes and the failures by first mistake. */
/**
 * The closing lines of an RL run: its lift is only known against the baselines at equal
 * compute, so they name the runs that measure them (the other objective on the same pool,
 * steps and seed; continued SFT for the same minutes) and the evaluations to compare.
 */
export function rlBaselineLines(s: GrpoSummary, runName: string): string[] {
  const objective = s.objective === 'rft' ? 'rft' : 'grpo';
  const other = objective === 'rft' ? 'grpo' : 'rft';
  const pool = s.pool ? ` --pool ${s.pool}` : '';
  const seed = s.seed !== undefined ? ` --seed ${s.seed}` : '';
  const splits = ['heldout', ...(s.pool && s.pool !== 'train' ? [s.pool] : [])].join(', ');
  return [
    `${objective === 'rft' ? 'RFT' : 'GRPO'}'s lift is only known against its baselines at equal compute; to measure them:`,
    `  ${other === 'rft' ? 'no teacher (RFT: SFT on its own verified rollouts)' : 'GRPO'}: agent-lab train grpo --from ${s.from} --objective ${other}${pool} --steps ${s.steps}${seed} --run ${runName}-${other}`,
    `  more SFT for the same minutes: agent-lab train sft --from ${s.from} --minutes ${s.minutes.toFixed(2)}${seed} --run ${runName}-sft`,
    `  then \`agent-lab eval --run RUN --split S\` for each run and S in ${splits} (bench/grpo.ts does all of it over seeds)`,
    ...(s.pool === 'fresh-entities' && objective === 'grpo'
      ? ['  what was measured on this pool (the default students, three seeds: GRPO lifted it where RFT and continued SFT lowered it): docs/results.md, "GRPO from the default students"']
      : []),
  ];
}

export function evaluateFinishMessage(name: string, s: EvalJobSummary): string {
  const f = evaluateFigure(s);
  const shapes = shapeLine(f.byKind);
  const failed = Object.entries(s.failures ?? {}).filter(([, v]) => v > 0);
  return (
    `${name}: ${figureText(f, false)} (checkpoint ${s.checkpoint === 'latest' ? `latest, step-${s.step}` : s.checkpoint})` +
    (shapes ? `; per shape ${shapes}` : '') +
    (failed.length ? `; failures (first mistake) ${failed.map(([k, v]) => `${k} ${v}`).join(', ')}` : '') +
    '.'
  );
}

/**
 * A run's held-out figures from its files, oldest first: each final training point (a
 * metrics.jsonl eval record with `final`) and each Evaluate (a record with `checkpoint`).
 * The Runs view shows the last and names it; its tooltip lists the last of each source.
 */
export function heldoutFigures(records: readonly Record<string, unknown>[]): Figure[] {
  const out: Figure[] = [];
  for (const rec of records) {
    if (rec['phase'] !== 'eval' || rec['split'] !== 'heldout' || typeof rec['accuracy'] !== 'number') continue;
    const evaluate = typeof rec['checkpoint'] === 'string';
    if (!evaluate && rec['final'] !== true) continue;
    const byKind = typeof rec['by_kind'] === 'object' && rec['by_kind'] !== null ? (rec['by_kind'] as Record<string, KindFigure>) : undefined;
    const n = typeof rec['n'] === 'number' ? rec['n'] : sumN(byKind);
    out.push({
      split: 'heldout',
      accuracy: rec['accuracy'],
      n,
      ...(typeof rec['of'] === 'number' ? { of: rec['of'] } : {}),
      ...(typeof rec['step'] === 'number' ? { step: rec['step'] } : {}),
      source: evaluate ? 'evaluate' : 'training',
      ...(byKind ? { byKind } : {}),
    });
  }
  return out;
}

/** The tooltip lines of a run's held-out figures: the last of each source, each named in full. */
export function figureTooltip(figures: readonly Figure[]): string[] {
  const last = (source: Figure['source']) => [...figures].reverse().find((f) => f.source === source);
  return [last('training'), last('evaluate')]
    .filter((f): f is Figure => f !== undefined)
    .map((f) => `${figureText(f)}${shapeLine(f.byKind) ? `: ${shapeLine(f.byKind)}` : ''}`);
}
