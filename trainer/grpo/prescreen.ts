// GRPO's pass-rate pre-screen: before the first step, sample a few tasks of the RL pool a
// few times each and predict the share of groups that will carry a gradient. A group of G
// rollouts of a task with pass rate p has a spread in correctness with probability
// 1 - p^G - (1-p)^G; flat groups teach nothing (and dynamic sampling drops them), so a
// share near 0 says before any update that RL has nothing to learn from this student on
// this pool. Pure functions, and the sampling in pieces that lets a stop in; trainer/grpo/grpo.ts
// samples the rollouts.
import type { RlPool } from '../../core/protocol/grpoOptions';
import type { TaskKind } from '../../core/types';

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
  /** A 90% interval of the share (Wilson's, over the screened tasks): its upper end is a one-sided 95% bound. */
  interval: [number, number];
}

/** Choices for the default pre-screen and its verdict (docs/decisions.md, "The pre-screen's verdict"). */
export const PRESCREEN_DEFAULTS = {
  /** The default screen rolls out this share of the rollouts the run may draw. */
  budgetShare: 0.1,
  /** Below this many tasks a default screen cannot tell much: it is skipped (say so). */
  minTasks: 16,
  /**
   * The run is refused when it is 95% sure the informative share is below this: a run at 0
   * learns nothing, while the textbook default's share (7.5%) and fresh-entities' (4.4%)
   * still lift a little (docs/decisions.md, "The pre-screen's verdict").
   */
  threshold: 0.05,
  /** z of the one-sided 95% bound (the upper end of a two-sided 90% interval). */
  z: 1.645,
};

/** Wilson's score interval of a proportion `share` over `n` draws at `z` ([0, 1] at n = 0). */
export function wilsonInterval(share: number, n: number, z: number = PRESCREEN_DEFAULTS.z): [number, number] {
  if (n <= 0) return [0, 1];
  const p = Math.min(1, Math.max(0, share));
  const z2n = (z * z) / n;
  const centre = (p + z2n / 2) / (1 + z2n);
  const half = (z * Math.sqrt((p * (1 - p)) / n + z2n / (4 * n))) / (1 + z2n);
  return [Math.max(0, centre - half), Math.min(1, centre + half)];
}

export interface PrescreenSummary extends PrescreenFigure {
  /** Rollouts per screened task. */
  samples: number;
  /** The run's group size G the prediction is for. */
  group: number;
  byKind: Partial<Record<TaskKind, PrescreenFigure>>;
  /** Tasks dynamic sampling is expected to draw per informative group (1 / share; null at share 0). */
  drawsPerGroup: number | null;
  /** Screened tasks whose every rollout was right, and whose every rollout was wrong. */
  allRight: number;
  allWrong: number;
  /** Screened tasks whose rewards differed although every rollout was equally right or wrong: a spread of step counts alone. */
  stepsOnly: number;
  /** The screen covered the whole pool: no uncertainty from which tasks were drawn. */
  wholePool?: boolean;
}

/** One screened task: its shape, how many of its rollouts were right, and whether its rewards differed. */
export interface PrescreenResult {
  kind: TaskKind;
  correct: number;
  /** The rollouts' rewards were not all equal (a spread of correctness or of step counts). */
  rewardSpread?: boolean;
}

/** The pre-screen's figures from each screened task's kind and number of correct rollouts. */
export function summarisePrescreen(results: readonly PrescreenResult[], samples: number, group: number): PrescreenSummary {
  const figure = (rows: readonly { correct: number }[]): PrescreenFigure => {
    const informativeShare = rows.reduce((a, r) => a + informativeShareOf(r.correct, samples, group), 0) / Math.max(1, rows.length);
    return {
      tasks: rows.length,
      passRate: rows.reduce((a, r) => a + r.correct, 0) / Math.max(1, rows.length * samples),
      informativeShare,
      interval: wilsonInterval(informativeShare, rows.length),
    };
  };
  const all = figure(results);
  const byKind: Partial<Record<TaskKind, PrescreenFigure>> = {};
  for (const kind of [...new Set(results.map((r) => r.kind))].sort()) byKind[kind] = figure(results.filter((r) => r.kind === kind));
  const allRight = results.filter((r) => r.correct === samples).length;
  const allWrong = results.filter((r) => r.correct === 0).length;
  const stepsOnly = results.filter((r) => r.rewardSpread === true && (r.correct === samples || r.correct === 0)).length;
  return { ...all, samples, group, byKind, drawsPerGroup: all.informativeShare > 0 ? 1 / all.informativeShare : null, allRight, allWrong, stepsOnly };
}

