// A user's world from its files (docs/worlds.md): each kind of bad row is one line naming
// file, line and field; the seed's rules make the tasks and the split (the textbook's table
// given as a CSV rebuilds the textbook world); nothing is written when a file is bad.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../cli/main';
import { overlapKey } from '../../core/overlap';
import { TASK_FACTS, buildCorpus, makeTaskPool } from '../../core/world';
import { TASK_SHAPES } from '../../core/types';
import {
  WorldFileError,
  buildDocsWorld,
  buildFactWorld,
  checkFactTable,
  checkTasksFile,
  chunkDocuments,
  corpusProblem,
  parseFactTable,
  parseSplitSpec,
  parseTasksFile,
  splitSizes,
} from '../../core/worldSource';
import { capture } from '../support/capture';

const REPO = path.resolve(__dirname, '..', '..');
const ELEMENTS = path.join(REPO, 'samples', 'worlds', 'elements', 'elements.csv');
const PLANETS = path.join(REPO, 'samples', 'worlds', 'planets-notes');

function errorOf(f: () => unknown): WorldFileError {
  try {
    f();
  } catch (err) {
    if (err instanceof WorldFileError) return err;
    throw err;
  }
  assert.fail('expected a WorldFileError');
}

let tmp: string;
before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-worlds-'));
});
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('fact tables: parsing', () => {
  it('reads CSV (quotes, comments, blank lines, CRLF) and JSONL (settings row, integer values) alike', () => {
    const csv = parseFactTable('# a comment\r\nentity,attribute,value\r\n"Smith, J.",birth year,1950\r\n\r\nIron,chemical symbol,"Fe"\r\n', 'a.csv');
    assert.deepEqual(csv.facts, [
      ['Smith, J.', 'birth year', '1950'],
      ['Iron', 'chemical symbol', 'Fe'],
    ]);
    assert.deepEqual(csv.lines, [3, 5]);
    const jsonl = parseFactTable(
      '{"settings": {"distractors": 3, "shapes": ["lookup", "sum"]}}\n{"entity": "Iron", "attribute": "atomic number", "value": 26}\n{"entity": "Iron", "attribute": "chemical symbol", "value": "Fe"}\n',
      'a.jsonl',
    );
    assert.deepEqual(jsonl.facts, [
      ['Iron', 'atomic number', '26'],
      ['Iron', 'chemical symbol', 'Fe'],
    ]);
    assert.deepEqual(jsonl.settings, { distractors: 3, shapes: ['lookup', 'sum'] });
  });

  // Each kind of mistake: [file name, text, line, field (null: the whole line), what the message says].
  const cases: [string, string, number, string | null, RegExp][] = [
    ['h.csv', 'entity,value\nA,1\n', 1, 'header', /expected the header "entity,attribute,value"/],
    ['empty.csv', '\n# nothing\n', 1, 'header', /empty/],
    ['cols.csv', 'entity,attribute,value\nA,b\n', 2, 'value', /expected 3 columns/],
    ['extra.csv', 'entity,attribute,value\nA,b,1,2\n', 2, 'value', /got 4/],
    ['quote.csv', 'entity,attribute,value\n"A,b,1\n', 2, null, /quoted field is not closed/],
    ['blank.csv', 'entity,attribute,value\nA,,1\n', 2, 'attribute', /is empty/],
    ['pad.csv', 'entity,attribute,value\nA ,b,1\n', 2, 'entity', /leading or trailing spaces/],
    ['dec.csv', 'entity,attribute,value\nEarth,mass,5.97\n', 2, 'value', /holds '\.', ',' or ';'/],
    ['minus.csv', 'entity,attribute,value\nA,b,--5\n', 2, 'value', /not a number/],
    ['dup.csv', 'entity,attribute,value\nA,b,1\nC,d,2\nA,b,3\n', 4, 'attribute', /duplicate fact: .* on line 2/],
    ['nofacts.csv', 'entity,attribute,value\n', 1, null, /no facts/],
    ['nj.jsonl', '{"entity":"A","attribute":"b","value":"1"}\n{oops\n', 2, null, /not JSON/],
    ['arr.jsonl', '["A","b","1"]\n', 1, null, /expected an object/],
    ['miss.jsonl', '{"entity":"A","value":"1"}\n', 1, 'attribute', /is missing/],
    ['unknown.jsonl', '{"entity":"A","attribute":"b","value":"1","unit":"K"}\n', 1, 'unit', /unknown key/],
    ['type.jsonl', '{"entity":"A","attribute":"b","value":true}\n', 1, 'value', /must be a string or an integer/],
    ['float.jsonl', '{"entity":"A","attribute":"b","value":1.5}\n', 1, 'value', /not an integer/],
    ['late.jsonl', '{"entity":"A","attribute":"b","value":"1"}\n{"settings":{}}\n', 2, 'settings', /before the facts/],
    ['setting.jsonl', '{"settings":{"shapes":["lookup","divide"]}}\n{"entity":"A","attribute":"b","value":"1"}\n', 1, 'settings.shapes', /non-empty list of lookup, double, sum, compare/],
  ];
  for (const [file, text, line, field, what] of cases) {
    it(`${file}: line ${line}, ${field === null ? 'the line' : `field "${field}"`}`, () => {
      const e = errorOf(() => parseFactTable(text, file));
      assert.equal(e.file, file);
      assert.equal(e.line, line);
      assert.equal(e.field, field);
      assert.match(e.message, what);
      assert.ok(e.message.startsWith(`${file}:${line}: ${field === null ? '' : `field "${field}": `}`), e.message);
      assert.ok(!e.message.includes('\n'), 'one line');
    });
  }
});

