// Worlds derived from any fact table (issue 27): counterfactual values and new names shaped
// like the table's own, deterministic per seed; a derived world's gold recomputed
// independently from its own rendered corpus.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { deriveFacts, kinSyllables, nameLike, newNamesFor, parentGoldOf, renameInText, withOwnNames } from '../../core/derivedWorlds';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { TASK_FACTS } from '../../core/world';
import { ReservedWorldError, namesTrainingMustNotSee } from '../../core/worlds';
import { worldRlTaskPool } from '../../trainer/grpo/grpo';
import { OWN_NAMES_SUFFIX, RUN_VOCAB_CAP, asksOneAttributeOfTwo, derivedWorldTasks, prepareRunData, prepareWorldRunData, tokenizerText, worldEvaluationNames } from '../../trainer/sft/prepare';
import { readWorldFolder } from '../../store/worldFolder';
import { main } from '../../cli/main';
import { capture } from '../support/capture';
import { canonicalTokenizerJson, trainBpe } from '../../core/tokenizer';
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
    case 'difference':
      return String(BigInt(v[0]!) - BigInt(v[1]!));
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

/** The passages a transcript's tools returned, as a corpus of its own. */
const toolPassages = (text: string) => [...text.matchAll(/<\|tool_result\|>([\s\S]*?)<\|end\|>/g)].map((m) => ({ text: m[1]! }));
const jsonl = (file: string) => fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
const hasWord = (text: string, name: string) => new RegExp(`(?<![A-Za-z0-9])${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![A-Za-z0-9])`).test(text);

