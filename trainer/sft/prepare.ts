// Prepares a run folder's data: the world, the distilled transcripts the run trains on
// (the training pool minus every task that overlaps the held-out split), the held-out
// teacher transcripts (for held-out loss and span accuracy), and the tokenizer. Every
// file is written atomically, so a killed preparation leaves nothing half-written.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DistillStats, ToolEnv, TraceRow, distill, makeStubTeacher } from '../../core/distill';
import { findOverlaps } from '../../core/overlap';
import { BpeTokenizer, type Tokenizer, anyTokenizerFromJsonText, canonicalTokenizerJson, tokenizerConfig, trainBpe } from '../../core/tokenizer';
import { PoolName, trainingPool } from '../../core/trainingPool';
import type { Task } from '../../core/types';
import { TASK_FACTS, buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../../core/world';
import { TRAINING_SEEDS, WorldId, assertNoEvaluationNames, freshTrainingTasks, namesTrainingMustNotSee, loadedWorldId, worldEnv, worldName } from '../../core/worlds';
import { type DerivedSpec, deriveFacts, withOwnNames } from '../../core/derivedWorlds';
import { PyRandom } from '../../core/pyrandom';
import { overlapKey } from '../../core/overlap';
import { stubTeacherOptions, type Augmentation, type Recipe } from './recipes';
import { rowToPassage } from '../../core/worldRows';
import type { McpTool } from '../../core/tools/schemas';
import { transcriptToolViolation } from '../../core/worldTools';
import { buildFactWorld, isHinted } from '../../core/worldSource';
import { LoadedWorld, derivedBuildOptions, freshSpecOf, runWorld, sha256File, writeWorldFiles } from '../../store/worldFolder';
import { INPUT_LIMITS, InputError, exists, readInputText, readJsonlRows, writeFileAtomic, writeJsonAtomic, writeJsonlAtomic } from '../../store/files';
import { CORPUS_FILE, DATA_DIR, DEV_FILE, HELDOUT_FILE, HELDOUT_TRACES_FILE, PREPARED_FILE, RUN_WORLD_DIR, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, TRAIN_FILE, TRAIN_TASKS_FILE, TRAIN_TRACES_FILE, WORLD_FORMAT, WORLD_MANIFEST, type WorldManifest } from '../../core/protocol/folders';

export const WORLD_SEED = 0;
export const SAMPLES_PER_TASK = 4;

export interface PreparedData {
  corpusSize: number;
  train: { tasks: Task[]; rows: TraceRow[]; excluded: number; yield: Record<string, { kept: number; tasks: number }> };
  /** Counterfactual-value training worlds (the recipe's augmentation), when it has one. */
  augment?: { worlds: string[]; tasks: number; rows: number; ownNames?: number; yield: Record<string, { kept: number; tasks: number }> };
  heldout: { tasks: Task[]; rows: TraceRow[]; yield: Record<string, { kept: number; tasks: number }> };
  overlap: { exact: number; swapped: number };
  tokenizer: Tokenizer;
  tokenizerSeconds: number;
}

/**
 * A run's tokenizer given rather than trained: `train sft --base DIR` with the model's own
 * Hugging Face tokenizer (the base's tokenizer.json plus the wire specials as added tokens).
 */
export interface GivenTokenizer {
  /** tokenizer.json's text, compact. */
  json: string;
  /** tokenizer_config.json to write beside it. */
  config: Record<string, unknown>;
  /** Where it came from, for data/prepared.json. */
  from: string;
}

/** The trained tokenizer, or the given one (no BPE training). */
function runTokenizer(given: GivenTokenizer | undefined, train: () => BpeTokenizer): Tokenizer {
  return given ? anyTokenizerFromJsonText(given.json) : train();
}

/** A renamed copy's world: its source world's name and this suffix (one world in the counts, its copies apart). */
export const OWN_NAMES_SUFFIX = '/own-names';

/** Where the renamed copies' names are drawn: one stream per preparation, reproducible. */
const OWN_NAMES_SEED = 400_001;

type AugmentTaskRow = ReturnType<typeof taskToRow> & { world: string; derived: true };

/**
 * `count` copies of the counterfactual worlds' transcripts (drawn without repeats until each
 * was copied once), each with its entities renamed by names of its own (core/derivedWorlds.ts
 * withOwnNames), none of them a name of an evaluation split or RL pool (asserted).
 */
function ownNameCopies(
  rows: readonly (TraceRow & { world: string })[],
  taskOf: (row: TraceRow & { world: string }) => Task | undefined,
  count: number,
  entities: readonly string[],
  avoid: ReadonlySet<string>,
  purpose: string,
  kinShare = 0,
  options: { varied?: boolean; sameAttributeShare?: number } = {},
): { rows: (TraceRow & { world: string })[]; tasks: AugmentTaskRow[] } {
  const out: { rows: (TraceRow & { world: string })[]; tasks: AugmentTaskRow[] } = { rows: [], tasks: [] };
  const usable = rows.filter((r) => taskOf(r) !== undefined);
  if (count <= 0 || usable.length === 0) return out;
  const sameShare = options.sameAttributeShare ?? 0;
  const pairs = sameShare > 0 ? usable.filter((r) => asksOneAttributeOfTwo(taskOf(r)!)) : [];
  const rng = new PyRandom(OWN_NAMES_SEED);
  let order: number[] = [];
  let pairOrder: number[] = [];
  for (let k = 0; k < count; k++) {
    let row: TraceRow & { world: string };
    // Drawn only for recipes that ask for pairs (and kin names, below), so the other recipes' copies stay as they were.
    if (pairs.length > 0 && rng.random() < sameShare) {
      if (pairOrder.length === 0) {
        pairOrder = pairs.map((_, i) => i);
        rng.shuffle(pairOrder);
      }
      row = pairs[pairOrder.pop()!]!;
    } else {
      if (order.length === 0) {
        order = usable.map((_, i) => i);
        rng.shuffle(order);
      }
      row = usable[order.pop()!]!;
    }
    const kin = kinShare > 0 && rng.random() < kinShare;
    const copy = withOwnNames(row.text, taskOf(row)!, entities, rng, avoid, kin, options.varied ?? false);
    assertNoEvaluationNames([copy.task], purpose, avoid);
    const world = row.world + OWN_NAMES_SUFFIX;
    out.rows.push({ task: copy.task.question, text: copy.text, kind: row.kind, world });
    out.tasks.push({ ...taskToRow(copy.task), world, derived: true });
  }
  return out;
}

/** How the renamed copies were drawn, for the augmentation's log line ('' for the plain draw). */
function copiesDrawn(augment: Augmentation): string {
  const parts = [
    ...((augment.ownNamesSameAttribute ?? 0) > 0 ? [`${Math.round(100 * augment.ownNamesSameAttribute!)}% from questions asking one attribute of two names`] : []),
    ...(augment.ownNamesVaried ? ['varied names: no syllable twice in a row, numbers of other widths'] : []),
  ];
  return parts.length > 0 ? ` (${parts.join('; ')})` : '';
}

/** A two-name task asking the same attribute of both ("the publication year of A ... of B"). */
export function asksOneAttributeOfTwo(task: Task): boolean {
  const f = task.hints.facts;
  return f.length === 2 && f[0]![1] === f[1]![1] && f[0]![0] !== f[1]![0];
}

export const dataFiles = (runDir: string) => ({
  trainTraces: path.join(runDir, DATA_DIR, TRAIN_TRACES_FILE),
  heldoutTraces: path.join(runDir, DATA_DIR, HELDOUT_TRACES_FILE),
  trainTasks: path.join(runDir, DATA_DIR, TRAIN_TASKS_FILE),
  tokenizer: path.join(runDir, TOKENIZER_FILE),
  /** How the data and tokenizer were made (TOKENIZER_DATA, the augmentation drawn); absent in older runs. */
  prepared: path.join(runDir, DATA_DIR, PREPARED_FILE),
});

/** The files prepareRunData writes, relative to the run folder. */
const PREPARED_FILES = [
  ...[CORPUS_FILE, TRAIN_FILE, HELDOUT_FILE, DEV_FILE, WORLD_MANIFEST].map((f) => `${RUN_WORLD_DIR}/${f}`),
  ...[TRAIN_TRACES_FILE, HELDOUT_TRACES_FILE, TRAIN_TASKS_FILE, PREPARED_FILE].map((f) => `${DATA_DIR}/${f}`),
  TOKENIZER_FILE,
];
const TRAIN_TRACES_PATH = `${DATA_DIR}/${TRAIN_TRACES_FILE}`;

/** Throws (naming what is there and what is missing) when any file prepareRunData writes exists. */
function refuseToOverwriteData(runDir: string): void {
  const present = PREPARED_FILES.filter((f) => exists(path.join(runDir, f)));
  if (present.length === 0) return;
  throw new InputError(
    `${runDir} already holds ${present.join(', ')}: refusing to build the default data over it` +
      (present.includes(TRAIN_TRACES_PATH) ? '' : ` (it has no ${TRAIN_TRACES_PATH}, the transcripts to train on: add it, or use an empty folder)`),
  );
}

/**
 * The text a run's tokenizer is trained on (TOKENIZER_DATA records it in the run): the
 * world's passages, the training transcripts and the augmentation's; never held-out text.
 */
export function tokenizerText(passages: readonly string[], trainRows: readonly TraceRow[], augmentRows: readonly TraceRow[]): string[] {
  return [...passages, ...trainRows.map((r) => r.text), ...augmentRows.map((r) => r.text)];
}

/**
 * A run's tokenizer stops at this many tokens: the merges are the frequent pairs, so a name
 * never seen is cut into pieces the training text holds many times (trained rows), not into
 * merges of one other name seen twice (docs/decisions.md, "New names").
 */
export const RUN_VOCAB_CAP = 1024;

/** What the tokenizer of a run this code prepares was trained on (data/prepared.json; a run without it is older). */
export const TOKENIZER_DATA = { version: 2, vocabCap: RUN_VOCAB_CAP, text: 'passages + training transcripts + augmentation (no held-out text)' } as const;

/** data/prepared.json: how the tokenizer was trained and what the augmentation drew. */
export interface PreparedRecord {
  tokenizer: typeof TOKENIZER_DATA | { given: string };
  augmentation: { worlds: number; rows: number; ownNames: number } | null;
}

function preparedRecord(augment: PreparedData['augment'], given?: GivenTokenizer): PreparedRecord {
  return { tokenizer: given ? { given: given.from } : TOKENIZER_DATA, augmentation: augment ? { worlds: augment.worlds.length, rows: augment.rows, ownNames: augment.ownNames ?? 0 } : null };
}

/** A run's data/prepared.json, or null for a run made before it was written (or data brought by hand). */
export function readPreparedRecord(runDir: string): PreparedRecord | null {
  const file = dataFiles(runDir).prepared;
  if (!exists(file)) return null;
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as PreparedRecord;
  } catch (err) {
    throw new InputError(`${file}: not JSON (${(err as Error).message.split('\n')[0]})`);
  }
}

