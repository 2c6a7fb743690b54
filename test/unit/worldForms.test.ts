// A user's world in its own words (issue 35): a fact table's corpus is rendered with plain
// sentences (or the user's own templates from the world source), never the textbook's story;
// every derived world (fresh splits, augmentation, RL pools) is rendered with the same forms;
// a template without the canonical clause is refused with its line; the textbook world is
// unchanged (its corpus is pinned against the Python reference in world.test.ts).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { PLAIN_TEMPLATES, TEMPLATES, buildCorpus, renderFact } from '../../core/world';
import { WorldFileError, buildFactWorld, checkFactTable, corpusProblem, parseFactTable, statedFact } from '../../core/worldSource';
import { ToolEnv, distill, makeStubTeacher } from '../../core/distill';
import { readWorldFolder, freshWorldTasks, derivedBuildOptions, runWorld } from '../../store/worldFolder';
import { derivedWorldTasks } from '../../trainer/sft/prepare';
import { worldRlTaskPool } from '../../trainer/grpo/grpo';
import { buildWorld, worldEnv } from '../../core/worlds';
import { main } from '../../cli/main';
import { capture } from '../support/capture';

const repoRoot = path.resolve(__dirname, '..', '..');
const ELEMENTS = path.join(repoRoot, 'samples', 'worlds', 'elements', 'elements.csv');

/** Words and phrases of the textbook's story (its three forms, its distractors, its table). */
const STORY = ['Stack-100M', 'capstone', 'Reference note', 'Design log', 'Configuration record', 'project notes', 'specification', 'architecture pass', 'Downstream stages', 'fine-tuning', 'tuned per run', 'ablation run', 'hidden size', 'layer count'];

const storyIn = (texts: readonly string[]): string[] => STORY.filter((w) => texts.some((t) => t.includes(w)));

const RIVERS = [
  'entity,attribute,value',
  'Volga,length in km,3530',
  'Volga,source country,Russia',
  'Danube,length in km,2850',
  'Danube,source country,Germany',
  'Rhine,length in km,1233',
  'Rhine,source country,Switzerland',
  'Nile,length in km,6650',
  'Nile,source country,Burundi',
  'Amazon,length in km,6400',
  'Amazon,source country,Peru',
  'Mississippi,length in km,3766',
  'Mississippi,source country,United States',
].join('\n');

function tmp(): string {
  return mkdtempSync(path.join(tmpdir(), 'agent-lab-forms-'));
}

/** Every training question (drawn sums and compares repeat) distilled by the stub teacher over the world's own corpus (BM25 search): how many are solved. */
function solvedByStub(w: { corpus: { docId: string; text: string }[]; train: import('../../core/types').Task[] }): { solved: number; of: number } {
  const env = new ToolEnv(w.corpus);
  const rows = distill(w.train, makeStubTeacher(w.train), env, 1);
  return { solved: new Set(rows.map((r) => r.task)).size, of: new Set(w.train.map((t) => t.question)).size };
}

