// World folders on disk (docs/worlds.md): corpus.jsonl, train.jsonl, heldout.jsonl,
// dev.jsonl and world.json (the source files' hashes and how the world was made), as
// `agent-lab world --facts|--docs` writes them. A run folder keeps a copy under world/
// with its world.json, so eval, run and the language server find the run's world again.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TASK_SHAPES, type Passage, type Task, type TaskKind } from '../core/types';
import { type Fact, makeTaskPool, passageToRow, taskToRow } from '../core/world';
import { deriveFacts } from '../core/derivedWorlds';
import { type FactWorldOptions, WorldFileError, buildFactWorld, checkTemplate, factWorldCorpus } from '../core/worldSource';
import { templatesFor } from '../core/worldTools';
import { rowToPassage, rowToTask } from '../core/worldRows';
import { DEV_ENTITY_SEED, SEED_WORLD, WorldId, type WorldTask, assertPoolApart, loadedWorldId } from '../core/worlds';
import { drawDifferenceTasks, splitPairs } from '../core/differenceTasks';
import type { McpTool } from '../core/tools/schemas';
import { parseToolList } from '../core/worldTools';
import { INPUT_LIMITS, InputError, exists, processAlive, readInputBytes, readJsonlRows, writeFileAtomic as writeFileAtomicText, writeJsonAtomic, writeJsonlAtomic } from './files';
import { CONFIG_FILE, CORPUS_FILE, DEV_FILE, FACTS_FILE, HELDOUT_FILE, RUN_WORLD_DIR, TOOLS_FILE, TRAIN_FILE, WORLD_FILES, WORLD_FORMAT, WORLD_MANIFEST, type FreshName, type FreshSpec, type RunConfigView, type WorldManifest } from '../core/protocol/folders';
import { isObj } from '../core/protocol/isObj';

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
  /** A fact world's table (facts.json), from which its fresh splits are derived; null for other worlds. */
  facts: Fact[] | null;
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
  const corpus = parseRows(need(CORPUS_FILE), rowToPassage);
  const train = parseRows(need(TRAIN_FILE), rowToTask);
  const heldout = parseRows(need(HELDOUT_FILE), rowToTask);
  const devFile = path.join(dir, DEV_FILE);
  const dev = exists(devFile) ? parseRows(devFile, rowToTask) : [];
  if (corpus.length === 0) throw new InputError(`${path.join(dir, CORPUS_FILE)} holds no passage`);
  if (heldout.length === 0) throw new InputError(`${path.join(dir, HELDOUT_FILE)} holds no task: eval reports on it`);
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
    checkManifestFields(manifestFile, manifest);
    checkWorldHashes(dir, manifest);
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
  const factsFile = path.join(dir, FACTS_FILE);
  const facts = exists(factsFile) ? readFactsFile(factsFile) : null;
  const id = loadedWorldId({ corpus, train, heldout, dev, tools });
  return { dir, manifest, id, corpus, train, heldout, dev, tools, facts };
}

/** The fields later code reads (names, the source's files, shapes, counts): a wrong type is named here, not met as a crash. */
function checkManifestFields(file: string, m: WorldManifest): void {
  const bad = (field: string, want: string): never => {
    throw new InputError(`${file}: field "${field}" must be ${want}`);
  };
  if (typeof m.name !== 'string') bad('name', 'a string');
  if (!isObj(m.source) || !['facts', 'docs', 'folder'].includes(m.source.kind as string)) bad('source', '{"kind": "facts"|"docs"|"folder", "files": [...]}');
  if (!Array.isArray(m.source.files) || !m.source.files.every((f) => isObj(f) && typeof f.path === 'string' && typeof f.sha256 === 'string')) {
    bad('source.files', 'a list of {"path", "sha256"} strings');
  }
  if (!isObj(m.made) || typeof m.made.seed !== 'number') bad('made', 'an object with a numeric "seed"');
  if (m.made.shapes !== undefined && !(Array.isArray(m.made.shapes) && m.made.shapes.every((s) => TASK_SHAPES.includes(s as TaskKind)))) {
    bad('made.shapes', 'a list of lookup, double, sum, compare');
  }
  if (m.made.templates !== undefined) {
    if (!Array.isArray(m.made.templates) || m.made.templates.length === 0) bad('made.templates', 'a non-empty list of sentences');
    m.made.templates.forEach((t, i) => {
      if (typeof t !== 'string') bad(`made.templates[${i}]`, 'a string');
      try {
        checkTemplate(file, 1, `made.templates[${i}]`, t);
      } catch (err) {
        if (err instanceof WorldFileError) throw new InputError(err.message);
        throw err;
      }
    });
  }
  if (!isObj(m.counts) || typeof m.counts.passages !== 'number' || !isObj(m.counts.tasks)) bad('counts', 'an object with "passages" (a number) and "tasks" (an object)');
  if (m.unsolvable !== undefined && !isObj(m.unsolvable)) bad('unsolvable', 'an object of counts by reason');
}