/**
 * Builds the default world and distills it with the stub teacher into `runDir`. Never
 * writes over a file that is there (data brought by hand, e.g. distilled with a paid
 * teacher): such a folder is refused, naming what it holds and what it lacks.
 */
export function prepareRunData(
  runDir: string,
  pool: PoolName,
  log: (line: string) => void = () => {},
  recipe: Pick<Recipe, 'augment' | 'teacherTopHit' | 'teacherNotes' | 'teacherVerdict'> = {},
  given?: GivenTokenizer,
): PreparedData {
  refuseToOverwriteData(runDir);
  const augment = recipe.augment;
  const teacherFor = (tasks: Task[], env: ToolEnv) => makeStubTeacher(tasks, stubTeacherOptions(recipe, env));
  log(`building the world (seed ${WORLD_SEED})`);
  const corpus = buildCorpus(WORLD_SEED);
  const split = makeTaskPool(WORLD_SEED);
  writeJsonlAtomic(path.join(runDir, RUN_WORLD_DIR, CORPUS_FILE), corpus.map(passageToRow));
  writeJsonlAtomic(path.join(runDir, RUN_WORLD_DIR, TRAIN_FILE), split.train.map(taskToRow));
  writeJsonlAtomic(path.join(runDir, RUN_WORLD_DIR, HELDOUT_FILE), split.heldout.map(taskToRow));

  const training = trainingPool(pool, split.train, split.heldout);
  log(`distilling with the stub teacher: ${training.tasks.length} training tasks (${pool} pool, ${training.excluded.length} overlapping held-out excluded), ${split.heldout.length} held-out`);
  const env = new ToolEnv(corpus);
  const run = (tasks: Task[]) => {
    const stats: DistillStats = { perKind: {} };
    const rows = distill(tasks, teacherFor(tasks, env), env, SAMPLES_PER_TASK, stats);
    const y: Record<string, { kept: number; tasks: number }> = {};
    for (const [k, s] of Object.entries(stats.perKind)) y[k] = { kept: s.kept, tasks: s.tasks };
    return { rows, y };
  };
  const tr = run(training.tasks);
  const he = run(split.heldout);
  // Augmentation: fresh training worlds, each distilled against its own corpus. Their rows
  // and tasks carry a "world" key (extra keys come after the seed's); the overlap contract
  // holds in every world: no task with a held-out task's (kind, facts) is kept.
  const augRows: (TraceRow & { world: string })[] = [];
  const augTasks: (ReturnType<typeof taskToRow> & { world: string; derived?: true })[] = [];
  let augmentInfo: PreparedData['augment'];
  if (augment && augment.worlds > 0 && augment.share > 0) {
    const heldKeys = new Set(split.heldout.map(overlapKey));
    const y: Record<string, { kept: number; tasks: number }> = {};
    const names: string[] = [];
    const valueTasks = new Map<string, Task>(); // world|question of the counterfactual worlds' tasks, for their renamed copies
    const ids: WorldId[] = [
      ...Array.from({ length: augment.worlds }, (_, i): WorldId => ({ kind: 'values', seed: TRAINING_SEEDS.augment + i })),
      ...Array.from({ length: augment.entityWorlds ?? 0 }, (_, i): WorldId => ({ kind: 'entities', seed: TRAINING_SEEDS.augmentEntities + i })),
    ];
    for (const id of ids) {
      const tasks = freshTrainingTasks(id, augment.perShape, heldKeys, { balanceCompares: augment.balanceCompares ?? false });
      const stats: DistillStats = { perKind: {} };
      const rows = distill(tasks, teacherFor(tasks, worldEnv(id)), worldEnv(id), 1, stats);
      for (const [k, s2] of Object.entries(stats.perKind)) {
        const e = (y[k] ??= { kept: 0, tasks: 0 });
        e.kept += s2.kept;
        e.tasks += s2.tasks;
      }
      names.push(worldName(id));
      for (const r of rows) augRows.push({ ...r, world: worldName(id) });
      for (const t of tasks) {
        augTasks.push({ ...taskToRow(t), world: worldName(id) });
        if (id.kind === 'values') valueTasks.set(`${worldName(id)}|${t.question}`, t);
      }
    }
    const ownNames = augment.ownNames ?? 0;
    if (ownNames > 0) {
      const copies = ownNameCopies(
        augRows.filter((r) => valueTasks.has(`${r.world}|${r.task}`)),
        (r) => valueTasks.get(`${r.world}|${r.task}`),
        ownNames,
        [...new Set(TASK_FACTS.map((f) => f[0]))],
        namesTrainingMustNotSee(),
        'the renamed copies of the textbook augmentation',
        augment.ownNamesKin ?? 0,
        { varied: augment.ownNamesVaried ?? false, sameAttributeShare: augment.ownNamesSameAttribute ?? 0 },
      );
      augRows.push(...copies.rows);
      augTasks.push(...copies.tasks);
    }
    augmentInfo = { worlds: names, tasks: augTasks.length, rows: augRows.length, ...(ownNames > 0 ? { ownNames } : {}), yield: y };
    const entityWorlds = augment.entityWorlds ?? 0;
    log(
      `augmentation: ${augRows.length} transcripts from ${augment.worlds} counterfactual-value worlds (${names[0]} .. ${names[augment.worlds - 1]})` +
        (entityWorlds > 0 ? ` and ${entityWorlds} new-entity worlds (${names[augment.worlds]} .. ${names[names.length - 1]})` : '') +
        (ownNames > 0 ? `, ${ownNames} of them copies with names of their own` : '') +
        ((augment.ownNamesKin ?? 0) > 0 ? ` (${Math.round(100 * augment.ownNamesKin!)}% of the copies with kin names)` : '') +
        copiesDrawn(augment),
    );
  }
  const files = dataFiles(runDir);
  writeJsonlAtomic(files.trainTraces, [...tr.rows, ...augRows]);
  writeJsonlAtomic(files.heldoutTraces, he.rows);
  writeJsonlAtomic(files.trainTasks, [...training.tasks.map(taskToRow), ...augTasks]);

  log(given ? `the tokenizer is ${given.from}` : 'training the tokenizer on the world');
  const t0 = Date.now();
  // What the student trains on and nothing else: never the held-out transcripts (what eval
  // asks), and the augmentation's text, so the pieces of the new names and values it copies are trained ones.
  const tokenizer = runTokenizer(given, () => trainBpe(tokenizerText(corpus.map((p) => p.text), tr.rows, augRows), { vocabSize: RUN_VOCAB_CAP }));
  const tokenizerSeconds = (Date.now() - t0) / 1000;
  writeFileAtomic(files.tokenizer, canonicalTokenizerJson(tokenizer));
  writeJsonAtomic(path.join(runDir, TOKENIZER_CONFIG_FILE), given?.config ?? tokenizerConfig());
  writeJsonAtomic(files.prepared, preparedRecord(augmentInfo, given));
  const overlaps = findOverlaps(split.train, split.heldout);
  return {
    corpusSize: corpus.length,
    train: { tasks: training.tasks, rows: tr.rows, excluded: training.excluded.length, yield: tr.y },
    ...(augmentInfo ? { augment: augmentInfo } : {}),
    heldout: { tasks: split.heldout, rows: he.rows, yield: he.y },
    overlap: { exact: overlaps.exact.length, swapped: overlaps.swapped.length },
    tokenizer,
    tokenizerSeconds,
  };
}

