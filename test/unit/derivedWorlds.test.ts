// Worlds derived from any fact table (issue 27): counterfactual values and new names shaped
// like the table's own, deterministic per seed; a derived world's gold recomputed
// independently from its own rendered corpus.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { deriveFacts, nameLike, parentGoldOf } from '../../core/derivedWorlds';
import { PyRandom } from '../../core/pyrandom';
import { buildFactWorld, parseFactTable } from '../../core/worldSource';
import type { Fact } from '../../core/world';
import type { Task } from '../../core/types';
import { describeRun } from '../../extension/runFolders';

const repoRoot = path.resolve(__dirname, '..', '..');
const ELEMENTS = path.join(repoRoot, 'samples', 'worlds', 'elements', 'elements.csv');
const elements = parseFactTable(fs.readFileSync(ELEMENTS, 'utf8'), ELEMENTS);
const isInt = (v: string) => /^-?[0-9]+$/.test(v);

/** Gold from the corpus text alone: "the {attribute} of {entity} is {value}" read back, then the shape's arithmetic. */
function goldFromCorpus(task: Task, corpus: readonly { text: string }[]): string {
  const read = (entity: string, attribute: string): string => {
    const clause = `the ${attribute} of ${entity} is `;
    for (const p of corpus) {
      const at = p.text.indexOf(clause);
      if (at >= 0) return /^[^.,;]+/.exec(p.text.slice(at + clause.length))![0].trim();
    }
    throw new Error(`no passage states ${clause}`);
  };
  const v = task.hints.facts.map(([e, a]) => read(e, a));
  switch (task.kind) {
    case 'lookup':
      return v[0]!;
    case 'double':
      return String(BigInt(v[0]!) * 2n);
    case 'sum':
      return String(BigInt(v[0]!) + BigInt(v[1]!));
    case 'compare':
      return BigInt(v[0]!) > BigInt(v[1]!) ? task.hints.facts[0]![0] : task.hints.facts[1]![0];
  }
}

