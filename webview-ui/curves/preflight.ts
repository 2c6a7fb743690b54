// A GRPO run's checks before step 1 as the curves panel shows them (issue 33): the
// pass-rate pre-screen's prediction per task shape as a table (tasks screened, pass rate,
// predicted share of groups with a spread in correctness and its 90% interval), the
// verdict in words and the next step. DOM-free, so the unit tests read it.
import type { PreflightView } from '../../core/protocol/panels';

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
  const pool = refused ? (/`--pool ([a-z-]+)`/.exec(v.next ?? '')?.[1] ?? null) : null;
  const all = ps?.figures.find((f) => f.kind === 'all');
  const word = { pass: 'PASS', fail: 'FAIL', forced: 'FAIL (forced)', none: 'no verdict yet' }[verdictClass];
  const headline = all ? `${word} · ${pct(all.share)} of groups predicted with a spread (90% ${pct(all.low)}–${pct(all.high)})` : word;
  return { head, rows, verdictClass, verdict, next, noScreen, refused, pool, headline };
}