/**
 * The data a run trains on, there or made: with `data/train.traces.jsonl` present the data
 * is used as it is (a missing tokenizer.json is trained from it; nothing in data/ is ever
 * rewritten); with no data at all the default world is built and distilled with the stub
 * teacher; anything in between is refused (prepareRunData says what is missing).
 */
export async function ensureRunData(
  runDir: string,
  pool: PoolName,
  log: (line: string) => void = () => {},
  recipe: Pick<Recipe, 'augment' | 'teacherTopHit' | 'teacherNotes' | 'teacherVerdict'> = {},
  source?: WorldSource,
  stop: () => boolean = () => false,
  given?: GivenTokenizer,
): Promise<'present' | 'tokenizer-trained' | 'prepared'> {
  const files = dataFiles(runDir);
  if (source) {
    if (exists(files.trainTraces)) {
      // A run's data stays the world it was made from: another --world would mislead.
      const mine = runWorld(runDir);
      if (!mine) throw new InputError(`${runDir} holds data of the textbook world; --world ${source.world.dir} needs a new run folder`);
      if (mine.id.seed !== source.world.id.seed) throw new InputError(`${runDir} was built from the world in ${mine.dir} (${mine.manifest?.name ?? 'unnamed'}), not ${source.world.dir}: use a new run folder`);
      if (source.traces !== undefined) throw new InputError(`${runDir} already holds data/train.traces.jsonl: --traces needs a new run folder`);
      return 'present';
    }
    refuseToOverwriteData(runDir);
    await prepareWorldRunDataStoppable(runDir, source, log, recipe, stop, given); // a user's world can be big: it hears a stop
    return 'prepared';
  }
  if (exists(files.trainTraces)) {
    if (exists(files.tokenizer)) return 'present';
    if (given) {
      log(`${runDir} has data/train.traces.jsonl but no tokenizer.json: writing ${given.from} (data/ is left as it is)`);
      writeFileAtomic(files.tokenizer, given.json);
      writeJsonAtomic(path.join(runDir, TOKENIZER_CONFIG_FILE), given.config);
      return 'tokenizer-trained';
    }
    log(`${runDir} has data/train.traces.jsonl but no tokenizer.json: training the tokenizer from the data there (data/ is left as it is)`);
    trainTokenizerFromRunData(runDir, log);
    return 'tokenizer-trained';
  }
  refuseToOverwriteData(runDir);
  log(`${runDir} has no data/: building the default world and distilling it with the stub teacher`);
  prepareRunData(runDir, pool, log, recipe, given);
  return 'prepared';
}

