// `agent-lab world --facts FILE | --docs DIR --tasks FILE [--split ...] --out DIR`: a
// user's own world (docs/worlds.md). Everything is read and checked before anything is
// written, so a bad file (one line naming file, line and field; exit 2) writes nothing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BadInputError, ParsedArgs, UsageError, intOption } from './args';
import { TASK_SHAPES, type TaskKind } from '../core/types';
import {
  BuiltWorld,
  DocFile,
  FactSettings,
  SplitSizes,
  WorldFileError,
  buildDocsWorld,
  buildFactWorld,
  checkDocumentText,
  chunkDocuments,
  parseFactTable,
  parseSplitSpec,
  parseTasksFile,
} from '../core/worldSource';
import { INPUT_LIMITS, InputError, readInputText, writeJsonlAtomic } from '../store/files';
import { findOverlaps } from '../core/overlap';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../core/world';
import { McpTool, toolsLine } from '../core/tools/schemas';
import { parseToolList, systemPromptFor, templatesFor } from '../core/worldTools';
import { checkWorldTarget, freshSpecs, sha256File, writeWorldFiles } from '../store/worldFolder';
import type { Fact } from '../core/world';
import { CORPUS_FILE, HELDOUT_FILE, TRAIN_FILE, WORLD_FORMAT, type WorldManifest } from '../core/protocol/folders';

type Options = Record<string, string | number | boolean | undefined>;

export const WORLD_USAGE =
  'agent-lab world [--seed N] [--distractors N] [--train N] [--heldout N] --out DIR          (the textbook world)\n' +
  `  agent-lab world --facts FILE [--shapes ${TASK_SHAPES.join(',')}] [--distractors N] [--split train=N,heldout=N,dev=N] [--seed N] --out DIR\n` +
  '  agent-lab world --docs DIR --tasks FILE [--split train=N,heldout=N,dev=N] [--seed N] --out DIR      (formats: docs/worlds.md)\n' +
  '      either with [--tools FILE]: an MCP tool list narrowing search/calc (docs/worlds.md, "Tools")';

/** True when the options ask for a user's world rather than the textbook's. */
export function isSourceWorld(o: Options): boolean {
  return o['facts'] !== undefined || o['docs'] !== undefined || o['tasks'] !== undefined;
}

function given(o: Options, names: string[]): string[] {
  return names.filter((n) => o[n] !== undefined).map((n) => `--${n}`);
}

/** Every .txt and .md file under `dir` (dot-files and dot-folders skipped), paths relative and '/'-separated. */
export function readDocsFolder(dirArg: string): { docs: DocFile[]; files: string[] } {
  const dir = path.resolve(dirArg);
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch {
    throw new BadInputError(`${dir}: no such folder (--docs needs a folder of .txt or .md files)`);
  }
  if (!st.isDirectory()) throw new BadInputError(`${dir}: not a folder (--docs needs a folder of .txt or .md files)`);
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
  if (files.length === 0) throw new BadInputError(`${dir}: no .txt or .md files`);
  const docs = files.map((f) => {
    const text = readInputText(f, 'the document', INPUT_LIMITS.data);
    checkDocumentText(f, text);
    return { relPath: path.relative(dir, f).split(path.sep).join('/'), text };
  });
  return { docs, files };
}

function parseShapes(v: string): TaskKind[] {
  const shapes = v.split(',').map((s) => s.trim());
  const bad = shapes.find((s) => !TASK_SHAPES.includes(s as TaskKind));
  if (bad === 'difference') throw new UsageError("--shapes: 'difference' is a family no teacher demonstrates, never a world's shape: it is the evaluation split fresh-differences and the RL pool of that name");
  if (bad !== undefined) throw new UsageError(`--shapes: unknown shape '${bad}' (known: ${TASK_SHAPES.join(', ')})`);
  return [...new Set(shapes as TaskKind[])];
}

