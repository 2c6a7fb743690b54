// Worlds derived from any fact table (docs/worlds.md, "Splits that measure reading"): a
// counterfactual world keeps the entities and attributes and resamples every value from what
// the table shows of its attribute (its range, step and digit count; a text value is another
// of its attribute's values), never the original; a new-entity world also renames every
// entity with names shaped like the table's own (capitals, digits, hyphens, several words).
// Deterministic per (table, kind, seed). A student that answers a derived world's question
// with the parent's value has remembered, not read (`memorised`).
import { differenceGold } from './differenceTasks';
import { PyRandom } from './pyrandom';
import { type Fact, compareTask, doubleTask, isNum, lookupTask, sumTask } from './world';
import type { Task } from './types';

export type DerivedKind = 'values' | 'entities';

export interface DerivedSpec {
  kind: DerivedKind;
  seed: number;
}

/** A derived table and how it relates to its parent (for the `memorised` failure and for audits). */
export interface DerivedFacts {
  facts: Fact[];
  /** Parent entity -> its new name ('entities'); empty for 'values'. */
  renamed: Map<string, string>;
}

/** Range, step and digit counts of one attribute's integer values. */
interface NumericShape {
  low: number;
  high: number;
  step: number;
}

const gcd = (a: number, b: number): number => (b === 0 ? Math.abs(a) : gcd(b, a % b));

/**
 * Where an attribute's values may be drawn from: the table's span widened by half on each
 * side (at least 10 steps in all), on the grid of the values' common step, never crossing
 * zero where the table does not, and within the digit counts the table shows.
 */
function numericShape(values: readonly number[]): NumericShape {
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  let step = 0;
  for (const v of values) step = gcd(step, v - lo);
  // One value (or all equal): the grid of its trailing zeros (1990 -> 10, 7 -> 1).
  if (step === 0) step = lo === 0 ? 1 : 10 ** (String(Math.abs(lo)).match(/0+$/)?.[0].length ?? 0);
  const span = Math.max(hi - lo, 10 * step);
  const digits = values.map((v) => String(Math.abs(v)).length);
  const minDigits = Math.min(...digits);
  const maxDigits = Math.max(...digits);
  let low = lo - Math.floor(span / 2 / step) * step;
  let high = hi + Math.floor(span / 2 / step) * step;
  if (lo >= 0) low = Math.max(low, minDigits > 1 ? 10 ** (minDigits - 1) : 0);
  if (hi <= 0) high = Math.min(high, 0);
  if (lo > 0) high = Math.min(high, 10 ** maxDigits - 1);
  // Back onto the table's grid (values are lo + k * step).
  low = lo - Math.floor((lo - low) / step) * step;
  high = lo + Math.floor((high - lo) / step) * step;
  return { low, high, step };
}

function drawNumber(rng: PyRandom, shape: NumericShape, avoid: number): number {
  const slots = Math.floor((shape.high - shape.low) / shape.step) + 1;
  if (slots <= 1) return avoid + shape.step;
  for (;;) {
    const v = shape.low + shape.step * rng.randrange(slots);
    if (v !== avoid) return v;
  }
}

/** Each fact's value resampled within its attribute; the parent's value never kept where another exists. */
function resampleValues(facts: readonly Fact[], rng: PyRandom): string[] {
  const byAttribute = new Map<string, number[]>();
  facts.forEach((f, i) => byAttribute.set(f[1], [...(byAttribute.get(f[1]) ?? []), i]));
  const out = facts.map((f) => f[2]);
  for (const rows of byAttribute.values()) {
    const numeric = rows.filter((i) => isNum(facts[i]![2]));
    if (numeric.length > 0) {
      const shape = numericShape(numeric.map((i) => Number(facts[i]![2])));
      for (const i of numeric) out[i] = String(drawNumber(rng, shape, Number(facts[i]![2])));
    }
    // Text values: a shuffle of the attribute's own values, then every value still in place swapped with a neighbour.
    const text = rows.filter((i) => !isNum(facts[i]![2]));
    if (text.length >= 2) {
      const values = text.map((i) => facts[i]![2]);
      rng.shuffle(values);
      for (let k = 0; k < values.length; k++) {
        if (values[k] === facts[text[k]!]![2]) {
          const j = (k + 1) % values.length;
          [values[k], values[j]] = [values[j]!, values[k]!];
        }
      }
      text.forEach((i, k) => (out[i] = values[k]!));
    }
  }
  return out;
}

const ONSETS = ['b', 'br', 'c', 'ch', 'cl', 'd', 'dr', 'f', 'fl', 'g', 'gr', 'h', 'j', 'k', 'kr', 'l', 'm', 'n', 'p', 'pr', 'qu', 'r', 's', 'sk', 'sh', 'st', 't', 'tr', 'th', 'v', 'w', 'z'];
const VOWELS = ['a', 'e', 'i', 'o', 'u', 'ai', 'ea', 'ou', 'y', 'io'];
const CODAS = ['', '', '', 'n', 'r', 'l', 's', 'm', 'x', 'th', 'nd', 'sk'];