/**
 * tokenizer.json (and tokenizer_config.json) from the data in a run folder: the world's
 * passages (world/corpus.jsonl, else the default world's) and the training transcripts. For data the stub teacher made this is the tokenizer prepareRunData trains.
 */
export function trainTokenizerFromRunData(runDir: string, log: (line: string) => void = () => {}): BpeTokenizer {
  const files = dataFiles(runDir);
  const corpusFile = path.join(runDir, RUN_WORLD_DIR, CORPUS_FILE);
  const passages = exists(corpusFile)
    ? readJsonlRows(corpusFile).map(({ value, where }) => {
        try {
          return rowToPassage(value, where).text;
        } catch (err) {
          throw new InputError((err as Error).message);
        }
      })
    : buildCorpus(WORLD_SEED).map((p) => p.text);
  // The training transcripts only: held-out text is what eval asks (as prepareRunData's).
  const traces = readTraceRows(files.trainTraces);
  const t0 = Date.now();
  const tokenizer = trainBpe([...passages, ...traces.map((r) => r.text)], { vocabSize: RUN_VOCAB_CAP });
  log(`trained the tokenizer on ${passages.length} passages and ${traces.length} training transcripts (no held-out text) in ${((Date.now() - t0) / 1000).toFixed(1)} s (${tokenizer.vocabSize} tokens)`);
  writeFileAtomic(files.tokenizer, canonicalTokenizerJson(tokenizer));
  writeJsonAtomic(path.join(runDir, TOKENIZER_CONFIG_FILE), tokenizerConfig());
  return tokenizer;
}