/** A world file that is not the one world.json recorded: a mix of two builds, or an edit by hand. */
function checkWorldHashes(dir: string, manifest: WorldManifest): void {
  const files = manifest.files;
  if (files === undefined) return; // a world written before world.json recorded them
  if (typeof files !== 'object' || files === null) throw new InputError(`${path.join(dir, WORLD_MANIFEST)}: field "files" must be an object of sha256 by file name`);
  for (const [name, sha] of Object.entries(files)) {
    if (!HASHED_FILES.includes(name)) throw new InputError(`${path.join(dir, WORLD_MANIFEST)}: "files" names ${JSON.stringify(name)}, which is not a world file`);
    const file = path.join(dir, name);
    if (!exists(file)) throw new InputError(`${file} is missing but ${WORLD_MANIFEST} records it: rebuild the world (agent-lab world ... --out ${dir})`);
    if (sha256File(file) !== sha) {
      throw new InputError(`${file} is not the file ${WORLD_MANIFEST} recorded (a build stopped halfway, or an edit by hand): rebuild the world (agent-lab world ... --out ${dir})`);
    }
  }
}

function readFactsFile(file: string): Fact[] {
  let v: unknown;
  try {
    v = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new InputError(`${file}: not JSON (${(err as Error).message.split('\n')[0]})`);
  }
  if (!Array.isArray(v) || !v.every((f) => Array.isArray(f) && f.length === 3 && f.every((x) => typeof x === 'string'))) {
    throw new InputError(`${file}: expected a list of [entity, attribute, value] string triples`);
  }
  return v as Fact[];
}

/** What a run folder's world/ holds, copied with the run (train grpo --from). */
export const WORLD_COPY: readonly string[] = WORLD_FILES;
/** The world files whose sha256 world.json records (`files`), so a mixed or edited world is named on read. */
const HASHED_FILES = WORLD_FILES.filter((f) => f !== WORLD_MANIFEST);

/** What is wrong with `dir`/world.json as the manifest of a world this lab wrote, or null when it is one. */
function manifestProblem(dir: string): string | null {
  const file = path.join(dir, WORLD_MANIFEST);
  let st: fs.Stats;
  try {
    st = fs.lstatSync(file);
  } catch {
    return `it has no ${WORLD_MANIFEST}`;
  }
  if (!st.isFile()) return `its ${WORLD_MANIFEST} is not a plain file`;
  if (st.size > INPUT_LIMITS.json) return `its ${WORLD_MANIFEST} is over ${INPUT_LIMITS.json} bytes`;
  let v: unknown;
  try {
    v = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return `its ${WORLD_MANIFEST} is not JSON`;
  }
  if (typeof v !== 'object' || v === null || (v as { format?: unknown }).format !== WORLD_FORMAT) {
    return `its ${WORLD_MANIFEST} does not say "format": "${WORLD_FORMAT}"`;
  }
  return null;
}

const list = (names: string[]): string => `${names.slice(0, 3).join(', ')}${names.length > 3 ? `, and ${names.length - 3} more` : ''}`;