describe('fact tables: the world they make', () => {
  const seedCsv = () => 'entity,attribute,value\n' + TASK_FACTS.map((f) => f.join(',')).join('\n') + '\n';

  it("the textbook's 28 facts as a CSV, with its distractors and split counts, give the textbook's corpus and split (training minus overlap)", () => {
    const table = parseFactTable(seedCsv(), 'seed.csv');
    const w = buildFactWorld(table, { seed: 0, split: { train: 200, heldout: 50, dev: 0 }, settings: { distractors: 120 }, forms: 'textbook' });
    assert.deepEqual(w.corpus, buildCorpus(0));
    const pool = makeTaskPool(0);
    assert.deepEqual(w.heldout, pool.heldout);
    const held = new Set(pool.heldout.map(overlapKey));
    assert.deepEqual(w.train, pool.train.filter((t) => !held.has(overlapKey(t))));
    // The contract's figures: 2 exact and 2 operand-swapped overlaps (5 training rows left out).
    assert.equal(w.overlap.exact, 2);
    assert.equal(w.overlap.swapped, 2);
    assert.equal(w.overlap.excluded, 200 - w.train.length);
    assert.ok(w.overlap.excluded >= 4);
  });

  it('the elements sample: lookup for every fact (symbols too), arithmetic only on numbers, no same-entity or tied compare, no overlap left in train', () => {
    const table = parseFactTable(fs.readFileSync(ELEMENTS, 'utf8'), ELEMENTS);
    assert.equal(new Set(table.facts.map((f) => f[0])).size, 30);
    const w = buildFactWorld(table);
    const all = [...w.train, ...w.heldout, ...w.dev];
    const value = new Map(table.facts.map((f) => [`${f[0]}\u0000${f[1]}`, f[2]]));
    for (const t of all) {
      const vals = t.hints.facts.map(([e, a]) => value.get(`${e}\u0000${a}`)!);
      if (t.kind !== 'lookup') assert.ok(vals.every((v) => /^-?\d+$/.test(v)), `${t.kind} over a non-number: ${t.question}`);
      if (t.kind === 'compare') {
        assert.notEqual(t.hints.facts[0]![0], t.hints.facts[1]![0]);
        assert.notEqual(BigInt(vals[0]!), BigInt(vals[1]!));
      }
    }
    assert.ok(all.some((t) => t.kind === 'lookup' && t.question.includes('chemical symbol')));
    assert.ok(!all.some((t) => t.kind !== 'lookup' && t.question.includes('chemical symbol')));
    const evalKeys = new Set([...w.heldout, ...w.dev].map(overlapKey));
    assert.ok(w.train.every((t) => !evalKeys.has(overlapKey(t))));
    assert.deepEqual(w.sizes, splitSizes(w.sizes.train + w.sizes.heldout + w.sizes.dev));
    for (const split of ['train', 'heldout', 'dev'] as const) {
      assert.equal(Object.values(w.counts[split]).reduce((a, b) => a + b, 0), w[split].length);
    }
  });

  it('shapes narrow the tasks; a table with one number warns that it has no pairs', () => {
    const table = parseFactTable(fs.readFileSync(ELEMENTS, 'utf8'), ELEMENTS);
    const w = buildFactWorld(table, { settings: { shapes: ['lookup', 'compare'] } });
    assert.deepEqual(new Set([...w.train, ...w.heldout, ...w.dev].map((t) => t.kind)), new Set(['lookup', 'compare']));
    const small = buildFactWorld(parseFactTable('entity,attribute,value\nA,size,3\nB,colour,red\nC,colour,blue\n', 's.csv'));
    assert.deepEqual([...small.train, ...small.heldout, ...small.dev].map((t) => t.kind).sort(), ['double', 'lookup', 'lookup', 'lookup']);
    assert.ok(small.warnings.some((w2) => /no sum tasks/.test(w2)));
  });

  it("calls the tool-call grammar refuses are counted (outside_grammar): none in the textbook's or the elements table", () => {
    assert.deepEqual(buildFactWorld(parseFactTable(seedCsv(), 'seed.csv')).unsolvable, {});
    assert.deepEqual(buildFactWorld(parseFactTable(fs.readFileSync(ELEMENTS, 'utf8'), ELEMENTS)).unsolvable, {});
    const odd = buildFactWorld(parseFactTable('entity,attribute,value\nÅngström,unit exponent,-10\nBohr,radius in picometres,53\n', 'odd.csv'));
    // Every task with Ångström in its query, and nothing else.
    const all = [...odd.train, ...odd.heldout, ...odd.dev];
    assert.equal(odd.unsolvable['outside_grammar'], all.filter((t) => t.hints.facts.some(([e]) => e === 'Ångström')).length);
    assert.ok(odd.warnings.some((w) => /grammar refuses .*Ångström/.test(w)));
  });

  it('split specs: counts as asked, defaults 20% held-out and 10% dev, more than the pool refused', () => {
    assert.deepEqual(parseSplitSpec('train=10,dev=0'), { train: 10, dev: 0 });
    assert.throws(() => parseSplitSpec('test=3'), /not NAME=COUNT/);
    // Issue 36, Low: a name given twice was accepted (the last won) and huge counts printed wrong sums.
    // Issue 36, Low: a 300k-row table held ~1.5 GB while the world was built; the count is capped.
    const big = ['entity,attribute,value', ...Array.from({ length: 100_001 }, (_, i) => `E${i},mass,${i + 1}`)].join('\n');
    assert.throws(() => parseFactTable(big, 'big.csv'), /big\.csv:100002: the table has 100001 facts; a world takes at most 100000/);
    assert.throws(() => parseSplitSpec('train=3,train=4'), /train is given twice \(train=3 and train=4\)/);
    assert.throws(() => parseSplitSpec('heldout=99999999999999999999'), /over 999,999,999 tasks/);
    assert.deepEqual(splitSizes(100), { train: 70, heldout: 20, dev: 10 });
    assert.throws(() => splitSizes(10, { train: 8, heldout: 3 }), /fewer than train 8/);
  });
});

