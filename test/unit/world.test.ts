// The world port against the seed: the seed-0 golden (test/golden/world_seed0.json, made by
// test/golden/gen_world.py), the counts the design states, and live differential runs of
// the Python reference for seeds, sizes and texts that no golden holds.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { PyRandom } from '../../core/pyrandom';
import {
  PAPER_FACTS,
  SPEC_FACTS,
  TaskRow,
  PassageRow,
  buildCorpus,
  chunkWords,
  isNum,
  makeTaskPool,
  makeTasks,
  passageToRow,
  taskToRow,
} from '../../core/world';
import { pySplitWhitespace } from '../../core/pystr';
import { referenceUnavailable, runReference } from '../support/reference';

interface WorldGolden {
  seed: number;
  n_distractors: number;
  n_train: number;
  n_heldout: number;
  task_counts: Record<string, number>;
  corpus: PassageRow[];
  train: TaskRow[];
  heldout: TaskRow[];
}

const golden = JSON.parse(
  readFileSync(path.join(__dirname, '..', 'golden', 'world_seed0.json'), 'utf8'),
) as WorldGolden;

function countKinds(rows: { kind: string }[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rows) out[r.kind] = (out[r.kind] ?? 0) + 1;
  return out;
}

/** Skips the enclosing suite, saying why, when the Python reference cannot run here. */
function requireReference(this: Mocha.Context): void {
  const why = referenceUnavailable();
  if (why !== null) {
    console.log(`    skipped: ${why}`);
    this.skip();
  }
}

// Python side of the live checks: the same rows gen_world.py writes.
const WORLD_PROGRAM = `
from stacklm.agent.corpus import build_corpus, make_task_pool, make_tasks
def row(t):
    return {'question': t.question, 'gold': t.gold, 'kind': t.kind, 'hints': t.hints}
out = []
for c in INPUT:
    train, heldout = make_task_pool(c['seed'], c['n_train'], c['n_heldout'])
    out.append({'corpus': [{'doc_id': p.doc_id, 'text': p.text} for p in build_corpus(c['seed'], c['n_distractors'])],
                'tasks': [row(t) for t in make_tasks(c['seed'])],
                'train': [row(t) for t in train], 'heldout': [row(t) for t in heldout]})
print(json.dumps(out))`;

