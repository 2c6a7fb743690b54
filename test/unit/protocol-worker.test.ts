// The extension ↔ worker messages (core/protocol/worker.ts): a `done` carries its job's
// kind and the summary typed for it, a `metrics` message a real metrics.jsonl record; the
// validators refuse what a reader would misread.
import * as assert from 'node:assert/strict';
import { checkJobSpec, isJobSummary, parseFromWorker, parseToWorker, type JobResult } from '../../core/protocol/worker';

const sft: JobResult<'sft'> = {
  kind: 'sft',
  cancelled: false,
  summary: { runDir: '/r', steps: 6, minutes: 0.1, wallMinutes: 0.2, backend: 'wasm', loss: 1.5, sup_acc: 0.4, curve: [], dev_curve: [] },
};
const grpo: JobResult<'grpo'> = {
  kind: 'grpo',
  cancelled: true,
  summary: { runDir: '/g', from: '/r', steps: 2, minutes: 0.3, wallMinutes: 0.4, backend: 'cpu', frac_reward_zero_std: [0.5, 1], curve: [{ step: 0, accuracy: 0.2 }] },
};
const evaluated: JobResult<'eval'> = {
  kind: 'eval',
  cancelled: false,
  summary: {
    split: 'heldout', accuracy: 0.5, n: 4, by_kind: { sum: { n: 4, accuracy: 0.5 } }, failures: { final: 2 },
    span_accuracy: { answer: 0.9 }, contaminated: 0, steps_mean: 2.5, checkpoint: 'latest', step: 6,
  },
};

describe('core/protocol/worker: typed worker messages', () => {
  it('accepts a done of each job kind, its summary as sent', () => {
    for (const result of [sft, grpo, evaluated]) {
      const parsed = parseFromWorker({ type: 'done', ...result });
      assert.ok(parsed.ok, `${result.kind}: ${parsed.ok ? '' : parsed.error}`);
      assert.deepEqual(parsed.message, { type: 'done', ...result });
    }
  });

  it('refuses a done without a known kind, or whose summary lacks what readers use', () => {
    assert.equal(parseFromWorker({ type: 'done', cancelled: false, summary: sft.summary }).ok, false, 'no kind');
    assert.equal(parseFromWorker({ type: 'done', kind: 'distill', cancelled: false, summary: sft.summary }).ok, false, 'unknown kind');
    assert.equal(parseFromWorker({ type: 'done', kind: 'eval', cancelled: false, summary: sft.summary }).ok, false, "an SFT summary is not an eval's");
    const { steps: _steps, ...noSteps } = sft.summary;
    assert.equal(parseFromWorker({ type: 'done', kind: 'sft', cancelled: false, summary: noSteps }).ok, false, 'no steps');
    assert.equal(parseFromWorker({ type: 'done', kind: 'sft', summary: sft.summary }).ok, false, 'no cancelled');
    assert.equal(isJobSummary('eval', { ...evaluated.summary, accuracy: '0.5' }), false, 'accuracy as text');
  });

  it('a metrics message carries a metrics.jsonl record (phase, step, time)', () => {
    assert.ok(parseFromWorker({ type: 'metrics', record: { phase: 'sft', step: 3, time: 1.5, loss: 2 } }).ok);
    assert.equal(parseFromWorker({ type: 'metrics', record: { step: 3, time: 1.5, loss: 2 } }).ok, false, 'no phase');
    assert.equal(parseFromWorker({ type: 'metrics', record: { phase: 'sft', step: -1, time: 1.5 } }).ok, false, 'a negative step');
    assert.equal(parseFromWorker({ type: 'metrics', record: { phase: 'rl', step: 1, time: 1 } }).ok, false, 'an unknown phase');
  });

  it('the job specs: each kind checked field by field, naming the bad one', () => {
    assert.equal(checkJobSpec({ kind: 'sft', runDir: '/r', steps: 4 }), null);
    assert.match(checkJobSpec({ kind: 'sft', runDir: '/r', steps: -4 }) ?? '', /job\.steps/);
    assert.match(checkJobSpec({ kind: 'grpo', runDir: '/g' }) ?? '', /job\.from/);
    assert.equal(checkJobSpec({ kind: 'grpo', runDir: '/g', resume: true }), null, 'a resume needs no --from');
    assert.match(checkJobSpec({ kind: 'eval', runDir: '/r', split: 'test' }) ?? '', /job\.split/);
    assert.match(checkJobSpec({ kind: 'distill', split: 'train' }) ?? '', /job\.out is required/, 'a distillation writes a file');
    assert.equal(checkJobSpec({ kind: 'distill', split: 'train', out: '/w/train.traces.jsonl' }), null);
    assert.match(checkJobSpec({ kind: 'distill', split: 'train', out: '/w/t.jsonl', teacher: 'http', apiKey: 'sk-x' }) ?? '', /job\.apiKey: a job never carries a credential/);
    assert.match(checkJobSpec({ kind: 'train', runDir: '/r' }) ?? '', /job\.kind/);
    const start = parseToWorker({ type: 'start', job: { kind: 'eval', runDir: '/r', split: 'dev', limit: 3 } });
    assert.ok(start.ok);
    assert.deepEqual(parseToWorker({ type: 'cancel' }), { ok: true, message: { type: 'cancel' } });
    assert.equal(parseToWorker({ type: 'stop' }).ok, false);
  });
});
