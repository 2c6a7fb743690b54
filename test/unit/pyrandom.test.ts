// PyRandom against CPython 3.11's random.Random: the golden file (test/golden/pyrandom.json,
// made by test/golden/gen_world.py) and a live differential run on seeds it does not hold.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { PyRandom } from '../../core/pyrandom';
import { referenceUnavailable, runReference } from '../support/reference';

type Sample = [n: number, k: number, out: number[]];
type Mixed = number | string;
interface RandomCase {
  seed: string;
  random: number[];
  getrandbits: [k: number, out: string[]][];
  randbelow: [n: string, out: string[]][];
  choice: number[];
  sample: Sample[];
  shuffle: number[][];
  randrange: [args: number[], out: number[]][];
  randint: [args: [number, number], out: number[]][];
  mixed: Mixed[];
}

const golden = JSON.parse(
  readFileSync(path.join(__dirname, '..', 'golden', 'pyrandom.json'), 'utf8'),
) as { python: string; cases: RandomCase[] };

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
const CHOICE_SIZES = [1, 2, 3, 9, 10, 28, 1000];

/** Replays one golden case's recipe (mirrors random_case in gen_world.py). */
function replay(c: Omit<RandomCase, 'random' | 'mixed' | 'randrange' | 'randint'> & Pick<RandomCase, 'seed'>) {
  const seed = BigInt(c.seed);
  let r = new PyRandom(seed);
  const getrandbits = c.getrandbits.map(([k, out]) => [k, out.map(() => r.getrandbits(k).toString())]);
  r = new PyRandom(seed);
  const randbelow = c.randbelow.map(([n, out]) => [n, out.map(() => r.randbelow(BigInt(n)).toString())]);
  r = new PyRandom(seed);
  const choice = CHOICE_SIZES.flatMap((n) => [0, 1, 2].map(() => r.choice(range(n))));
  r = new PyRandom(seed);
  const sample = c.sample.map(([n, k]) => [n, k, r.sample(range(n), k)]);
  r = new PyRandom(seed);
  const shuffle = c.shuffle.map((x) => {
    const arr = range(x.length);
    r.shuffle(arr);
    return arr;
  });
  return { getrandbits, randbelow, choice, sample, shuffle };
}