/**
 * Trace rows ({"task", "text", "kind"}, plus "world" in a fresh world's row): each must be an
 * object with a string "text". With a world's tool list (`--traces` of a world with tools.json)
 * every call in a transcript must keep to it: a row with a tool the list leaves out or an
 * argument its schema refuses is an error naming the row, as any other bad row is.
 */
export function readTraceRows(file: string, tools?: readonly McpTool[] | null): { task: string; text: string; kind: string; world?: string }[] {
  return readJsonlRows(file).map(({ value, where }) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InputError(`${where}: expected a trace row {"task", "text", "kind"}`);
    const r = value as Record<string, unknown>;
    if (typeof r['text'] !== 'string') throw new InputError(`${where}: "text" must be a string (the transcript)`);
    const off = tools ? transcriptToolViolation(r['text'], tools) : null;
    if (off) throw new InputError(`${where}: the call ${off.call} is outside the world's tool list: ${off.why} (train on calls the world's tools take: distill again with --world)`);
    for (const k of ['task', 'kind', 'world']) if (r[k] !== undefined && typeof r[k] !== 'string') throw new InputError(`${where}: "${k}" must be a string`);
    const world = r['world'] as string | undefined;
    return { task: (r['task'] as string | undefined) ?? '', text: r['text'], kind: (r['kind'] as string | undefined) ?? '', ...(world !== undefined ? { world } : {}) };
  });
}

/** The run's tokenizer, either kind (the lab's BPE, or a base model's Hugging Face tokenizer with the wire specials added). */
export function loadTokenizer(runDir: string): Tokenizer {
  const file = dataFiles(runDir).tokenizer;
  if (!exists(file)) throw new InputError(`${file} is missing: the run folder has no tokenizer`);
  const text = readInputText(file, 'the tokenizer', INPUT_LIMITS.tokenizer);
  try {
    return anyTokenizerFromJsonText(text);
  } catch (err) {
    throw new InputError(`${file}: ${(err as Error).message.replace(/^tokenizer\.json: /, '')}`);
  }
}

// ---- a user's world (docs/worlds.md) ---------------------------------------------------

/** The world a run is made from, and optionally trajectories distilled elsewhere to train on. */
export interface WorldSource {
  world: LoadedWorld;
  /** A traces file (e.g. `distill --teacher http --world DIR`): trained on instead of the stub teacher's. */
  traces?: string;
}

/**
 * A run folder from a user's world: the world copied into world/ (with its world.json, so
 * eval and run find it again), the train split's transcripts (the stub teacher's over the
 * tasks with hints, or the given traces file), minus every task that overlaps held-out; the
 * held-out transcripts (stub teacher, tasks with hints) and the tokenizer over it all.
 */
export function prepareWorldRunData(runDir: string, source: WorldSource, log: (line: string) => void = () => {}, recipe: Pick<Recipe, 'augment' | 'teacherTopHit' | 'teacherNotes' | 'teacherVerdict'> = {}): PreparedData {
  const work = worldRunData(runDir, source, log, recipe);
  for (;;) {
    const r = work.next();
    if (r.done) return r.value;
  }
}

/**
 * A stop heard before a job's first step (data preparation, GRPO's pre-screen): there is no
 * checkpoint to stop with, so the job ends there. `left` says what the run folder holds
 * (never a half-written file) and how a retry goes.
 */
