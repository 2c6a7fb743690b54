// The world job (trainer/run/worldJob.ts) as the worker runs it (runJob with hooks) and as the
// editor reaches it (dist/worker.js over IPC): the textbook's world the editor builds is the
// one it always built, a user's world is read and checked before anything is written, a
// refusal writes nothing and names the file, and a cancel before the writing writes nothing.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runJob, type JobHooks } from '../../trainer/run/jobs';
import { UserError } from '../../trainer/run/jobRun';
import { WorldSourceError } from '../../store/worldBuild';
import { toJsonl } from '../../store/files';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../../core/world';
import { WorldFileError } from '../../core/worldSource';
import { type FromWorker, type ToWorker, type WorldJobSpec } from '../../core/protocol/worker';
import { capture } from '../support/capture';
import { main } from '../../cli/main';
import { ensureWorkerBuilt, talkToWorker } from '../support/worker';

const repoRoot = path.resolve(__dirname, '..', '..');
const ELEMENTS = path.join(repoRoot, 'samples', 'worlds', 'elements', 'elements.csv');
const PLANETS = path.join(repoRoot, 'samples', 'worlds', 'planets-notes');
const BROKEN_TABLE = 'entity,attribute,value\nIron,atomic number,26\nIron,atomic number,27\n';

interface Heard {
  started: string[];
  progress: [string, number, number, string | undefined][];
  logs: [string, string][];
}

/** Hooks that record what the job reports in `heard`; after `cancelAfter` progress reports, the job is asked to stop. */
function recordingHooks(cancelAfter = Infinity): { hooks: JobHooks; heard: Heard } {
  const heard: Heard = { started: [], progress: [], logs: [] };
  const hooks: JobHooks = {
    started: (backend) => void heard.started.push(backend),
    progress: (phase, done, total, message) => void heard.progress.push([phase, done, total, message]),
    metrics: () => {},
    log: (level, message) => void heard.logs.push([level, message]),
    checkpoint: () => {},
    isCancelled: () => heard.progress.length >= cancelAfter,
  };
  return { hooks, heard };
}

const lines = (file: string) => fs.readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');

