// Ask the Student as a job (trainer/agent/askJob.ts): the same job answers through runJob
// in-process (what `agent-lab run` prints) and in the worker process (what the editor
// receives); the refusals keep their messages and the CLI its exit codes; nothing is written
// into the run, and the model's tensors are freed whether it answers or refuses.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { type AskJobSummary, isJobSummary } from '../../core/protocol/worker';
import { main } from '../../cli/main';
import { InputError } from '../../store/files';
import { QuestionTooLong } from '../../trainer/agent/askJob';
import { UserError } from '../../trainer/run/jobRun';
import { type JobHooks, runJob } from '../../trainer/run/jobs';
import { capture } from '../support/capture';
import { copyAsKilledBeforeCheckpoint } from '../support/runFiles';
import { ensureWorkerBuilt, talkToWorker } from '../support/worker';

const QUESTION = 'What is the layer count of Stack-100M? Use the corpus.';

const hooksFor = (started: string[] = []): JobHooks => ({
  started: (backend) => started.push(backend),
  progress: () => {},
  metrics: () => {},
  log: () => {},
  checkpoint: () => {},
  isCancelled: () => false,
});

/** Every file under `dir` with its size and mtime: what "nothing written" compares. */
function snapshot(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .map((e) => path.join(e.parentPath, e.name))
    .map((f) => `${f} ${fs.statSync(f).size} ${fs.statSync(f).mtimeMs}`)
    .sort();
}

/** The lines `agent-lab run` prints for a summary (its text form). */
function printed(s: AskJobSummary): string[] {
  const lines: string[] = [];
  for (const step of s.record) {
    lines.push(`--- step (${step.kind}${step.guard ? `, ${step.guard}` : ''}${step.truncated ? ', cut' : ''})`, step.text);
    if (step.observation !== undefined) lines.push(`>>> ${step.observation}`);
  }
  const why = s.contextFull ? `, the trajectory outgrew the student's context of ${s.context} tokens` : s.outOfSteps ? ', out of steps' : '';
  lines.push(`answer: ${s.answer ?? '(none)'}  (${s.steps} steps${why}, checkpoint ${s.checkpoint})`);
  return lines;
}

