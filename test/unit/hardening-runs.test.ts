// Issue 36, Low items on run folders: a tokenizer of the same size with other ids is refused
// by eval, run and resume (only GRPO checked its sha256); a metrics record is never glued onto
// an unterminated last line; two jobs on one run folder (two --resume) do not both run.
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../cli/main';
import { tokenizerFromJsonText, tokenizerHash } from '../../core/tokenizer';
import { checkRunTokenizer } from '../../trainer/run/runGuards';
import { MetricsWriter, lockRun } from '../../store/runStore';
import { capture } from '../support/capture';
import { RUN_LOCK_FILE } from '../../core/protocol/folders';

/** The same tokenizer with the ids of two ordinary tokens swapped: same size, other meaning. */
function permuted(text: string): string {
  const j = JSON.parse(text) as { model: { vocab: Record<string, number> } };
  const names = Object.keys(j.model.vocab).filter((t) => j.model.vocab[t]! > 20);
  const [a, b] = [names[0]!, names[1]!];
  [j.model.vocab[a], j.model.vocab[b]] = [j.model.vocab[b]!, j.model.vocab[a]!];
  return JSON.stringify(j);
}

describe('issue 36: run folders (Low items)', function () {
  this.timeout(300_000);
  let tmp: string;
  let run: string;
  before(async function () {
    this.timeout(300_000);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-hard-runs-'));
    run = path.join(tmp, 'run');
    const t = await capture(() => main(['train', 'sft', '--steps', '2', '--run', run]));
    assert.equal(t.code, 0, t.stderr);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('Low: a tokenizer of the same size with permuted ids is refused by eval, run and train sft --resume, naming both hashes', async () => {
    const file = path.join(run, 'tokenizer.json');
    const original = fs.readFileSync(file, 'utf8');
    const config = JSON.parse(fs.readFileSync(path.join(run, 'config.json'), 'utf8')) as Record<string, unknown>;
    assert.doesNotThrow(() => checkRunTokenizer(config, path.join(run, 'config.json'), tokenizerFromJsonText(original)));
    const other = tokenizerFromJsonText(permuted(original));
    assert.equal(other.vocabSize, tokenizerFromJsonText(original).vocabSize);
    assert.notEqual(tokenizerHash(other), tokenizerHash(tokenizerFromJsonText(original)));
    fs.writeFileSync(file, permuted(original));
    try {
      for (const args of [
        ['eval', '--run', run, '--split', 'heldout', '--limit', '1'],
        ['run', '--run', run, '--', 'What is the vocabulary size of Stack-100M? Use the corpus.'],
        ['train', 'sft', '--resume', '--run', run],
      ]) {
        const r = await capture(() => main(args));
        assert.notEqual(r.code, 0, `${args[0]} accepted a permuted tokenizer`);
        assert.match(r.stderr, /tokenizer\.json is not the tokenizer this run was trained with \(config\.json records sha256 sha256:[0-9a-f]+\.\.\., the file has sha256:/, `${args.join(' ')}: ${r.stderr}`);
      }
    } finally {
      fs.writeFileSync(file, original);
    }
    const ok = await capture(() => main(['eval', '--run', run, '--split', 'heldout', '--limit', '1']));
    assert.equal(ok.code, 0, ok.stderr);
  });

  it('Low: after an unterminated last line, the next metrics record starts a line of its own', () => {
    const file = path.join(tmp, 'metrics.jsonl');
    fs.writeFileSync(file, '{"phase": "sft", "step": 1}\n{"phase": "sft", "st');
    const w = new MetricsWriter(file);
    w.append({ phase: 'eval', step: 1, time: 0, split: 'heldout', accuracy: 0.5, by_kind: {} } as never);
    w.close();
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    assert.equal(lines[1], '{"phase": "sft", "st', 'the torn line stays as it was');
    assert.deepEqual(JSON.parse(lines[2]!), { phase: 'eval', step: 1, time: 0, split: 'heldout', accuracy: 0.5, by_kind: {} });
    const clean = path.join(tmp, 'clean.jsonl');
    fs.writeFileSync(clean, '{"a": 1}\n');
    const w2 = new MetricsWriter(clean);
    w2.append({ event: 'resume', step: 1 });
    w2.close();
    assert.equal(fs.readFileSync(clean, 'utf8'), '{"a": 1}\n{"event":"resume","step":1}\n', 'no blank line added after a whole line');
  });

  it('Low: two jobs on one run folder: the second is refused while the first holds it; a lock whose process is gone is taken over', async () => {
    const run = path.join(tmp, 'locked');
    fs.mkdirSync(run);
    // Another live process holds the run.
    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    const exited = new Promise((r) => other.on('exit', r));
    try {
      fs.writeFileSync(path.join(run, RUN_LOCK_FILE), JSON.stringify({ pid: other.pid, started: 'then' }));
      assert.throws(() => lockRun(run), new RegExp(`being trained by another job \\(pid ${other.pid}`));
    } finally {
      other.kill('SIGKILL');
    }
    await exited;
    // Its process gone (kill -9): the lock is stale and taken over, and released on close.
    const release = lockRun(run);
    assert.match(fs.readFileSync(path.join(run, RUN_LOCK_FILE), 'utf8'), new RegExp(`"pid":${process.pid}`));
    release();
    assert.ok(!fs.existsSync(path.join(run, RUN_LOCK_FILE)));
  });

  it('Low: train sft --resume on a run another process is training is refused with exit 1 and the run untouched', async () => {
    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      fs.writeFileSync(path.join(run, RUN_LOCK_FILE), JSON.stringify({ pid: other.pid, started: 'then' }));
      const metricsBefore = fs.readFileSync(path.join(run, 'metrics.jsonl'), 'utf8');
      const r = await capture(() => main(['train', 'sft', '--resume', '--run', run]));
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /being trained by another job/, r.stderr);
      assert.equal(fs.readFileSync(path.join(run, 'metrics.jsonl'), 'utf8'), metricsBefore);
    } finally {
      other.kill('SIGKILL');
      fs.rmSync(path.join(run, RUN_LOCK_FILE), { force: true });
    }
  });

  it("Low: train grpo's usage errors print train grpo's usage, not train sft's", async () => {
    const g = await capture(() => main(['train', 'grpo', '--group', 'x', '--run', path.join(tmp, 'g')]));
    assert.equal(g.code, 2);
    assert.match(g.stderr, /^agent-lab train grpo: option '--group' needs an integer, got 'x'\nusage: agent-lab train grpo --from SFT_RUN/);
    assert.doesNotMatch(g.stderr, /train sft/);
    const s = await capture(() => main(['train', 'sft', '--steps', 'x', '--run', path.join(tmp, 's')]));
    assert.match(s.stderr, /^agent-lab train sft: option '--steps' needs an integer, got 'x'\nusage: agent-lab train sft \[--preset P\]/);
    assert.doesNotMatch(s.stderr, /train grpo/);
  });

  it('train sft --help and train grpo --help print their own usage and exit 0 (as train --help does)', async () => {
    for (const sub of ['sft', 'grpo']) {
      for (const flag of ['--help', '-h']) {
        const r = await capture(() => main(['train', sub, flag]));
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stderr, '');
        assert.match(r.stdout, new RegExp(`^usage: agent-lab train ${sub} `));
        assert.doesNotMatch(r.stdout, new RegExp(`train ${sub === 'sft' ? 'grpo' : 'sft'}`));
      }
    }
  });
});