describe('documents and questions', () => {
  it("chunks each file with the seed's chunk_words, doc ids PATH#J in path order, empty files skipped", () => {
    const long = Array.from({ length: 100 }, (_, i) => `w${i}`).join(' ');
    const p = chunkDocuments([
      { relPath: 'b/two.md', text: 'short text' },
      { relPath: 'a.txt', text: long },
      { relPath: 'empty.md', text: '  \n' },
    ]);
    assert.deepEqual(p.map((x) => x.docId), ['a.txt#0', 'a.txt#1', 'b/two.md#0']);
    assert.equal(p[0]!.text.split(' ').length, 80);
    assert.equal(p[1]!.text.split(' ')[0], 'w64'); // overlap 16
  });

  const taskCases: [string, number, string | null, RegExp][] = [
    ['{"question":"q?"}', 1, 'gold', /is missing/],
    ['{"question":"q?","gold":7}', 1, 'gold', /must be a string/],
    ['{"question":"","gold":"x"}', 1, 'question', /is empty/],
    ['{"question":"q?","gold":"x","why":"y"}', 1, 'why', /unknown key/],
    ['{"question":"q?","gold":"x","kind":"divide"}', 1, 'kind', /must be one of/],
    ['{"question":"q?","gold":"x"}\n{"question":"q?","gold":"y"}', 2, 'question', /same question is on line 1/],
    ['{"question":"q?","gold":"x","hints":{"queries":[],"facts":[]}}', 1, 'hints.queries', /non-empty list/],
    ['{"question":"q?","gold":"x","hints":{"queries":["a"],"facts":[["a"]]}}', 1, 'hints.facts[0]', /pair/],
    ['{"question":"q?","gold":"x","kind":"sum","hints":{"queries":["a"],"facts":[["a","b"]],"op":"sum"}}', 1, 'hints.facts', /needs 2 fact/],
    ['{"question":"q?","gold":"x","kind":"lookup","hints":{"queries":["a"],"facts":[["a","b"]],"op":"double"}}', 1, 'hints.op', /lookup task has op null/],
    ['{"question":"q?","gold":"x","hints":{"queries":["a","b"],"facts":[["a","b"],["c","d"]],"op":"compare"}}', 1, 'hints.names', /needs names/],
    ['{"question":"q <|end|>","gold":"x"}', 1, 'question', /special token/],
    ['\n\nnope', 3, null, /not JSON/],
  ];
  for (const [text, line, field, what] of taskCases) {
    it(`tasks: ${field ?? 'a line'} (${what.source})`, () => {
      const e = errorOf(() => parseTasksFile(text, 'tasks.jsonl'));
      assert.equal(e.line, line);
      assert.equal(e.field, field);
      assert.match(e.message, what);
    });
  }

  it('the planets sample: hinted tasks checked against the corpus, the rest counted as no_hints; kinds from hints.op', () => {
    const tasksFile = path.join(PLANETS, 'tasks.jsonl');
    const tasks = parseTasksFile(fs.readFileSync(tasksFile, 'utf8'), tasksFile);
    const docs = ['inner-planets.md', 'outer-planets.md'].map((f) => ({ relPath: f, text: fs.readFileSync(path.join(PLANETS, 'docs', f), 'utf8') }));
    const w = buildDocsWorld(chunkDocuments(docs), tasks, tasksFile);
    assert.equal(w.unsolvable['no_hints'], tasks.filter((t) => !t.hinted).length);
    assert.ok(w.unsolvable['no_hints']! > 0);
    assert.equal(w.unsolvable['fact_not_in_corpus'], undefined, w.warnings.join('\n'));
    assert.equal(w.unsolvable['gold_differs'], undefined, w.warnings.join('\n'));
    // A wrong gold and a fact the documents do not state are both caught.
    const bad = parseTasksFile(
      [
        '{"question":"What is the orbital period in days of Mars? Use the corpus.","gold":"686","hints":{"queries":["Mars orbital period"],"facts":[["Mars","orbital period in days"]]}}',
        '{"question":"What is the mass of Mars? Use the corpus.","gold":"642","hints":{"queries":["Mars mass"],"facts":[["Mars","mass"]]}}',
      ].join('\n'),
      'bad.jsonl',
    );
    const wb = buildDocsWorld(chunkDocuments(docs), bad, 'bad.jsonl');
    assert.deepEqual(wb.unsolvable, { gold_differs: 1, fact_not_in_corpus: 1 });
    assert.ok(wb.warnings.some((m) => /^bad\.jsonl:1: field "gold"/.test(m)));
    assert.ok(wb.warnings.some((m) => /^bad\.jsonl:2: field "hints\.facts\[0\]"/.test(m)));
    assert.ok(TASK_SHAPES.includes(tasks[0]!.task.kind));
  });
});

