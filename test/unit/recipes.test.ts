// The default recipe and the teacher a run's student imitated: the failure taxonomy compares
// a trajectory with that teacher's, so a GRPO run must report its SFT source's teacher.
import * as assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { runTeacherKnobs } from '../../trainer/run/jobs';
import { DEFAULT_RECIPE, defaultRecipeName, demoRecipeName, getRecipe } from '../../trainer/sft/recipes';
import { DataOrder } from '../../trainer/sft/dataOrder';
import { type ExamplePools, poolKey, poolSampler } from '../../trainer/sft/sft';
import type { TrainExample } from '../../trainer/sft/data';

describe("trainer/sft/recipes: the default recipe and a run's teacher", () => {
  let tmp: string;
  before(() => (tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-recipes-'))));
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('the default recipe reads: counterfactual-value worlds, renamed copies half of them kin, two in five from one-attribute pairs, compares drawn most, k = 1 where the top hit holds', () => {
    const r = getRecipe(DEFAULT_RECIPE);
    assert.equal(r.name, 'reader-k1-own-names-pairs');
    assert.equal(r.augment?.ownNames, 6400);
    assert.equal(r.augment?.ownNamesKin, 0.5);
    assert.equal(r.augment?.ownNamesVaried, true);
    assert.equal(r.augment?.ownNamesSameAttribute, 0.4);
    // The demo's five minutes keep the recipe they were measured with.
    assert.equal(getRecipe(demoRecipeName(false)).name, 'reader-k1-fresh-compare');
    assert.equal(demoRecipeName(true), defaultRecipeName(true));
    assert.equal(r.teacherTopHit, true);
    assert.equal(r.augment?.share, 0.75);
    assert.deepEqual(r.shapeWeights, { lookup: 0.1, double: 0.15, sum: 0.35, compare: 0.4 });
  });

  it("the sampler draws each origin by the augmentation share and each shape by the recipe's weights, whatever the pools' sizes", () => {
    const r = getRecipe(DEFAULT_RECIPE);
    // Pools of very unequal sizes (the natural mix would be mostly sums); each example names its pool.
    const sizes: Record<string, number> = { lookup: 3, double: 5, sum: 400, compare: 40 };
    const pools: ExamplePools = new Map();
    const tagOf = new Map<TrainExample, string>();
    for (const origin of ['seed', 'fresh'] as const) {
      for (const [kind, n] of Object.entries(sizes)) {
        const list = Array.from({ length: n }, () => ({ inputIds: new Int32Array(1), labels: new Int32Array(1), weights: new Float32Array(1), kinds: new Uint8Array(1) }));
        for (const ex of list) tagOf.set(ex, `${origin}|${kind}`);
        pools.set(poolKey('all', origin, kind), list);
      }
    }
    const draws = poolSampler(pools, r, new DataOrder(7))('all', 40_000);
    const count = (pred: (tag: string) => boolean) => draws.filter((ex) => pred(tagOf.get(ex)!)).length / draws.length;
    assert.ok(Math.abs(count((t) => t.startsWith('fresh|')) - 0.75) < 0.01, 'fresh share');
    for (const [kind, w] of Object.entries(r.shapeWeights!)) {
      assert.ok(Math.abs(count((t) => t.endsWith(`|${kind}`)) - w) < 0.01, `${kind}: ${count((t) => t.endsWith(`|${kind}`))} against ${w}`);
    }
  });

  it("an SFT run's teacher is its recipe's; a GRPO run's is that of the run it started from", () => {
    const sft = path.join(tmp, 'sft');
    mkdirSync(sft);
    writeFileSync(path.join(sft, 'config.json'), JSON.stringify({ kind: 'sft', recipe: getRecipe('reader-k1-answer') }));
    assert.deepEqual(runTeacherKnobs({ kind: 'sft', recipe: getRecipe('reader-k1-answer') }), { teacherTopHit: true });
    assert.deepEqual(runTeacherKnobs({ kind: 'grpo', from: { run: sft, checkpoint: 'step-8', step: 8 } }), { teacherTopHit: true });
    assert.deepEqual(runTeacherKnobs({ kind: 'sft', recipe: getRecipe('reader-k1-verdict') }), { teacherTopHit: true, teacherVerdict: true });
    // A source that is gone or damaged: the seed's teacher, and no error.
    assert.deepEqual(runTeacherKnobs({ kind: 'grpo', from: { run: path.join(tmp, 'missing'), step: 1 } }), {});
    const bad = path.join(tmp, 'bad');
    mkdirSync(bad);
    writeFileSync(path.join(bad, 'config.json'), '{ not json');
    assert.deepEqual(runTeacherKnobs({ kind: 'grpo', from: { run: bad, step: 1 } }), {});
  });
});
