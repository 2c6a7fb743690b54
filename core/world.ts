// The narrow, deterministic world the agent lives in: a port of the seed's
// stacklm/agent/corpus.py. Every string and every random draw matches CPython 3.11
// byte for byte (see core/pyrandom.ts); test/golden/world_seed0.json pins seed 0 and
// the unit tests compare other seeds live against the Python reference.
import { PyRandom } from './pyrandom';
import { pySplitWhitespace } from './pystr';
import type { Passage, Task, TaskHints } from './types';

/** (entity, attribute, value); values are strings so one code path serves all facts. */
export type Fact = readonly [entity: string, attribute: string, value: string];

// Byte-identical to the seed (which says they are byte-identical to its PLAN.md).
export const SPEC_FACTS: readonly Fact[] = [
  ['Stack-100M', 'hidden size', '512'],
  ['Stack-100M', 'layer count', '30'],
  ['Stack-100M', 'vocabulary size', '32768'],
  ['Stack-100M', 'query head count', '8'],
  ['Stack-100M', 'key-value head count', '2'],
  ['Stack-100M', 'head dimension', '64'],
  ['Stack-100M', 'MLP inner dimension', '1408'],
  ['Stack-100M', 'pretraining sequence length', '2048'],
  ['Stack-100M', 'mid-training sequence length', '8192'],
  ['Stack-100M', 'RoPE base', '10000'],
  ['Stack-100M', 'parameter count in millions', '101'],
  ['Stack-100M', 'pretraining token budget in billions', '20'],
];

export const PAPER_FACTS: readonly Fact[] = [
  ['the Transformer paper', 'publication year', '2017'],
  ['Adam', 'publication year', '2014'],
  ['RMSNorm', 'publication year', '2019'],
  ['SwiGLU', 'publication year', '2020'],
  ['RoFormer', 'publication year', '2021'],
  ['LoRA', 'publication year', '2021'],
  ['Chinchilla', 'publication year', '2022'],
  ['FlashAttention', 'publication year', '2022'],
  ['ReAct', 'publication year', '2022'],
  ['STaR', 'publication year', '2022'],
  ['Toolformer', 'publication year', '2023'],
  ['DPO', 'publication year', '2023'],
  ['grouped-query attention', 'publication year', '2023'],
  ['DeepSeekMath', 'publication year', '2024'],
  ['Muon', 'publication year', '2024'],
  ['MobileLLM', 'publication year', '2024'],
];

export const DISTRACTOR_ATTRS: readonly string[] = [
  'hidden size', 'layer count', 'MLP inner dimension', 'vocabulary size', 'head dimension',
];

/** The values a distractor fact draws from (rng.choice over this list, in this order). */
export const DISTRACTOR_VALUES: readonly number[] = [128, 192, 256, 384, 640, 768, 896, 1024, 1536];

/**
 * The three surface forms, with Python `str.format` fields {n} {attr} {ent} {val}. All
 * contain the canonical clause "the {attr} of {ent} is {val}".
 */
export const TEMPLATES: readonly string[] = [
  'Reference note {n}. In the Stack-100M project notes, the {attr} of {ent} ' +
    'is {val}. This value is fixed by the capstone specification and is not ' +
    'tuned per run.',
  'Configuration record {n}: the {attr} of {ent} is {val}. Downstream stages ' +
    '(mid-training, supervised fine-tuning, serving) all assume this setting ' +
    'without re-deriving it.',
  'Design log entry {n}. We record here that the {attr} of {ent} is {val}, a ' +
    'choice made during the architecture pass and left unchanged since.',
];

/** `_render`: template n % 3 with its fields filled (a single pass, like str.format). */
export function renderFact(n: number, ent: string, attr: string, val: string): string {
  const fields: Record<string, string> = { n: String(n), ent, attr, val };
  return TEMPLATES[n % TEMPLATES.length]!.replace(/\{(n|ent|attr|val)\}/g, (_m, name: string) => fields[name]!);
}

// ---- a user's world: its own surface forms ------------------------------------------------

/** The canonical clause every surface form holds, in a user's template's placeholders. */
export const CANONICAL_CLAUSE = 'the {attribute} of {entity} is {value}';

/**
 * A user's world's default surface forms: the canonical clause in plain words and nothing of
 * the textbook's story (no project, no specification). Fact n takes form n % 3, as the seed's.
 * Placeholders {n} {entity} {attribute} {value}.
 */
export const PLAIN_TEMPLATES: readonly string[] = [
  'Entry {n}: the {attribute} of {entity} is {value}.',
  'As listed, the {attribute} of {entity} is {value}.',
  'Record {n} states that the {attribute} of {entity} is {value}.',
];

/** A user's form `templates[n % length]` filled in one pass (a value holding "{entity}" stays as written). */
export function renderOwnFact(templates: readonly string[], n: number, ent: string, attr: string, val: string): string {
  if (templates.length === 0) throw new Error('renderOwnFact needs at least one template');
  const fields: Record<string, string> = { n: String(n), entity: ent, attribute: attr, value: val };
  return templates[n % templates.length]!.replace(/\{(n|entity|attribute|value)\}/g, (_m, name: string) => fields[name]!);
}

