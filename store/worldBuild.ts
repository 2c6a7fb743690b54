// A world folder built from what `agent-lab world` and the editor's Build World are given
// (docs/worlds.md): the textbook's seeded world, or a user's from a fact table or from
// documents and a tasks file. Reading, building and checking write nothing; the world job
// (trainer/run/worldJob.ts) runs these steps in order and writes only at the end, so a bad
// file or a cancel leaves no folder behind.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TASK_SHAPES, type Passage, type Task } from '../core/types';
import {
  type BuiltWorld,
  type DocFile,
  type FactSettings,
  type FactTable,
  type SourceTask,
  type SplitSizes,
  WorldFileError,
  buildDocsWorld,
  buildFactWorld,
  checkDocumentText,
  chunkDocuments,
  parseFactTable,
  parseTasksFile,
} from '../core/worldSource';
import { findOverlaps } from '../core/overlap';
import { type Fact, passageToRow, taskToRow } from '../core/world';
import { type McpTool, toolsLine } from '../core/tools/schemas';
import { parseToolList, systemPromptFor, templatesFor } from '../core/worldTools';
import { CORPUS_FILE, HELDOUT_FILE, TRAIN_FILE, WORLD_FORMAT, type WorldManifest } from '../core/protocol/folders';
import { INPUT_LIMITS, InputError, type Warn, exists, readInputText, writeJsonlAtomic } from './files';
import { checkWorldTarget, freshSpecs, sha256File, writeWorldFiles } from './worldFolder';

/**
 * A world source that cannot be built: unreadable, malformed, or refused by the builder
 * (too few tasks, split counts over the pool). One line; the CLI exits 2 with it.
 */
export class WorldSourceError extends Error {
  constructor(message: string) {
    super(message.replace(/\r?\n/g, '\\n'));
    this.name = 'WorldSourceError';
  }
}

/** Runs a reading or building step: a world file's own error (file, line, field) stays as it is, any other is the source's. */
function sourceStep<T>(step: () => T): T {
  try {
    return step();
  } catch (err) {
    if (err instanceof WorldFileError || err instanceof WorldSourceError) throw err;
    throw new WorldSourceError((err as Error).message);
  }
}

/** The world's MCP tool list (docs/worlds.md, "Tools"): read first, it decides the grammar. */
export function readToolList(file: string, warn: Warn): McpTool[] {
  try {
    return parseToolList(readInputText(file, 'the tool list', INPUT_LIMITS.json, warn), file);
  } catch (err) {
    if (err instanceof InputError) throw new WorldSourceError(err.message);
    throw err;
  }
}

/** Refuses an `out` that is a folder of the user's (or a run's world): checked before the work, so nothing is written into it. */
export function checkWorldOut(out: string): void {
  sourceStep(() => checkWorldTarget(out));
}

/** A user's world as read: a fact table, or documents and their questions. */
export type WorldSource =
  | { kind: 'facts'; file: string; table: FactTable }
  | { kind: 'docs'; docs: DocFile[]; docFiles: string[]; tasks: SourceTask[]; tasksFile: string };

export function readFactSource(fileArg: string, warn: Warn): WorldSource {
  const file = path.resolve(fileArg);
  const table = sourceStep(() => parseFactTable(readInputText(file, 'the fact table', INPUT_LIMITS.data, warn), file));
  return { kind: 'facts', file, table };
}

export function readDocsSource(docsDir: string, tasksFileArg: string, warn: Warn): WorldSource {
  const read = sourceStep(() => readDocsFolder(docsDir, warn));
  const tasksFile = path.resolve(tasksFileArg);
  const tasks = sourceStep(() => parseTasksFile(readInputText(tasksFile, 'the tasks file', INPUT_LIMITS.data, warn), tasksFile));
  return { kind: 'docs', docs: read.docs, docFiles: read.files, tasks, tasksFile };
}

