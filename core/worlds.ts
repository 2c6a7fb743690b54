// Worlds from a fact table. The seed's world is one table (its 28 facts) rendered through
// its templates, distractors and task shapes; a counterfactual world keeps the entities and
// attributes and resamples every value, a new-entity world also renames every entity. Each
// is rendered by the same code (core/world.ts with the table as data), so its gold answers
// come from its own table — and a student that answers a fresh world's question with the
// seed's value has remembered, not read. World seeds are partitioned by purpose: the
// evaluation splits' seeds are reserved, and no training pool, augmentation or RL pool may
// draw from them (assertNotReserved).
import { differenceGold, drawDifferenceTasks, splitPairs } from './differenceTasks';
import { ToolEnv } from './env';
import { TEMPLATES, type Template } from './grammar';
import type { McpTool } from './tools/schemas';
import { systemPromptFor, templatesFor } from './worldTools';
import { overlapKey } from './overlap';
import { PyRandom } from './pyrandom';
import type { Passage, Task } from './types';
import { Fact, TASK_FACTS, buildCorpus, compareTask, doubleTask, isNum, lookupTask, makeTaskPool, sumTask } from './world';

/** How a world's table was made from the seed's; 'custom' is a user's world folder (docs/worlds.md). */
export type WorldKind = GeneratedWorldKind | 'custom';
export type GeneratedWorldKind = 'seed' | 'values' | 'entities';

/** A world made from the seed's table: its kind and seed rebuild it anywhere ("seed:0", "values:17", "entities:2000003"). */
export interface GeneratedWorldId {
  kind: GeneratedWorldKind;
  seed: number;
}

/**
 * A user's world (read from its folder, or derived from its table): no seed rebuilds it, so
 * its rows travel with its id, passed explicitly to every thread that needs them. Its seed
 * is a hash of the rows ("custom:N"): the same content always gets the same name.
 */
export interface LoadedWorldId {
  kind: 'custom';
  seed: number;
  rows: CustomWorld;
}

/** A world a task lives in. */
export type WorldId = GeneratedWorldId | LoadedWorldId;

export const SEED_WORLD: WorldId = { kind: 'seed', seed: 0 };

export function worldName(id: { kind: WorldKind; seed: number }): string {
  return `${id.kind}:${id.seed}`;
}

/** The user's worlds a world name may refer to, by name ("custom:N"). */
export type LoadedWorlds = ReadonlyMap<string, LoadedWorldId>;

/** The loaded worlds among `ids`, by name: what a reader of world names (a file, a worker message) is handed. */
export function loadedWorlds(ids: Iterable<WorldId>): Map<string, LoadedWorldId> {
  const out = new Map<string, LoadedWorldId>();
  for (const id of ids) if (id.kind === 'custom') out.set(worldName(id), id);
  return out;
}

/** A world from its name; a user's world ("custom:N") must be among `loaded`, as no seed rebuilds it. */
export function parseWorldName(name: string, loaded: LoadedWorlds = new Map()): WorldId {
  const m = /^(seed|values|entities|custom):(\d+)$/.exec(name);
  if (!m) throw new Error(`not a world name: ${JSON.stringify(name)} (expected seed:N, values:N, entities:N or custom:N)`);
  if (m[1] !== 'custom') return { kind: m[1] as GeneratedWorldKind, seed: Number(m[2]) };
  const id = loaded.get(name);
  if (!id) throw new Error(`world ${name} is a user's world that was not passed along with this name (${loaded.size ? `the loaded ones: ${[...loaded.keys()].join(', ')}` : 'no user world is loaded here'})`);
  return id;
}

/**
 * Value ranges that fit each attribute of the seed's table: [low, high] in steps of `step`.
 * Wide enough that a resampled value is almost never the seed's (and it is redrawn when it is).
 */