/**
 * Distractor facts of a user's world: entities the table does not hold ("entry D-000"), each
 * with two of the table's own attributes and a value that attribute takes in the table, so a
 * search for a fact also meets passages that look like it. Nothing of the textbook's.
 */
export function ownDistractorFacts(rng: PyRandom, table: readonly Fact[], n: number): Fact[] {
  if (n <= 0 || table.length === 0) return [];
  const byAttribute = new Map<string, string[]>();
  for (const [, a, v] of table) byAttribute.set(a, [...(byAttribute.get(a) ?? []), v]);
  const attributes = [...byAttribute.keys()];
  const taken = new Set(table.map((f) => f[0]));
  let prefix = 'entry D-';
  while ([...taken].some((e) => e.startsWith(prefix))) prefix = `other ${prefix}`;
  const out: Fact[] = [];
  for (let i = 0; i < n; i++) {
    const ent = `${prefix}${pad(i, 3)}`;
    for (const attr of rng.sample(attributes, Math.min(2, attributes.length))) out.push([ent, attr, rng.choice(byAttribute.get(attr)!)]);
  }
  return out;
}

/**
 * A user's world's corpus: its table and `nDistractors` distractor entities
 * (ownDistractorFacts), rendered through `templates` (PLAIN_TEMPLATES unless the user wrote
 * their own) and chunked as the seed chunks; doc ids as the seed's.
 */
export function buildOwnCorpus(seed: number, nDistractors: number, table: readonly Fact[], templates: readonly string[] = PLAIN_TEMPLATES): Passage[] {
  const rng = new PyRandom(seed);
  const facts: Fact[] = [...table, ...ownDistractorFacts(rng, table, nDistractors)];
  const passages: Passage[] = [];
  facts.forEach(([ent, attr, val], n) => {
    chunkWords(renderOwnFact(templates, n, ent, attr, val)).forEach((piece, j) => {
      passages.push({ docId: `doc-${pad(n, 4)}-${j}`, text: piece });
    });
  });
  return passages;
}

/**
 * `chunk_words`: fixed-size word chunks with overlap. A text of at most `size` words is
 * returned unchanged (whitespace and all); longer texts are re-joined with single spaces.
 */