describe('world (port of stacklm/agent/corpus.py)', () => {
  describe('seed 0 against the golden file', () => {
    it('buildCorpus() equals the seed corpus row for row (268 passages)', () => {
      const rows = buildCorpus().map(passageToRow);
      assert.equal(rows.length, 268);
      assert.deepEqual(rows, golden.corpus);
    });

    it('makeTaskPool() equals the seed split (200 train + 50 held-out)', () => {
      const { train, heldout } = makeTaskPool();
      assert.equal(train.length, 200);
      assert.equal(heldout.length, 50);
      assert.deepEqual(train.map(taskToRow), golden.train);
      assert.deepEqual(heldout.map(taskToRow), golden.heldout);
    });

    it('rows serialise byte-identically to Python json.dumps (key order included)', () => {
      // json.dumps(..., separators=(',', ':')) of the golden rows; JSON.stringify keeps key order.
      const want = readFileSync(path.join(__dirname, '..', 'golden', 'world_seed0.json'), 'utf8');
      const { train } = makeTaskPool();
      for (const row of train.map(taskToRow).slice(0, 40)) {
        assert.ok(want.includes(JSON.stringify(row)), `not found verbatim: ${JSON.stringify(row)}`);
      }
      const compare = train.map(taskToRow).find((r) => r.kind === 'compare')!;
      assert.deepEqual(Object.keys(compare.hints), ['queries', 'facts', 'op', 'names']);
      const lookup = train.map(taskToRow).find((r) => r.kind === 'lookup')!;
      assert.deepEqual(Object.keys(lookup.hints), ['queries', 'facts', 'op']);
      assert.equal(lookup.hints.op, null);
      assert.deepEqual(Object.keys(buildCorpus().map(passageToRow)[0]!), ['doc_id', 'text']);
    });

    it('makeTasks() yields 262 tasks: 28 lookup + 28 double + 120 sum + 86 compare', () => {
      const tasks = makeTasks();
      assert.equal(tasks.length, 262);
      assert.deepEqual(countKinds(tasks), { lookup: 28, double: 28, sum: 120, compare: 86 });
      assert.deepEqual(countKinds(tasks), golden.task_counts);
    });

    it('doc ids and distractor entities use the seed formatting', () => {
      const corpus = buildCorpus();
      assert.equal(corpus[0]!.docId, 'doc-0000-0');
      assert.equal(corpus[267]!.docId, 'doc-0267-0');
      assert.ok(corpus.every((p) => /^doc-\d{4}-\d+$/.test(p.docId)));
      assert.ok(corpus[28]!.text.includes(' of ablation run R-000 is '));
      assert.ok(corpus[267]!.text.includes(' of ablation run R-119 is '));
    });

    it('fact tables: 12 spec + 16 paper facts, all numeric per _is_num', () => {
      assert.equal(SPEC_FACTS.length, 12);
      assert.equal(PAPER_FACTS.length, 16);
      assert.ok([...SPEC_FACTS, ...PAPER_FACTS].every((f) => isNum(f[2])));
      assert.deepEqual(['12', '-12', '--3', '', '-', '1.5', ' 1', '1e3'].map(isNum), [true, true, true, false, false, false, false, false]);
    });

    it('throws the seed assert when the pool is too small', () => {
      assert.throws(() => makeTaskPool(0, 250, 50), /pool too small/);
      assert.doesNotThrow(() => makeTaskPool(0, 212, 50));
      assert.throws(() => makeTaskPool(0, 213, 50), /pool too small/);
    });
  });

  describe('chunkWords', () => {
    it('returns short texts unchanged and splits on Python whitespace, not JS \\s', () => {
      const odd = '  a\u3000b\x1cc\x85d\ufeffe  ';
      assert.deepEqual(chunkWords(odd), [odd]);
      assert.deepEqual(pySplitWhitespace(odd), ['a', 'b', 'c', 'd\ufeffe']);
      assert.deepEqual(chunkWords('a b c d e f g', 3, 1), ['a b c', 'c d e', 'e f g']);
      assert.deepEqual(chunkWords('a b c d e', 2, 5), ['a b', 'b c', 'c d', 'd e']);
    });
  });

  describe('live differential against the Python reference', function () {
    before(requireReference);

    const cases = [
      { seed: 7, n_distractors: 30, n_train: 100, n_heldout: 40 },
      { seed: 123, n_distractors: 120, n_train: 200, n_heldout: 50 },
      { seed: -4, n_distractors: 0, n_train: 0, n_heldout: 262 },
    ];

    it(`corpus, tasks and split agree for ${cases.map((c) => `seed ${c.seed}`).join(', ')}`, () => {
      const expected = runReference<{ corpus: PassageRow[]; tasks: TaskRow[]; train: TaskRow[]; heldout: TaskRow[] }[]>(
        WORLD_PROGRAM,
        cases,
      );
      cases.forEach((c, i) => {
        const want = expected[i]!;
        const { train, heldout } = makeTaskPool(c.seed, c.n_train, c.n_heldout);
        const label = `seed ${c.seed}`;
        assert.deepEqual(buildCorpus(c.seed, c.n_distractors).map(passageToRow), want.corpus, label);
        assert.deepEqual(makeTasks(c.seed).map(taskToRow), want.tasks, label);
        assert.deepEqual(train.map(taskToRow), want.train, label);
        assert.deepEqual(heldout.map(taskToRow), want.heldout, label);
        assert.equal(want.corpus.length, 28 + 2 * c.n_distractors, label);
      });
    });

    it('chunkWords agrees on long synthetic texts with odd whitespace and varied size/overlap', () => {
      // Whitespace Python splits on (incl. \x1c-\x1f, \x85, \u3000), and look-alikes it does
      // not (\ufeff, \u200b, \u180e), which must stay inside words.
      const seps = [' ', '  ', '\t', '\n', '\r\n', '\v', '\f', '\x1c', '\x1f', '\x85', '\xa0', '\u2003', '\u3000', '\u2028', ' \t\n '];
      const glue = ['\ufeff', '\u200b', '\u180e'];
      const words = ['alpha', 'b', 'Stack-100M', '512,', '(x)', 'é', '日本', '\u{1F600}', 'R-007', 'z'];
      const rng = new PyRandom(99);
      const texts: string[] = [];
      for (let t = 0; t < 40; t++) {
        const n = [0, 1, 79, 80, 81, 96, 97, 160, 250, 1000][t % 10]!;
        let s = rng.randbelow(3) === 0 ? rng.choice(seps) : '';
        for (let w = 0; w < n; w++) {
          s += rng.choice(words) + (rng.randbelow(10) === 0 ? rng.choice(glue) + rng.choice(words) : '');
          if (w < n - 1 || rng.randbelow(2) === 0) s += rng.choice(seps);
        }
        texts.push(s);
      }
      const params: [number, number][] = [[80, 16], [10, 3], [5, 5], [5, 9], [1, 0], [3, -2], [0, 0], [-3, 2]];
      // Code points, so the text survives any stdin encoding on the Python side.
      const input = { texts: texts.map((s) => Array.from(s, (ch) => ch.codePointAt(0)!)), params };
      const program = `
from stacklm.agent.corpus import chunk_words
texts = [''.join(map(chr, t)) for t in INPUT['texts']]
print(json.dumps([[chunk_words(t, s, o) for s, o in INPUT['params']] for t in texts]))`;
      const expected = runReference<string[][][]>(program, input);
      const got = texts.map((t) => params.map(([s, o]) => chunkWords(t, s, o)));
      assert.equal(got.length, expected.length);
      got.forEach((g, i) => assert.deepEqual(g, expected[i], `text ${i} (${texts[i]!.length} chars)`));
      // The cases must exercise chunking, not only the short-text shortcut.
      assert.ok(got.some((g) => g[0]!.length > 3));
    });
  });
});