export class Stopped extends Error {
  constructor(
    readonly phase: string,
    readonly left: string,
  ) {
    super(`stopped during ${phase}; nothing half-written: ${left}`);
    this.name = 'Stopped';
  }
}

/** Between two turns of the event loop, stoppable work runs at most this long: a signal is heard within it. */
const TURN_MS = 50;

/**
 * prepareWorldRunData that can be stopped (Ctrl-C, SIGTERM, the panel's Stop): a signal's
 * handler runs only when the event loop turns, so the distillation gives it a turn every
 * TURN_MS; `stop()` true there ends it with Stopped, before anything was written.
 */
export async function prepareWorldRunDataStoppable(
  runDir: string,
  source: WorldSource,
  log: (line: string) => void,
  recipe: Pick<Recipe, 'augment' | 'teacherTopHit' | 'teacherNotes' | 'teacherVerdict'>,
  stop: () => boolean,
  given?: GivenTokenizer,
): Promise<PreparedData> {
  const work = worldRunData(runDir, source, log, recipe, given);
  for (let turn = Date.now(); ;) {
    const r = work.next();
    if (r.done) return r.value;
    if (Date.now() - turn < TURN_MS) continue;
    await new Promise<void>((resolve) => setImmediate(resolve));
    turn = Date.now();
    if (stop()) {
      work.return(undefined as never);
      throw new Stopped('the data preparation', `nothing was written to ${runDir}; the same command prepares it again`);
    }
  }
}

/** prepareWorldRunData's work, yielding between tasks of the distillation (nothing is written until it is all made). */
function* worldRunData(
  runDir: string,
  source: WorldSource,
  log: (line: string) => void,
  recipe: Pick<Recipe, 'augment' | 'teacherTopHit' | 'teacherNotes' | 'teacherVerdict'>,
  given?: GivenTokenizer,
): Generator<void, PreparedData> {
  const w = source.world;
  const augmentable = recipe.augment !== undefined && recipe.augment.share > 0 && recipe.augment.worlds + (recipe.augment.entityWorlds ?? 0) > 0;
  if (augmentable && !(w.facts && w.manifest)) log("the recipe's augmentation derives worlds from a fact table: this world has none (a documents world, or built before worlds kept facts.json), so it is not used");
  const manifest: WorldManifest = w.manifest ?? {
    format: WORLD_FORMAT,
    name: path.basename(w.dir),
    source: { kind: 'folder', files: [CORPUS_FILE, TRAIN_FILE, HELDOUT_FILE].map((f) => ({ path: path.join(w.dir, f), sha256: sha256File(path.join(w.dir, f)) })) },
    made: { by: 'a world folder without world.json', seed: 0, split: { train: w.train.length, heldout: w.heldout.length, dev: w.dev.length }, created: new Date().toISOString() },
    counts: { passages: w.corpus.length, tasks: {} },
    overlap: { excluded: 0, exact: 0, swapped: 0 },
    unsolvable: {},
  };
  const training = trainingPool('seed', w.train, w.heldout);
  const env = worldEnv(w.id); // the world's corpus, and its system prompt (its tool list's tool line)
  const stubRun = function* (tasks: Task[]): Generator<void, { rows: TraceRow[]; y: Record<string, { kept: number; tasks: number }>; hintless: number }> {
    const hinted = tasks.filter(isHinted);
    const stats: DistillStats = { perKind: {} };
    // The recipe's teacher knobs (k = 1 searches, restated facts), as for the textbook world.
    const teacher = makeStubTeacher(hinted, stubTeacherOptions(recipe, env));
    // A task at a time (the same rows as one call): a big world distills for minutes.
    const rows: TraceRow[] = [];
    for (const task of hinted) {
      for (const row of distill([task], teacher, env, SAMPLES_PER_TASK, stats)) rows.push(row);
      yield;
    }
    const y: Record<string, { kept: number; tasks: number }> = {};
    for (const [k, st] of Object.entries(stats.perKind)) y[k] = { kept: st.kept, tasks: st.tasks };
    return { rows, y, hintless: tasks.length - hinted.length };
  };
  let trainRows: TraceRow[];
  let trainYield: Record<string, { kept: number; tasks: number }> = {};
  let trainTasks = training.tasks;
  if (source.traces !== undefined) {
    // Trajectories from another teacher: only those of this world's training tasks are kept.
    const byQuestion = new Map(training.tasks.map((t) => [t.question, t]));
    const excluded = new Set(training.excluded.map((t) => t.question));
    const held = new Set(w.heldout.map((t) => t.question));
    const rows = readTraceRows(source.traces, w.tools);
    let unknown = 0;
    let overlapping = 0;
    trainRows = [];
    for (const r of rows) {
      if (excluded.has(r.task) || held.has(r.task)) overlapping++;
      else if (!byQuestion.has(r.task)) unknown++;
      else trainRows.push({ task: r.task, text: r.text, kind: byQuestion.get(r.task)!.kind });
    }
    if (trainRows.length === 0) throw new InputError(`${source.traces}: none of its ${rows.length} trajectories is of a training task of ${w.dir} (${overlapping} overlap held-out, ${unknown} of other questions)`);
    const kept = new Set(trainRows.map((r) => r.task));
    trainTasks = training.tasks.filter((t) => kept.has(t.question));
    log(`training on ${trainRows.length} trajectories of ${source.traces} (${kept.size} tasks; left out: ${overlapping} overlapping held-out, ${unknown} of questions not in the train split)`);
  } else {
    log(`distilling ${w.manifest?.name ?? w.dir} with the stub teacher: ${training.tasks.length} training tasks, then ${w.heldout.length} held-out`);
    const tr = yield* stubRun(training.tasks);
    trainRows = tr.rows;
    trainYield = tr.y;
    const solved = new Set(tr.rows.map((r) => r.task));
    trainTasks = training.tasks.filter((t) => solved.has(t.question));
    log(`distilled ${w.manifest?.name ?? w.dir} with the stub teacher: ${tr.rows.length} transcripts from ${training.tasks.length} training tasks (${training.excluded.length} overlapping held-out excluded, ${tr.hintless} without hints left out)`);
    if (tr.rows.length === 0) throw new InputError(`the stub teacher solved none of the training tasks of ${w.dir} (${tr.hintless} have no hints): distill with --teacher http and pass --traces FILE`);
  }
  const aug = augmentable && w.facts && w.manifest ? yield* worldAugmentation(w, recipe, log) : null;
  const he = yield* stubRun(w.heldout);
  const files = dataFiles(runDir);
  const t0 = Date.now();
  // Never the held-out transcripts (their questions and answers are what eval asks); the
  // augmentation's text is in, so the pieces of names and values the student copies are trained ones.
  const tokenizer = runTokenizer(given, () => trainBpe(tokenizerText(w.corpus.map((p) => p.text), trainRows, aug?.rows ?? []), { vocabSize: RUN_VOCAB_CAP }));
  const tokenizerSeconds = (Date.now() - t0) / 1000;
  // Everything is made before the first write, and a failed write takes back what this call
  // wrote: a failed or stopped preparation leaves no file a retry would refuse to build over.
  const made: string[] = [];
  const write = (target: string, writeIt: () => void): void => {
    const fresh = !exists(target);
    writeIt();
    if (fresh) made.push(target);
  };
  try {
    write(path.join(runDir, RUN_WORLD_DIR), () => writeWorldFiles(path.join(runDir, RUN_WORLD_DIR), w, manifest, w.tools));
    write(files.trainTraces, () => writeJsonlAtomic(files.trainTraces, [...trainRows, ...(aug?.rows ?? [])]));
    write(files.heldoutTraces, () => writeJsonlAtomic(files.heldoutTraces, he.rows));
    // Rows carry the world's id, so contamination is counted in this world (trainer/sft/sft.ts trainingKeysOf).
    const taskRows = [...trainTasks.map((t) => ({ ...taskToRow(t), world: worldName(w.id) })), ...(aug?.tasks ?? [])];
    write(files.trainTasks, () => writeJsonlAtomic(files.trainTasks, taskRows));
    write(files.tokenizer, () => writeFileAtomic(files.tokenizer, canonicalTokenizerJson(tokenizer)));
    write(path.join(runDir, TOKENIZER_CONFIG_FILE), () => writeJsonAtomic(path.join(runDir, TOKENIZER_CONFIG_FILE), given?.config ?? tokenizerConfig()));
    write(files.prepared, () => writeJsonAtomic(files.prepared, preparedRecord(aug?.info, given)));
  } catch (err) {
    for (const f of made) fs.rmSync(f, { recursive: true, force: true });
    throw err;
  }
  const overlaps = findOverlaps(w.train, w.heldout);
  return {
    corpusSize: w.corpus.length,
    train: { tasks: trainTasks, rows: trainRows, excluded: training.excluded.length, yield: trainYield },
    ...(aug ? { augment: aug.info } : {}),
    heldout: { tasks: w.heldout, rows: he.rows, yield: he.y },
    overlap: { exact: overlaps.exact.length, swapped: overlaps.swapped.length },
    tokenizer,
    tokenizerSeconds,
  };
}