/**
 * Throws unless `dir` is absent, empty, or a world folder made by `agent-lab world` (a
 * world.json that says so, and nothing but world files): a user's folder is never written
 * into, whatever its file names. A run's own world/ is never rebuilt: the run was trained on it.
 */
export function checkWorldTarget(dirArg: string): void {
  const dir = path.resolve(dirArg);
  if (path.basename(dir) === RUN_WORLD_DIR && exists(path.join(path.dirname(dir), CONFIG_FILE))) {
    throw new InputError(`${dir} is the world of the run ${path.dirname(dir)} (it has a ${CONFIG_FILE}): a run's world is never replaced, its evaluations would report on another world; choose a new folder for --out`);
  }
  if (!exists(dir)) return;
  const st = fs.statSync(dir);
  if (!st.isDirectory()) throw new InputError(`${dir} exists and is not a folder`);
  const names = fs.readdirSync(dir);
  if (names.length === 0) return;
  const foreign = names.filter((n) => !WORLD_FILES.includes(n));
  if (foreign.length > 0) {
    throw new InputError(`${dir} is not empty (it holds ${list(foreign)}) and is not a world made by agent-lab world: choose a new folder for --out`);
  }
  const problem = manifestProblem(dir);
  if (problem !== null) {
    throw new InputError(`${dir} holds ${list(names)} but ${problem}, so it is not a world made by agent-lab world (or one stopped before its end): nothing was written; choose a new folder for --out or remove that one`);
  }
  const notFiles = names.filter((n) => !fs.lstatSync(path.join(dir, n)).isFile());
  if (notFiles.length > 0) throw new InputError(`${dir}: ${list(notFiles)} should be plain files in a world folder: nothing was written; choose a new folder for --out`);
}

const STAGING = /^\.(.+)\.(building|old)-(\d+)-\d+$/;

/** Staging folders a killed build left beside `dir` (their process is gone): removed, they hold no one's data. */
function removeDeadStaging(dir: string): void {
  const parent = path.dirname(dir);
  let names: string[];
  try {
    names = fs.readdirSync(parent);
  } catch {
    return;
  }
  for (const n of names) {
    const m = STAGING.exec(n);
    if (!m || m[1] !== path.basename(dir) || processAlive(Number(m[3]))) continue;
    fs.rmSync(path.join(parent, n), { recursive: true, force: true });
  }
}


/**
 * Writes a world as one step: every file into a staging folder beside `dir`, then the folder
 * swapped in by rename. A build killed at any point leaves either the old world or the new one,
 * never a mix (a staging folder left behind is removed by the next build). world.json records
 * each file's sha256 (`files`), so a world edited or mixed by hand is named when it is read.
 */
export function writeWorldFiles(
  dirArg: string,
  w: { corpus: Passage[]; train: Task[]; heldout: Task[]; dev: Task[]; facts?: readonly Fact[] | null },
  manifest: WorldManifest,
  tools: readonly McpTool[] | null = null,
): void {
  const dir = path.resolve(dirArg);
  removeDeadStaging(dir);
  const stamp = `${process.pid}-${Date.now()}`;
  const staging = path.join(path.dirname(dir), `.${path.basename(dir)}.building-${stamp}`);
  try {
    fs.mkdirSync(staging, { recursive: true });
    writeJsonlAtomic(path.join(staging, CORPUS_FILE), w.corpus.map(passageToRow));
    writeJsonlAtomic(path.join(staging, TRAIN_FILE), w.train.map(taskToRow));
    writeJsonlAtomic(path.join(staging, HELDOUT_FILE), w.heldout.map(taskToRow));
    writeJsonlAtomic(path.join(staging, DEV_FILE), w.dev.map(taskToRow));
    if (tools) writeJsonAtomic(path.join(staging, TOOLS_FILE), tools);
    if (w.facts) writeFileAtomicText(path.join(staging, FACTS_FILE), `[\n${w.facts.map((f) => JSON.stringify(f)).join(',\n')}\n]\n`);
    const files: Record<string, string> = {};
    for (const f of HASHED_FILES) if (exists(path.join(staging, f))) files[f] = sha256File(path.join(staging, f));
    writeJsonAtomic(path.join(staging, WORLD_MANIFEST), { ...manifest, files });
    swapIn(staging, dir, stamp);
  } catch (err) {
    fs.rmSync(staging, { recursive: true, force: true });
    if (err instanceof InputError) throw err;
    throw new InputError(`cannot write the world ${dir}: ${(err as Error).message}`);
  }
}