const VALUE_RANGES: Record<string, { low: number; high: number; step: number }> = {
  'hidden size': { low: 256, high: 2048, step: 64 },
  'layer count': { low: 6, high: 48, step: 1 },
  'vocabulary size': { low: 8192, high: 65536, step: 1024 },
  'query head count': { low: 4, high: 32, step: 1 },
  'key-value head count': { low: 1, high: 8, step: 1 },
  'head dimension': { low: 32, high: 256, step: 16 },
  'MLP inner dimension': { low: 512, high: 4096, step: 64 },
  'pretraining sequence length': { low: 1024, high: 8192, step: 512 },
  'mid-training sequence length': { low: 4096, high: 32768, step: 1024 },
  'RoPE base': { low: 1000, high: 100000, step: 500 },
  'parameter count in millions': { low: 20, high: 999, step: 1 },
  'pretraining token budget in billions': { low: 2, high: 300, step: 1 },
  'publication year': { low: 1990, high: 2025, step: 1 },
};

function drawValue(rng: PyRandom, attr: string, avoid: string): string {
  const r = VALUE_RANGES[attr];
  if (!r) throw new Error(`no value range for attribute '${attr}'`);
  const slots = Math.floor((r.high - r.low) / r.step) + 1;
  for (;;) {
    const v = String(r.low + r.step * rng.randrange(slots));
    if (v !== avoid) return v;
  }
}

const SYLLABLES = ['ka', 'lo', 'mi', 'ra', 'ven', 'tor', 'sil', 'da', 'nu', 'pe', 'zor', 'qui', 'bel', 'fa', 'gri', 'hol', 'jun', 'mar', 'ost', 'ty'];

function pseudoWord(rng: PyRandom, parts: number): string {
  let w = '';
  for (let i = 0; i < parts; i++) w += SYLLABLES[rng.randrange(SYLLABLES.length)];
  return w[0]!.toUpperCase() + w.slice(1);
}

/** The table of a world: the seed's, or one resampled (values; and names for 'entities'). */
export function worldFacts(id: WorldId): Fact[] {
  if (id.kind === 'seed') return [...TASK_FACTS];
  // Offset so that a world's draws never coincide with the seed's own corpus stream.
  const rng = new PyRandom(1_000_003 * (id.kind === 'values' ? 1 : 2) + id.seed);
  const rename = new Map<string, string>();
  if (id.kind === 'entities') {
    const taken = new Set(TASK_FACTS.map((f) => f[0]));
    if (isAugmentEntitySeed(id.seed)) for (const name of namesTrainingMustNotSee()) taken.add(name);
    // RL's new-entity pool shared 48 of the evaluation's 160 names: its worlds draw apart from them.
    else if (isRlEntitySeed(id.seed)) for (const name of evaluationEntityNames()) taken.add(name);
    for (const [ent] of TASK_FACTS) {
      if (rename.has(ent)) continue;
      let name: string;
      do {
        // Model entities keep the seed's "Name-NNNM" shape; papers get a pseudo-word.
        name = /-\d+M$/.test(ent) ? `${pseudoWord(rng, 2)}-${10 * (1 + rng.randrange(60))}M` : pseudoWord(rng, 2 + rng.randrange(2));
      } while (taken.has(name));
      taken.add(name);
      rename.set(ent, name);
    }
  }
  return TASK_FACTS.map(([ent, attr, val]): Fact => [rename.get(ent) ?? ent, attr, drawValue(rng, attr, val)]);
}

/** A world rendered: its table, its corpus (the seed's templates and distractors) and its task split. */
export interface World {
  id: WorldId;
  facts: Fact[];
  corpus: Passage[];
  train: Task[];
  heldout: Task[];
}

const worldCache = new Map<string, World>();

// ---- custom worlds (a user's world folder) --------------------------------------------

/** A user's world as read from its folder: the corpus and the splits it was written with. */
export interface CustomWorld {
  corpus: Passage[];
  train: Task[];
  heldout: Task[];
  dev: Task[];
  /** Its MCP tool list (tools.json), or null for the textbook's search and calc. */
  tools?: McpTool[] | null;
  /** A world derived from a user's fact table: the parent's table and renames, for `memorised`. */
  parent?: { kind: 'values' | 'entities'; facts: Fact[]; renamed: [string, string][] };
}

