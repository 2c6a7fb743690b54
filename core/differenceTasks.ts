// The no-teacher family (issue 28): "By how much is the <attr> of A larger than the <attr> of
// B?" over two facts of one numeric attribute of two different entities, A's value the
// larger. The gold is what the seed's calculator prints for vA - vB (the student searches
// both facts, calcs the difference and answers it). No world builds, distils or augments
// with these tasks: the stub teacher never demonstrates one (core/stubTeacher.ts,
// core/distill.ts refuse), so only a verifiable reward can teach them. They exist as an
// evaluation split (fresh-differences) and an RL pool of the same name, over disjoint
// pairs of facts: every pair of a table is either the split's or the pool's (splitPairs).
import { PyRandom } from './pyrandom';
import { calc } from './tools/calc';
import type { Task, TaskKind } from './types';
import type { Fact } from './world';

/** The task kinds no teacher demonstrates: RL pools and evaluation only, never SFT data. */
export const NO_TEACHER_KINDS: readonly TaskKind[] = ['difference'];

export function isNoTeacherKind(kind: TaskKind): boolean {
  return NO_TEACHER_KINDS.includes(kind);
}

/** Thrown where a teacher would demonstrate (or SFT data would hold) a task no teacher demonstrates. */
export class NoTeacherError extends Error {}

/** Throws NoTeacherError naming `purpose` and the first task of a no-teacher kind in `tasks`. */
export function assertTeacherTasks(tasks: readonly Task[], purpose: string): void {
  const t = tasks.find((x) => isNoTeacherKind(x.kind));
  if (t) {
    throw new NoTeacherError(
      `${purpose}: ${JSON.stringify(t.question)} is a ${t.kind} task, a family the stub teacher never demonstrates ` +
        '(it exists so that only a verifiable reward can teach it: use it as an RL pool or an evaluation split, never as SFT data)',
    );
  }
}

/** A value the calculator reads as a plain number: digits, an optional sign and decimals. */
const PLAIN_NUMBER = /^-?[0-9]+(\.[0-9]+)?$/;

/** The calculator's answer to `a-b` (the seed prints an integer-valued float as an int: 12.5-2.5 is "10"). */
export function differenceGold(a: string, b: string): string {
  return calc(`${a}-${b}`);
}

/** -1, 0 or 1 as a < b, a == b, a > b (integers exactly, decimals as floats). */
function compareValues(a: string, b: string): number {
  if (!a.includes('.') && !b.includes('.')) {
    const x = BigInt(a);
    const y = BigInt(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return Math.sign(Number(a) - Number(b));
}

/**
 * The difference task of two facts of one attribute, the larger value's entity first; null
 * for the same entity, equal values (the answer would be 0: no "larger") or a value that is
 * not a plain number.
 */
export function differenceTask(f1: Fact, f2: Fact): Task | null {
  if (f1[1] !== f2[1]) throw new Error(`differenceTask needs two facts of one attribute, got "${f1[1]}" and "${f2[1]}"`);
  if (f1[0] === f2[0] || !PLAIN_NUMBER.test(f1[2]) || !PLAIN_NUMBER.test(f2[2])) return null;
  const order = compareValues(f1[2], f2[2]);
  if (order === 0) return null;
  const [[a, attr, va], [b, , vb]] = order > 0 ? [f1, f2] : [f2, f1];
  return {
    question: `By how much is the ${attr} of ${a} larger than the ${attr} of ${b}? Use the corpus.`,
    gold: differenceGold(va, vb),
    kind: 'difference',
    hints: { queries: [`${a} ${attr}`, `${b} ${attr}`], facts: [[a, attr], [b, attr]], op: 'difference', names: [a, b] },
  };
}

/** A pair of facts, by (entity, attribute) keys: the same pair in every world of a table's rows. */
export type FactPair = readonly [entity1: string, entity2: string, attribute: string];

const pairKey = ([e1, e2, a]: FactPair): string => (e1 < e2 ? `${a}\u0000${e1}\u0000${e2}` : `${a}\u0000${e2}\u0000${e1}`);

/** The pair a difference task asks about (order-free key). */
export function pairOfTask(t: Task): string {
  const [[e1, a], [e2]] = t.hints.facts as [[string, string], [string, string]];
  return pairKey([e1, e2, a]);
}

/** Every pair of different entities with a plain-number value of one attribute, in table order. */
export function differencePairs(facts: readonly Fact[]): FactPair[] {
  const byAttribute = new Map<string, Fact[]>();
  for (const f of facts) if (PLAIN_NUMBER.test(f[2])) byAttribute.set(f[1], [...(byAttribute.get(f[1]) ?? []), f]);
  const out: FactPair[] = [];
  for (const [attr, rows] of byAttribute) {
    for (let i = 0; i < rows.length; i++) for (let j = i + 1; j < rows.length; j++) if (rows[i]![0] !== rows[j]![0]) out.push([rows[i]![0], rows[j]![0], attr]);
  }
  return out;
}

/**
 * A table's pairs split once, for every world derived from it: the evaluation split's half
 * and the RL pool's half (a fixed shuffle; the evaluation gets the odd one). No pool task
 * can then share a pair, so an overlap key, with an evaluation task, in any world.
 */
export function splitPairs(facts: readonly Fact[]): { evaluation: Set<string>; training: Set<string> } {
  const keys = differencePairs(facts).map(pairKey);
  new PyRandom(28_001).shuffle(keys);
  const cut = Math.ceil(keys.length / 2);
  return { evaluation: new Set(keys.slice(0, cut)), training: new Set(keys.slice(cut)) };
}

/**
 * Up to `n` difference tasks of a world's table over the pairs in `pairs` (values equal in
 * this world make no task), in a fixed order drawn with `seed`.
 */
export function drawDifferenceTasks(facts: readonly Fact[], pairs: ReadonlySet<string>, n: number, seed: number): Task[] {
  const byKey = new Map(facts.map((f) => [`${f[0]}\u0000${f[1]}`, f] as const));
  const tasks: Task[] = [];
  for (const p of differencePairs(facts)) {
    if (!pairs.has(pairKey(p))) continue;
    const t = differenceTask(byKey.get(`${p[0]}\u0000${p[2]}`)!, byKey.get(`${p[1]}\u0000${p[2]}`)!);
    if (t) tasks.push(t);
  }
  new PyRandom(28_003 + seed).shuffle(tasks);
  return tasks.slice(0, n);
}