describe('Ask the Student as a job (trainer/agent/askJob.ts)', function () {
  this.timeout(600_000);
  let tmp: string;
  let run: string;
  let answered: AskJobSummary;

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-ask-job-'));
    run = path.join(tmp, 'run');
    const trained = await runJob({ kind: 'sft', runDir: run, backend: 'wasm', steps: 2, evalLimit: 0 }, hooksFor());
    assert.equal(trained.summary.steps, 2);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('answers through runJob: the whole transcript, the steps as `agent-lab run` prints them, the checkpoint; nothing written into the run', async () => {
    const before = snapshot(run);
    const started: string[] = [];
    const result = await runJob({ kind: 'ask', runDir: run, question: QUESTION, backend: 'wasm' }, hooksFor(started));
    assert.equal(result.kind, 'ask');
    assert.equal(result.cancelled, false);
    assert.deepEqual(started, ['wasm'], 'the job says once which backend answers');
    answered = result.summary;
    assert.ok(isJobSummary('ask', answered), 'the summary the worker protocol accepts');
    assert.equal(answered.question, QUESTION);
    assert.ok(answered.text.startsWith('<|system|>') && answered.text.includes(QUESTION), 'the wire-format transcript');
    assert.ok(answered.steps >= 1);
    assert.ok(answered.record.length >= answered.steps, 'a step per turn (plus a forced answer when out of steps)');
    // Each step's text (and tool result) is in the transcript, in order.
    let at = 0;
    for (const step of answered.record) {
      const where = answered.text.indexOf(step.text, at);
      assert.ok(where >= at, `step ${JSON.stringify(step.text.slice(0, 40))} in the transcript`);
      at = where + step.text.length;
      if (step.observation !== undefined) assert.ok(answered.text.includes(step.observation.slice(0, 30)), 'the observation in the transcript');
    }
    assert.equal(answered.checkpoint, 'step-2');
    const config = JSON.parse(fs.readFileSync(path.join(run, 'config.json'), 'utf8')) as { model: { maxSeq: number } };
    assert.equal(answered.context, config.model.maxSeq);
    assert.deepEqual(snapshot(run), before, 'asking writes nothing into the run');
  });

  it('`agent-lab run` prints the job\'s record and answer (text form) and the job\'s fields (--json), nothing on stderr', async () => {
    const text = await capture(() => main(['run', '--run', run, '--backend', 'wasm', '--', QUESTION]));
    assert.equal(text.code, 0, text.stderr);
    assert.equal(text.stderr, '');
    assert.equal(text.stdout, printed(answered).join('\n'));
    const json = await capture(() => main(['run', '--run', run, '--backend', 'wasm', '--json', '--', QUESTION]));
    assert.equal(json.code, 0, json.stderr);
    assert.equal(json.stderr, '');
    const { question, answer, steps, outOfSteps, contextFull, text: transcript } = answered;
    assert.equal(json.stdout, JSON.stringify({ question, answer, steps, outOfSteps, contextFull, text: transcript }));
  });

  it('refuses a folder that is no run, a run without a trained model, a bad checkpoint name (UserError: the CLI exits 2)', async () => {
    const nothing = path.join(tmp, 'nothing');
    await assert.rejects(runJob({ kind: 'ask', runDir: nothing, question: QUESTION }, hooksFor()), (e: unknown) => e instanceof UserError && e.message === `${nothing} is not a run folder (no config.json)`);
    const untrained = path.join(tmp, 'untrained');
    fs.mkdirSync(untrained);
    fs.writeFileSync(path.join(untrained, 'config.json'), '{}');
    await assert.rejects(
      runJob({ kind: 'ask', runDir: untrained, question: QUESTION }, hooksFor()),
      (e: unknown) => e instanceof UserError && e.message === `${untrained} holds no trained model; train one with agent-lab train sft --run ${untrained}`,
    );
    await assert.rejects(
      runJob({ kind: 'ask', runDir: run, question: QUESTION, checkpoint: 'best' }, hooksFor()),
      (e: unknown) => e instanceof UserError && e.message === "--checkpoint must be 'latest' or 'step-N' (got 'best')",
    );
    const cli = await capture(() => main(['run', '--run', nothing, '--', QUESTION]));
    assert.equal(cli.code, 2);
    assert.ok(cli.stderr.startsWith(`agent-lab run: ${nothing} is not a run folder (no config.json)\nusage: agent-lab run --run DIR`), cli.stderr);
  });

  it('refuses a run killed before its first checkpoint (InputError naming the checkpoint: the CLI exits 1), and starts no backend', async () => {
    const killed = path.join(tmp, 'killed');
    copyAsKilledBeforeCheckpoint(run, killed);
    const started: string[] = [];
    await assert.rejects(runJob({ kind: 'ask', runDir: killed, question: QUESTION }, hooksFor(started)), (e: unknown) => e instanceof InputError && /checkpoint/.test(e.message));
    assert.deepEqual(started, []);
    const cli = await capture(() => main(['run', '--run', killed, '--', QUESTION]));
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /^agent-lab run: .*checkpoint/);
  });

  it('a question longer than the context is refused (the CLI exits 1), and the model built for it is freed', async () => {
    const long = 'What is '.repeat(400) + '2+2?';
    const tensors = tf.memory().numTensors;
    await assert.rejects(
      runJob({ kind: 'ask', runDir: run, question: long, backend: 'wasm' }, hooksFor()),
      (e: unknown) => e instanceof QuestionTooLong && /^the question does not fit the student's context: the prompt is \d+ tokens, the context \d+ \(shorten the question\)$/.test(e.message),
    );
    assert.equal(tf.memory().numTensors, tensors, 'the refused job left no tensor behind');
    await runJob({ kind: 'ask', runDir: run, question: QUESTION, backend: 'wasm' }, hooksFor());
    assert.equal(tf.memory().numTensors, tensors, 'nor did an answered one');
    const cli = await capture(() => main(['run', '--run', run, '--backend', 'wasm', '--', long]));
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /^agent-lab run: the question does not fit the student's context/);
    assert.equal(cli.stdout, '');
  });

  it('in the worker process: a typed done with the same answer; a refusal is a failed message with its text', async () => {
    ensureWorkerBuilt();
    const ok = await talkToWorker([{ type: 'start', job: { kind: 'ask', runDir: run, question: QUESTION, backend: 'wasm' } }]);
    assert.deepEqual(ok.bad, [], 'every message validates');
    assert.deepEqual(ok.messages.filter((m) => m.type === 'started').map((m) => m.type === 'started' && m.backend), ['wasm']);
    const done = ok.messages.find((m) => m.type === 'done');
    assert.ok(done && done.kind === 'ask', JSON.stringify(ok.messages.at(-1)));
    assert.deepEqual(done.summary, answered, 'the same answer as in-process (greedy decoding)');
    assert.equal(ok.code, 0);
    const nothing = path.join(tmp, 'nothing');
    const refused = await talkToWorker([{ type: 'start', job: { kind: 'ask', runDir: nothing, question: QUESTION } }]);
    assert.deepEqual(refused.bad, []);
    assert.deepEqual(
      refused.messages.filter((m) => m.type === 'failed' || m.type === 'done'),
      [{ type: 'failed', error: `${nothing} is not a run folder (no config.json)` }],
    );
    assert.equal(refused.code, 1);
  });
});
