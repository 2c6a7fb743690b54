// GRPO's revisit queue (trainer/grpo/revisit.ts): tasks whose last group had spread come back
// first, oldest first; a flat group takes its task out; the capacity keeps the newest; a
// saved state is checked against the pool.
import * as assert from 'node:assert/strict';
import { RevisitQueue, drawRound, revisitStateProblem } from '../../trainer/grpo/revisit';

describe('GRPO revisit queue', () => {
  it('gives back informative tasks oldest first, skipping those already drawn this step', () => {
    const q = new RevisitQueue(8);
    for (const ti of [5, 9, 2, 7]) q.record(ti, true);
    q.record(3, false); // a flat task never enters
    assert.deepEqual(q.take(2, new Set([5])), [9, 2]);
    assert.deepEqual(q.exportState(), [5, 7], 'the skipped task stays, in its place');
    assert.deepEqual(q.take(5, new Set()), [5, 7]);
    assert.equal(q.size, 0);
  });

  it('moves a task that had spread again to the tail, and drops one that came out flat', () => {
    const q = new RevisitQueue(8, [1, 2, 3]);
    q.record(1, true);
    assert.deepEqual(q.exportState(), [2, 3, 1]);
    q.record(3, false);
    assert.deepEqual(q.exportState(), [2, 1]);
  });

  it('keeps at most its capacity, the most recently informative', () => {
    const q = new RevisitQueue(3);
    for (let ti = 0; ti < 10; ti++) q.record(ti, true);
    assert.deepEqual(q.exportState(), [7, 8, 9]);
    assert.deepEqual(new RevisitQueue(2, [1, 2, 3]).exportState(), [2, 3]);
    assert.throws(() => new RevisitQueue(0), /capacity/);
  });

  it('checks a saved state against the pool', () => {
    assert.equal(revisitStateProblem([0, 4, 2], 5), null);
    assert.match(revisitStateProblem([0, 5], 5) ?? '', /entry 1 \(5\).*below the pool's 5/);
    assert.match(revisitStateProblem([1, 1], 5) ?? '', /twice/);
    assert.match(revisitStateProblem({ 0: 1 }, 5) ?? '', /array/);
    assert.match(revisitStateProblem([1.5], 5) ?? '', /entry 0/);
  });

  it("a step's round: the queue's tasks first, then new uniform draws that skip every task already picked", () => {
    const q = new RevisitQueue(8, [7, 3, 9]);
    const picked = new Set([3]);
    const draws = [0.75, 0.35, 0.05, 0.55]; // tasks 7 (revisited already), 3 (picked), 0, 5 of a pool of 10
    let i = 0;
    const { round, revisited } = drawRound(q, picked, 4, 10, () => draws[i++]!);
    assert.deepEqual(round, [7, 9, 0, 5]);
    assert.equal(revisited, 2);
    assert.deepEqual(q.exportState(), [3], 'the task picked earlier in the step stays queued');
    assert.deepEqual([...picked].sort((a, b) => a - b), [0, 3, 5, 7, 9]);
    // Without revisiting, the same draws give new tasks only.
    i = 0;
    assert.deepEqual(drawRound(null, new Set(), 3, 10, () => draws[i++]!), { round: [7, 3, 0], revisited: 0 });
    // A pool that runs out stops the round short.
    assert.deepEqual(drawRound(null, new Set([0, 1]), 5, 3, () => 0.9).round, [2]);
  });
});
