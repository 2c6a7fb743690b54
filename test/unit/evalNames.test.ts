// Issue 27: no name of an evaluation split reaches SFT augmentation or any RL pool, asserted
// where every pool is drawn (core/worlds.ts freshTrainingTasks) and checked here on the pools
// themselves. RL's new-entity pool used to share 48 of fresh-entities' 160 names.
import * as assert from 'node:assert/strict';
import { DEV_ENTITY_SEED, ReservedWorldError, TRAINING_SEEDS, assertNoEvaluationNames, evaluationEntityNames, freshSplitTasks, freshTrainingTasks, namesTrainingMustNotSee } from '../../core/worlds';
import { makeTaskPool } from '../../core/world';
import { overlapKey } from '../../core/overlap';
import { rlTaskPool } from '../../trainer/grpo/grpo';

const names = (tasks: readonly { hints: { facts: [string, string][] } }[]) => new Set(tasks.flatMap((t) => t.hints.facts.map(([e]) => e)));

describe('evaluation names never reach a training pool (issue 27)', function () {
  this.timeout(120_000);
  const evalNames = evaluationEntityNames();

  it('the evaluation names are the fresh-entities split\'s new names (160 of them)', () => {
    const fromSplit = names(freshSplitTasks('fresh-entities').map((w) => w.task));
    assert.ok(evalNames.size >= 150, `${evalNames.size} names`);
    for (const n of fromSplit) if (!names(makeTaskPool(0).train).has(n)) assert.ok(evalNames.has(n), n);
  });

  it('dev-entities (choosing recipes on new names) has names of its own seeds, kept from training like the evaluation\'s', () => {
    const dev = freshSplitTasks('dev-entities');
    assert.equal(dev.length, 200);
    assert.ok(dev.every((w) => w.world.kind === 'entities' && w.world.seed >= DEV_ENTITY_SEED));
    const seedNames = names(makeTaskPool(0).train);
    const devNames = [...names(dev.map((w) => w.task))].filter((n) => !seedNames.has(n));
    assert.ok(devNames.length >= 50, `${devNames.length} new names`);
    for (const n of devNames) assert.ok(evalNames.has(n) && namesTrainingMustNotSee().has(n), `${n} is not kept from training`);
  });

  it("RL's fresh-entities and fresh-values pools hold no evaluation name (before: 48 of 160 shared)", () => {
    for (const pool of ['fresh-entities', 'fresh-values'] as const) {
      const tasks = rlTaskPool(pool, '/nonexistent', makeTaskPool(0).heldout).map((w) => w.task);
      assert.ok(tasks.length > 500);
      const shared = [...names(tasks)].filter((n) => evalNames.has(n));
      console.log(`      (${pool} RL pool: ${names(tasks).size} names, ${shared.length} shared with the evaluation split)`);
      assert.deepEqual(shared, []);
    }
  });

  it("SFT's new-entity augmentation worlds hold no evaluation name", () => {
    const held = new Set(makeTaskPool(0).heldout.map(overlapKey));
    const tasks = Array.from({ length: 20 }, (_, i) => freshTrainingTasks({ kind: 'entities', seed: TRAINING_SEEDS.augmentEntities + i }, 40, held)).flat();
    assert.deepEqual([...names(tasks)].filter((n) => evalNames.has(n) || namesTrainingMustNotSee().has(n)), []);
  });

  it('the assertion refuses a pool that holds an evaluation name, naming it', () => {
    const name = [...evalNames][0]!;
    const task = { question: `What is the layer count of ${name}? Use the corpus.`, gold: '12', kind: 'lookup' as const, hints: { queries: [], facts: [[name, 'layer count']] as [string, string][], op: null } };
    assert.throws(() => assertNoEvaluationNames([task], 'an RL pool'), (err: unknown) => err instanceof ReservedWorldError && err.message.includes(`"${name}" is a name of an evaluation split`));
  });
});