/**
 * A pronounceable word of about `length` letters (32 x 10 x 12 per syllable: a name space of
 * millions), or, given `syllables`, one made of those alone (kin names, below).
 */
function pseudoWord(rng: PyRandom, length: number, syllables?: readonly string[], varied = false): string {
  let w = '';
  let last = -1;
  while (w.length < Math.max(3, length - 1)) {
    if (!syllables) {
      w += ONSETS[rng.randrange(ONSETS.length)]! + VOWELS[rng.randrange(VOWELS.length)]! + CODAS[rng.randrange(CODAS.length)]!;
    } else if (varied && last >= 0 && syllables.length > 1) {
      // Never the same syllable twice in a row: a student trained on "venven" learns to loop.
      const k = rng.randrange(syllables.length - 1);
      last = k >= last ? k + 1 : k;
      w += syllables[last]!;
    } else {
      last = rng.randrange(syllables.length);
      w += syllables[last]!;
    }
  }
  return w;
}

/** Syllables of kin names may also open on a vowel ("Ostzor"): the empty onset. */
const KIN_ONSETS = [...ONSETS, '', ''];

/**
 * The few syllables one transcript's kin names are made of: names that share pieces, as a
 * model family's do ("Qwen2-0.5B", "Qwen2-1.5B") or a syllable-built table's ("Junpe",
 * "Junmida"). Copying one of two such names needs more than the last piece to tell them apart.
 */
export function kinSyllables(rng: PyRandom, count = 3): string[] {
  const out: string[] = [];
  while (out.length < count) {
    const s = KIN_ONSETS[rng.randrange(KIN_ONSETS.length)]! + VOWELS[rng.randrange(VOWELS.length)]! + CODAS[rng.randrange(CODAS.length)]!;
    if (!out.includes(s)) out.push(s);
  }
  return out;
}

const LETTERS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';

/**
 * A new name shaped like `name`: each capitalised word (also inside a camel-case name:
 * "RoFormer" is "Ro" + "Former") becomes a new word of about its length, an acronym other
 * capitals, a number other digits of the same count; lower-case words ("the", "paper"), unit
 * letters after digits ("540M") and separators are kept, unless the name has nothing else
 * ("grouped-query attention": then its longer lower-case words are new words).
 */
export function nameLike(name: string, rng: PyRandom, syllables?: readonly string[], varied = false): string {
  const tokens = name.match(/[A-Z]+(?![a-z])|[A-Z][a-z]+|[a-z]+|[0-9]+|[^A-Za-z0-9]+/g) ?? [name];
  const afterDigits = (i: number) => i > 0 && /^[0-9]+$/.test(tokens[i - 1]!);
  const isCapitalised = (tok: string, i: number) => /^[A-Z][a-z]+$/.test(tok) && !afterDigits(i);
  const isCapitals = (tok: string, i: number) => /^[A-Z]{2,}$/.test(tok) || (/^[A-Z]$/.test(tok) && !afterDigits(i));
  const onlyLowerCase = !tokens.some((tok, i) => /^[0-9]+$/.test(tok) || isCapitalised(tok, i) || isCapitals(tok, i));
  let out = '';
  tokens.forEach((tok, i) => {
    if (/^[0-9]+$/.test(tok)) {
      // Varied: one digit more or fewer a third of the time each ("Junpe-40M" beside "Stack-100M"),
      // so a number is copied digit by digit, not completed to the table's usual width.
      const width = varied ? Math.max(1, tok.length + rng.randrange(3) - 1) : tok.length;
      let d = '';
      for (let k = 0; k < width; k++) d += String(k === 0 && width > 1 ? 1 + rng.randrange(9) : rng.randrange(10));
      out += d;
    } else if (isCapitalised(tok, i)) {
      const w = pseudoWord(rng, tok.length, syllables, varied);
      out += w[0]!.toUpperCase() + w.slice(1);
    } else if (isCapitals(tok, i)) {
      for (let k = 0; k < tok.length; k++) out += LETTERS[rng.randrange(26)];
    } else if (/^[a-z]+$/.test(tok) && onlyLowerCase && (tokens.length === 1 || tok.length >= 4)) {
      out += pseudoWord(rng, tok.length, syllables, varied); // a lower-case name is a name, not a function word
    } else {
      out += tok;
    }
  });
  return out;
}

/**
 * New names for `entities` (in their order, each shaped like itself by nameLike), apart from
 * each other, from every entity and from `avoid`: the same draws deriveFacts makes.
 */