describe("a user's world in its own words (issue 35)", () => {
  it('a fact table gives plain sentences: the canonical clause in each, no word of the textbook, deterministic per seed, three forms in turn', () => {
    const table = parseFactTable(RIVERS, 'rivers.csv');
    const w = buildFactWorld(table);
    assert.deepEqual(storyIn(w.corpus.map((p) => p.text)), []);
    assert.equal(w.corpus.length, table.facts.length);
    w.corpus.forEach((p, n) => {
      const [e, a, v] = table.facts[n]!;
      assert.ok(p.text.includes(`the ${a} of ${e} is ${v}.`), p.text);
      assert.equal(p.docId, `doc-${String(n).padStart(4, '0')}-0`);
    });
    assert.equal(w.corpus[0]!.text, 'Entry 0: the length in km of Volga is 3530.');
    assert.equal(w.corpus[1]!.text, 'As listed, the source country of Volga is Russia.');
    assert.equal(w.corpus[2]!.text, 'Record 2 states that the length in km of Danube is 2850.');
    assert.deepEqual(w.templates, PLAIN_TEMPLATES);
    assert.deepEqual(buildFactWorld(table).corpus, w.corpus, 'the same table and seed, the same corpus');
    // Every fact is read back from the corpus as the teacher reads it.
    for (const [e, a, v] of table.facts) assert.equal(statedFact([e, a], w.corpus)?.value, v);
  });

  it("distractors of a user's world use its own attributes and values under names the table does not hold (no ablation runs); per seed", () => {
    const table = parseFactTable(RIVERS, 'rivers.csv');
    const w = buildFactWorld(table, { settings: { distractors: 20 } });
    assert.equal(w.corpus.length, table.facts.length + 40);
    assert.deepEqual(storyIn(w.corpus.map((p) => p.text)), []);
    const extra = w.corpus.slice(table.facts.length).map((p) => p.text);
    const attrs = new Set(table.facts.map((f) => f[1]));
    for (const t of extra) {
      const m = /the (.+) of (entry D-\d{3}) is ([^.,;]+)[.,;]/.exec(t);
      assert.ok(m, t);
      assert.ok(attrs.has(m[1]!), `${m[1]} is the table's attribute`);
      assert.ok(table.facts.some((f) => f[1] === m[1] && f[2] === m[3]), `${m[3]} is a value the table gives ${m[1]}`);
    }
    assert.deepEqual(buildFactWorld(table, { settings: { distractors: 20 } }).corpus, w.corpus);
    assert.notDeepEqual(buildFactWorld(table, { seed: 1, settings: { distractors: 20 } }).corpus.slice(12), w.corpus.slice(12));
    // The stub teacher still finds every fact by BM25 search among them.
    const s = solvedByStub(w);
    assert.equal(s.solved, s.of);
  });

  it("the user's templates (CSV '# template:' lines, JSONL settings.templates) render the corpus, the textbook's words only where they wrote them", () => {
    const csv = RIVERS.replace('entity,attribute,value', [
      '# rivers of the world',
      '# template: River atlas, entry {n}: the {attribute} of {entity} is {value}.',
      '#Template: {entity} runs far; the {attribute} of {entity} is {value}; so say the maps.',
      'entity,attribute,value',
    ].join('\n'));
    const table = parseFactTable(csv, 'rivers.csv');
    assert.deepEqual(table.settings.templates, ['River atlas, entry {n}: the {attribute} of {entity} is {value}.', '{entity} runs far; the {attribute} of {entity} is {value}; so say the maps.']);
    const w = buildFactWorld(table);
    assert.equal(w.corpus[0]!.text, 'River atlas, entry 0: the length in km of Volga is 3530.');
    assert.equal(w.corpus[1]!.text, 'Volga runs far; the source country of Volga is Russia; so say the maps.');
    for (const [e, a, v] of table.facts) assert.equal(statedFact([e, a], w.corpus)?.value, v);
    for (const t of [...w.train, ...w.heldout]) assert.equal(corpusProblem(t, w.corpus), null);

    const jsonl = [
      JSON.stringify({ settings: { templates: ['In the Stack-100M project notes, the {attribute} of {entity} is {value}.'] } }),
      JSON.stringify({ entity: 'Volga', attribute: 'length in km', value: 3530 }),
      JSON.stringify({ entity: 'Nile', attribute: 'length in km', value: 6650 }),
    ].join('\n');
    const jw = buildFactWorld(parseFactTable(jsonl, 'rivers.jsonl'));
    assert.equal(jw.corpus[1]!.text, 'In the Stack-100M project notes, the length in km of Nile is 6650.');
    assert.deepEqual(storyIn(jw.corpus.map((p) => p.text)), ['Stack-100M', 'project notes'], "the user's own words are kept");
  });

  const refused: [string, string, number, string, RegExp][] = [
    ['no clause', '# template: {entity} measures {value}.', 2, 'template', /does not hold the canonical clause "the \{attribute\} of \{entity\} is \{value\}"/],
    ['a capital The', '# template: The {attribute} of {entity} is {value}.', 2, 'template', /lower-case "the"/],
    ['the value not ended by . , ;', '# template: the {attribute} of {entity} is {value} km.', 2, 'template', /followed by '\.', ',' or ';'/],
    ['the clause at the very end', '# template: we know the {attribute} of {entity} is {value}', 2, 'template', /canonical clause/],
    ['an unknown placeholder', '# template: {name}: the {attribute} of {entity} is {value}.', 2, 'template', /"\{name\}" is not a placeholder/],
    ['a lone brace', '# template: {entity: the {attribute} of {entity} is {value}.', 2, 'template', /is not a placeholder/],
    ['a special token', '# template: <|end|> the {attribute} of {entity} is {value}.', 2, 'template', /special token/],
    ['an empty template', '# template:   ', 2, 'template', /is empty/],
  ];
  for (const [what, line, at, field, re] of refused) {
    it(`a CSV template is refused with its line and field: ${what}`, () => {
      const text = `entity,attribute,value\n${line}\nVolga,length in km,3530\nNile,length in km,6650\n`;
      assert.throws(() => parseFactTable(text, 'rivers.csv'), (e: unknown) => {
        assert.ok(e instanceof WorldFileError, String(e));
        assert.equal(e.line, at);
        assert.equal(e.field, field);
        assert.match(e.message, re);
        assert.ok(e.message.startsWith(`rivers.csv:${at}: field "${field}": `), e.message);
        return true;
      });
      // The editor's checks (every problem at once) name the same line.
      const { problems, table } = checkFactTable(text, 'rivers.csv');
      assert.deepEqual(problems.map((p) => [p.line, p.field]), [[at, field]]);
      assert.equal(table.facts.length, 2);
    });
  }

  it("a decimal's hint speaks of the row's own attribute (no textbook or other domain's example)", () => {
    assert.throws(() => parseFactTable('entity,attribute,value\nVolga,length in km,3530.5\n', 'rivers.csv'), (e: unknown) => {
      assert.ok(e instanceof WorldFileError);
      assert.match(e.message, /"35305" as the length in km in tenths, or round it/);
      assert.doesNotMatch(e.message, /kg|10\^21/);
      return true;
    });
  });

  it('a JSONL template is refused with the settings row\'s line and its index; a non-list and a non-string too', () => {
    const row = (templates: unknown) => `${JSON.stringify({ settings: { templates } })}\n{"entity": "Volga", "attribute": "length in km", "value": 3530}\n`;
    const cases: [unknown, string, RegExp][] = [
      [['ok: the {attribute} of {entity} is {value}.', 'Volga is long'], 'settings.templates[1]', /canonical clause/],
      [[], 'settings.templates', /non-empty list/],
      ['the {attribute} of {entity} is {value}.', 'settings.templates', /non-empty list/],
      [[7], 'settings.templates[0]', /must be a string/],
    ];
    for (const [templates, field, re] of cases) {
      assert.throws(() => parseFactTable(row(templates), 'rivers.jsonl'), (e: unknown) => e instanceof WorldFileError && e.line === 1 && e.field === field && re.test(e.message), JSON.stringify(templates));
    }
  });

  it("the textbook world keeps the seed's forms byte for byte; the textbook's table as a fact table gives them only when asked", () => {
    // The seed's three forms (world.test.ts pins the whole corpus against the Python reference).
    assert.equal(renderFact(0, 'Stack-100M', 'hidden size', '512'), 'Reference note 0. In the Stack-100M project notes, the hidden size of Stack-100M is 512. This value is fixed by the capstone specification and is not tuned per run.');
    assert.equal(TEMPLATES.length, 3);
    assert.equal(buildCorpus(0).length, 268);
    assert.deepEqual(buildWorld({ kind: 'seed', seed: 0 }).corpus, buildCorpus(0));
    const seedCsv = 'entity,attribute,value\n' + buildWorld({ kind: 'seed', seed: 0 }).facts.map((f) => f.join(',')).join('\n');
    const table = parseFactTable(seedCsv, 'seed.csv');
    assert.deepEqual(buildFactWorld(table, { settings: { distractors: 120 }, forms: 'textbook' }).corpus, buildCorpus(0));
    const own = buildFactWorld(table, { settings: { distractors: 120 } });
    assert.deepEqual(storyIn(own.corpus.slice(0, 28).map((p) => p.text)).filter((w) => w !== 'Stack-100M' && w !== 'hidden size' && w !== 'layer count'), [], 'only the table\'s own names');
  });

  it('agent-lab world --facts records its forms; its fresh splits, augmentation worlds and RL pools are rendered with them; a world that recorded none keeps the textbook\'s', async function () {
    this.timeout(300_000);
    const dir = tmp();
    try {
      const src = path.join(dir, 'rivers.csv');
      fs.writeFileSync(src, RIVERS.replace('entity,attribute,value', '# template: Atlas {n}: the {attribute} of {entity} is {value}.\nentity,attribute,value'));
      const out = path.join(dir, 'rivers');
      const made = await capture(() => main(['world', '--facts', src, '--out', out]));
      assert.equal(made.code, 0, made.stderr);
      const w = readWorldFolder(out);
      assert.deepEqual(w.manifest!.made.templates, ['Atlas {n}: the {attribute} of {entity} is {value}.']);
      assert.ok(w.corpus.every((p) => /^Atlas \d+: the /.test(p.text)));
      const atlas = (texts: string[]) => texts.every((t) => /^Atlas \d+: the .+ of .+ is [^.,;]+\.$/.test(t));
      for (const split of ['fresh-values', 'fresh-entities'] as const) {
        const { tasks } = freshWorldTasks(w, split);
        const corpus = worldEnv(tasks[0]!.world).retriever.search(tasks[0]!.task.hints.queries[0]!, 3).map((h) => h.passage.text);
        assert.ok(atlas(corpus), `${split}: ${corpus.join(' | ')}`);
        assert.deepEqual(storyIn(corpus), []);
      }
      const aug = derivedWorldTasks(w, { kind: 'values', seed: 1 }, 3, new Set(), 'a pool');
      assert.ok(atlas(buildWorld(aug.id).corpus.map((p) => p.text)));
      const rl = worldRlTaskPool(w, 'fresh-values');
      assert.ok(atlas(buildWorld(rl[0]!.world).corpus.map((p) => p.text)));

      // Plain forms when the source has no templates (recorded, so derived worlds keep them too).
      const plainSrc = path.join(dir, 'plain.csv');
      fs.writeFileSync(plainSrc, RIVERS);
      const plainOut = path.join(dir, 'plain');
      assert.equal((await capture(() => main(['world', '--facts', plainSrc, '--out', plainOut]))).code, 0);
      const pw = readWorldFolder(plainOut);
      assert.deepEqual(pw.manifest!.made.templates, PLAIN_TEMPLATES);
      assert.deepEqual(derivedBuildOptions(pw).forms, PLAIN_TEMPLATES);
      const fresh = freshWorldTasks(pw, 'fresh-values').tasks;
      assert.deepEqual(storyIn(buildWorld(fresh[0]!.world).corpus.map((p) => p.text)), []);

      // A world built before worlds had forms of their own: its derived worlds are rendered as its corpus was.
      const manifestFile = path.join(plainOut, 'world.json');
      const m = JSON.parse(fs.readFileSync(manifestFile, 'utf8'));
      delete m.made.templates;
      fs.writeFileSync(manifestFile, JSON.stringify(m));
      assert.equal(derivedBuildOptions(readWorldFolder(plainOut)).forms, 'textbook');
      // A hand-edited template in world.json is named.
      m.made.templates = ['no clause here'];
      fs.writeFileSync(manifestFile, JSON.stringify(m));
      assert.throws(() => readWorldFolder(plainOut), /world\.json:1: field "made\.templates\[0\]": .*canonical clause/);
      assert.equal(runWorld(dir), null);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('search still finds the facts: BM25 top hits of the answer key\'s queries state the fact (elements sample, plain forms vs the seed\'s)', () => {
    const table = parseFactTable(fs.readFileSync(ELEMENTS, 'utf8'), ELEMENTS);
    const topK = (forms: 'textbook' | undefined, k: number): number => {
      const w = buildFactWorld(table, forms ? { forms } : {});
      const env = new ToolEnv(w.corpus);
      let hit = 0;
      for (const [e, a] of table.facts) {
        const top = env.retriever.search(`${e} ${a}`, k);
        if (top.some((h) => h.passage.text.includes(`the ${a} of ${e} is `))) hit++;
      }
      return hit / table.facts.length;
    };
    const plain1 = topK(undefined, 1);
    const plain2 = topK(undefined, 2);
    const seed1 = topK('textbook', 1);
    console.log(`      top-1 hit states the fact: plain ${plain1.toFixed(3)}, seed's forms ${seed1.toFixed(3)}; top-2: plain ${plain2.toFixed(3)}`);
    assert.ok(plain2 >= 0.99, `top-2 ${plain2}`);
    assert.ok(plain1 >= seed1 - 0.02, `plain top-1 ${plain1} vs the seed's ${seed1}`);
    const w = buildFactWorld(table);
    const s = solvedByStub(w);
    assert.equal(s.solved, s.of, 'the stub teacher solves every training task over the plain corpus');
  });
});