describe('agent-lab world --facts | --docs --tasks (in-process CLI)', () => {
  it('writes the world folder: corpus, three splits, world.json with source hashes, counts and overlap', async () => {
    const out = path.join(tmp, 'elements');
    const r = await capture(() => main(['world', '--facts', ELEMENTS, '--split', 'heldout=60,dev=30', '--out', out]));
    assert.equal(r.code, 0, r.stderr);
    for (const f of ['corpus.jsonl', 'train.jsonl', 'heldout.jsonl', 'dev.jsonl', 'world.json']) assert.ok(fs.existsSync(path.join(out, f)), f);
    const m = JSON.parse(fs.readFileSync(path.join(out, 'world.json'), 'utf8'));
    assert.equal(m['format'], 'agent-lab-world/1');
    assert.equal(m['source'].kind, 'facts');
    assert.match(m['source'].files[0].sha256, /^[0-9a-f]{64}$/);
    assert.equal(m['made'].split.heldout, 60);
    assert.equal(fs.readFileSync(path.join(out, 'heldout.jsonl'), 'utf8').trim().split('\n').length, 60);
    assert.match(r.stdout, /148 passages; train \d+ \(lookup \d+, double \d+, sum \d+, compare \d+\)/);
    // Building again into the same world folder is allowed; into a folder of the user's, not.
    assert.equal((await capture(() => main(['world', '--facts', ELEMENTS, '--out', out]))).code, 0);
    const mine = path.join(tmp, 'mine');
    fs.mkdirSync(mine);
    fs.writeFileSync(path.join(mine, 'notes.txt'), 'keep me');
    const refused = await capture(() => main(['world', '--facts', ELEMENTS, '--out', mine]));
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /not empty \(it holds notes\.txt\)/);
    assert.deepEqual(fs.readdirSync(mine), ['notes.txt']);
  });

  it('a bad fact table or tasks file: one line with file:line and field, exit 2, nothing written', async () => {
    const bad = path.join(tmp, 'bad.csv');
    fs.writeFileSync(bad, 'entity,attribute,value\nIron,atomic number,26\nIron,atomic number,27\n');
    const out = path.join(tmp, 'never');
    const r = await capture(() => main(['world', '--facts', bad, '--out', out]));
    assert.equal(r.code, 2);
    assert.equal(r.stderr, `agent-lab world: ${bad}:3: field "attribute": duplicate fact: the atomic number of Iron is already given on line 2`);
    assert.equal(fs.existsSync(out), false);
    const badTasks = path.join(tmp, 'bad.jsonl');
    fs.writeFileSync(badTasks, '{"question":"q?","gold":"x"}\n{"question":"r?","gold":"y","kind":"sum","hints":{"queries":["a"],"facts":[["a","b"]],"op":"sum"}}\n');
    const r2 = await capture(() => main(['world', '--docs', path.join(PLANETS, 'docs'), '--tasks', badTasks, '--out', out]));
    assert.equal(r2.code, 2);
    assert.equal(r2.stderr.split('\n').length, 1);
    assert.match(r2.stderr, /bad\.jsonl:2: field "hints\.facts": a sum task needs 2 fact\(s\), got 1$/);
    assert.equal(fs.existsSync(out), false);
  });

  it('usage: --facts with --docs, --docs without --tasks, --train with --facts, a split over the pool', async () => {
    const out = path.join(tmp, 'u');
    const runs: [string[], RegExp][] = [
      [['--facts', ELEMENTS, '--docs', PLANETS], /not both/],
      [['--docs', PLANETS], /go together/],
      [['--facts', ELEMENTS, '--train', '10'], /--split train=N/],
      [['--facts', ELEMENTS, '--split', 'heldout=999'], /fewer than/],
      [['--shapes', 'lookup'], /--facts FILE or --docs/],
    ];
    for (const [args, what] of runs) {
      const r = await capture(() => main(['world', ...args, '--out', out]));
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, what);
      assert.equal(fs.existsSync(out), false);
    }
  });
});