/** Every .txt and .md file under `dir` (dot-files and dot-folders skipped), paths relative and '/'-separated. */
function readDocsFolder(dirArg: string, warn: Warn): { docs: DocFile[]; files: string[] } {
  const dir = path.resolve(dirArg);
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch {
    throw new WorldSourceError(`${dir}: no such folder (--docs needs a folder of .txt or .md files)`);
  }
  if (!st.isDirectory()) throw new WorldSourceError(`${dir}: not a folder (--docs needs a folder of .txt or .md files)`);
  const files: string[] = [];
  const walk = (d: string) => {
    for (const ent of fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (ent.name.startsWith('.')) continue;
      const full = path.join(d, ent.name);
      if (ent.isDirectory()) walk(full);
      else if (ent.isFile() && /\.(txt|md)$/i.test(ent.name)) files.push(full);
    }
  };
  walk(dir);
  if (files.length === 0) throw new WorldSourceError(`${dir}: no .txt or .md files`);
  const docs = files.map((f) => {
    const text = readInputText(f, 'the document', INPUT_LIMITS.data, warn);
    checkDocumentText(f, text);
    return { relPath: path.relative(dir, f).split(path.sep).join('/'), text };
  });
  return { docs, files };
}

/** How a user's world is made from its source. */
export interface WorldRecipe {
  out: string;
  seed: number;
  split: Partial<SplitSizes>;
  /** A fact table's settings over its own (shapes, distractors). */
  settings: FactSettings;
  /** The world's tool list and the file it came from (docs/worlds.md, "Tools"). */
  tools: { list: McpTool[]; file: string } | null;
}

/** A user's world built and checked in memory, with the world.json it will carry: nothing written yet. */
export interface SourceWorld {
  out: string;
  built: BuiltWorld;
  manifest: WorldManifest;
  tools: McpTool[] | null;
  facts: Fact[] | null;
}

/** Builds the world from its source and checks it against its tool list; writes nothing. */
export function buildSourceWorld(source: WorldSource, recipe: WorldRecipe): SourceWorld {
  const { out, seed, split, settings } = recipe;
  const tools = recipe.tools?.list ?? null;
  const templates = tools ? templatesFor(tools) : undefined;
  const options = { seed, split, ...(templates ? { templates } : {}) };
  type Built = { built: BuiltWorld; made: Partial<WorldManifest['made']>; manifestSource: WorldManifest['source']; facts: Fact[] | null };
  const fromSource = sourceStep((): Built => {
    if (source.kind === 'facts') {
      const built = buildFactWorld(source.table, { ...options, settings });
      const made = {
        distractors: settings.distractors ?? source.table.settings.distractors ?? 0,
        shapes: settings.shapes ?? source.table.settings.shapes ?? [...TASK_SHAPES],
        // Its derived worlds (fresh splits, augmentation, RL pools) are rendered with the same sentences.
        ...(built.templates ? { templates: [...built.templates] } : {}),
      };
      return { built, made, manifestSource: { kind: 'facts', files: [{ path: source.file, sha256: sha256File(source.file) }] }, facts: source.table.facts };
    }
    const built = buildDocsWorld(chunkDocuments(source.docs), source.tasks, source.tasksFile, options);
    const files = [...source.docFiles, source.tasksFile].map((f) => ({ path: f, sha256: sha256File(f) }));
    return { built, made: {}, manifestSource: { kind: 'docs', files }, facts: null };
  });
  const { built, facts } = fromSource;
  let manifestSource = fromSource.manifestSource;
  if (recipe.tools) {
    const { list, file } = recipe.tools;
    if (!list.some((t) => t.name === 'calc')) {
      const arithmetic = [...built.train, ...built.heldout, ...built.dev].filter((t) => t.kind !== 'lookup').length;
      if (arithmetic > 0) throw new WorldSourceError(`${file}:1: the list has no calc, but the world has ${arithmetic} double, sum or compare task(s): add calc or use --shapes lookup`);
    }
    manifestSource = { ...manifestSource, files: [...manifestSource.files, { path: file, sha256: sha256File(file) }] };
  }
  const manifest: WorldManifest = {
    format: WORLD_FORMAT,
    name: path.basename(out),
    source: manifestSource,
    made: { by: 'agent-lab world', seed, ...fromSource.made, split: built.sizes, created: new Date().toISOString() },
    counts: { passages: built.corpus.length, ...(facts ? { facts: facts.length } : {}), tasks: built.counts },
    overlap: built.overlap,
    unsolvable: built.unsolvable,
    ...(tools ? { tools: { line: toolsLine(tools), system_prompt: systemPromptFor(tools) } } : {}),
    // Its reading splits: worlds derived from the table with reserved seeds (docs/worlds.md).
    ...(facts ? { fresh: freshSpecs(built.heldout.length) } : {}),
  };
  return { out, built, manifest, tools, facts };
}