/** The names of a fact world's fresh-entities and dev-entities splits: no SFT augmentation or RL pool of it may hold one. */
export function worldEvaluationNames(w: LoadedWorld): Set<string> {
  const names = new Set<string>();
  for (const split of ['fresh-entities', 'dev-entities'] as const) {
    for (const seed of freshSpecOf(w, split)?.seeds ?? []) for (const name of deriveFacts(w.facts!, { kind: 'entities', seed }).renamed.values()) names.add(name);
  }
  return names;
}

/**
 * Training tasks of one world derived from a user's table with a training seed (the SFT
 * augmentation's and the RL pools' alike): rendered with the parent's build settings and tool
 * list, up to `perShape` tasks of each shape, none with a held-out or dev task's (kind, facts)
 * read back to the parent's names, and none naming an entity of an evaluation split (asserted
 * here, for every pool drawn). The world is registered so its tools answer.
 */
export function derivedWorldTasks(w: LoadedWorld, spec: DerivedSpec, perShape: number, evalNames: ReadonlySet<string>, purpose: string): { id: WorldId; tasks: Task[] } {
  const evalKeys = new Set([...w.heldout, ...w.dev].map(overlapKey));
  const derived = deriveFacts(w.facts!, spec, evalNames);
  const back = new Map([...derived.renamed].map(([from, to]) => [to, from] as const));
  const built = buildFactWorld({ facts: derived.facts, lines: [], settings: {} }, { ...derivedBuildOptions(w), split: { heldout: 1, dev: 0 } });
  const inParentNames = (t: Task): Task => ({ ...t, hints: { ...t.hints, facts: t.hints.facts.map(([e, a]) => [back.get(e) ?? e, a] as [string, string]) } });
  const byShape = new Map<string, Task[]>();
  for (const t of [...built.train, ...built.heldout]) {
    if (evalKeys.has(overlapKey(inParentNames(t)))) continue;
    byShape.set(t.kind, [...(byShape.get(t.kind) ?? []), t]);
  }
  const rng = new PyRandom(7_919 + spec.seed);
  const chosen: Task[] = [];
  for (const list of byShape.values()) {
    rng.shuffle(list);
    chosen.push(...list.slice(0, perShape));
  }
  assertNoEvaluationNames(chosen, purpose, evalNames);
  const id: WorldId = loadedWorldId({ corpus: built.corpus, train: chosen, heldout: built.heldout, dev: [], tools: w.tools });
  return { id, tasks: chosen };
}