/**
 * The default screen's size: the budget share of the rollouts the run may draw (steps x
 * draws per step x G), as tasks of G rollouts, at most the pool; 0 (skipped) below minTasks.
 */
export function defaultPrescreenTasks(o: { steps: number; drawsPerStep: number; group: number; poolSize: number }): { tasks: number; runRollouts: number } {
  const runRollouts = o.steps * o.drawsPerStep * o.group;
  const tasks = Math.min(o.poolSize, Math.floor((PRESCREEN_DEFAULTS.budgetShare * runRollouts) / o.group));
  return { tasks: tasks >= PRESCREEN_DEFAULTS.minTasks ? tasks : 0, runRollouts };
}

/** Why the groups will be flat, as the screen saw it. */
export type FlatCause = 'memorised' | 'too-hard' | 'length-only' | 'confident';

export interface PrescreenVerdict {
  ok: boolean;
  /** The share the verdict compared with the threshold: the interval's upper end, or the share itself for a whole pool. */
  bound: number;
  threshold: number;
  cause?: FlatCause;
  /** The cause in words, with the counts that show it. */
  detail?: string;
  /** The flag or command that changes it. */
  next?: string;
  /** `next` as data, in the order its text names them: what the editor offers as buttons. */
  actions?: VerdictAction[];
}

/**
 * One next step a refusal names: GRPO again from the same SFT run with these flags (the rest
 * as the refused run had them), or more SFT from that run first (`train sft --from`).
 */
export type VerdictAction = { kind: 'grpo'; flags: { pool?: RlPool; temperature?: number; guide?: 'on' } } | { kind: 'sft-more' };

/** A next step in words and as actions, produced together so that the two cannot drift. */
interface Next {
  text: string;
  actions: VerdictAction[];
}

/** The hotter temperature a refusal suggests. */
const HOTTER = 1.2;

/** Where the run draws from, for the next step a verdict names. */
export interface VerdictContext {
  pool: RlPool;
  /** The run's world has no fresh pools (a user's world without a fact table: documents and questions). */
  noFreshPools: boolean;
  /** The SFT run the GRPO run starts from (for the continued-SFT command). */
  fromRun: string;
  dynamicSampling: boolean;
}

const hotter = (): Next => ({ text: `\`--temperature ${HOTTER}\` (hotter rollouts differ more)`, actions: [{ kind: 'grpo', flags: { temperature: HOTTER } }] });
const poolNext = (pool: RlPool, why: string): Next => ({ text: `\`--pool ${pool}\` (${why})`, actions: [{ kind: 'grpo', flags: { pool } }] });

/** The next step when every rollout solves the pool. */
function memorisedNext(c: VerdictContext): Next {
  if (c.noFreshPools) {
    return {
      text: `this world has no fact table to derive fresh pools from, so RL has nothing to add on its own training tasks: evaluate the student, or try \`--temperature ${HOTTER}\` to spread the rollouts`,
      actions: [{ kind: 'grpo', flags: { temperature: HOTTER } }],
    };
  }
  if (c.pool === 'train') return poolNext('fresh-values', 'training worlds with new values, never distilled');
  if (c.pool === 'fresh-values') return poolNext('fresh-entities', 'training worlds with new entities: harder');
  if (c.pool === 'fresh-entities') return poolNext('fresh-differences', 'a family no teacher demonstrates');
  return hotter();
}

/** The next step when every rollout fails. */
function tooHardNext(c: VerdictContext): Next {
  const easierPool: RlPool | null = c.pool === 'fresh-entities' || c.pool === 'fresh-differences' ? 'fresh-values' : c.pool === 'fresh-values' && !c.noFreshPools ? 'train' : null;
  const easier = easierPool ? ` or an easier pool: \`--pool ${easierPool}\`` : '';
  const actions: VerdictAction[] = [{ kind: 'sft-more' }, ...(easierPool ? [{ kind: 'grpo' as const, flags: { pool: easierPool } }] : [])];
  // No teacher demonstrates a difference: a guided group would have nothing to join it.
  if (c.pool === 'fresh-differences') {
    return { text: `SFT more (\`agent-lab train sft --from ${c.fromRun} --steps N --run NEW_SFT_RUN\`: its sums and compares use the same calls, then GRPO from it)${easier}`, actions };
  }
  return {
    text:
      `SFT more (\`agent-lab train sft --from ${c.fromRun} --steps N --run NEW_SFT_RUN\`, then GRPO from it)${easier}, ` +
      "or `--guide on` (the stub teacher's transcript joins every all-wrong group)",
    actions: [...actions, { kind: 'grpo', flags: { guide: 'on' } }],
  };
}