describe('world files checked whole (the language server): every bad row, by the same checks', () => {
  const table = ['entity,attribute,value', 'Iron,atomic number,26', 'Iron,atomic number,27', 'Gold,atomic number', 'Tin,symbol,Sn.', 'Zinc,atomic number,30', ''].join('\n');

  it('checkFactTable reports each bad row once, in line order, and keeps the good rows', () => {
    const { table: t, problems } = checkFactTable(table, 'f.csv');
    assert.deepEqual(
      problems.map((e) => [e.line, e.field]),
      [
        [3, 'attribute'],
        [4, 'value'],
        [5, 'value'],
      ],
    );
    assert.deepEqual(t.facts, [
      ['Iron', 'atomic number', '26'],
      ['Zinc', 'atomic number', '30'],
    ]);
    assert.deepEqual(t.lines, [2, 6]);
    // The throwing form stops at the first of them, with the same words.
    assert.throws(() => parseFactTable(table, 'f.csv'), { message: problems[1]!.message });
    // A wrong header is reported once, not once per row after it.
    assert.deepEqual(
      checkFactTable('name,attribute,value\nA,b,1\nB,b,2\n', 'g.csv').problems.map((e) => [e.line, e.field]),
      [[1, 'header']],
    );
  });

  it('checkTasksFile reports each bad row; corpusProblem names the field the stub teacher trips on', () => {
    const rows = [
      '{"question": "What is the mass of X? Use the corpus.", "gold": "5", "hints": {"queries": ["X mass"], "facts": [["X", "mass"]], "op": null}}',
      '{"question": "Q2", "gold": 2}',
      '{"question": "Q3", "gold": "a", "kind": "sum"}',
      '{"question": "What is the mass of Y? Use the corpus.", "gold": "6", "hints": {"queries": ["Y mass"], "facts": [["Y", "mass"]], "op": null}}',
      'not json',
    ];
    const { tasks, problems } = checkTasksFile(rows.join('\n'), 't.jsonl');
    assert.deepEqual(
      problems.map((e) => [e.line, e.field]),
      [
        [2, 'gold'],
        [5, null],
      ],
    );
    assert.deepEqual(
      tasks.map((t) => t.line),
      [1, 3, 4],
    );
    const corpus = [{ docId: 'a.md#0', text: 'Notes: the mass of X is 4. Done.' }];
    assert.deepEqual(corpusProblem(tasks[0]!.task, corpus), { reason: 'gold_differs', field: 'gold', message: '"5" but the corpus says "4"' });
    assert.equal(corpusProblem(tasks[2]!.task, corpus)?.field, 'hints.facts[0]');
    assert.equal(corpusProblem(tasks[2]!.task, corpus)?.reason, 'fact_not_in_corpus');
  });

  it('issue 27: the split gives train every shape held-out tests (a 4-fact table put every sum and compare into held-out or dev, and said nothing)', () => {
    const table = parseFactTable('entity,attribute,value\nA,mass,3\nB,mass,5\nC,mass,8\nD,mass,13\n', 'small.csv');
    for (let seed = 0; seed < 20; seed++) {
      const w = buildFactWorld(table, { seed });
      const trainShapes = new Set(w.train.map((t) => t.kind));
      for (const t of [...w.heldout, ...w.dev]) {
        if (!trainShapes.has(t.kind)) assert.ok(w.warnings.some((x) => x.includes(`train has no ${t.kind} task`)), `seed ${seed}: ${t.kind} untrained and unsaid`);
      }
      const untaught = [...new Set([...w.heldout, ...w.dev].map((t) => t.kind))].filter((k) => !trainShapes.has(k));
      assert.deepEqual(untaught, [], `seed ${seed}: train ${[...trainShapes].join(',')}; held-out/dev shapes without training: ${untaught.join(',')}`);
    }
  });
});
