// The default recipe and the teacher a run's student imitated: the failure taxonomy compares
// a trajectory with that teacher's, so a GRPO run must report its SFT source's teacher.
import * as assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { runTeacherKnobs } from '../../trainer/jobs';
import { DEFAULT_RECIPE, getRecipe } from '../../trainer/recipes';

describe("trainer/recipes: the default recipe and a run's teacher", () => {
  let tmp: string;
  before(() => (tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-recipes-'))));
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('the default recipe reads: counterfactual-value worlds, balanced shapes, k = 1 where the top hit holds', () => {
    const r = getRecipe(DEFAULT_RECIPE);
    assert.equal(r.name, 'reader-k1-fresh');
    assert.equal(r.teacherTopHit, true);
    assert.equal(r.augment?.share, 0.75);
    assert.ok(r.shapeWeights);
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
