// Evaluate's one chooser (issue 35): instead of three questions in a row (run, split, world),
// one list of what can be evaluated, run by run (newest first), each run's held-out split of
// its own world first (the default: Enter evaluates it), then another world's held-out when
// agentLab.world names one, then the other splits, each saying how many tasks it holds.
// Pure (Node, no vscode): the view maps the rows to a quick pick with separators.
import * as path from 'node:path';
import type { RunInfo } from './runFolders';
import { heldoutShort, readJson } from './runFolders';
import { CONFIG_FILE, RUN_WORLD_DIR, WORLD_MANIFEST, type RunConfigView } from '../core/protocol/folders';

export interface EvalChoice {
  label: string;
  description: string;
  runDir: string;
  split: 'heldout' | 'train' | 'dev' | 'dev-entities' | 'fresh-values' | 'fresh-entities' | 'fresh-differences';
  /** Another world folder to evaluate on (eval --world); absent: the run's own world. */
  world?: string;
}

/** A separator row (the run's name and figure) or a choice. */
export type EvalRow = { separator: string } | EvalChoice;


/** What a run's world is: its name, its split sizes, whether it has fresh splits and a dev split. */
export function runWorldFacts(runDir: string): { name: string; heldout: number; dev: number; train: number; fresh: boolean } {
  const m = readJson(path.join(runDir, RUN_WORLD_DIR, WORLD_MANIFEST));
  if (!m) return { name: 'the textbook world', heldout: 50, dev: 0, train: 200, fresh: true };
  const split = (m['made'] as { split?: Record<string, unknown> } | undefined)?.split ?? {};
  const n = (k: string) => (typeof split[k] === 'number' ? (split[k] as number) : 0);
  return { name: typeof m['name'] === 'string' ? m['name'] : path.basename(runDir), heldout: n('heldout'), dev: n('dev'), train: n('train'), fresh: m['fresh'] !== undefined };
}

/** A world's identity apart from where it lies: its source files' digests (world.json's source). */
function sourceKey(source: unknown): string | null {
  const files = (source as { files?: { path?: unknown; sha256?: unknown }[] } | null | undefined)?.files;
  if (!Array.isArray(files) || files.length === 0 || !files.every((f) => typeof f.sha256 === 'string')) return null;
  return files.map((f) => f.sha256 as string).sort().join(',');
}

/**
 * Whether `worldDir` is the world the run was made from: the same folder, or a world built from
 * the same source files (a GRPO run records its SFT run's copy of the world, and a world built
 * again lies in a new folder; either way it is no "other world").
 */
export function isRunsOwnWorld(runDir: string, worldDir: string): boolean {
  const made = (readJson(path.join(runDir, CONFIG_FILE)) as RunConfigView | null)?.world;
  if (!made) return false;
  if (typeof made.dir === 'string' && path.resolve(made.dir) === path.resolve(worldDir)) return true;
  const mine = sourceKey(made.source) ?? sourceKey(readJson(path.join(runDir, RUN_WORLD_DIR, WORLD_MANIFEST))?.['source']);
  return mine !== null && mine === sourceKey(readJson(path.join(worldDir, WORLD_MANIFEST))?.['source']);
}

const count = (n: number, limit: number): string => (limit > 0 && limit < n ? `${limit} of its ${n} tasks` : `its ${n} tasks`);
/** A limited split takes its question shapes in turn (trainer/run/jobs.ts spreadByShape). */
const spread = (n: number, limit: number): string => (limit > 0 && limit < n ? ', the question shapes in turn' : '');

/**
 * The rows of the chooser. `runs`: the trained runs (newest first); `other`: the world
 * agentLab.world names when it is built ({dir, name}); `limit`: agentLab.evaluate.tasks (0: all).
 */
export function evaluateChoices(runs: readonly RunInfo[], other: { dir: string; name: string } | null, limit = 0): EvalRow[] {
  const out: EvalRow[] = [];
  for (const r of runs) {
    const w = runWorldFacts(r.dir);
    const figure = heldoutShort(r);
    out.push({ separator: `${r.name} · ${r.kind} · step ${r.step ?? 0}${figure ? ` · ${figure}` : ''}` });
    out.push({ label: `${r.name}: held-out`, description: `${count(w.heldout, limit)} of ${w.name} (the figure every run reports)${spread(w.heldout, limit)}`, runDir: r.dir, split: 'heldout' });
    // The world the run was made from (config.json's world): agentLab.world naming it is no other world.
    if (other && !isRunsOwnWorld(r.dir, other.dir)) {
      out.push({ label: `${r.name}: held-out of ${other.name}`, description: `another world (agentLab.world): the student on tasks it never saw`, runDir: r.dir, split: 'heldout', world: other.dir });
    }
    if (w.fresh) {
      out.push({ label: `${r.name}: fresh-values`, description: 'known questions with values the student never saw (read or remembered?)', runDir: r.dir, split: 'fresh-values' });
      out.push({ label: `${r.name}: fresh-entities`, description: 'questions about entities the student never saw', runDir: r.dir, split: 'fresh-entities' });
      out.push({ label: `${r.name}: fresh-differences`, description: '"by how much is A larger than B": a kind no teacher demonstrated (only RL teaches it)', runDir: r.dir, split: 'fresh-differences' });
    }
    if (w.dev > 0 || w.name === 'the textbook world') out.push({ label: `${r.name}: dev`, description: w.dev > 0 ? `${count(w.dev, limit)}: for choosing recipes${spread(w.dev, limit)}` : 'fresh worlds for choosing recipes', runDir: r.dir, split: 'dev' });
    if (w.fresh || w.name === 'the textbook world') out.push({ label: `${r.name}: dev-entities`, description: 'new-name worlds for choosing recipes (apart from fresh-entities)', runDir: r.dir, split: 'dev-entities' });
    out.push({ label: `${r.name}: train`, description: 'the tasks it trained on (memorised or learned?)', runDir: r.dir, split: 'train' });
  }
  return out;
}