/**
 * The pre-screen's verdict: refused when the screen is 95% sure (Wilson's one-sided bound;
 * the share itself when it covered the whole pool) that fewer than `threshold` of the
 * groups will differ in correctness, with the cause it can see and what changes it.
 */
export function prescreenVerdict(s: PrescreenSummary, c: VerdictContext, threshold: number = PRESCREEN_DEFAULTS.threshold): PrescreenVerdict {
  const bound = s.wholePool ? s.informativeShare : s.interval[1];
  if (s.tasks === 0 || bound >= threshold) return { ok: true, bound, threshold };
  const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
  const of = (k: number) => `${k} of ${s.tasks} screened tasks`;
  const pass = `pass rate ${pct(s.passRate)}`;
  let cause: FlatCause;
  let detail: string;
  let next: Next;
  const mostlyRight = s.allRight >= s.allWrong;
  if (s.stepsOnly >= s.tasks / 2) {
    cause = 'length-only';
    detail =
      `the rewards of ${of(s.stepsOnly)} differ only by step counts (every rollout equally ${mostlyRight ? 'right' : 'wrong'}; ${pass}): ` +
      `the reward has nothing but its length term to rank them, which ${c.dynamicSampling ? 'dynamic sampling drops' : 'would teach answering early (measured: held-out 0.32 -> 0.26)'}`;
    const then = mostlyRight ? memorisedNext(c) : tooHardNext(c);
    next = { text: `make correctness vary: ${then.text}`, actions: then.actions };
  } else if (s.allRight >= 0.9 * s.tasks) {
    cause = 'memorised';
    detail = `every rollout solves the pool: ${of(s.allRight)} were solved by all ${s.samples} rollouts (${pass}); the student has memorised pool ${c.pool}`;
    next = memorisedNext(c);
  } else if (s.allWrong >= 0.9 * s.tasks) {
    cause = 'too-hard';
    detail = `every rollout fails: ${of(s.allWrong)} were failed by all ${s.samples} rollouts (${pass}); the pool is too hard for this student`;
    next = tooHardNext(c);
  } else {
    cause = 'confident';
    detail = `each task is either always or never solved (${of(s.allRight)} always, ${s.allWrong} never; ${pass}): the student is confident either way`;
    next = hotter();
  }
  return { ok: false, bound, threshold, cause, detail, next: next.text, actions: next.actions };
}

/** The verdict's lines for the log or a refusal. */
export function formatVerdict(v: PrescreenVerdict, forced = false): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  if (v.ok) return `pre-screen verdict: PASS (the predicted informative share is not below ${pct(v.threshold)}: bound ${pct(v.bound)})`;
  return (
    `pre-screen verdict: FAIL${forced ? ' (forced: running anyway, recorded in config.json)' : ''}: the predicted informative share is below ${pct(v.threshold)} ` +
    `(bound ${pct(v.bound)}): GRPO would take (almost) no gradient.\n  cause (${v.cause}): ${v.detail}.\n  next: ${v.next}; or \`--force\` to run anyway`
  );
}

/** One line for the log: the prediction, by shape, and what it means for a step (maxDraws null: dynamic sampling off). */
export function formatPrescreen(s: PrescreenSummary, tasksPerStep: number, maxDraws: number | null): string {
  const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
  const range = (f: PrescreenFigure) => `${pct(f.informativeShare)} (90% ${pct(f.interval[0])}-${pct(f.interval[1])})`;
  const kinds = Object.entries(s.byKind)
    .map(([k, f]) => `${k} ${range(f)} (pass ${pct(f.passRate)}, ${f.tasks})`)
    .join(', ');
  const head =
    `pre-screen: ${s.tasks} tasks x ${s.samples} rollouts${s.wholePool ? ' (the whole pool)' : ''}: pass rate ${pct(s.passRate)}, ` +
    `predicted informative groups ${pct(s.informativeShare)} at G = ${s.group} (90% interval ${pct(s.interval[0])}-${pct(s.interval[1])})${kinds ? ` [${kinds}]` : ''}`;
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