export function chunkWords(text: string, size = 80, overlap = 16): string[] {
  if (!Number.isInteger(size) || !Number.isInteger(overlap)) {
    throw new TypeError(`chunkWords needs integer size and overlap, got ${size} and ${overlap}`);
  }
  const words = pySplitWhitespace(text);
  if (words.length <= size) return [text];
  const out: string[] = [];
  const step = Math.max(1, size - overlap);
  for (let i = 0; i < words.length; i += step) {
    // Array.slice treats a negative end like Python's slice, so this is words[i:i+size].
    const piece = words.slice(i, i + size);
    if (piece.length > 0) out.push(piece.join(' '));
    if (i + size >= words.length) break;
  }
  return out;
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

/**
 * `build_corpus`: the 28 real facts (or another table, core/worlds.ts) plus `nDistractors` synthetic ablation runs with two
 * facts each, rendered and chunked: 268 passages for the defaults.
 */
export function buildCorpus(seed = 0, nDistractors = 120, table: readonly Fact[] = [...SPEC_FACTS, ...PAPER_FACTS]): Passage[] {
  const rng = new PyRandom(seed);
  const facts: Fact[] = [...table];
  for (let i = 0; i < nDistractors; i++) {
    const ent = `ablation run R-${pad(i, 3)}`;
    for (const attr of rng.sample(DISTRACTOR_ATTRS, 2)) {
      facts.push([ent, attr, String(rng.choice(DISTRACTOR_VALUES))]);
    }
  }
  const passages: Passage[] = [];
  facts.forEach(([ent, attr, val], n) => {
    chunkWords(renderFact(n, ent, attr, val)).forEach((piece, j) => {
      passages.push({ docId: `doc-${pad(n, 4)}-${j}`, text: piece });
    });
  });
  return passages;
}

/**
 * `_is_num`: `v.lstrip("-").isdigit()`. ASCII digits only: Python's isdigit also takes
 * other Unicode digits, but the fact tables are fixed and ASCII, and `int()` would
 * reject most of those anyway.
 */
export function isNum(v: string): boolean {
  return /^-*[0-9]+$/.test(v);
}

/** Python `int(v)` for the numeric fact values (exact at any size). */
function pyInt(v: string): bigint {
  return BigInt(v);
}

/** SHAPE 1: look one fact up. */
export function lookupTask([ent, attr, val]: Fact): Task {
  return {
    question: `What is the ${attr} of ${ent}? Use the corpus.`,
    gold: val,
    kind: 'lookup',
    hints: { queries: [`${ent} ${attr}`], facts: [[ent, attr]], op: null },
  };
}

/** SHAPE 2: one numeric fact, times two. */
export function doubleTask([ent, attr, val]: Fact): Task {
  return {
    question: `What is the ${attr} of ${ent}, multiplied by 2? Use the corpus.`,
    gold: String(pyInt(val) * 2n),
    kind: 'double',
    hints: { queries: [`${ent} ${attr}`], facts: [[ent, attr]], op: 'double' },
  };
}

/** SHAPE 3: the sum of two numeric facts. */
export function sumTask([e1, a1, v1]: Fact, [e2, a2, v2]: Fact): Task {
  return {
    question: `What do you get if you add the ${a1} of ${e1} to the ${a2} of ${e2}? Use the corpus.`,
    gold: String(pyInt(v1) + pyInt(v2)),
    kind: 'sum',
    hints: { queries: [`${e1} ${a1}`, `${e2} ${a2}`], facts: [[e1, a1], [e2, a2]], op: 'sum' },
  };
}

/**
 * SHAPE 4: which of two facts is larger, or null for the seed's two rejections: the same
 * entity (gold is that entity either way) or equal values (no unique gold).
 */
export function compareTask([e1, a1, v1]: Fact, [e2, a2, v2]: Fact): Task | null {
  if (e1 === e2 || pyInt(v1) === pyInt(v2)) return null;
  return {
    question:
      `Which is larger, the ${a1} of ${e1} or the ${a2} of ${e2}? ` + 'Answer with the entity name. Use the corpus.',
    gold: pyInt(v1) > pyInt(v2) ? e1 : e2,
    kind: 'compare',
    hints: {
      queries: [`${e1} ${a1}`, `${e2} ${a2}`],
      facts: [[e1, a1], [e2, a2]],
      op: 'compare',
      names: [e1, e2],
    },
  };
}

/** The facts that tasks are made of (all 28 are numeric, as it happens). */
export const TASK_FACTS: readonly Fact[] = [...SPEC_FACTS, ...PAPER_FACTS];

/** `make_tasks`: 262 tasks for seed 0 (lookup 28, double 28, sum 120, compare 86). */
export function makeTasks(seed = 0, facts: readonly Fact[] = TASK_FACTS): Task[] {
  const rng = new PyRandom(seed + 1);
  const numeric = facts.filter((f) => isNum(f[2]));
  const tasks: Task[] = [];
  for (const f of facts) tasks.push(lookupTask(f));
  for (const f of numeric) tasks.push(doubleTask(f));
  for (let t = 0; t < 120; t++) {
    const [f1, f2] = rng.sample(numeric, 2) as [Fact, Fact];
    tasks.push(sumTask(f1, f2));
  }
  for (let t = 0; t < 120; t++) {
    // A rejected draw is still consumed, so the random stream stays aligned with the seed.
    const [f1, f2] = rng.sample(numeric, 2) as [Fact, Fact];
    const task = compareTask(f1, f2);
    if (task) tasks.push(task);
  }
  return tasks;
}

export interface TaskPool {
  train: Task[];
  heldout: Task[];
}

/**
 * `make_task_pool`: shuffle `makeTasks(seed)` with `Random(seed + 2)` and split. Throws
 * (the seed's assert) when the pool cannot fill both splits.
 */
export function makeTaskPool(seed = 0, nTrain = 200, nHeldout = 50, facts: readonly Fact[] = TASK_FACTS): TaskPool {
  // Python would slice oddly with negative counts; they are never meaningful here.
  if (!Number.isInteger(nTrain) || !Number.isInteger(nHeldout) || nTrain < 0 || nHeldout < 0) {
    throw new RangeError(`nTrain and nHeldout must be non-negative integers, got ${nTrain} and ${nHeldout}`);
  }
  const tasks = makeTasks(seed, facts);
  new PyRandom(seed + 2).shuffle(tasks);
  if (!(tasks.length >= nTrain + nHeldout)) {
    throw new Error(
      `pool too small; raise the counts: ${tasks.length} tasks for seed ${seed}, ` +
        `but nTrain + nHeldout = ${nTrain} + ${nHeldout} = ${nTrain + nHeldout}`,
    );
  }
  return { train: tasks.slice(0, nTrain), heldout: tasks.slice(nTrain, nTrain + nHeldout) };
}

/** A passage as the seed serialises it (key order as the Python dataclass). */
export interface PassageRow {
  doc_id: string;
  text: string;
}

/** Task hints as JSON, keys in the seed's order: queries, facts, op, then names (compare). */
export interface TaskHintsRow {
  queries: string[];
  facts: [string, string][];
  op: string | null;
  names?: [string, string];
}

export interface TaskRow {
  question: string;
  gold: string;
  kind: string;
  hints: TaskHintsRow;
}

export function passageToRow(p: Passage): PassageRow {
  return { doc_id: p.docId, text: p.text };
}

export function taskToRow(t: Task): TaskRow {
  const h: TaskHints = t.hints;
  const hints: TaskHintsRow = {
    queries: [...h.queries],
    facts: h.facts.map(([e, a]): [string, string] => [e, a]),
    op: h.op,
  };
  if (h.names !== undefined) hints.names = [h.names[0], h.names[1]];
  return { question: t.question, gold: t.gold, kind: t.kind, hints };
}
