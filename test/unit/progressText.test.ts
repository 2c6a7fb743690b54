// The worker's progress in units a person reads (extension/progressText.ts).
import * as assert from 'node:assert/strict';
import { describeProgress, etaText } from '../../extension/progressText';

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
  it('says what a GRPO step is doing instead of a full rollout bar', () => {
    const rolling = describeProgress('grpo', { phase: 'grpo rollouts', done: 0, total: 32, message: 'step 5' }, 10);
    assert.equal(rolling.text, 'step 5: rolling out 32 episodes');
    assert.equal(rolling.fraction, null);
    const updating = describeProgress('grpo', { phase: 'grpo rollouts', done: 32, total: 32, message: 'step 5' }, 10);
    assert.equal(updating.text, 'step 5: scoring the 32 episodes and updating the policy');
    const step = describeProgress('grpo', { phase: 'grpo', done: 5, total: 60, message: 'step 5: reward 0.500, solved 40%, flat groups 2/4' }, 100);
    assert.equal(step.text, 'step 5 of 60 done: reward 0.500, solved 40%, flat groups 2/4, about 18.3 min left');
    assert.equal(step.fraction, 5 / 60);
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
