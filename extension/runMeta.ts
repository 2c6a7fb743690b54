// What a run's config.json says that the panels and the GRPO progress show: its kind, its
// recipe and curriculum (the curves mark the phase changes), and a GRPO run's checks before
// step 1 (pre-flight, the pass-rate pre-screen per shape, the verdict) as one PreflightView,
// with the text the progress notification and the refusal show. Pure over the parsed
// config (readRunMeta reads the file); no vscode, so the unit tests read it directly.
import * as path from 'node:path';
import { CONFIG_FILE } from '../core/protocol/folders';
import { isObj } from '../core/protocol/isObj';
import { type CurriculumPhaseView, type PreflightView, type PrescreenFigureView, type RunMeta, isPreflightAction } from '../core/protocol/panels';
import { readJson } from './runFolders';

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** The curriculum of a recipe record ({fraction, turns, batch} per phase); [] when it has none. */
export function curriculumOf(recipe: unknown): CurriculumPhaseView[] {
  if (!isObj(recipe) || !Array.isArray(recipe['curriculum'])) return [];
  const out: CurriculumPhaseView[] = [];
  for (const p of recipe['curriculum']) {
    if (!isObj(p)) return [];
    const fraction = num(p['fraction']);
    const batch = num(p['batch']);
    const turns = str(p['turns']);
    if (fraction === null || batch === null || turns === null) return [];
    out.push({ fraction, turns, batch });
  }
  return out;
}

/** One pre-screen figure (trainer/grpo/prescreen.ts PrescreenFigure) as the view's row, or null when it is not one. */
function figureOf(kind: string, v: unknown): PrescreenFigureView | null {
  if (!isObj(v)) return null;
  const tasks = num(v['tasks']);
  const passRate = num(v['passRate']);
  const share = num(v['informativeShare']);
  const interval = v['interval'];
  if (tasks === null || passRate === null || share === null || !Array.isArray(interval) || interval.length !== 2) return null;
  const [low, high] = interval.map(num);
  if (low === null || high === null || low === undefined || high === undefined) return null;
  return { kind, tasks, passRate, share, low, high };
}

/** A GRPO run's pre-flight from its config.json; null for another kind or a run that recorded none. */
export function preflightViewOf(config: Record<string, unknown>): PreflightView | null {
  if (config['kind'] !== 'grpo') return null;
  const checks = Array.isArray(config['preflight'])
    ? config['preflight'].filter(isObj).flatMap((c) => (typeof c['name'] === 'string' && typeof c['ok'] === 'boolean' ? [{ name: c['name'], ok: c['ok'], detail: str(c['detail']) ?? '' }] : []))
    : [];
  let prescreen: PreflightView['prescreen'] = null;
  const ps = config['prescreen'];
  if (isObj(ps)) {
    const all = figureOf('all', ps);
    const byKind = isObj(ps['byKind']) ? Object.entries(ps['byKind']).map(([k, f]) => figureOf(k, f)) : [];
    if (all && num(ps['samples']) !== null && num(ps['group']) !== null) {
      prescreen = {
        samples: num(ps['samples'])!,
        group: num(ps['group'])!,
        wholePool: ps['wholePool'] === true,
        figures: [all, ...byKind.filter((f): f is PrescreenFigureView => f !== null)],
      };
    }
  }
  let verdict: PreflightView['verdict'] = null;
  const v = config['prescreenVerdict'];
  if (isObj(v) && typeof v['ok'] === 'boolean' && num(v['bound']) !== null && num(v['threshold']) !== null) {
    verdict = {
      ok: v['ok'],
      bound: num(v['bound'])!,
      threshold: num(v['threshold'])!,
      cause: str(v['cause']),
      detail: str(v['detail']),
      next: str(v['next']),
      // A folder written before the verdict recorded its actions has none: the panel reads the pool from `next`.
      actions: Array.isArray(v['actions']) ? v['actions'].filter(isPreflightAction) : null,
      forced: config['forced'] === true,
      refused: config['refused'] === true,
    };
  }
  if (checks.length === 0 && !prescreen && !verdict) return null;
  return { checks, prescreen, verdict };
}

/** The run's meta from its parsed config.json. */
export function runMetaOf(config: Record<string, unknown>): RunMeta {
  const recipe = config['recipe'];
  return {
    kind: str(config['kind']) ?? 'run',
    recipe: isObj(recipe) ? str(recipe['name']) : str(recipe),
    curriculum: curriculumOf(recipe),
    preflight: preflightViewOf(config),
  };
}

/** The run folder's meta; null when it has no readable config.json (yet). */
export function readRunMeta(runDir: string): RunMeta | null {
  const config = readJson(path.join(runDir, CONFIG_FILE));
  return config ? runMetaOf(config) : null;
}

const pct = (x: number): string => `${(100 * x).toFixed(0)}%`;

/** "34% (90% 22–47%)": a predicted share with its interval. */
export function shareText(f: Pick<PrescreenFigureView, 'share' | 'low' | 'high'>): string {
  return `${pct(f.share)} (90% ${pct(f.low)}–${pct(f.high)})`;
}

/**
 * The prediction and the verdict on one line, for the progress notification and the
 * message shown before step 1: "pre-screen PASS: 34% (90% 22–47%) of groups predicted with
 * a spread in correctness (lookup 40% …); 24 tasks x 8 rollouts".
 */
export function preflightLine(view: PreflightView): string {
  const failed = view.checks.filter((c) => !c.ok);
  const checks = view.checks.length ? (failed.length ? `pre-flight: ${failed.map((c) => c.name).join(', ')} FAILED` : `pre-flight: ${view.checks.length} checks passed`) : '';
  const ps = view.prescreen;
  const all = ps?.figures.find((f) => f.kind === 'all');
  const shapes = ps ? ps.figures.filter((f) => f.kind !== 'all').map((f) => `${f.kind} ${pct(f.share)}`).join(', ') : '';
  const v = view.verdict;
  const word = v ? (v.ok ? 'PASS' : v.forced ? 'FAIL (forced: running anyway)' : 'FAIL') : '';
  const prediction =
    ps && all
      ? `pre-screen${word ? ` ${word}` : ''}: ${shareText(all)} of groups of ${ps.group} predicted with a spread in correctness${shapes ? ` (${shapes})` : ''}; ${all.tasks} tasks x ${ps.samples} rollouts${ps.wholePool ? ', the whole pool' : ''}`
      : v
        ? `pre-screen ${word}`
        : '';
  const cause = v && !v.ok && v.detail ? `; cause (${v.cause ?? '?'}): ${v.detail}` : '';
  return [checks, prediction + cause].filter((x) => x !== '').join(' · ');
}

/** The table as text rows (shape, tasks, pass rate, predicted share, interval), for the log and tests. */
export function prescreenRows(view: PreflightView): string[][] {
  if (!view.prescreen) return [];
  return view.prescreen.figures.map((f) => [f.kind, String(f.tasks), pct(f.passRate), pct(f.share), `${pct(f.low)}–${pct(f.high)}`]);
}