let tmp: string;
before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-world-job-'));
});
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('the world job through runJob (as the worker calls it)', function () {
  this.timeout(120_000);

  it("the editor's textbook spec builds the world Build World always wrote: seed 0, 120 distractors, 200 + 50 tasks, three files", async () => {
    const out = path.join(tmp, 'textbook');
    const { hooks, heard } = recordingHooks();
    const spec: WorldJobSpec = { kind: 'world', out, seed: 0, distractors: 120, train: 200, heldout: 50 };
    const r = await runJob(spec, hooks);
    assert.equal(r.kind, 'world');
    assert.equal(r.cancelled, false);
    assert.deepEqual(fs.readdirSync(out).sort(), ['corpus.jsonl', 'heldout.jsonl', 'train.jsonl']);
    const pool = makeTaskPool(0, 200, 50);
    assert.equal(fs.readFileSync(path.join(out, 'corpus.jsonl'), 'utf8'), toJsonl(buildCorpus(0, 120).map(passageToRow)));
    assert.equal(fs.readFileSync(path.join(out, 'train.jsonl'), 'utf8'), toJsonl(pool.train.map(taskToRow)));
    assert.equal(fs.readFileSync(path.join(out, 'heldout.jsonl'), 'utf8'), toJsonl(pool.heldout.map(taskToRow)));
    assert.deepEqual([r.summary.out, r.summary.passages, r.summary.train, r.summary.heldout, r.summary.dev], [out, 268, 200, 50, undefined]);
    assert.match(r.summary.lines.join('\n'), /^wrote .*textbook: 268 passages, 200 train and 50 held-out tasks; \d+ held-out questions also in train/);
    assert.deepEqual(heard.started, ['none']);
    assert.deepEqual(
      heard.progress.map(([phase, done, total, message]) => [phase, done, total, message]),
      [['world', 0, 3, 'corpus'], ['world', 1, 3, 'task pool'], ['world', 2, 3, 'writing files'], ['world', 3, 3, undefined]],
    );
  });

  it("a fact table's world: the summary counts what the folder holds, world.json names the source", async () => {
    const out = path.join(tmp, 'elements');
    const { hooks, heard } = recordingHooks();
    const r = await runJob({ kind: 'world', facts: ELEMENTS, out }, hooks);
    assert.equal(r.cancelled, false);
    assert.equal(r.summary.passages, lines(path.join(out, 'corpus.jsonl')).length);
    assert.equal(r.summary.train, lines(path.join(out, 'train.jsonl')).length);
    assert.equal(r.summary.heldout, lines(path.join(out, 'heldout.jsonl')).length);
    assert.equal(r.summary.dev, lines(path.join(out, 'dev.jsonl')).length);
    const manifest = JSON.parse(fs.readFileSync(path.join(out, 'world.json'), 'utf8')) as { source: { kind: string; files: { path: string }[] } };
    assert.deepEqual([manifest.source.kind, manifest.source.files.map((f) => f.path)], ['facts', [ELEMENTS]]);
    assert.match(r.summary.lines[0]!, new RegExp(`^wrote ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: ${r.summary.passages} passages; train ${r.summary.train} \\(`));
    assert.equal(heard.progress.at(-1)![1], 3);
  });

  it("a documents world says what the stub teacher cannot solve; a builder's warnings are logged as warnings (the CLI prints them as before)", async () => {
    const out = path.join(tmp, 'planets');
    const r = await runJob({ kind: 'world', docs: path.join(PLANETS, 'docs'), tasks: path.join(PLANETS, 'tasks.jsonl'), out }, recordingHooks().hooks);
    assert.ok(r.summary.lines.some((l) => /the stub teacher cannot solve: no_hints \d+/.test(l)), r.summary.lines.join('\n'));
    const words = path.join(tmp, 'words.csv');
    fs.writeFileSync(words, 'entity,attribute,value\nIron,colour,grey\nGold,colour,yellow\nZinc,colour,blue\nNeon,colour,red\n');
    const warned = recordingHooks();
    await runJob({ kind: 'world', facts: words, out: path.join(tmp, 'words') }, warned.hooks);
    assert.deepEqual(warned.heard.logs.map(([level]) => level), ['warn', 'warn', 'warn']);
    assert.match(warned.heard.logs[0]![1], /^no double tasks: double needs a numeric value/);
  });

  it('a broken fact table is refused naming file, line and field, and no folder is made', async () => {
    const table = path.join(tmp, 'broken.csv');
    fs.writeFileSync(table, BROKEN_TABLE);
    const out = path.join(tmp, 'never');
    await assert.rejects(runJob({ kind: 'world', facts: table, out }, recordingHooks().hooks), (err: unknown) => {
      assert.ok(err instanceof WorldFileError);
      assert.match(err.message, new RegExp(`^${table.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:3: field "attribute": duplicate fact`));
      return true;
    });
    assert.equal(fs.existsSync(out), false);
  });

  it("a folder of the user's is refused before the work and left as it was; a mistake in what was asked is a UserError", async () => {
    const mine = path.join(tmp, 'mine');
    fs.mkdirSync(mine);
    fs.writeFileSync(path.join(mine, 'notes.txt'), 'keep');
    await assert.rejects(runJob({ kind: 'world', facts: ELEMENTS, out: mine }, recordingHooks().hooks), (err: unknown) => {
      assert.ok(err instanceof WorldSourceError);
      assert.match(err.message, /is not empty \(it holds notes\.txt\) and is not a world made by agent-lab world/);
      return true;
    });
    assert.deepEqual(fs.readdirSync(mine), ['notes.txt']);
    await assert.rejects(runJob({ kind: 'world', facts: ELEMENTS, shapes: 'lookup,nope', out: path.join(tmp, 'x') }, recordingHooks().hooks), UserError);
    await assert.rejects(runJob({ kind: 'world', split: 'train=3', out: path.join(tmp, 'x') }, recordingHooks().hooks), /--shapes, --split and --tools describe a world from --facts FILE/);
    await assert.rejects(runJob({ kind: 'world', train: 100_000, out: path.join(tmp, 'x') }, recordingHooks().hooks), (err: unknown) => err instanceof UserError && /pool too small/.test(err.message));
    assert.equal(fs.existsSync(path.join(tmp, 'x')), false);
  });

  for (const [name, spec] of [
    ['textbook', { kind: 'world', out: '' }],
    ['fact table', { kind: 'world', facts: ELEMENTS, out: '' }],
  ] as const) {
    it(`a cancel at any step before the writing leaves nothing written (${name})`, async () => {
      for (const after of [1, 2]) {
        const out = path.join(tmp, `cancelled-${name.replace(' ', '-')}-${after}`);
        const { hooks, heard } = recordingHooks(after);
        const r = await runJob({ ...spec, out }, hooks);
        assert.equal(r.cancelled, true, `cancelled after ${after} progress report(s)`);
        assert.equal(heard.progress.length, after, 'the job stopped where it saw the cancel');
        assert.equal(fs.existsSync(out), false, `nothing written at ${out}`);
        assert.deepEqual([r.summary.passages, r.summary.train, r.summary.heldout], [0, 0, 0]);
      }
    });
  }
});