/**
 * The reading recipe's augmentation for a user's fact world (docs/worlds.md): worlds derived
 * from its own table with training seeds (counterfactual values; and new names, drawn apart
 * from every name of the world's fresh-entities split), each rendered and distilled by the
 * stub teacher against its own corpus (derivedWorldTasks), and the renamed copies.
 */
function* worldAugmentation(
  w: LoadedWorld,
  recipe: Pick<Recipe, 'augment' | 'teacherTopHit' | 'teacherNotes' | 'teacherVerdict'>,
  log: (line: string) => void,
): Generator<void, { rows: (TraceRow & { world: string })[]; tasks: AugmentTaskRow[]; info: NonNullable<PreparedData['augment']> }> {
  const augment = recipe.augment!;
  const facts = w.facts!;
  const evalNames = worldEvaluationNames(w);
  const specs = [
    ...Array.from({ length: augment.worlds }, (_, i) => ({ kind: 'values' as const, seed: TRAINING_SEEDS.augment + i })),
    ...Array.from({ length: augment.entityWorlds ?? 0 }, (_, i) => ({ kind: 'entities' as const, seed: TRAINING_SEEDS.augmentEntities + i })),
  ];
  const rows: (TraceRow & { world: string })[] = [];
  const tasks: AugmentTaskRow[] = [];
  const y: Record<string, { kept: number; tasks: number }> = {};
  const names: string[] = [];
  const valueTasks = new Map<string, Task>(); // world|question of the counterfactual worlds' tasks, for their renamed copies
  for (const spec of specs) {
    const { id, tasks: chosen } = derivedWorldTasks(w, spec, augment.perShape, evalNames, `augmentation world ${spec.kind}:${spec.seed} of ${w.dir}`);
    const env = worldEnv(id);
    const teacher = makeStubTeacher(chosen, stubTeacherOptions(recipe, env));
    const stats: DistillStats = { perKind: {} };
    for (const task of chosen) {
      for (const r of distill([task], teacher, env, 1, stats)) rows.push({ ...r, world: worldName(id) });
      tasks.push({ ...taskToRow(task), world: worldName(id), derived: true });
      if (spec.kind === 'values') valueTasks.set(`${worldName(id)}|${task.question}`, task);
      yield;
    }
    for (const [k, s2] of Object.entries(stats.perKind)) {
      const e = (y[k] ??= { kept: 0, tasks: 0 });
      e.kept += s2.kept;
      e.tasks += s2.tasks;
    }
    names.push(`${spec.kind}:${spec.seed}`);
  }
  const ownNames = augment.ownNames ?? 0;
  if (ownNames > 0) {
    const copies = ownNameCopies(
      rows.filter((r) => valueTasks.has(`${r.world}|${r.task}`)),
      (r) => valueTasks.get(`${r.world}|${r.task}`),
      ownNames,
      [...new Set(facts.map((f) => f[0]))],
      evalNames,
      `the renamed copies of ${w.dir}'s augmentation`,
      augment.ownNamesKin ?? 0,
      { varied: augment.ownNamesVaried ?? false, sameAttributeShare: augment.ownNamesSameAttribute ?? 0 },
    );
    rows.push(...copies.rows);
    tasks.push(...copies.tasks);
  }
  const entityWorlds = augment.entityWorlds ?? 0;
  log(
    `augmentation: ${rows.length} transcripts from ${augment.worlds} counterfactual-value worlds` +
      (entityWorlds > 0 ? ` and ${entityWorlds} new-name worlds` : '') +
      (ownNames > 0 ? `, ${ownNames} of them copies with names of their own` : '') +
      ((augment.ownNamesKin ?? 0) > 0 ? ` (${Math.round(100 * augment.ownNamesKin!)}% with kin names)` : '') +
      copiesDrawn(augment) +
      ` derived from ${w.manifest!.name}'s table (no name of the ${evalNames.size} in fresh-entities and dev-entities), drawn at ${Math.round(100 * augment.share)}% of the batches`,
  );
  return { rows, tasks, info: { worlds: names, tasks: tasks.length, rows: rows.length, ...(ownNames > 0 ? { ownNames } : {}), yield: y } };
}
