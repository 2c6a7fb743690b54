// A GRPO run's checks before step 1 as the curves panel shows them (issue 33): the
// pass-rate pre-screen's prediction per task shape as a table (tasks screened, pass rate,
// predicted share of groups with a spread in correctness and its 90% interval), the
// verdict in words and the next step, with a button for each next step the verdict names.
// DOM-free, so the unit tests read it.
import { type FromWebview, type PreflightAction, type PreflightView, preflightActionLabel } from '../../core/protocol/panels';
import { RL_POOLS, type RlPool } from '../../core/protocol/grpoOptions';

/** One button of a refused run's card: a next step the verdict names, or Train Anyway. */
export interface PreflightButton {
  label: string;
  action: PreflightAction | { kind: 'force' };
}

export interface PreflightTable {
  head: string[];
  rows: string[][];
  /** 'pass', 'fail', 'forced' or 'none' (no verdict recorded yet). */
  verdictClass: 'pass' | 'fail' | 'forced' | 'none';
  verdict: string;
  next: string | null;
  /** What stands in for the table when no pre-screen ran. */
  noScreen: string;
  /** One line for the card's summary: "PASS · 34% of groups predicted with a spread (90% 22%–47%)". */
  headline: string;
  /** A refused run (not forced): its card offers to train again. */
  refused: boolean;
  /** The pool the verdict's next step names (`--pool fresh-values`), for a button; null when none. */
  pool: string | null;
  /** A refused run's buttons: one per next step the verdict names, in its order, then Train Anyway; [] otherwise. */
  buttons: PreflightButton[];
}

const pct = (x: number): string => `${(100 * x).toFixed(0)}%`;

export function preflightTable(view: PreflightView): PreflightTable {
  const ps = view.prescreen;
  const head = ['shape', 'tasks screened', 'pass rate', `groups with a spread (G = ${ps?.group ?? '?'})`, '90% interval'];
  const rows = (ps?.figures ?? []).map((f) => [f.kind === 'all' ? 'all shapes' : f.kind, String(f.tasks), pct(f.passRate), pct(f.share), `${pct(f.low)}–${pct(f.high)}`]);
  const v = view.verdict;
  const failedChecks = view.checks.filter((c) => !c.ok);
  let verdictClass: PreflightTable['verdictClass'];
  let verdict: string;
  if (failedChecks.length) {
    verdictClass = 'fail';
    verdict = `Refused: a pre-flight check failed (${failedChecks.map((c) => `${c.name}: ${c.detail}`).join('; ')}).`;
  } else if (!v) {
    verdictClass = 'none';
    verdict = ps ? 'No verdict recorded.' : 'No pre-screen verdict yet (it runs before step 1; a short run skips it).';
  } else if (v.ok) {
    verdictClass = 'pass';
    verdict = `PASS: the predicted share of groups with a spread is not below ${pct(v.threshold)} (bound ${pct(v.bound)}), so the steps have groups to learn from.`;
  } else {
    verdictClass = v.forced ? 'forced' : 'fail';
    verdict =
      `${v.forced ? 'FAIL, forced (running anyway)' : 'FAIL: refused before step 1'}: the predicted share is below ${pct(v.threshold)} (bound ${pct(v.bound)}), ` +
      `so GRPO would take (almost) no gradient.${v.detail ? ` Cause (${v.cause ?? '?'}): ${v.detail}.` : ''}`;
  }
  const next = v && !v.ok && v.next ? `Next: ${v.next.replace(/`/g, '')}; or Train Anyway (--force).` : null;
  const noScreen = ps ? '' : 'No pre-screen ran (a run too short to judge skips it; --prescreen N runs one).';
  const refused = !!v && !v.ok && !v.forced;
  // A run folder from before the verdict recorded its actions: the pool its text names, as before.
  const oldPool = /`--pool ([a-z-]+)`/.exec(v?.next ?? '')?.[1];
  const actions: PreflightAction[] = !refused
    ? []
    : (v.actions ?? (oldPool && (RL_POOLS as readonly string[]).includes(oldPool) ? [{ kind: 'grpo', flags: { pool: oldPool as RlPool } }] : []));
  const pool = refused ? (actions.flatMap((a) => (a.kind === 'grpo' && a.flags.pool ? [a.flags.pool] : []))[0] ?? null) : null;
  const buttons: PreflightButton[] = refused ? [...actions.map((action) => ({ label: preflightActionLabel(action), action })), { label: 'Train Anyway', action: { kind: 'force' } }] : [];
  const all = ps?.figures.find((f) => f.kind === 'all');
  const word = { pass: 'PASS', fail: 'FAIL', forced: 'FAIL (forced)', none: 'no verdict yet' }[verdictClass];
  const headline = all ? `${word} · ${pct(all.share)} of groups predicted with a spread (90% ${pct(all.low)}–${pct(all.high)})` : word;
  return { head, rows, verdictClass, verdict, next, noScreen, refused, pool, headline, buttons };
}

/** The message a card's button posts for run `id` (the extension checks it again). */
export function buttonMessage(id: string, b: PreflightButton): FromWebview {
  const a = b.action;
  if (a.kind === 'force') return { type: 'curves/retryGrpo', id, pool: null, force: true };
  if (a.kind === 'sft-more') return { type: 'curves/sftMore', id };
  const f = a.flags;
  return {
    type: 'curves/retryGrpo',
    id,
    pool: f.pool ?? null,
    force: false,
    ...(f.temperature !== undefined ? { temperature: f.temperature } : {}),
    ...(f.guide !== undefined ? { guide: f.guide } : {}),
  };
}