describe('the world job through the worker process (as the editor runs it)', function () {
  this.timeout(180_000);
  before(function () {
    this.timeout(300_000);
    ensureWorkerBuilt();
  });

  /** The worker's messages for `messages` sent in order; each one validated. */
  async function talk(messages: ToWorker[]): Promise<FromWorker[]> {
    const heard = await talkToWorker(messages, { cwd: tmp });
    assert.deepEqual(heard.bad, [], 'every message validates');
    return heard.messages;
  }

  it('a fact world ends with a typed done: started (no backend), progress to the end, the summary', async () => {
    const out = path.join(tmp, 'via-worker');
    const heard = await talk([{ type: 'start', job: { kind: 'world', facts: ELEMENTS, out } }]);
    assert.deepEqual(heard.filter((m) => m.type === 'started').map((m) => m.type === 'started' && m.backend), ['none']);
    const progress = heard.flatMap((m) => (m.type === 'progress' ? [[m.done, m.total]] : []));
    assert.deepEqual(progress, [[0, 3], [1, 3], [2, 3], [3, 3]]);
    const done = heard.at(-1)!;
    assert.ok(done.type === 'done' && done.kind === 'world', JSON.stringify(done));
    assert.equal(done.cancelled, false);
    assert.equal(done.summary.out, out);
    assert.equal(done.summary.train, lines(path.join(out, 'train.jsonl')).length);
  });

  it("a refusal fails with the message the CLI prints after 'agent-lab world: ', and writes nothing", async () => {
    const table = path.join(tmp, 'broken-worker.csv');
    fs.writeFileSync(table, BROKEN_TABLE);
    const out = path.join(tmp, 'never-worker');
    const heard = await talk([{ type: 'start', job: { kind: 'world', facts: table, out } }]);
    const failed = heard.at(-1)!;
    assert.equal(failed.type, 'failed');
    const cli = await capture(() => main(['world', '--facts', table, '--out', out]));
    assert.equal(cli.code, 2);
    assert.equal(failed.type === 'failed' && failed.error, cli.stderr.replace(/^agent-lab world: /, ''));
    assert.equal(fs.existsSync(out), false);
  });

  it('a cancel that reaches the worker before the writing: done with cancelled true, no folder', async () => {
    const out = path.join(tmp, 'cancelled-worker');
    // The cancel first, so that it is certainly there when the job first looks.
    const heard = await talk([{ type: 'cancel' }, { type: 'start', job: { kind: 'world', out, seed: 0, distractors: 120, train: 200, heldout: 50 } }]);
    const done = heard.at(-1)!;
    assert.ok(done.type === 'done' && done.kind === 'world' && done.cancelled, JSON.stringify(done));
    assert.equal(fs.existsSync(out), false);
  });
});
