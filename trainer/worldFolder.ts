// World folders on disk (docs/worlds.md): corpus.jsonl, train.jsonl, heldout.jsonl,
// dev.jsonl and world.json (the source files' hashes and how the world was made), as
// `agent-lab world --facts|--docs` writes them. A run folder keeps a copy under world/
// with its world.json, so eval, run and the language server find the run's world again.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Passage, Task } from '../core/types';
import { makeTaskPool, passageToRow, taskToRow } from '../core/world';
import { rowToPassage, rowToTask } from '../core/worldRows';
import { SEED_WORLD, WorldId, registerCustomWorld } from '../core/worlds';
import type { McpTool } from '../core/tools/schemas';
import { parseToolList } from '../core/worldTools';
import { INPUT_LIMITS, InputError, exists, readInputBytes, writeJsonAtomic, writeJsonlAtomic } from './files';
import { readJsonlRows } from './prepare';

export const WORLD_MANIFEST = 'world.json';
export const WORLD_FORMAT = 'agent-lab-world/1';

/** world.json: what the world was made from and how. */
export interface WorldManifest {
  format: typeof WORLD_FORMAT;
  name: string;
  source: { kind: 'facts' | 'docs' | 'folder'; files: { path: string; sha256: string }[] };
  made: { by: string; seed: number; distractors?: number; shapes?: string[]; split: { train: number; heldout: number; dev: number }; created: string };
  counts: { passages: number; facts?: number; tasks: Record<string, Record<string, number>> };
  overlap: { excluded: number; exact: number; swapped: number };
  /** Tasks the stub teacher cannot solve, by reason (no_hints, fact_not_in_corpus, gold_differs, outside_grammar). */
  unsolvable: Record<string, number>;
  /** With a tool list (tools.json): its tool line and the system prompt it makes. */
  tools?: { line: string; system_prompt: string };
}

/** A world read back from a folder, registered as a custom world of this thread. */
export interface LoadedWorld {
  dir: string;
  manifest: WorldManifest | null;
  id: WorldId;
  corpus: Passage[];
  train: Task[];
  heldout: Task[];
  dev: Task[];
  /** The world's tool list (tools.json), or null for the textbook's search and calc. */
  tools: McpTool[] | null;
}

export function sha256File(file: string): string {
  return createHash('sha256').update(readInputBytes(file, 'a world source file', INPUT_LIMITS.data)).digest('hex');
}

function parseRows<T>(file: string, parse: (row: unknown, where: string) => T): T[] {
  return readJsonlRows(file).map(({ value, where }) => {
    try {
      return parse(value, where);
    } catch (err) {
      throw new InputError((err as Error).message);
    }
  });
}

/** Reads a world folder; a missing or damaged file is an InputError naming it (and the line). */
export function readWorldFolder(dirArg: string): LoadedWorld {
  const dir = path.resolve(dirArg);
  const need = (name: string) => {
    const f = path.join(dir, name);
    if (!exists(f)) throw new InputError(`${f} is missing (is ${dir} a world folder? agent-lab world --out DIR writes one)`);
    return f;
  };
  const corpus = parseRows(need('corpus.jsonl'), rowToPassage);
  const train = parseRows(need('train.jsonl'), rowToTask);
  const heldout = parseRows(need('heldout.jsonl'), rowToTask);
  const devFile = path.join(dir, 'dev.jsonl');
  const dev = exists(devFile) ? parseRows(devFile, rowToTask) : [];
  if (corpus.length === 0) throw new InputError(`${path.join(dir, 'corpus.jsonl')} holds no passage`);
  if (heldout.length === 0) throw new InputError(`${path.join(dir, 'heldout.jsonl')} holds no task: eval reports on it`);
  const manifestFile = path.join(dir, WORLD_MANIFEST);
  let manifest: WorldManifest | null = null;
  if (exists(manifestFile)) {
    let v: unknown;
    try {
      v = JSON.parse(fs.readFileSync(manifestFile, 'utf8'));
    } catch (err) {
      throw new InputError(`${manifestFile}: not JSON (${(err as Error).message.split('\n')[0]})`);
    }
    if (typeof v !== 'object' || v === null || (v as { format?: unknown }).format !== WORLD_FORMAT) {
      throw new InputError(`${manifestFile}: field "format" must be "${WORLD_FORMAT}"`);
    }
    manifest = v as WorldManifest;
  }
  const toolsFile = path.join(dir, TOOLS_FILE);
  let tools: McpTool[] | null = null;
  if (exists(toolsFile)) {
    try {
      tools = parseToolList(fs.readFileSync(toolsFile, 'utf8'), toolsFile);
    } catch (err) {
      throw new InputError((err as Error).message);
    }
  }
  const id = registerCustomWorld({ corpus, train, heldout, dev, tools });
  return { dir, manifest, id, corpus, train, heldout, dev, tools };
}

