// What the Runs view watches (issue 35): the files its items come from, by folder. One
// non-recursive watcher per folder (the runs folder itself: a world or run folder made or
// removed; each world folder: world.json, corpus.jsonl, *.traces.jsonl; each run folder:
// config.json, metrics.jsonl, and its eval/, checkpoints/ and data/), because VS Code serves
// non-recursive watchers even where `files.watcherExclude` or a remote host's recursive
// watcher would not, and a Distill or a training job writes only these files. Pure (no
// vscode): the view creates and disposes watchers to match `watchTargets`.
import * as path from 'node:path';
import { CHECKPOINTS_DIR, CONFIG_FILE, CORPUS_FILE, DATA_DIR, EVAL_DIR, METRICS_FILE, RUN_WORLD_DIR, SOURCE_FILE, TRACES_SUFFIX, WORLD_MANIFEST } from '../core/protocol/folders';

/** A world or run folder's entries whose change the Runs view shows. */
const WATCHED_ENTRIES: ReadonlySet<string> = new Set([WORLD_MANIFEST, CORPUS_FILE, CONFIG_FILE, METRICS_FILE, EVAL_DIR, CHECKPOINTS_DIR, DATA_DIR, RUN_WORLD_DIR]);

/** A folder to watch and the pattern of its direct children that matter. */
export interface WatchTarget {
  base: string;
  pattern: string;
}

/** The folders the view's items come from: each runs folder, its world folders, its run folders (with eval/, checkpoints/, data/). */
export function watchTargets(roots: readonly string[], worldDirs: readonly string[], runDirs: readonly string[]): WatchTarget[] {
  const out: WatchTarget[] = [];
  for (const root of roots) out.push({ base: root, pattern: '*' });
  for (const w of worldDirs) out.push({ base: w, pattern: '{world.json,corpus.jsonl,*.traces.jsonl}' });
  for (const r of runDirs) {
    out.push({ base: r, pattern: '{config.json,metrics.jsonl,world,eval,checkpoints,data}' });
    out.push({ base: path.join(r, EVAL_DIR), pattern: '*.{json,jsonl}' });
    out.push({ base: path.join(r, CHECKPOINTS_DIR), pattern: '*' });
    out.push({ base: path.join(r, DATA_DIR), pattern: SOURCE_FILE });
  }
  return out;
}

/** A key per target, to compare the watchers there are with the ones wanted. */
export const targetKey = (t: WatchTarget): string => `${t.base}\u0000${t.pattern}`;

/**
 * What to do to go from the watchers there are to the ones wanted: targets to start
 * watching and keys to stop (both in a stable order).
 */
export function diffTargets(current: Iterable<string>, wanted: readonly WatchTarget[]): { start: WatchTarget[]; stop: string[] } {
  const have = new Set(current);
  const want = new Map(wanted.map((t) => [targetKey(t), t] as const));
  return {
    start: [...want].filter(([k]) => !have.has(k)).map(([, t]) => t),
    stop: [...have].filter((k) => !want.has(k)).sort(),
  };
}

/**
 * Whether a changed file (an absolute path) is one the view shows something of: a folder
 * directly in a runs folder, or a file `watchTargets` names. Used to filter events of any
 * watcher, so a run's other files (its tokenizer, its training data) cause no refresh.
 */
export function isRunsViewFile(file: string, roots: readonly string[]): boolean {
  for (const root of roots) {
    const rel = path.relative(root, file);
    if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) continue;
    const parts = rel.split(path.sep);
    if (parts.length === 1) return true; // a world or run folder made or removed
    const name = parts.at(-1)!;
    if (parts.length === 2) return WATCHED_ENTRIES.has(name) || name.endsWith(TRACES_SUFFIX);
    if (parts.length === 3) {
      const folder = parts[1]!;
      if (folder === EVAL_DIR) return /\.(json|jsonl)$/.test(name);
      if (folder === CHECKPOINTS_DIR) return true;
      if (folder === DATA_DIR) return name === SOURCE_FILE;
    }
  }
  return false;
}