export function newNamesFor(
  entities: readonly string[],
  rng: PyRandom,
  avoid: ReadonlySet<string> = new Set(),
  taken: Set<string> = new Set([...entities, ...avoid]),
  syllables?: readonly string[],
  varied = false,
): Map<string, string> {
  const renamed = new Map<string, string>();
  for (const entity of entities) {
    if (renamed.has(entity)) continue;
    let name = nameLike(entity, rng, syllables, varied);
    for (let tries = 0; taken.has(name) || name.toLowerCase() === entity.toLowerCase(); tries++) {
      // A name with no word to renew keeps its shape by a new word in front; kin names that
      // keep meeting taken ones fall back to free syllables.
      name = tries < 20 ? nameLike(entity, rng, tries < 10 ? syllables : undefined, varied) : `${nameLike('Name', rng)} ${entity}`;
    }
    taken.add(name);
    renamed.set(entity, name);
  }
  return renamed;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * `text` with every whole occurrence of a name (not inside a longer word or number) replaced
 * through `renamed`, in one pass (longest names first, so "X" never eats "X Large").
 */
export function renameInText(text: string, renamed: ReadonlyMap<string, string>): string {
  if (renamed.size === 0) return text;
  const names = [...renamed.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp);
  const re = new RegExp(`(?<![A-Za-z0-9])(?:${names.join('|')})(?![A-Za-z0-9])`, 'g');
  return text.replace(re, (m) => renamed.get(m) ?? m);
}

/** A task with its entity names (question, hints; the gold where it is a name) replaced through `renamed`. */
export function renameTask(task: Task, renamed: ReadonlyMap<string, string>): Task {
  return {
    ...task,
    question: renameInText(task.question, renamed),
    gold: renamed.get(task.gold) ?? task.gold,
    hints: {
      ...task.hints,
      queries: task.hints.queries.map((q) => renameInText(q, renamed)),
      facts: task.hints.facts.map(([e, a]) => [renamed.get(e) ?? e, a] as [string, string]),
      ...(task.hints.names ? { names: task.hints.names.map((n) => renamed.get(n) ?? n) as [string, string] } : {}),
    },
  };
}

/**
 * The table of a derived world. 'values': every value resampled; 'entities': every entity
 * renamed (apart from the parent's names and `avoid`) and every value resampled.
 */
export function deriveFacts(parent: readonly Fact[], spec: DerivedSpec, avoid: ReadonlySet<string> = new Set()): DerivedFacts {
  // Offset per kind, so a values world and an entities world of one seed draw apart.
  const rng = new PyRandom(1_000_003 * (spec.kind === 'values' ? 3 : 4) + spec.seed);
  const entities = [...new Set(parent.map((f) => f[0]))];
  const renamed = spec.kind === 'entities' ? newNamesFor(entities, rng, avoid) : new Map<string, string>();
  const values = resampleValues(parent, rng);
  return { facts: parent.map(([e, a], i): Fact => [renamed.get(e) ?? e, a, values[i]!]), renamed };
}

/**
 * The parent world's gold for a derived task's question (the same question over the parent's
 * table: names read back through `renamed`), or null when the parent has no such question.
 */
export function parentGoldOf(task: Task, parent: readonly Fact[], renamed: ReadonlyMap<string, string> = new Map()): string | null {
  const back = new Map([...renamed].map(([from, to]) => [to, from] as const));
  const byKey = new Map(parent.map((f) => [`${f[0]}\u0000${f[1]}`, f] as const));
  const facts = task.hints.facts.map(([e, a]) => byKey.get(`${back.get(e) ?? e}\u0000${a}`));
  if (facts.length === 0 || facts.some((f) => f === undefined)) return null;
  const [f1, f2] = facts as Fact[];
  switch (task.kind) {
    case 'lookup':
      return lookupTask(f1!).gold;
    case 'double':
      return isNum(f1![2]) ? doubleTask(f1!).gold : null;
    case 'sum':
      return isNum(f1![2]) && isNum(f2![2]) ? sumTask(f1!, f2!).gold : null;
    case 'compare':
      return isNum(f1![2]) && isNum(f2![2]) ? (compareTask(f1!, f2!)?.gold ?? null) : null;
    case 'difference':
      // The same question (A's value minus B's) over the parent's values, whichever is larger there.
      return isNum(f1![2]) && isNum(f2![2]) ? differenceGold(f1![2], f2![2]) : null;
  }
}

/**
 * A transcript and its task with every entity of `entities` that the text names renamed by
 * names drawn for this copy alone (shaped like each, apart from every entity and `avoid`).
 * The text stays self-consistent: the question, the thoughts, the queries and the passages
 * the tools returned all carry the new names. `kin`: the copy's names are made of a few
 * syllables drawn for it (kinSyllables), so they share pieces. `varied`: no syllable twice in
 * a row, and numbers one digit longer or shorter a third of the time each (nameLike).
 */
export function withOwnNames(
  text: string,
  task: Task,
  entities: readonly string[],
  rng: PyRandom,
  avoid: ReadonlySet<string>,
  kin = false,
  varied = false,
): { text: string; task: Task; renamed: Map<string, string> } {
  const named = entities.filter((e) => text.includes(e) || task.hints.facts.some(([f]) => f === e));
  const renamed = newNamesFor(named, rng, avoid, new Set([...entities, ...avoid]), kin ? kinSyllables(rng) : undefined, varied);
  return { text: renameInText(text, renamed), task: renameTask(task, renamed), renamed };
}