function swapIn(staging: string, dir: string, stamp: string): void {
  if (!exists(dir)) {
    fs.renameSync(staging, dir);
    return;
  }
  if (fs.readdirSync(dir).length === 0) {
    fs.rmdirSync(dir);
    fs.renameSync(staging, dir);
    return;
  }
  const old = path.join(path.dirname(dir), `.${path.basename(dir)}.old-${stamp}`);
  fs.renameSync(dir, old);
  fs.renameSync(staging, dir);
  // Only the world files go; a file that appeared meanwhile keeps the old folder (said, not lost).
  for (const f of WORLD_FILES) fs.rmSync(path.join(old, f), { force: true });
  try {
    fs.rmdirSync(old);
  } catch {
    throw new InputError(`the world ${dir} was rebuilt, but files not of a world appeared in it meanwhile: they are kept in ${old}`);
  }
}

/** Whether a run folder holds a user's world (world/ with a world.json); else it is the textbook's. */
export function hasRunWorld(runDir: string): boolean {
  return exists(path.join(runDir, RUN_WORLD_DIR, WORLD_MANIFEST));
}

/** A run folder's own world: its world/ copy when that has a world.json, else null (the textbook world). */
export function runWorld(runDir: string): LoadedWorld | null {
  if (!hasRunWorld(runDir)) return null;
  const w = readWorldFolder(path.join(runDir, RUN_WORLD_DIR));
  checkRunWorldIsTrained(runDir, w);
  return w;
}

/** world/ must be the world config.json says the run was made from: an eval must not report on another. */
function checkRunWorldIsTrained(runDir: string, w: LoadedWorld): void {
  const configFile = path.join(runDir, CONFIG_FILE);
  if (!exists(configFile)) return;
  let recorded: unknown;
  try {
    recorded = (JSON.parse(fs.readFileSync(configFile, 'utf8')) as RunConfigView).world?.source;
  } catch {
    return; // the run's own readers name a damaged config.json
  }
  const sources = (s: unknown): string[] =>
    s && typeof s === 'object' && Array.isArray((s as { files?: unknown }).files)
      ? ((s as { files: { sha256?: unknown }[] }).files.map((f) => String(f?.sha256)))
      : [];
  const want = sources(recorded);
  const have = sources(w.manifest?.source);
  if (want.length === 0 || have.length === 0) return;
  if (want.join() !== have.join()) {
    throw new InputError(`${w.dir} is not the world this run was trained on (its ${CONFIG_FILE} records another source: sha256 ${want[0]!.slice(0, 12)}..., world/ has ${have[0]!.slice(0, 12)}...): evaluate it with a run made from that world`);
  }
}

/** What config.json records of a custom world. */
export function worldRecord(w: LoadedWorld): { name: string; dir: string; id: string; source: WorldManifest['source'] | null; fresh?: WorldManifest['fresh'] } {
  return {
    name: w.manifest?.name ?? path.basename(w.dir),
    dir: w.dir,
    id: `custom:${w.id.seed}`,
    source: w.manifest?.source ?? null,
    ...(w.manifest?.fresh ? { fresh: w.manifest.fresh } : {}),
  };
}

/** Reserved seeds of a fact world's fresh splits (the textbook's ranges): at most 50 held-out tasks a world, enough worlds for 500. */
export function freshSpecs(heldoutPerWorld: number): Record<FreshName, FreshSpec> {
  const perWorld = Math.max(1, Math.min(50, heldoutPerWorld));
  const worlds = Math.min(100, Math.max(10, Math.ceil(500 / perWorld)));
  const seeds = (from: number) => Array.from({ length: worlds }, (_, i) => from + i);
  return {
    'fresh-values': { kind: 'values', seeds: seeds(1_000_001), tasks_per_world: perWorld },
    'fresh-entities': { kind: 'entities', seeds: seeds(2_000_001), tasks_per_world: perWorld },
    'dev-entities': devEntitiesSpec(perWorld),
  };
}