/** Writes the world as one step (store/worldFolder.ts writeWorldFiles: staged, then renamed into place). */
export function writeSourceWorld(w: SourceWorld): void {
  writeWorldFiles(w.out, { ...w.built, facts: w.facts }, w.manifest, w.tools);
}

/** What `agent-lab world` prints for a user's world. */
export function sourceWorldLines(w: SourceWorld): string[] {
  const { built, manifest } = w;
  const shapes = (c: Record<string, number>) => Object.entries(c).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
  const lines = [
    `wrote ${w.out}: ${built.corpus.length} passages; train ${built.train.length} (${shapes(built.counts.train)}), ` +
      `held-out ${built.heldout.length} (${shapes(built.counts.heldout)}), dev ${built.dev.length} (${shapes(built.counts.dev)})`,
    `  overlap: ${built.overlap.excluded} training task(s) left out (${built.overlap.exact} also a held-out or dev question, ${built.overlap.swapped} with the same facts)`,
  ];
  const unsolvable = Object.entries(built.unsolvable);
  if (unsolvable.length) lines.push(`  the stub teacher cannot solve: ${unsolvable.map(([r, n]) => `${r} ${n}`).join(', ')} (use --teacher http or student)`);
  if (manifest.fresh) {
    const f = manifest.fresh['fresh-values'];
    lines.push(`  reading splits: fresh-values and fresh-entities, ${f.seeds.length} derived worlds each from reserved seeds (eval --split fresh-values|fresh-entities)`);
    const d = manifest.fresh['dev-entities'];
    if (d) lines.push(`  dev-entities: ${d.seeds.length} new-name worlds of their own reserved seeds, for choosing recipes on new names (eval --split dev-entities)`);
    lines.push(`  no-teacher split: fresh-differences, "by how much is A larger than B" in fresh-values' worlds (eval --split fresh-differences; RL: train grpo --pool fresh-differences)`);
  }
  return lines;
}

/** The textbook's world (core/world.ts buildCorpus, makeTaskPool): three JSONL files, no world.json. */
export interface TextbookWorld {
  out: string;
  corpus: Passage[];
  train: Task[];
  heldout: Task[];
}

/**
 * Writes the textbook's three files into `out` (each atomically; a folder that holds other
 * files keeps them, as `agent-lab world --out` always did). A folder this call made is
 * removed again when a write fails, so a failed build leaves no half-written world.
 */
export function writeTextbookWorld(w: TextbookWorld): void {
  const made = !exists(w.out);
  try {
    writeJsonlAtomic(path.join(w.out, CORPUS_FILE), w.corpus.map(passageToRow));
    writeJsonlAtomic(path.join(w.out, TRAIN_FILE), w.train.map(taskToRow));
    writeJsonlAtomic(path.join(w.out, HELDOUT_FILE), w.heldout.map(taskToRow));
  } catch (err) {
    if (made) removeQuietly(w.out);
    throw err;
  }
}

/** Removes a folder a failed write made; the write's own error is what is reported, not this one's. */
function removeQuietly(dir: string): void {
  try {
    fs.rmSync(dir, { recursive: true, force: true });
  } catch {
    // Left as it is: the error thrown after this names what failed.
  }
}

/** What `agent-lab world` prints for the textbook's world. */
export function textbookWorldLine(w: TextbookWorld): string {
  const overlap = findOverlaps(w.train, w.heldout);
  return (
    `wrote ${w.out}: ${w.corpus.length} passages, ${w.train.length} train and ${w.heldout.length} held-out tasks; ` +
    `${overlap.exact.length} held-out questions also in train, ${overlap.swapped.length} more with operands swapped (training excludes both)`
  );
}
