// What the Runs view watches (issue 35): one non-recursive watcher per folder its items
// come from, kept in step with the folders there are, and a filter that lets through the
// files it shows something of (a new *.traces.jsonl in a world folder after Distill, a
// world.json, a run's config.json, metrics.jsonl, eval/*, checkpoints/*) and nothing else.
// The view itself (vscode) refreshes on these; the UI tier checks it in code-server
// (test/ui/runsView.ui.ts).
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { diffTargets, isRunsViewFile, targetKey, watchTargets } from '../../extension/runsWatch';

const root = path.join(path.sep, 'ws', 'runs');
const world = path.join(root, 'world-rivers-20261204-120000');
const run = path.join(root, 'sft-20261204-120500');

describe('the Runs view watches the files its items come from (issue 35)', () => {
  it('a watcher on the runs folder, each world folder and each run folder (with eval/, checkpoints/, data/)', () => {
    const t = watchTargets([root], [world], [run]);
    assert.deepEqual(t, [
      { base: root, pattern: '*' },
      { base: world, pattern: '{world.json,corpus.jsonl,*.traces.jsonl}' },
      { base: run, pattern: '{config.json,metrics.jsonl,world,eval,checkpoints,data}' },
      { base: path.join(run, 'eval'), pattern: '*.{json,jsonl}' },
      { base: path.join(run, 'checkpoints'), pattern: '*' },
      { base: path.join(run, 'data'), pattern: 'source.json' },
    ]);
    // None is recursive: no pattern has a path segment or **.
    assert.ok(t.every((x) => !x.pattern.includes('/') && !x.pattern.includes('**')));
  });

  it('the watchers follow the folders: a new world is watched, a removed run is not', () => {
    const before = watchTargets([root], [], [run]).map(targetKey);
    const { start, stop } = diffTargets(before, watchTargets([root], [world], []));
    assert.deepEqual(start, [{ base: world, pattern: '{world.json,corpus.jsonl,*.traces.jsonl}' }]);
    assert.equal(stop.length, 4);
    assert.ok(stop.every((k) => k.startsWith(run)));
    assert.deepEqual(diffTargets(before, watchTargets([root], [], [run])), { start: [], stop: [] });
  });

  it('refreshes for the files it shows: a new traces file after Distill, world.json, metrics, eval, checkpoints, folders made', () => {
    const yes = [
      path.join(world, 'train.traces.jsonl'),
      path.join(world, 'train-2.traces.jsonl'),
      path.join(world, 'world.json'),
      path.join(world, 'corpus.jsonl'),
      path.join(run, 'config.json'),
      path.join(run, 'metrics.jsonl'),
      path.join(run, 'eval', 'heldout.json'),
      path.join(run, 'eval', 'fresh-values.jsonl'),
      path.join(run, 'checkpoints', 'step-40'),
      path.join(run, 'data', 'source.json'),
      path.join(root, 'world-new'),
    ];
    for (const f of yes) assert.ok(isRunsViewFile(f, [root]), f);
  });

  it('and not for the rest: a run\'s tokenizer and training data, a world\'s task files, anything outside the runs folder', () => {
    const no = [
      path.join(run, 'tokenizer.json'),
      path.join(run, 'data', 'train.traces.jsonl'),
      path.join(run, 'world', 'corpus.jsonl'),
      path.join(run, 'checkpoints', 'step-40', 'model.safetensors'),
      path.join(world, 'train.jsonl'),
      path.join(world, '.train.traces.jsonl.tmp-1'),
      path.join(path.sep, 'ws', 'samples', 'facts.csv'),
      path.join(path.sep, 'ws', 'runs-other', 'x', 'config.json'),
      root,
    ];
    for (const f of no) assert.ok(!isRunsViewFile(f, [root]), f);
  });
});