/** dev-entities: about 200 tasks (the textbook dev's size) of new-name worlds from their own reserved seeds. */
function devEntitiesSpec(perWorld: number): FreshSpec {
  const worlds = Math.min(40, Math.max(4, Math.ceil(200 / perWorld)));
  return { kind: 'entities', seeds: Array.from({ length: worlds }, (_, i) => DEV_ENTITY_SEED + i), tasks_per_world: perWorld };
}

/**
 * The spec of a fact world's split of derived worlds: as world.json records it; a world built
 * before dev-entities existed gets it from its fresh-entities spec (same size of world).
 */
export function freshSpecOf(w: LoadedWorld, split: FreshName): FreshSpec | undefined {
  const fresh = w.manifest?.fresh;
  if (!fresh) return undefined;
  if (split === 'dev-entities') return fresh['dev-entities'] ?? devEntitiesSpec(fresh['fresh-entities'].tasks_per_world);
  return fresh[split];
}

/**
 * How a world derived from `w`'s table is rendered: the parent's seed, distractors, shapes,
 * tool list and surface forms (the textbook's for a world that recorded none: it was built so).
 */
export function derivedBuildOptions(w: LoadedWorld): FactWorldOptions {
  const made = w.manifest!.made;
  const templates = w.tools ? templatesFor(w.tools) : undefined;
  return {
    seed: made.seed,
    settings: { distractors: made.distractors ?? 0, ...(made.shapes ? { shapes: made.shapes as Task['kind'][] } : {}) },
    ...(templates ? { templates } : {}),
    forms: made.templates ?? 'textbook',
  };
}

/**
 * The tasks of a fact world's fresh split: each reserved seed's derived world (the parent's
 * build settings and tool list over the derived table), its held-out tasks, each world
 * registered with its parent's table so `memorised` can be judged in any thread.
 */
export function freshWorldTasks(w: LoadedWorld, split: FreshName | 'fresh-differences'): { tasks: WorldTask[]; spec: FreshSpec } {
  if (split === 'fresh-differences') return freshWorldDifferenceTasks(w);
  const spec = freshSpecOf(w, split);
  if (!w.facts || !spec || !w.manifest) {
    throw new InputError(`the world in ${w.dir} has no ${split} split: it is not a fact table's world, or it was built before worlds had one (rebuild it with agent-lab world --facts ... --out ${w.dir})`);
  }
  const options = derivedBuildOptions(w);
  const tasks: WorldTask[] = [];
  for (const seed of spec.seeds) {
    const derived = deriveFacts(w.facts, { kind: spec.kind, seed });
    const table = { facts: derived.facts, lines: [], settings: {} };
    let built;
    try {
      built = buildFactWorld(table, { ...options, split: { train: 0, dev: 0, heldout: spec.tasks_per_world } });
    } catch {
      built = buildFactWorld(table, { ...options, split: { train: 0, dev: 0 } }); // fewer tasks than the parent's held-out (equal values make no compare)
    }
    const id = loadedWorldId({
      corpus: built.corpus,
      train: [],
      heldout: built.heldout,
      dev: [],
      tools: w.tools,
      parent: { kind: spec.kind, facts: w.facts, renamed: [...derived.renamed] },
    });
    for (const task of built.heldout.slice(0, spec.tasks_per_world)) tasks.push({ task, world: id });
  }
  return { tasks, spec };
}

/** Difference tasks of the fresh-differences split: about 500 over the fresh-values worlds (core/worlds.ts FRESH_SPLITS' rule). */
const DIFFERENCE_SPLIT_TASKS = 500;

/**
 * A difference family's world derived from `w`'s table with new values (seed `seed`): its
 * corpus rendered as the parent's build settings render it, registered with `tasks` (chosen
 * from the derived table by `choose`) and the parent's table, so `memorised` is judged.
 */
