// The worker's progress in units a person reads (extension/progressText.ts).
import * as assert from 'node:assert/strict';
import { describeProgress, etaText, grpoFigures, type ProgressMemo } from '../../extension/progressText';

describe('progress text', () => {
  it('says an SFT minutes budget in minutes trained and left, with the step', () => {
    const v = describeProgress('sft', { phase: 'sft', done: 46, total: 720, message: 'step 12, loss 2.345' }, 50);
    assert.equal(v.text, 'step 12: 0.8 of 12.0 min trained, about 11.2 min left, loss 2.345');
    assert.equal(v.fraction, 46 / 720);
  });
  it('says an SFT step budget as step N of M, with the time left once it can tell', () => {
    const v = describeProgress('sft', { phase: 'sft', done: 50, total: 200, message: 'loss 1.500' }, 120);
    assert.equal(v.text, 'step 50 of 200, loss 1.500, about 6.0 min left');
    assert.equal(describeProgress('sft', { phase: 'sft', done: 1, total: 200, message: 'loss 9.000' }, 1).text, 'step 1 of 200, loss 9.000');
  });
  it('says what a GRPO step is doing, of how many, with the last step\'s reward and spread (issue 35, item 9)', () => {
    const memo: ProgressMemo = {};
    const rolling = describeProgress('grpo', { phase: 'grpo rollouts', done: 0, total: 32, message: 'step 5 of 60, 4 tasks drawn' }, 10, 0, memo);
    assert.equal(rolling.text, 'GRPO step 5 of 60: rolling out 32 episodes');
    assert.equal(rolling.short, 'step 5/60', 'the status bar puts GRPO before it');
    assert.equal(rolling.fraction, null);
    const updating = describeProgress('grpo', { phase: 'grpo rollouts', done: 32, total: 32, message: 'step 5 of 60, 4 tasks drawn' }, 10, 0, memo);
    assert.equal(updating.text, 'GRPO step 5 of 60: scoring the 32 episodes and updating the policy');
    const step = describeProgress('grpo', { phase: 'grpo', done: 5, total: 60, message: 'step 5: reward 0.420, solved 40%, flat groups 3/4 (zero-spread 75%)' }, 100, 0, memo);
    assert.equal(step.text, 'GRPO step 5 of 60 · reward 0.42 · solved 40% · 1 of 4 groups with a spread (25%) · about 18.3 min left');
    assert.equal(step.fraction, 5 / 60);
    // The next step's rollouts keep the last step's figures in view.
    const next = describeProgress('grpo', { phase: 'grpo rollouts', done: 0, total: 32, message: 'step 6 of 60, 4 tasks drawn' }, 110, 0, memo);
    assert.equal(next.text, 'GRPO step 6 of 60: rolling out 32 episodes · step 5: reward 0.42 · solved 40% · 1 of 4 groups with a spread (25%)');
    // An older trainer's message (no total) still reads.
    assert.equal(describeProgress('grpo', { phase: 'grpo rollouts', done: 0, total: 32, message: 'step 5' }, 10).text, 'GRPO step 5: rolling out 32 episodes');
  });
  it('says a flat GRPO step updated nothing, and a minutes budget in minutes', () => {
    assert.equal(grpoFigures('step 3: reward 1.000, solved 100%, flat groups 4/4 (zero-spread 100%)'), 'reward 1.00 · solved 100% · 0 of 4 groups with a spread (0%): no update');
    assert.equal(grpoFigures('step 3: something else'), 'something else');
    // Dynamic sampling drops a spread of step counts alone (every rollout wrong): nothing trained although rewards differed.
    assert.equal(
      grpoFigures('step 4: reward -0.026, solved 0%, flat groups 0/12 (zero-spread 0%), trained on 0'),
      'reward -0.03 · solved 0% · 0 of 12 groups trained on (12 with a reward spread, kept only where correctness differed): no update',
    );
    assert.equal(grpoFigures('step 4: reward 0.4, solved 40%, flat groups 1/4 (zero-spread 25%), trained on 3'), 'reward 0.40 · solved 40% · 3 of 4 groups with a spread (75%)');
    const v = describeProgress('grpo', { phase: 'grpo', done: 72, total: 180, message: 'step 3: reward 0.420, solved 40%, flat groups 3/4 (zero-spread 75%)' }, 80);
    assert.equal(v.text, 'GRPO step 3 · 1.2 of 3.0 min trained, about 1.8 min left · reward 0.42 · solved 40% · 1 of 4 groups with a spread (25%)');
  });
  it('says the pre-screen runs before step 1, outside the budget', () => {
    const v = describeProgress('grpo', { phase: 'grpo pre-screen', done: 8, total: 24, message: '8 of 24 tasks screened' }, 10);
    assert.equal(v.text, 'pre-screen before step 1: 8 of 24 tasks sampled to predict the groups with a spread (not counted in the budget)');
    assert.equal(v.fraction, null);
  });
  it('says evaluation in tasks, without moving a training bar', () => {
    assert.deepEqual(describeProgress('sft', { phase: 'eval heldout', done: 10, total: 50 }, 1), {
      text: 'evaluating on held-out: 10 of 50 tasks',
      short: 'eval 10/50',
      fraction: null,
    });
    assert.equal(describeProgress('eval', { phase: 'eval heldout', done: 10, total: 50 }, 1).fraction, 0.2);
  });
  it('gives no time left before it can tell', () => {
    assert.equal(etaText(0.01, 100), '');
    assert.equal(etaText(0.5, 2), '');
    assert.equal(etaText(0.5, 30), 'about 30 s left');
  });
});