describe('PyRandom (CPython 3.11 random.Random)', () => {
  it(`golden file was made by CPython 3.11 (${golden.python})`, () => {
    assert.match(golden.python, /^3\.11\./);
    assert.ok(golden.cases.length >= 5);
  });

  for (const c of golden.cases) {
    describe(`seed ${c.seed}`, () => {
      const seed = BigInt(c.seed);

      it('random()', () => {
        const r = new PyRandom(seed);
        assert.deepEqual(c.random.map(() => r.random()), c.random);
      });

      it('getrandbits(k), as bigint and (k <= 53) as number', () => {
        const got = replay(c);
        assert.deepEqual(got.getrandbits, c.getrandbits);
        const r = new PyRandom(seed);
        for (const [k, out] of c.getrandbits) {
          for (const v of out) {
            if (k <= 53) assert.equal(r.getrandbitsNumber(k), Number(v), `k=${k}`);
            else assert.equal(r.getrandbits(k), BigInt(v), `k=${k}`);
          }
        }
      });

      it('_randbelow(n), bigint path and number path', () => {
        assert.deepEqual(replay(c).randbelow, c.randbelow);
        const r = new PyRandom(seed);
        for (const [n, out] of c.randbelow) {
          const big = BigInt(n);
          for (const v of out) {
            if (big <= BigInt(Number.MAX_SAFE_INTEGER)) assert.equal(r.randbelow(Number(big)), Number(v), `n=${n}`);
            else assert.equal(r.randbelow(big), BigInt(v), `n=${n}`);
          }
        }
      });

      it('choice(seq)', () => {
        assert.deepEqual(replay(c).choice, c.choice);
      });

      it('sample(population, k): pool and set branches', () => {
        assert.deepEqual(replay(c).sample, c.sample);
      });

      it('shuffle(x)', () => {
        assert.deepEqual(replay(c).shuffle, c.shuffle);
      });

      it('randrange and randint', () => {
        const r = new PyRandom(seed);
        const got = c.randrange.map(([args, out]) => [
          args,
          out.map(() => (args.length === 1 ? r.randrange(args[0]!) : r.randrange(args[0]!, args[1], args[2]))),
        ]);
        assert.deepEqual(got, c.randrange);
        const gotInt = c.randint.map(([[a, b], out]) => [[a, b], out.map(() => r.randint(a, b))]);
        assert.deepEqual(gotInt, c.randint);
      });

      it('an interleaved stream keeps state across call kinds', () => {
        const r = new PyRandom(seed);
        const got = c.mixed.map((_, i) =>
          i % 3 === 0 ? r.random() : i % 3 === 1 ? r.randbelow(1000 + i) : r.getrandbits(40 + i).toString(),
        );
        assert.deepEqual(got, c.mixed);
      });
    });
  }

  it('seed(n) reseeds; negative seeds equal their absolute value; number and bigint agree', () => {
    const a = new PyRandom(5);
    a.random();
    a.seed(-12345);
    const b = new PyRandom(12345n);
    assert.deepEqual([a.random(), a.getrandbits(77)], [b.random(), b.getrandbits(77)]);
  });

  it('rejects what CPython rejects (and randbelow(0), which CPython would loop on)', () => {
    const r = new PyRandom(0);
    assert.throws(() => r.choice([]), /empty sequence/);
    assert.throws(() => r.sample([1, 2], 3), /Sample larger than population/);
    assert.throws(() => r.sample([1, 2], -1), /Sample larger than population/);
    assert.throws(() => r.randbelow(0), RangeError);
    assert.throws(() => r.randbelow(0n), RangeError);
    assert.throws(() => r.getrandbits(-1), RangeError);
    assert.throws(() => r.getrandbitsNumber(54), RangeError);
    assert.throws(() => r.randrange(0), /empty range/);
    assert.throws(() => r.randrange(3, 3), /empty range/);
    assert.throws(() => r.randrange(0, 10, 0), /zero step/);
    assert.throws(() => new PyRandom(1.5), TypeError);
    assert.equal(r.getrandbits(0), 0n);
  });

  describe('live differential against CPython (seeds not in the golden file)', () => {
    before(function () {
      const why = referenceUnavailable();
      if (why !== null) {
        console.log(`    skipped: ${why}`);
        this.skip();
      }
    });

    it('random, getrandbits, _randbelow, choice, sample, shuffle agree for 5 more seeds', () => {
      const seeds = ['3', '2024', String(2n ** 64n - 1n), String(-(2n ** 33n)), String(10n ** 40n + 1n)];
      const program = `
import random
out = []
for s in INPUT['seeds']:
    r = random.Random(int(s))
    row = {'random': [r.random() for _ in range(5)],
           'bits': [str(r.getrandbits(k)) for k in (3, 32, 45, 64, 130)],
           'below': [str(r._randbelow(n)) for n in (1, 6, 97, 2**40 + 1, 2**70 + 3)],
           'choice': [r.choice(range(n)) for n in (2, 17, 500)],
           'sample': [r.sample(range(n), k) for n, k in ((5, 2), (28, 2), (28, 10), (200, 30), (40, 40), (3000, 7))]}
    x = list(range(120)); r.shuffle(x); row['shuffle'] = x
    out.append(row)
print(json.dumps(out))`;
      const expected = runReference<unknown[]>(program, { seeds });
      const got = seeds.map((s) => {
        const r = new PyRandom(BigInt(s));
        const row = {
          random: range(5).map(() => r.random()),
          bits: [3, 32, 45, 64, 130].map((k) => r.getrandbits(k).toString()),
          below: [1n, 6n, 97n, 2n ** 40n + 1n, 2n ** 70n + 3n].map((n) => r.randbelow(n).toString()),
          choice: [2, 17, 500].map((n) => r.choice(range(n))),
          sample: ([[5, 2], [28, 2], [28, 10], [200, 30], [40, 40], [3000, 7]] as const).map(([n, k]) =>
            r.sample(range(n), k),
          ),
          shuffle: range(120),
        };
        r.shuffle(row.shuffle);
        return row;
      });
      assert.deepEqual(got, expected);
    });
  });
});