/** FNV-1a over the world's rows: the same folder content always gets the same id. */
function contentId(w: CustomWorld): number {
  let h = 0x811c9dc5;
  const feed = (s: string) => {
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
  };
  for (const p of w.corpus) feed(`${p.docId}\u0000${p.text}\u0001`);
  for (const split of [w.train, w.heldout, w.dev]) {
    for (const t of split) feed(`${t.question}\u0000${t.gold}\u0000${t.kind}\u0001`);
    feed('\u0002');
  }
  if (w.tools) feed(JSON.stringify(w.tools));
  return h;
}

/** A user's world's id, with its rows (nothing is registered: the id is the value later code is handed). */
export function loadedWorldId(w: CustomWorld): LoadedWorldId {
  return { kind: 'custom', seed: contentId(w), rows: w };
}

/** The call grammar of a world: a user's world's tool list narrows it; every other world has the textbook's. */
export function worldTemplates(id: WorldId): readonly Template[] {
  if (id.kind !== 'custom') return TEMPLATES;
  const tools = id.rows.tools;
  return tools ? templatesFor(tools) : TEMPLATES;
}

export function buildWorld(id: WorldId, nTrain = 200, nHeldout = 50): World {
  if (id.kind === 'custom') return { id, facts: [], corpus: id.rows.corpus, train: id.rows.train, heldout: id.rows.heldout };
  const key = `${worldName(id)}/${nTrain}/${nHeldout}`;
  const hit = worldCache.get(key);
  if (hit) return hit;
  const facts = worldFacts(id);
  const corpus = buildCorpus(id.seed, 120, facts);
  const split = makeTaskPool(id.seed, nTrain, nHeldout, facts);
  const world: World = { id, facts, corpus, train: split.train, heldout: split.heldout };
  worldCache.set(key, world);
  return world;
}

const envCache = new Map<string, ToolEnv>();

/** True when the query's top BM25 hit in `env` states the fact (the stub teacher's k = 1 knob). */
export function topHitHolds(env: ToolEnv): (query: string, entity: string, attribute: string) => boolean {
  return (query, entity, attribute) => {
    const top = env.retriever.search(query, 1)[0];
    return top !== undefined && top.passage.text.includes(`the ${attribute} of ${entity} is `);
  };
}

/** The tools of a world (BM25 over its corpus, the calculator), cached. */
export function worldEnv(id: WorldId): ToolEnv {
  const name = worldName(id);
  let env = envCache.get(name);
  if (!env) {
    const tools = id.kind === 'custom' ? id.rows.tools : null;
    env = new ToolEnv(buildWorld(id).corpus, tools ? systemPromptFor(tools) : undefined);
    envCache.set(name, env);
  }
  return env;
}

// ---- Seed partition ------------------------------------------------------------------