export function runSourceWorldCommand(o: Options): void {
  const out = path.resolve(o['out'] as string);
  const facts = o['facts'] as string | undefined;
  const docs = o['docs'] as string | undefined;
  const tasksFile = o['tasks'] as string | undefined;
  if (facts !== undefined && (docs !== undefined || tasksFile !== undefined)) throw new UsageError('give --facts FILE, or --docs DIR with --tasks FILE, not both');
  if (facts === undefined && (docs === undefined || tasksFile === undefined)) throw new UsageError('--docs DIR and --tasks FILE go together');
  const legacy = given(o, ['train', 'heldout']);
  if (legacy.length) throw new UsageError(`${legacy.join(', ')}: the textbook world's options; a user's world takes --split train=N,heldout=N,dev=N`);
  if (docs !== undefined) {
    const wrong = given(o, ['shapes', 'distractors']);
    if (wrong.length) throw new UsageError(`${wrong.join(', ')}: fact-table options, not for --docs`);
  }
  // The world's tool list (docs/worlds.md, "Tools"): checked first, it decides the grammar.
  let tools: McpTool[] | null = null;
  if (o['tools'] !== undefined) {
    const file = path.resolve(o['tools'] as string);
    try {
      tools = parseToolList(readInputText(file, 'the tool list', INPUT_LIMITS.json), file);
    } catch (err) {
      if (err instanceof InputError) throw new BadInputError(err.message);
      throw err;
    }
  }
  const templates = tools ? templatesFor(tools) : undefined;
  let split: Partial<SplitSizes> = {};
  if (o['split'] !== undefined) {
    try {
      split = parseSplitSpec(String(o['split']));
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  const seed = typeof o['seed'] === 'number' ? o['seed'] : 0;
  // The target is checked before the work: a folder of the user's is never written into.
  try {
    checkWorldTarget(out);
  } catch (err) {
    throw new BadInputError((err as Error).message);
  }

  let built: BuiltWorld;
  let manifestSource: WorldManifest['source'];
  let made: Partial<WorldManifest['made']> = {};
  let factCount: number | undefined;
  let tableFacts: Fact[] | null = null;
  try {
    if (facts !== undefined) {
      const file = path.resolve(facts);
      const table = parseFactTable(readInputText(file, 'the fact table', INPUT_LIMITS.data), file);
      const settings: FactSettings = {
        ...(o['shapes'] !== undefined ? { shapes: parseShapes(String(o['shapes'])) } : {}),
        ...(typeof o['distractors'] === 'number' ? { distractors: o['distractors'] } : {}),
      };
      built = buildFactWorld(table, { seed, split, settings, ...(templates ? { templates } : {}) });
      factCount = table.facts.length;
      tableFacts = table.facts;
      manifestSource = { kind: 'facts', files: [{ path: file, sha256: sha256File(file) }] };
      made = {
        distractors: settings.distractors ?? table.settings.distractors ?? 0,
        shapes: settings.shapes ?? table.settings.shapes ?? [...TASK_SHAPES],
        // Its derived worlds (fresh splits, augmentation, RL pools) are rendered with the same sentences.
        ...(built.templates ? { templates: [...built.templates] } : {}),
      };
    } else {
      const read = readDocsFolder(docs!);
      const file = path.resolve(tasksFile!);
      const tasks = parseTasksFile(readInputText(file, 'the tasks file', INPUT_LIMITS.data), file);
      built = buildDocsWorld(chunkDocuments(read.docs), tasks, file, { seed, split, ...(templates ? { templates } : {}) });
      manifestSource = { kind: 'docs', files: [...read.files, file].map((f) => ({ path: f, sha256: sha256File(f) })) };
    }
  } catch (err) {
    if (err instanceof WorldFileError || err instanceof BadInputError || err instanceof UsageError || err instanceof InputError) {
      throw err instanceof InputError ? new BadInputError(err.message) : err;
    }
    // The builders' own refusals (too few tasks, split counts over the pool) are bad input too.
    throw new BadInputError((err as Error).message);
  }

  if (tools && !tools.some((t) => t.name === 'calc')) {
    const arithmetic = [...built.train, ...built.heldout, ...built.dev].filter((t) => t.kind !== 'lookup').length;
    if (arithmetic > 0) throw new BadInputError(`${path.resolve(o['tools'] as string)}:1: the list has no calc, but the world has ${arithmetic} double, sum or compare task(s): add calc or use --shapes lookup`);
  }
  if (tools) manifestSource = { ...manifestSource, files: [...manifestSource.files, { path: path.resolve(o['tools'] as string), sha256: sha256File(path.resolve(o['tools'] as string)) }] };
  const manifest: WorldManifest = {
    format: WORLD_FORMAT,
    name: path.basename(out),
    source: manifestSource,
    made: { by: 'agent-lab world', seed, ...made, split: built.sizes, created: new Date().toISOString() },
    counts: { passages: built.corpus.length, ...(factCount !== undefined ? { facts: factCount } : {}), tasks: built.counts },
    overlap: built.overlap,
    unsolvable: built.unsolvable,
    ...(tools ? { tools: { line: toolsLine(tools), system_prompt: systemPromptFor(tools) } } : {}),
    // Its reading splits: worlds derived from the table with reserved seeds (docs/worlds.md).
    ...(tableFacts ? { fresh: freshSpecs(built.heldout.length) } : {}),
  };
  writeWorldFiles(out, { ...built, facts: tableFacts }, manifest, tools);
  for (const w of built.warnings) console.error(`[agent-lab] warning: ${w}`);
  const shapes = (c: Record<string, number>) => Object.entries(c).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
  console.log(
    `wrote ${out}: ${built.corpus.length} passages; train ${built.train.length} (${shapes(built.counts.train)}), ` +
      `held-out ${built.heldout.length} (${shapes(built.counts.heldout)}), dev ${built.dev.length} (${shapes(built.counts.dev)})`,
  );
  console.log(
    `  overlap: ${built.overlap.excluded} training task(s) left out (${built.overlap.exact} also a held-out or dev question, ${built.overlap.swapped} with the same facts)`,
  );
  const unsolvable = Object.entries(built.unsolvable);
  if (unsolvable.length) console.log(`  the stub teacher cannot solve: ${unsolvable.map(([r, n]) => `${r} ${n}`).join(', ')} (use --teacher http or student)`);
  if (manifest.fresh) {
    const f = manifest.fresh['fresh-values'];
    console.log(`  reading splits: fresh-values and fresh-entities, ${f.seeds.length} derived worlds each from reserved seeds (eval --split fresh-values|fresh-entities)`);
    const d = manifest.fresh['dev-entities'];
    if (d) console.log(`  dev-entities: ${d.seeds.length} new-name worlds of their own reserved seeds, for choosing recipes on new names (eval --split dev-entities)`);
    console.log(`  no-teacher split: fresh-differences, "by how much is A larger than B" in fresh-values' worlds (eval --split fresh-differences; RL: train grpo --pool fresh-differences)`);
  }
}

/** `world`: the textbook's world (seeded), or a user's from --facts or --docs and --tasks. */
export function cmdWorld(a: ParsedArgs): void {
  if (isSourceWorld(a.options) || a.options['shapes'] !== undefined || a.options['split'] !== undefined || a.options['tools'] !== undefined) {
    if (!isSourceWorld(a.options)) throw new UsageError('--shapes, --split and --tools describe a world from --facts FILE or --docs DIR --tasks FILE');
    runSourceWorldCommand(a.options);
    return;
  }
  const seed = intOption(a, 'seed', 0);
  const out = a.options['out'] as string;
  const corpus = buildCorpus(seed, intOption(a, 'distractors', 120));
  let pool;
  try {
    pool = makeTaskPool(seed, intOption(a, 'train', 200), intOption(a, 'heldout', 50));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  writeJsonlAtomic(path.join(out, CORPUS_FILE), corpus.map(passageToRow));
  writeJsonlAtomic(path.join(out, TRAIN_FILE), pool.train.map(taskToRow));
  writeJsonlAtomic(path.join(out, HELDOUT_FILE), pool.heldout.map(taskToRow));
  const overlap = findOverlaps(pool.train, pool.heldout);
  console.log(
    `wrote ${out}: ${corpus.length} passages, ${pool.train.length} train and ${pool.heldout.length} held-out tasks; ` +
      `${overlap.exact.length} held-out questions also in train, ${overlap.swapped.length} more with operands swapped (training excludes both)`,
  );
}