describe('new names made of trained pieces (issue 27): transcripts with names of their own', () => {
  it('nameLike renews every part of a camel-case or acronym name, and a lower-case name\'s words', () => {
    const rng = new PyRandom(5);
    for (let i = 0; i < 30; i++) {
      const ro = nameLike('RoFormer', rng);
      assert.match(ro, /^[A-Z][a-z]+[A-Z][a-z]+$/);
      assert.ok(!ro.includes('Former') && !ro.startsWith('Ro'), ro);
      assert.match(nameLike('RMSNorm', rng), /^[A-Z]{3}[A-Z][a-z]+$/);
      const g = nameLike('grouped-query attention', rng);
      assert.match(g, /^[a-z]+-[a-z]+ [a-z]+$/);
      assert.ok(!g.includes('grouped') && !g.includes('attention'), g);
    }
  });

  it('renameInText replaces whole names only, longest first, in one pass', () => {
    const renamed = new Map([
      ['Adam', 'Zork'],
      ['Adam Large', 'Brio Kel'],
      ['Zork', 'Adam'],
    ]);
    assert.equal(renameInText('Adam, Adamant, Adam Large and Zork; "Adam"', renamed), 'Zork, Adamant, Brio Kel and Adam; "Zork"');
  });

  it("a renamed copy's gold is read again from its own tool results; its names are new, distinct per copy, and none an evaluation split's", async function () {
    this.timeout(120_000);
    const tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-own-'));
    const world = path.join(tmp, 'elements');
    const run = path.join(tmp, 'run');
    try {
      const made = await capture(() => main(['world', '--facts', ELEMENTS, '--out', world]));
      assert.equal(made.code, 0, made.stderr);
      {
        const w = readWorldFolder(world);
        const data = prepareWorldRunData(run, { world: w }, () => {}, { augment: { share: 0.5, worlds: 2, perShape: 3, ownNames: 40 } });
        assert.equal(data.augment!.ownNames, 40);
        const rows = jsonl(path.join(run, 'data', 'train.traces.jsonl'));
        const copies = rows.filter((r) => String(r['world']).endsWith(OWN_NAMES_SUFFIX));
        assert.equal(copies.length, 40);
        const tasks = jsonl(path.join(run, 'data', 'train.tasks.jsonl')).filter((r) => String(r['world']).endsWith(OWN_NAMES_SUFFIX));
        assert.equal(tasks.length, 40);
        assert.ok(tasks.every((t) => t['derived'] === true));
        const parentNames = [...new Set(elements.facts.map((f) => f[0]))];
        const evalNames = new Set<string>();
        const devSeeds = w.manifest!.fresh!['dev-entities']!.seeds;
        for (const seed of [...w.manifest!.fresh!['fresh-entities'].seeds, ...devSeeds]) for (const n of deriveFacts(elements.facts, { kind: 'entities', seed }).renamed.values()) evalNames.add(n);
        assert.deepEqual(worldEvaluationNames(w), evalNames, 'the names kept from training: fresh-entities and dev-entities');
        const seen = new Map<string, number>();
        copies.forEach((r, i) => {
          const task = tasks[i] as unknown as Task;
          assert.equal(task.question, r['task']);
          const text = String(r['text']);
          // The transcript's own passages answer its question: the gold read again from them.
          assert.equal(goldFromCorpus(task, toolPassages(text)), task.gold, task.question);
          assert.ok(text.trimEnd().endsWith(`Answer: ${task.gold}<|end|>`), 'the answer is the copy\'s gold');
          for (const [e] of task.hints.facts) {
            assert.ok(!parentNames.includes(e) && !evalNames.has(e), `${e} is a parent's or an evaluation name`);
            seen.set(e, (seen.get(e) ?? 0) + 1);
          }
          for (const p of parentNames) assert.ok(!hasWord(text, p), `a copy still names ${p}`);
        });
        // Names of their own: (almost) none recurs across the 40 copies.
        const repeats = [...seen.values()].filter((n) => n > 2).length;
        assert.ok(repeats <= 1, `${repeats} names recur`);
        // The tokenizer: the corpus and every training transcript (the copies too), never held-out text.
        const corpus = jsonl(path.join(run, 'world', 'corpus.jsonl')).map((r) => String(r['text']));
        const expected = trainBpe(tokenizerText(corpus, rows as never, []), { vocabSize: RUN_VOCAB_CAP });
        assert.equal(fs.readFileSync(path.join(run, 'tokenizer.json'), 'utf8'), canonicalTokenizerJson(expected));
        const prepared = JSON.parse(fs.readFileSync(path.join(run, 'data', 'prepared.json'), 'utf8'));
        assert.deepEqual(prepared.augmentation, { worlds: 2, rows: rows.length - rows.filter((r) => r['world'] === undefined).length, ownNames: 40 });
        assert.equal(prepared.tokenizer.version, 2);

        // RL's fresh pools of this world: derived from its table with the RL seeds, no task of
        // held-out or dev, no evaluation name; the one assertion SFT's augmentation draws through too.
        const evalKeys = new Set([...w.heldout, ...w.dev].map((t) => `${t.kind}|${JSON.stringify(t.hints.facts)}`));
        for (const pool of ['fresh-values', 'fresh-entities'] as const) {
          const rl = worldRlTaskPool(w, pool);
          assert.ok(rl.length >= 100, `${pool}: ${rl.length} tasks`);
          assert.equal(new Set(rl.map((x) => x.world.seed)).size, 50);
          for (const { task } of rl) {
            for (const [e] of task.hints.facts) assert.ok(!evalNames.has(e), `${pool} holds ${e}, a fresh-entities name`);
            if (pool === 'fresh-values') assert.ok(!evalKeys.has(`${task.kind}|${JSON.stringify(task.hints.facts)}`), `${pool} holds an evaluation task: ${task.question}`);
            else assert.ok(task.hints.facts.every(([e]) => !parentNames.includes(e)), 'new names only');
          }
        }
        // (A values world keeps the table's names: called as if they were evaluation names, it is refused.)
        assert.throws(() => derivedWorldTasks(w, { kind: 'values', seed: 1 }, 3, new Set(parentNames), 'a pool'), (err: Error) => err instanceof ReservedWorldError && /a pool: ".+" is a name of an evaluation split/.test(err.message));
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('the textbook world: copies avoid every name of the fresh-entities split and the RL pools; the tokenizer never sees held-out text', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'agent-lab-own-tb-'));
    try {
      const data = prepareRunData(dir, 'seed', () => {}, { augment: { share: 0.5, worlds: 2, perShape: 3, ownNames: 30 } });
      assert.equal(data.augment!.ownNames, 30);
      const rows = jsonl(path.join(dir, 'data', 'train.traces.jsonl'));
      const copies = rows.filter((r) => String(r['world']).endsWith(OWN_NAMES_SUFFIX));
      assert.equal(copies.length, 30);
      const reserved = namesTrainingMustNotSee();
      const seedNames = [...new Set(TASK_FACTS.map((f) => f[0]))];
      const tasks = jsonl(path.join(dir, 'data', 'train.tasks.jsonl')).filter((r) => String(r['world']).endsWith(OWN_NAMES_SUFFIX)) as unknown as Task[];
      for (const t of tasks) for (const [e] of t.hints.facts) assert.ok(!reserved.has(e) && !seedNames.includes(e), `${e} may not be trained on`);
      for (const r of copies) for (const n of reserved) assert.ok(!hasWord(String(r['text']), n), `a copy names ${n}, an evaluation or RL name`);
      const held = jsonl(path.join(dir, 'data', 'heldout.traces.jsonl')).map((r) => String(r['text']));
      const corpus = jsonl(path.join(dir, 'world', 'corpus.jsonl')).map((r) => String(r['text']));
      const trainOnly = canonicalTokenizerJson(trainBpe(tokenizerText(corpus, rows as never, []), { vocabSize: RUN_VOCAB_CAP }));
      assert.equal(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'), trainOnly);
      // And held-out text would have made another one (the check above can fail).
      assert.notEqual(canonicalTokenizerJson(trainBpe([...corpus, ...rows.map((r) => String(r['text'])), ...held], { vocabSize: RUN_VOCAB_CAP })), trainOnly);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('kin names: a copy\'s names share syllables, stay apart from each other and from every reserved name, and its gold is read again from its own passages', () => {
    // Two names of one question that share pieces ("Junpe", "Junmida") are what a student
    // copying by the last piece confuses; kin copies are made of a few syllables each.
    const rng = new PyRandom(3);
    const entities = ['Stack-100M', 'DeepSeekMath', 'Chinchilla', 'RoFormer'];
    let shared = 0;
    for (let i = 0; i < 50; i++) {
      const syllables = kinSyllables(rng);
      assert.equal(new Set(syllables).size, 3);
      const names = [...newNamesFor(entities, rng, new Set(), undefined, syllables).values()];
      assert.equal(new Set(names).size, names.length, names.join(', '));
      const words = names.map((n) => n.replace(/-\d+M$/, '').toLowerCase());
      if (words.some((a, k) => words.slice(k + 1).some((b) => syllables.some((s) => s.length >= 2 && a.includes(s) && b.includes(s))))) shared++;
    }
    assert.ok(shared >= 45, `only ${shared} of 50 draws have two names sharing a syllable`);
    // Free names share far less: the check above can fail.
    let free = 0;
    for (let i = 0; i < 50; i++) {
      const names = [...newNamesFor(entities, rng).values()].map((n) => n.replace(/-\d+M$/, '').toLowerCase());
      if (names.some((a, k) => names.slice(k + 1).some((b) => [...Array(Math.max(0, a.length - 2)).keys()].some((j) => b.includes(a.slice(j, j + 3)))))) free++;
    }
    assert.ok(free < shared, `free names shared pieces in ${free} of 50 draws`);

    const dir = mkdtempSync(path.join(tmpdir(), 'agent-lab-kin-'));
    try {
      const data = prepareRunData(dir, 'seed', () => {}, { augment: { share: 0.5, worlds: 2, perShape: 3, ownNames: 30, ownNamesKin: 1 } });
      assert.equal(data.augment!.ownNames, 30);
      const rows = jsonl(path.join(dir, 'data', 'train.traces.jsonl'));
      const copies = rows.filter((r) => String(r['world']).endsWith(OWN_NAMES_SUFFIX));
      const tasks = jsonl(path.join(dir, 'data', 'train.tasks.jsonl')).filter((r) => String(r['world']).endsWith(OWN_NAMES_SUFFIX)) as unknown as Task[];
      assert.equal(copies.length, 30);
      const reserved = namesTrainingMustNotSee();
      const seedNames = [...new Set(TASK_FACTS.map((f) => f[0]))];
      copies.forEach((r, i) => {
        const task = tasks[i]!;
        assert.equal(goldFromCorpus(task, toolPassages(String(r['text']))), task.gold, task.question);
        for (const [e] of task.hints.facts) assert.ok(!reserved.has(e) && !seedNames.includes(e), `${e} may not be trained on`);
        for (const n of reserved) assert.ok(!hasWord(String(r['text']), n), `a copy names ${n}, an evaluation or RL name`);
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('pair copies: varied kin names repeat no syllable back to back and vary their numbers; copies drawn from one-attribute pairs', () => {
    // The kin student looped on repeated syllables ("Loholvenvenven") and completed "Junpe-40M"
    // to the table's three digits; its worst questions ask one attribute of two new names.
    const rng = new PyRandom(5);
    const widths = new Set<number>();
    let plainRepeats = 0;
    for (let i = 0; i < 200; i++) {
      const syllables = kinSyllables(rng);
      const varied = nameLike('Stack-100M Chinchilla', rng, syllables, true);
      const [word, num, word2] = [varied.split('-')[0]!, varied.match(/-(\d+)M/)![1]!, varied.split(' ')[1]!];
      widths.add(num.length);
      for (const w of [word, word2]) assert.ok(!syllables.some((s) => s.length > 0 && w.toLowerCase().includes(s + s)), `${w} repeats a syllable of ${syllables.join('/')}`);
      const plain = nameLike('Chinchilla', rng, syllables).toLowerCase();
      if (syllables.some((s) => plain.includes(s + s))) plainRepeats++;
    }
    assert.deepEqual([...widths].sort(), [2, 3, 4]);
    assert.ok(plainRepeats > 20, `plain kin names repeated a syllable in only ${plainRepeats} of 200: the check above can fail`);
    // Without `varied` a name is drawn as before, draw for draw.
    assert.equal(nameLike('Stack-100M', new PyRandom(7), ['ka', 'ven', 'lo']), nameLike('Stack-100M', new PyRandom(7), ['ka', 'ven', 'lo'], false));

    const dir = mkdtempSync(path.join(tmpdir(), 'agent-lab-pairs-'));
    try {
      prepareRunData(dir, 'seed', () => {}, { augment: { share: 0.5, worlds: 2, perShape: 3, ownNames: 40, ownNamesKin: 1, ownNamesVaried: true, ownNamesSameAttribute: 1 } });
      const tasks = jsonl(path.join(dir, 'data', 'train.tasks.jsonl')).filter((r) => String(r['world']).endsWith(OWN_NAMES_SUFFIX)) as unknown as Task[];
      assert.equal(tasks.length, 40);
      for (const t of tasks) assert.ok(asksOneAttributeOfTwo(t), `${t.question} does not ask one attribute of two names`);
      const all = jsonl(path.join(dir, 'data', 'train.tasks.jsonl')) as unknown as Task[];
      assert.ok(all.some((t) => t.hints.facts.length === 2 && !asksOneAttributeOfTwo(t)), 'the rest of the data has other two-name questions: the check above can fail');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('withOwnNames renames only the names the transcript speaks of', () => {
    const rng = new PyRandom(9);
    const task = { question: 'What is the group of Lithium? Use the corpus.', gold: '1', kind: 'lookup', hints: { queries: ['Lithium group'], facts: [['Lithium', 'group']], op: 'lookup' } } as unknown as Task;
    const c = withOwnNames('Lithium and Neon', task, ['Lithium', 'Neon', 'Argon'], rng, new Set());
    assert.deepEqual([...c.renamed.keys()], ['Lithium', 'Neon']);
    assert.ok(!c.text.includes('Lithium') && !c.text.includes('Neon'));
    assert.equal(c.task.hints.queries[0], `${c.renamed.get('Lithium')} group`);
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