/** Evaluation splits made of fresh worlds: kind, reserved world seeds, held-out tasks per world. */
export interface FreshSplit {
  name: 'dev' | 'dev-entities' | 'fresh-values' | 'fresh-entities' | 'fresh-differences';
  kind: GeneratedWorldKind;
  seeds: number[];
  tasksPerWorld: number;
  /** Absent: each world's held-out tasks (the four shapes). 'difference': that no-teacher family (core/differenceTasks.ts). */
  family?: 'difference';
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** The first reserved seed of the dev-entities split (the textbook's and a user's fact world's). */
export const DEV_ENTITY_SEED = 2_900_001;

export const FRESH_SPLITS: Record<FreshSplit['name'], FreshSplit> = {
  // dev: for choosing recipes and hyper-parameters (never `heldout`).
  dev: { name: 'dev', kind: 'values', seeds: range(900_001, 4), tasksPerWorld: 50 },
  // dev-entities: choosing recipes on new names too (fresh-entities' generator, its own reserved seeds).
  'dev-entities': { name: 'dev-entities', kind: 'entities', seeds: range(DEV_ENTITY_SEED, 4), tasksPerWorld: 50 },
  'fresh-values': { name: 'fresh-values', kind: 'values', seeds: range(1_000_001, 10), tasksPerWorld: 50 },
  'fresh-entities': { name: 'fresh-entities', kind: 'entities', seeds: range(2_000_001, 10), tasksPerWorld: 50 },
  // fresh-values' worlds (values disjoint from training by construction), asked "by how much is A larger than B".
  'fresh-differences': { name: 'fresh-differences', kind: 'values', seeds: range(1_000_001, 10), tasksPerWorld: 50, family: 'difference' },
};

export { EVAL_SPLITS as SPLIT_NAMES, type EvalSplit as SplitName } from './protocol/worker';

/** Training worlds (SFT augmentation, RL pools) draw their seeds from here, far from the reserved ones. */
export const TRAINING_SEEDS = { augment: 1, rlValues: 100_001, rlEntities: 200_001, augmentEntities: 300_001 } as const;

/** Fresh RL pools (trainer/grpo/grpo.ts): this many training worlds, this many tasks of each shape from each. */
export const RL_POOL_WORLDS = 50;
export const RL_POOL_PER_SHAPE = 10;

/** SFT's new-entity augmentation worlds take their seeds from this range. */
function isAugmentEntitySeed(seed: number): boolean {
  return seed >= TRAINING_SEEDS.augmentEntities && seed < TRAINING_SEEDS.augmentEntities + 100_000;
}

function isRlEntitySeed(seed: number): boolean {
  return seed >= TRAINING_SEEDS.rlEntities && seed < TRAINING_SEEDS.rlEntities + 100_000;
}

let evaluationNames: ReadonlySet<string> | null = null;
/** The new names of the fresh-entities evaluation split: no SFT augmentation or RL pool may hold one. */
export function evaluationEntityNames(): ReadonlySet<string> {
  if (evaluationNames) return evaluationNames;
  const seedNames = new Set(TASK_FACTS.map((f) => f[0]));
  const out = new Set<string>();
  for (const seed of [...FRESH_SPLITS['fresh-entities'].seeds, ...FRESH_SPLITS['dev-entities'].seeds]) for (const [name] of worldFacts({ kind: 'entities', seed })) if (!seedNames.has(name)) out.add(name);
  evaluationNames = out;
  return out;
}

/** Throws when a training pool's task names an entity of an evaluation split (checked on every pool drawn). */
export function assertNoEvaluationNames(tasks: readonly Task[], purpose: string, names: ReadonlySet<string> = evaluationEntityNames()): void {
  for (const t of tasks) {
    const seen = t.hints.facts.find(([e]) => names.has(e));
    if (seen) throw new ReservedWorldError(`${purpose}: "${seen[0]}" is a name of an evaluation split (task ${JSON.stringify(t.question)}); it may not be trained on`);
  }
}

let unseenNames: ReadonlySet<string> | null = null;
/**
 * The names of the new-entity worlds that evaluation (fresh-entities) and RL's
 * fresh-entities pool use. Pseudo-words from a few syllables collide across worlds (a
 * third of the evaluation's names recur in 20 other worlds), so SFT's new-entity worlds
 * draw their names apart from these: what those splits measure stays "names never seen".
 */
export function namesTrainingMustNotSee(): ReadonlySet<string> {
  if (unseenNames) return unseenNames;
  const seedNames = new Set(TASK_FACTS.map((f) => f[0]));
  const seeds = [...FRESH_SPLITS['fresh-entities'].seeds, ...FRESH_SPLITS['dev-entities'].seeds, ...range(TRAINING_SEEDS.rlEntities, RL_POOL_WORLDS)];
  const out = new Set<string>();
  for (const seed of seeds) for (const [name] of worldFacts({ kind: 'entities', seed })) if (!seedNames.has(name)) out.add(name);
  unseenNames = out;
  return out;
}

/** Every reserved (kind, seed) of the evaluation splits. */
export function reservedWorlds(): Set<string> {
  const out = new Set<string>();
  for (const s of Object.values(FRESH_SPLITS)) for (const seed of s.seeds) out.add(worldName({ kind: s.kind, seed }));
  return out;
}

export class ReservedWorldError extends Error {}

/** Throws when a training pool would use an evaluation split's world. */
export function assertNotReserved(id: WorldId, purpose: string): void {
  if (id.kind === 'seed' || id.kind === 'custom') return;
  if (reservedWorlds().has(worldName(id))) {
    throw new ReservedWorldError(`${purpose}: world ${worldName(id)} is reserved for evaluation and may not be trained on`);
  }
}

/** A task with the world it lives in. */
export interface WorldTask {
  task: Task;
  world: WorldId;
}

/**
 * The tasks of a fresh split: each reserved world's held-out tasks, in seed order; for
 * fresh-differences, each world's difference tasks over the evaluation's half of the pairs.
 */
export function freshSplitTasks(name: FreshSplit['name']): WorldTask[] {
  const s = FRESH_SPLITS[name];
  const out: WorldTask[] = [];
  const pairs = s.family === 'difference' ? splitPairs(TASK_FACTS).evaluation : null;
  for (const seed of s.seeds) {
    const id = { kind: s.kind, seed };
    const tasks = pairs ? drawDifferenceTasks(worldFacts(id), pairs, s.tasksPerWorld, seed) : buildWorld(id).heldout.slice(0, s.tasksPerWorld);
    for (const task of tasks) out.push({ task, world: id });
  }
  return out;
}

/**
 * RL's fresh-differences pool on the textbook table: the RL value worlds (the fresh-values
 * pool's seeds), RL_POOL_PER_SHAPE difference tasks each over the training half of the
 * pairs; asserted apart from the evaluation split (assertPoolApart).
 */
export function freshDifferencePool(): WorldTask[] {
  const pairs = splitPairs(TASK_FACTS).training;
  const out: WorldTask[] = [];
  for (let i = 0; i < RL_POOL_WORLDS; i++) {
    const world: WorldId = { kind: 'values', seed: TRAINING_SEEDS.rlValues + i };
    assertNotReserved(world, 'RL pool fresh-differences');
    for (const task of drawDifferenceTasks(worldFacts(world), pairs, RL_POOL_PER_SHAPE, world.seed)) out.push({ task, world });
  }
  assertPoolApart(
    out.map(({ task, world }) => ({ task, seed: world.seed })),
    freshSplitTasks('fresh-differences').map(({ task, world }) => ({ task, seed: world.seed })),
    'RL pool fresh-differences',
  );
  return out;
}

/**
 * Throws (naming the item) when a training pool shares anything with an evaluation split: a
 * world seed, a task (its question) or an overlap key (its kind and facts, in any world).
 */
export function assertPoolApart(pool: readonly { task: Task; seed: number }[], evaluation: readonly { task: Task; seed: number }[], purpose: string): void {
  const seeds = new Set(evaluation.map((e) => e.seed));
  const questions = new Set(evaluation.map((e) => e.task.question));
  const keys = new Map(evaluation.map((e) => [overlapKey(e.task), e.task.question] as const));
  for (const { task, seed } of pool) {
    if (seeds.has(seed)) throw new ReservedWorldError(`${purpose}: world seed ${seed} is a world of the evaluation split (task ${JSON.stringify(task.question)}); it may not be trained on`);
    if (questions.has(task.question)) throw new ReservedWorldError(`${purpose}: the task ${JSON.stringify(task.question)} is a task of the evaluation split; it may not be trained on`);
    const seen = keys.get(overlapKey(task));
    if (seen !== undefined) throw new ReservedWorldError(`${purpose}: the task ${JSON.stringify(task.question)} asks for the facts of the evaluation split's ${JSON.stringify(seen)}; it may not be trained on`);
  }
}

/** Split sizes and reserved seeds, as recorded in config.json and eval summaries. */
export function splitManifest(): Record<string, { kind: WorldKind; seeds: number[]; tasks: number }> {
  const out: Record<string, { kind: WorldKind; seeds: number[]; tasks: number }> = {};
  for (const s of Object.values(FRESH_SPLITS)) out[s.name] = { kind: s.kind, seeds: s.seeds, tasks: s.seeds.length * s.tasksPerWorld };
  return out;
}

// ---- Task pools over a table -----------------------------------------------------------

/** Every task the four shapes can make from a table, in a fixed order. */
export function allTasksOf(facts: readonly Fact[]): Task[] {
  const numeric = facts.filter((f) => isNum(f[2]));
  const out: Task[] = [...facts.map(lookupTask), ...numeric.map(doubleTask)];
  for (const f1 of numeric) for (const f2 of numeric) if (f1 !== f2) out.push(sumTask(f1, f2));
  for (const f1 of numeric)
    for (const f2 of numeric) {
      if (f1 === f2) continue;
      const t = compareTask(f1, f2);
      if (t) out.push(t);
    }
  return out;
}

/**
 * Training tasks of a fresh world: every combination minus those whose (kind, facts) is a
 * held-out task of the seed world — the overlap contract holds in every world, and in a
 * world with new names a task is read back to the seed's names first (a renamed held-out
 * question is still that question) — then up to `perShape` of each shape, drawn with the
 * world's seed.
 */
export function freshTrainingTasks(id: WorldId, perShape: number, heldoutKeys: ReadonlySet<string>, opts: { balanceCompares?: boolean } = {}): Task[] {
  assertNotReserved(id, 'training pool');
  const w = buildWorld(id);
  const rng = new PyRandom(7_919 + id.seed);
  const byShape = new Map<string, Task[]>();
  const seedNameOf = new Map(w.facts.map((f, i) => [f[0], TASK_FACTS[i]![0]] as const));
  for (const t of allTasksOf(w.facts)) {
    if (heldoutKeys.has(overlapKey(t)) || heldoutKeys.has(overlapKey(inSeedNames(t, seedNameOf)))) continue;
    const list = byShape.get(t.kind) ?? [];
    list.push(t);
    byShape.set(t.kind, list);
  }
  const out: Task[] = [];
  for (const [kind, list] of byShape) {
    rng.shuffle(list);
    out.push(...(kind === 'compare' && opts.balanceCompares ? balancedCompares(list, perShape) : list.slice(0, perShape)));
  }
  assertNoEvaluationNames(out, `training pool of world ${worldName(id)}`);
  return out;
}

/**
 * Up to `n` compares, as many whose winner differs from the seed world's as whose winner is
 * the same (alternating, in the shuffled order; the other kind fills in when one runs out).
 * Resampled values keep the seed's winner in about 3 compares of 4 (the ranges seldom
 * cross), so a pool drawn plainly pays a student that names the remembered winner 3 times
 * in 4; balanced, only reading the calculator's sign pays.
 */
function balancedCompares(shuffled: readonly Task[], n: number): Task[] {
  const flipped: Task[] = [];
  const same: Task[] = [];
  for (const t of shuffled) {
    const g = seedGoldOf(t);
    (g !== null && g !== t.gold ? flipped : same).push(t);
  }
  const out: Task[] = [];
  for (let i = 0; out.length < n && (i < flipped.length || i < same.length); i++) {
    if (i < flipped.length) out.push(flipped[i]!);
    if (i < same.length && out.length < n) out.push(same[i]!);
  }
  return out;
}

/** A task with its facts named as the seed names them (`seedNameOf`: a row-aligned world's name -> the seed's). */
function inSeedNames(task: Task, seedNameOf: ReadonlyMap<string, string>): Task {
  return { ...task, hints: { ...task.hints, facts: task.hints.facts.map(([e, a]) => [seedNameOf.get(e) ?? e, a] as [string, string]) } };
}

/**
 * The seed world's gold for a fresh task's question (the same question over the seed's
 * table), or null when the seed world has no such question (new entities).
 */
export function seedGoldOf(task: Task): string | null {
  const seedFacts = new Map(TASK_FACTS.map((f) => [`${f[0]}\u0000${f[1]}`, f] as const));
  const facts = task.hints.facts.map(([e, a]) => seedFacts.get(`${e}\u0000${a}`));
  if (facts.some((f) => f === undefined)) return null;
  const [f1, f2] = facts as Fact[];
  switch (task.kind) {
    case 'lookup':
      return lookupTask(f1!).gold;
    case 'double':
      return doubleTask(f1!).gold;
    case 'sum':
      return sumTask(f1!, f2!).gold;
    case 'compare':
      return compareTask(f1!, f2!)?.gold ?? null;
    case 'difference':
      return differenceGold(f1![2], f2![2]);
  }
}
