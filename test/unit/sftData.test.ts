// Preparing an SFT run folder from the trajectories a user distilled (trainer/sft/tracesRun.ts, the worker runs it for an SFT job given `traces`):
// the run trains on exactly those rows (less the held-out overlaps, counted), nothing the
// user owns is written over, and bad rows are refused naming the file, the line and the field.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ToolEnv, distill, makeStubTeacher } from '../../core/distill';
import { overlapKey } from '../../core/overlap';
import { tokenizerFromJsonText } from '../../core/tokenizer';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../../core/world';
import { dataFiles } from '../../trainer/sft/prepare';
import { prepareSftRunData, readTraceRows } from '../../trainer/sft/tracesRun';

const jsonl = (rows: unknown[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';

describe('SFT run data from distilled trajectories', () => {
  let tmp: string;
  let world: string;
  let traces: string;
  const pool = makeTaskPool(0);
  const corpus = buildCorpus(0);
  // A world folder as "Build World" writes it, and 40 train tasks distilled into it.
  const rows = distill(pool.train.slice(0, 40), makeStubTeacher(pool.train), new ToolEnv(corpus), 2);
  const heldKeys = new Set(pool.heldout.map(overlapKey));
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-sftdata-'));
    world = path.join(tmp, 'runs', 'world-1');
    fs.mkdirSync(world, { recursive: true });
    fs.writeFileSync(path.join(world, 'corpus.jsonl'), jsonl(corpus.map(passageToRow)));
    fs.writeFileSync(path.join(world, 'train.jsonl'), jsonl(pool.train.map(taskToRow)));
    fs.writeFileSync(path.join(world, 'heldout.jsonl'), jsonl(pool.heldout.map(taskToRow)));
    traces = path.join(world, 'train.traces.jsonl');
    // One row of a task that overlaps the held-out split (it must be left out).
    const overlapping = pool.train.find((t) => heldKeys.has(overlapKey(t)))!;
    const leak = distill([overlapping], makeStubTeacher([overlapping]), new ToolEnv(corpus), 1);
    assert.equal(leak.length, 1);
    fs.writeFileSync(traces, jsonl([...rows, ...leak]));
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('writes exactly the distilled rows (less the held-out overlap) and a tokenizer the trainer takes as given', () => {
    const before = fs.readFileSync(traces, 'utf8');
    const runDir = path.join(tmp, 'runs', 'sft-1');
    const r = prepareSftRunData(runDir, traces);
    assert.equal(r.trainRows, rows.length);
    assert.equal(r.excluded, 1);
    assert.equal(r.world, 'folder');
    const files = dataFiles(runDir);
    assert.deepEqual(readTraceRows(files.trainTraces), rows);
    assert.ok(fs.existsSync(files.tokenizer), 'tokenizer.json (else the trainer would rebuild the data)');
    const tok = tokenizerFromJsonText(fs.readFileSync(files.tokenizer, 'utf8'));
    assert.equal(tok.vocabSize, r.vocabSize);
    const tasks = fs.readFileSync(files.trainTasks, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { question: string });
    assert.deepEqual(new Set(tasks.map((t) => t.question)), new Set(rows.map((x) => x.task)));
    assert.ok(readTraceRows(files.heldoutTraces).length > 0, 'held-out reference transcripts');
    assert.equal(fs.readFileSync(traces, 'utf8'), before, "the user's file is untouched");
    const source = JSON.parse(fs.readFileSync(path.join(runDir, 'data', 'source.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(source['traces'], path.resolve(traces));
  });

  it('never writes into an existing run folder', () => {
    const runDir = path.join(tmp, 'runs', 'taken');
    fs.mkdirSync(runDir, { recursive: true });
    fs.writeFileSync(path.join(runDir, 'notes.txt'), 'mine');
    assert.throws(() => prepareSftRunData(runDir, traces), /already exists and is not empty/);
    assert.deepEqual(fs.readdirSync(runDir), ['notes.txt']);
  });

  it('refuses held-out trajectories as training data', () => {
    const held = path.join(world, 'heldout.traces.jsonl');
    fs.writeFileSync(held, jsonl(distill(pool.heldout.slice(0, 5), makeStubTeacher(pool.heldout), new ToolEnv(corpus), 1)));
    assert.throws(() => prepareSftRunData(path.join(tmp, 'runs', 'sft-held'), held), /overlaps the held-out split/);
    assert.equal(fs.existsSync(path.join(tmp, 'runs', 'sft-held')), false);
  });

  it('names the file, the line and the field of a bad row', () => {
    const bad = path.join(tmp, 'bad.traces.jsonl');
    fs.writeFileSync(bad, jsonl([rows[0]]) + '{"task": "q", "kind": "sum"}\n');
    assert.throws(() => readTraceRows(bad), (err: Error) => err.message === `${bad}:2: field "text" must be a string (the transcript)`);
    fs.writeFileSync(bad, 'not json\n');
    assert.throws(() => readTraceRows(bad), new RegExp(`^Error: ${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:1: not JSON`));
  });
});