describe('derived worlds of any fact table (issue 27)', () => {
  it('values: every value resampled within its attribute (integers on the grid of the table, text values among the attribute\'s own), never the parent\'s; deterministic per seed', () => {
    const a = deriveFacts(elements.facts, { kind: 'values', seed: 7 });
    assert.deepEqual(a, deriveFacts(elements.facts, { kind: 'values', seed: 7 }));
    assert.notDeepEqual(a.facts, deriveFacts(elements.facts, { kind: 'values', seed: 8 }).facts);
    assert.equal(a.renamed.size, 0);
    const byAttr = new Map<string, string[]>();
    for (const [, attr, v] of elements.facts) byAttr.set(attr, [...(byAttr.get(attr) ?? []), v]);
    a.facts.forEach(([e, attr, v], i) => {
      const [pe, pattr, pv] = elements.facts[i]!;
      assert.equal(e, pe);
      assert.equal(attr, pattr);
      const own = byAttr.get(attr)!;
      if (isInt(pv)) {
        assert.ok(isInt(v), `${attr} of ${e}: ${v} should stay an integer`);
        assert.notEqual(v, pv, `${attr} of ${e} kept the parent's value`);
        assert.ok(!/^-?0[0-9]/.test(v), `${v} has a leading zero`);
      } else if (new Set(own.filter((x) => !isInt(x))).size >= 2) {
        assert.ok(own.includes(v), `${attr} of ${e}: ${v} is not one of the attribute's values`);
      }
    });
    const changed = a.facts.filter((f, i) => f[2] !== elements.facts[i]![2]).length;
    assert.ok(changed >= 0.9 * a.facts.length, `${changed} of ${a.facts.length} values changed`);
  });

  it('values: ranges follow the table (years stay four-digit years on their grid; a value never crosses zero the table does not)', () => {
    const table: Fact[] = [
      ['A', 'year', '1990'],
      ['B', 'year', '2005'],
      ['C', 'year', '2020'],
      ['A', 'depth', '-40'],
      ['B', 'depth', '-10'],
      ['C', 'depth', '-25'],
    ];
    for (let seed = 0; seed < 50; seed++) {
      const d = deriveFacts(table, { kind: 'values', seed }).facts;
      for (const [, attr, v] of d) {
        const n = Number(v);
        if (attr === 'year') assert.ok(n >= 1000 && n <= 9999 && (n - 1990) % 5 === 0, `year ${v}`);
        else assert.ok(n <= 0 && n % 5 === 0, `depth ${v}`);
      }
    }
  });

  it('entities: names shaped like the table\'s own ("Tygri-540M", "Velmora Peak", "the Quasfold paper"), apart from the parent\'s and the avoided ones', () => {
    const rng = new PyRandom(3);
    for (let i = 0; i < 30; i++) {
      assert.match(nameLike('Tygri-540M', rng), /^[A-Z][a-z]+-[1-9][0-9]{2}M$/);
      assert.match(nameLike('Velmora Peak', rng), /^[A-Z][a-z]+ [A-Z][a-z]+$/);
      assert.match(nameLike('the Quasfold paper', rng), /^the [A-Z][a-z]+ paper$/);
      assert.match(nameLike('DPO', rng), /^[A-Z]{3}$/);
    }
    const avoid = new Set(deriveFacts(elements.facts, { kind: 'entities', seed: 1 }).renamed.values());
    const d = deriveFacts(elements.facts, { kind: 'entities', seed: 2 }, avoid);
    const parentNames = new Set(elements.facts.map((f) => f[0]));
    assert.equal(d.renamed.size, parentNames.size);
    const names = [...d.renamed.values()];
    assert.equal(new Set(names).size, names.length, 'new names are distinct');
    for (const n of names) {
      assert.ok(!parentNames.has(n) && !avoid.has(n), `${n} is a parent's or an avoided name`);
      assert.match(n, /^[A-Z][a-z]+$/, 'element names are one capitalised word, and so are theirs');
    }
    // The name space is large: 10 worlds of 30 names share (almost) none.
    const all = Array.from({ length: 10 }, (_, s) => [...deriveFacts(elements.facts, { kind: 'entities', seed: 100 + s }).renamed.values()]).flat();
    assert.ok(new Set(all).size >= all.length - 3, `${all.length - new Set(all).size} repeats in ${all.length}`);
  });

  it("a derived world's gold is recomputed independently from its own rendered corpus, and differs from the parent's", () => {
    for (const kind of ['values', 'entities'] as const) {
      const d = deriveFacts(elements.facts, { kind, seed: 11 });
      const w = buildFactWorld({ ...elements, facts: d.facts }, { seed: 0 });
      const tasks = [...w.train, ...w.heldout, ...w.dev];
      assert.ok(tasks.length > 100);
      let differs = 0;
      for (const t of tasks) {
        assert.equal(t.gold, goldFromCorpus(t, w.corpus), `${kind}: ${t.question}`);
        const parent = parentGoldOf(t, elements.facts, d.renamed);
        if (parent !== null && parent !== t.gold) differs++;
      }
      assert.ok(differs >= 0.6 * tasks.length, `${kind}: ${differs} of ${tasks.length} answers differ from the parent world's`);
    }
  });
});

describe('the Runs view line of a run (extension/runFolders.ts)', () => {
  it('shows fresh-values and fresh-entities beside held-out when they were evaluated, and only then', () => {
    const base = { dir: '/r', name: 'r', kind: 'sft', preset: 'tiny', backend: 'wasm', step: 10, budget: null, heldout: 0.9, checkpoints: [], status: 'finished', trainedOn: null } as const;
    const ev = (split: string, accuracy: number) => ({ split, file: `/r/eval/${split}.json`, rowsFile: null, accuracy, n: 500 });
    assert.equal(describeRun({ ...base, evals: [] } as never), 'sft · tiny · wasm · finished · held-out 90.0%');
    assert.equal(
      describeRun({ ...base, evals: [ev('fresh-entities', 0.074), ev('heldout', 0.9), ev('fresh-values', 0.858)] } as never),
      'sft · tiny · wasm · finished · held-out 90.0% · fresh-values 85.8% · fresh-entities 7.4%',
    );
  });
});
