// The Runs view keeps up with a starting job (issue 35, item 1): a job prepares its data before
// it writes config.json, and the view said "No run yet" for that half minute of training.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { datasetTooltipLines, listRunFolders, listRunFoldersWithLive, readRun } from '../../extension/runFolders';

describe('the Runs view: a live job before its config.json', () => {
  let runs: string;
  beforeEach(() => (runs = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-live-'))));
  afterEach(() => fs.rmSync(runs, { recursive: true, force: true }));

  it('lists the live folder beside the finished runs, newest first; a dead empty folder stays out', () => {
    const done = path.join(runs, 'sft-20261205-100000');
    fs.mkdirSync(done);
    fs.writeFileSync(path.join(done, 'config.json'), JSON.stringify({ kind: 'sft' }));
    const starting = path.join(runs, 'sft-20261205-110000');
    const abandoned = path.join(runs, 'sft-20261205-090000');
    fs.mkdirSync(starting);
    fs.mkdirSync(abandoned);
    assert.deepEqual(listRunFolders(runs), [done], 'without the live set: only folders with config.json');
    assert.deepEqual(listRunFoldersWithLive(runs, new Set([starting])), [starting, done]);
    // A live job elsewhere, or one whose folder is gone, adds nothing here.
    assert.deepEqual(listRunFoldersWithLive(runs, new Set([path.join(os.tmpdir(), 'elsewhere-sft'), path.join(runs, 'gone')])), [done]);
    const info = readRun(starting, undefined, true);
    assert.equal(info.status, 'live');
    assert.equal(info.kind, 'sft', "the folder's name says its kind before config.json does");
    assert.equal(info.dir, starting);
  });
});

describe('the Runs view: a dataset row says what it holds', () => {
  it('rows, when written, what it is for and the path; a held-out file says it is never trained on', () => {
    const train = datasetTooltipLines({ file: '/w/train.traces.jsonl', rows: 183 }, new Date('2026-12-05T10:20:00Z'));
    assert.deepEqual(train[0], 'train.traces.jsonl: 183 trajectories distilled by the teacher from the training tasks');
    assert.equal(train[1], 'written 2026-12-05 10:20 UTC');
    assert.match(train[2]!, /Train on These Trajectories/);
    assert.equal(train[3], '/w/train.traces.jsonl');
    const held = datasetTooltipLines({ file: '/w/heldout.traces.jsonl', rows: 1 }, null);
    assert.equal(held[0], 'heldout.traces.jsonl: 1 trajectory of the held-out tasks (never trained on)');
    assert.equal(held.length, 3);
  });
});