function differenceWorld(w: LoadedWorld, seed: number, choose: (facts: Fact[]) => Task[], as: 'heldout' | 'train'): { id: WorldId; tasks: Task[] } {
  const derived = deriveFacts(w.facts!, { kind: 'values', seed });
  const tasks = choose(derived.facts);
  const { corpus } = factWorldCorpus({ facts: derived.facts, lines: [], settings: {} }, derivedBuildOptions(w));
  const id = loadedWorldId({
    corpus,
    train: as === 'train' ? tasks : [],
    heldout: as === 'heldout' ? tasks : [],
    dev: [],
    tools: w.tools,
    parent: { kind: 'values', facts: w.facts!, renamed: [] },
  });
  return { id, tasks };
}

/**
 * A fact world's fresh-differences split: its fresh-values worlds (the same reserved seeds,
 * so values disjoint from training by construction) asked "by how much is A larger than B"
 * over the evaluation's half of its pairs (core/differenceTasks.ts splitPairs), about 500.
 */
export function freshWorldDifferenceTasks(w: LoadedWorld): { tasks: WorldTask[]; spec: FreshSpec } {
  const { items, spec } = differenceSplit(w);
  return { tasks: items.map(({ task, world }) => ({ task, world })), spec };
}

/** The split's tasks, each with the seed of the derived world it lives in. */
function differenceSplit(w: LoadedWorld): { items: (WorldTask & { seed: number })[]; spec: FreshSpec } {
  const values = w.manifest?.fresh?.['fresh-values'];
  if (!w.facts || !values || !w.manifest) {
    throw new InputError(`the world in ${w.dir} has no fresh-differences split: it is not a fact table's world, or it was built before worlds had reading splits (rebuild it with agent-lab world --facts ... --out ${w.dir})`);
  }
  const pairs = splitPairs(w.facts).evaluation;
  if (pairs.size === 0) throw new InputError(`the world in ${w.dir} has no fresh-differences split: no attribute of its table has numeric values of two entities`);
  const spec: FreshSpec = { kind: 'values', seeds: values.seeds, tasks_per_world: Math.ceil(DIFFERENCE_SPLIT_TASKS / values.seeds.length) };
  const items: (WorldTask & { seed: number })[] = [];
  for (const seed of spec.seeds) {
    const { id, tasks } = differenceWorld(w, seed, (facts) => drawDifferenceTasks(facts, pairs, spec.tasks_per_world, seed), 'heldout');
    for (const task of tasks) items.push({ task, world: id, seed });
  }
  return { items: items.slice(0, DIFFERENCE_SPLIT_TASKS), spec };
}

/**
 * RL's fresh-differences pool of a fact world: worlds derived from its table with the RL value
 * seeds (`seeds`: the fresh-values pool's), `perWorld` difference tasks each over the training
 * half of its pairs; asserted apart from the world's fresh-differences split (a seed, a task
 * or an overlap key shared is an error naming it).
 */
export function worldDifferencePool(w: LoadedWorld, seeds: readonly number[], perWorld: number): WorldTask[] {
  if (!w.facts || !w.manifest) throw new InputError(`--pool fresh-differences derives worlds from a fact table: ${w.manifest?.name ?? w.dir} has none (a documents world, or built before worlds kept facts.json): use --pool train`);
  const pairs = splitPairs(w.facts).training;
  if (pairs.size === 0) throw new InputError(`--pool fresh-differences: no attribute of ${w.manifest.name}'s table has numeric values of two entities, so there is no difference to ask`);
  const out: (WorldTask & { seed: number })[] = [];
  for (const seed of seeds) {
    const { id, tasks } = differenceWorld(w, seed, (facts) => drawDifferenceTasks(facts, pairs, perWorld, seed), 'train');
    for (const task of tasks) out.push({ task, world: id, seed });
  }
  assertPoolApart(out, differenceSplit(w).items, `RL pool fresh-differences of ${w.dir}`);
  return out.map(({ task, world }) => ({ task, world }));
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
