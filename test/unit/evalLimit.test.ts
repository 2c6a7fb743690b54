// A limited Evaluate measures every question shape (issue 35's tour: the first 20 of a world's
// 55 held-out tasks held no lookup, so the figure was of other shapes than the split's).
import * as assert from 'node:assert/strict';
import { spreadByShape } from '../../trainer/run/jobs';

describe('eval --limit: tasks spread over the shapes', () => {
  const split = ['sum', 'sum', 'sum', 'compare', 'compare', 'lookup', 'double', 'lookup'].map((kind, i) => ({ task: { kind, id: i } }));
  const ids = (xs: { task: { id: number } }[]) => xs.map((x) => x.task.id);

  it('takes one of each shape in turn, kept in the split order', () => {
    assert.deepEqual(ids(spreadByShape(split, 4)), [0, 3, 5, 6]);
    assert.deepEqual(ids(spreadByShape(split, 6)), [0, 1, 3, 4, 5, 6]);
    assert.deepEqual(ids(spreadByShape(split, 1)), [0]);
  });

  it('no limit, or one as large as the split: the whole split as it is', () => {
    assert.deepEqual(ids(spreadByShape(split, undefined)), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual(ids(spreadByShape(split, 50)), [0, 1, 2, 3, 4, 5, 6, 7]);
  });
});