/** The world files a folder holds; writing a world refuses a folder holding anything else. */
export const TOOLS_FILE = 'tools.json';
const WORLD_FILES = ['corpus.jsonl', 'train.jsonl', 'heldout.jsonl', 'dev.jsonl', TOOLS_FILE, WORLD_MANIFEST];
/** What a run folder's world/ holds, copied with the run (train grpo --from). */
export const WORLD_COPY: readonly string[] = WORLD_FILES;

/**
 * Throws unless `dir` is absent, empty, or a world folder made by `agent-lab world` (it
 * has a world.json and nothing but world files): a user's folder is never written into.
 */
export function checkWorldTarget(dir: string): void {
  if (!exists(dir)) return;
  const st = fs.statSync(dir);
  if (!st.isDirectory()) throw new InputError(`${dir} exists and is not a folder`);
  const names = fs.readdirSync(dir);
  if (names.length === 0) return;
  const foreign = names.filter((n) => !WORLD_FILES.includes(n));
  if (!names.includes(WORLD_MANIFEST) || foreign.length > 0) {
    throw new InputError(
      `${dir} is not empty${foreign.length ? ` (it holds ${foreign.slice(0, 3).join(', ')}${foreign.length > 3 ? ', ...' : ''})` : ''} and is not a world made by agent-lab world: choose a new folder for --out`,
    );
  }
}

/** Writes the world files (each atomically) and world.json last. */
export function writeWorldFiles(dir: string, w: { corpus: Passage[]; train: Task[]; heldout: Task[]; dev: Task[] }, manifest: WorldManifest, tools: readonly McpTool[] | null = null): void {
  writeJsonlAtomic(path.join(dir, 'corpus.jsonl'), w.corpus.map(passageToRow));
  writeJsonlAtomic(path.join(dir, 'train.jsonl'), w.train.map(taskToRow));
  writeJsonlAtomic(path.join(dir, 'heldout.jsonl'), w.heldout.map(taskToRow));
  writeJsonlAtomic(path.join(dir, 'dev.jsonl'), w.dev.map(taskToRow));
  const toolsFile = path.join(dir, TOOLS_FILE);
  if (tools) writeJsonAtomic(toolsFile, tools);
  else if (exists(toolsFile)) fs.rmSync(toolsFile); // a rebuild without --tools: the world's own (rewritten) folder
  writeJsonAtomic(path.join(dir, WORLD_MANIFEST), manifest);
}

/** Whether a run folder holds a user's world (world/ with a world.json); else it is the textbook's. */
export function hasRunWorld(runDir: string): boolean {
  return exists(path.join(runDir, 'world', WORLD_MANIFEST));
}

/** A run folder's own world: its world/ copy when that has a world.json, else null (the textbook world). */
export function runWorld(runDir: string): LoadedWorld | null {
  return hasRunWorld(runDir) ? readWorldFolder(path.join(runDir, 'world')) : null;
}

/** What config.json records of a custom world. */
export function worldRecord(w: LoadedWorld): { name: string; dir: string; id: string; source: WorldManifest['source'] | null } {
  return { name: w.manifest?.name ?? path.basename(w.dir), dir: w.dir, id: `custom:${w.id.seed}`, source: w.manifest?.source ?? null };
}

/** The tasks a run evaluates on and the world they live in: the run's own world, or the textbook's. */
export interface WorldSplits {
  id: WorldId;
  train: Task[];
  heldout: Task[];
  /** A user's world's dev split ([] for the textbook world, whose dev split is fresh worlds). */
  dev: Task[];
  world: LoadedWorld | null;
}

export function splitsOfWorld(w: LoadedWorld): WorldSplits {
  return { id: w.id, train: w.train, heldout: w.heldout, dev: w.dev, world: w };
}

/** The run's world (its world/ with a world.json), else the textbook world (seed 0). */
export function runSplits(runDir: string): WorldSplits {
  const w = runWorld(runDir);
  if (w) return splitsOfWorld(w);
  const pool = makeTaskPool(0);
  return { id: SEED_WORLD, train: pool.train, heldout: pool.heldout, dev: [], world: null };
}
