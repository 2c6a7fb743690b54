// Training, evaluation and run folders under damage (issue 11): data brought by hand is
// never written over (finding 1), NaN never loops or gets checkpointed (2), a run killed
// before its first checkpoint resumes (3), the model comes from the checkpoint's header
// (10), and the Low items of run folders (checkpoint steps, pruning, uncommitted
// checkpoints, --resume with settings, GRPO's --eval-limit, export's max_len, questions
// that do not fit). Everything through the executable, as a user runs it.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { initBackend } from '../../trainer/model/backend';
import { decodeSafetensors, encodeSafetensors, latestCheckpoint, listCheckpoints, loadCheckpoint, pruneCheckpoints, saveCheckpoint } from '../../trainer/run/checkpoint';
import { StackModel } from '../../trainer/model/model';
import { DivergenceGuard, MAX_NONFINITE_STEPS, TrainingDiverged, checkpointsUsedByEvals } from '../../trainer/run/runGuards';
import { repoRoot } from '../support/reference';

const bin = path.join(repoRoot, 'bin', 'agent-lab');

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}
function cli(args: string[], timeoutMs = 60_000): Run {
  const t0 = Date.now();
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL' });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, ms: Date.now() - t0 };
}
/** One line naming the problem, no stack trace, no internal error. */
function cleanFailure(r: Run, code: number, pattern: RegExp): void {
  assert.equal(r.signal, null, `killed after ${r.ms} ms (a hang): ${r.stderr.slice(-500)}`);
  assert.equal(r.code, code, r.stderr);
  assert.doesNotMatch(r.stderr, /\n\s+at |internal error/, r.stderr);
  const last = r.stderr.trim().split('\n').pop()!;
  assert.match(last, pattern);
}
const copy = (from: string, to: string): string => {
  fs.cpSync(from, to, { recursive: true });
  return to;
};
const lines = (file: string): Record<string, unknown>[] =>
  fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const editJson = (file: string, f: (v: Record<string, unknown>) => void): void => {
  const v = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
  f(v);
  fs.writeFileSync(file, JSON.stringify(v, null, 2));
};
/** Rewrites tensors of a safetensors file in place. */
function editTensors(file: string, f: (name: string, data: Float32Array) => void): void {
  const d = decodeSafetensors(fs.readFileSync(file));
  for (const [name, t] of Object.entries(d.tensors)) f(name, t.data as Float32Array);
  fs.writeFileSync(file, encodeSafetensors(d.tensors, d.metadata));
}

describe('run folders under damage (issue 11)', function () {
  this.timeout(180_000);
  let tmp: string;
  let base: string;
  before(function () {
    this.timeout(240_000);
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = fs.mkdtempSync(path.join(tmpdir(), 'agent-lab-hardening-'));
    base = path.join(tmp, 'base');
    const r = cli(['train', 'sft', '--steps', '2', '--eval-limit', '0', '--run', base], 180_000);
    assert.equal(r.code, 0, r.stderr);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  describe('finding 1: training never writes over data/', () => {
    it('finding 1: train sft never writes over data/: with train traces but no tokenizer.json it trains the tokenizer from the data that is there', () => {
      const run = path.join(tmp, 'f1');
      fs.mkdirSync(path.join(run, 'data'), { recursive: true });
      // "Distilled elsewhere": the first 40 rows, with their thoughts reworded (not what the stub teacher writes).
      const rows = fs.readFileSync(path.join(base, 'data', 'train.traces.jsonl'), 'utf8').split('\n').slice(0, 40);
      const mine = rows.map((l) => l.replace(/Thought: /g, 'Thought: Carefully, ')).join('\n') + '\n';
      fs.writeFileSync(path.join(run, 'data', 'train.traces.jsonl'), mine);
      fs.copyFileSync(path.join(base, 'data', 'train.tasks.jsonl'), path.join(run, 'data', 'train.tasks.jsonl'));
      const r = cli(['train', 'sft', '--steps', '1', '--eval-limit', '0', '--run', run]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(fs.readFileSync(path.join(run, 'data', 'train.traces.jsonl'), 'utf8'), mine, 'data/train.traces.jsonl is byte for byte what it was');
      assert.match(r.stderr, /no tokenizer\.json: training the tokenizer from the data there/);
      assert.doesNotMatch(r.stderr, /distilling it with the stub teacher/);
      assert.ok(fs.existsSync(path.join(run, 'tokenizer.json')));
      assert.ok(!fs.existsSync(path.join(run, 'world')), 'no default world was built into the folder');
      const config = JSON.parse(fs.readFileSync(path.join(run, 'config.json'), 'utf8'));
      assert.equal(config.data.trainExamples + config.data.dropped, 40);
    });

    it('finding 1: traces brought without a tasks file: the overlap check uses the questions the rows name (a held-out question is refused, an unknown one is warned about), not the default split', () => {
      const rows = fs.readFileSync(path.join(base, 'data', 'train.traces.jsonl'), 'utf8').split('\n').filter((l) => l.trim() !== '');
      const clean = path.join(tmp, 'f1c');
      fs.mkdirSync(path.join(clean, 'data'), { recursive: true });
      const foreign = JSON.stringify({ ...JSON.parse(rows[0]!), task: 'What is the colour of the sky? Use the corpus.' });
      fs.writeFileSync(path.join(clean, 'data', 'train.traces.jsonl'), [...rows.slice(0, 20), foreign].join('\n') + '\n');
      const ok = cli(['train', 'sft', '--steps', '1', '--eval-limit', '0', '--run', clean]);
      assert.equal(ok.code, 0, ok.stderr);
      assert.match(ok.stderr, /1 of \d+ questions in .*train\.traces\.jsonl are not the default world's/);
      const leaky = path.join(tmp, 'f1d');
      fs.mkdirSync(path.join(leaky, 'data'), { recursive: true });
      const heldQuestion = JSON.parse(fs.readFileSync(path.join(base, 'data', 'heldout.traces.jsonl'), 'utf8').split('\n')[0]!).task as string;
      const leaked = JSON.stringify({ ...JSON.parse(rows[0]!), task: heldQuestion });
      fs.writeFileSync(path.join(leaky, 'data', 'train.traces.jsonl'), [...rows.slice(0, 20), leaked].join('\n') + '\n');
      const refused = cli(['train', 'sft', '--steps', '1', '--eval-limit', '0', '--run', leaky]);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /train\.traces\.jsonl holds 1 task\(s\) that overlap the held-out split/);
    });

    it('finding 1: a data/ without train.traces.jsonl is refused, naming the missing file, and left as it is', () => {
      const run = path.join(tmp, 'f1b');
      fs.mkdirSync(path.join(run, 'data'), { recursive: true });
      fs.copyFileSync(path.join(base, 'data', 'heldout.traces.jsonl'), path.join(run, 'data', 'heldout.traces.jsonl'));
      const r = cli(['train', 'sft', '--steps', '1', '--eval-limit', '0', '--run', run]);
      cleanFailure(r, 1, /already holds data\/heldout\.traces\.jsonl.*no data\/train\.traces\.jsonl/);
      assert.deepEqual(fs.readdirSync(run).sort(), ['data']);
      assert.deepEqual(fs.readdirSync(path.join(run, 'data')), ['heldout.traces.jsonl']);
      assert.equal(fs.readFileSync(path.join(run, 'data', 'heldout.traces.jsonl'), 'utf8'), fs.readFileSync(path.join(base, 'data', 'heldout.traces.jsonl'), 'utf8'));
    });
  });

  describe('finding 2: NaN weights never loop and are never checkpointed', () => {
    let nan: string;
    before(() => {
      nan = copy(base, path.join(tmp, 'nan'));
      editTensors(path.join(nan, 'checkpoints', 'step-2', 'model.safetensors'), (name, a) => {
        if (name === 'tok_embeddings') a.fill(NaN);
      });
      // A budget beyond the checkpoint, so a resume has steps to take.
      editJson(path.join(nan, 'config.json'), (c) => (c['budget'] = { steps: 6 }));
    });

    it('finding 2: --resume from a NaN checkpoint exits 1 at once naming it (no endless loop, metrics.jsonl does not grow, the checkpoint is not rewritten)', () => {
      const weights = fs.readFileSync(path.join(nan, 'checkpoints', 'step-2', 'model.safetensors'));
      const before = fs.readFileSync(path.join(nan, 'metrics.jsonl'), 'utf8');
      const r = cli(['train', 'sft', '--resume', '--eval-limit', '0', '--run', nan], 30_000);
      cleanFailure(r, 1, /step-2: model\.safetensors: weight tok_embeddings holds \d+ NaN\/Inf values/);
      assert.equal(fs.readFileSync(path.join(nan, 'metrics.jsonl'), 'utf8'), before);
      assert.ok(weights.equals(fs.readFileSync(path.join(nan, 'checkpoints', 'step-2', 'model.safetensors'))));
      assert.deepEqual(listCheckpoints(nan).map((c) => c.name), ['step-2']);
    });

    it('finding 2: eval, run, train grpo --from and the student teacher refuse a NaN checkpoint instead of reporting 0% or printing <|bos|> forever', () => {
      const pattern = /weight tok_embeddings holds \d+ NaN\/Inf values/;
      cleanFailure(cli(['eval', '--run', nan, '--limit', '1'], 30_000), 1, pattern);
      cleanFailure(cli(['run', '--run', nan, '--', 'What is 2+2?'], 30_000), 1, pattern);
      const out = path.join(tmp, 'nan-distill.jsonl');
      cleanFailure(cli(['distill', '--split', 'heldout', '--teacher', 'student', '--run', nan, '--samples', '1', '--out', out], 30_000), 1, pattern);
      assert.ok(!fs.existsSync(out));
      const grpo = path.join(tmp, 'nan-grpo');
      cleanFailure(cli(['train', 'grpo', '--from', nan, '--steps', '1', '--eval-limit', '0', '--run', grpo], 30_000), 1, pattern);
      assert.ok(!fs.existsSync(grpo), 'nothing written for the refused GRPO run');
    });

    it(`finding 2: a run whose updates turn the weights to NaN stops after ${MAX_NONFINITE_STEPS} non-finite steps with a clear message; latest stays on the last good checkpoint`, () => {
      const run = copy(base, path.join(tmp, 'diverge'));
      // Finite but absurd AdamW moments: the first update sends the weights to Inf, every later step is NaN.
      editTensors(path.join(run, 'checkpoints', 'step-2', 'optimizer.safetensors'), (name, a) => {
        if (name.startsWith('m.')) a.fill(3e38);
      });
      editJson(path.join(run, 'config.json'), (c) => (c['budget'] = { steps: 500 }));
      const r = cli(['train', 'sft', '--resume', '--eval-limit', '0', '--checkpoint-every', '0', '--run', run], 120_000);
      cleanFailure(r, 1, new RegExp(`training diverged: ${MAX_NONFINITE_STEPS} consecutive steps had a non-finite loss or gradient.*last good checkpoint is step-2`));
      assert.equal(fs.readFileSync(path.join(run, 'checkpoints', 'latest'), 'utf8').trim(), 'step-2');
      assert.deepEqual(listCheckpoints(run).map((c) => c.name), ['step-2'], 'no checkpoint of NaN weights was written');
      const after = lines(path.join(run, 'metrics.jsonl'));
      assert.ok(after.length <= 2 + 1 + 1 + MAX_NONFINITE_STEPS, `metrics.jsonl is bounded (${after.length} lines)`);
      assert.equal(loadCheckpoint(run).step, 2);
    });

    it('finding 2: the divergence guard counts consecutive non-finite steps only', () => {
      const g = new DivergenceGuard(path.join(tmp, 'no-such-run'), 3);
      g.observe({ loss: NaN, gradNorm: 1 }, 1);
      g.observe({ loss: 1, gradNorm: Infinity }, 1);
      g.observe({ loss: 1, gradNorm: 1 }, 2);
      assert.equal(g.consecutive, 0);
      g.observe({ loss: 1, gradNorm: 1, skipped: true }, 2);
      g.observe({ loss: NaN, gradNorm: NaN }, 2);
      assert.throws(() => g.observe({ loss: NaN, gradNorm: NaN }, 2), (e: unknown) => e instanceof TrainingDiverged && /no checkpoint was written/.test(e.message));
    });
  });

  it('finding 3: --resume on a folder killed before its first checkpoint starts again from step 0, saying so', () => {
    const run = copy(base, path.join(tmp, 'f3'));
    fs.rmSync(path.join(run, 'checkpoints'), { recursive: true });
    const r = cli(['train', 'sft', '--resume', '--eval-limit', '0', '--run', run]);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /\n\s+at |internal error/);
    assert.match(r.stderr, /has no checkpoint yet .*starting again from step 0/);
    assert.equal(latestCheckpoint(run), 'step-2');
    const resume = lines(path.join(run, 'metrics.jsonl')).find((l) => l['event'] === 'resume');
    assert.equal(resume?.['step'], 0);
  });

  it('finding 10: a config.json whose model differs from the checkpoint is refused by eval and run (naming both), not a crash in setWeights', () => {
    const run = copy(base, path.join(tmp, 'f10'));
    editJson(path.join(run, 'config.json'), (c) => ((c['model'] as Record<string, number>)['dModel'] = 64));
    const pattern = /config\.json describes a model \(.*dModel 64.*\) that differs from checkpoint .*step-2's \(.*dModel 128.*\)/;
    cleanFailure(cli(['eval', '--run', run, '--limit', '1']), 1, pattern);
    cleanFailure(cli(['run', '--run', run, '--', 'What is 2+2?']), 1, pattern);
    cleanFailure(cli(['train', 'grpo', '--from', run, '--steps', '1', '--run', path.join(tmp, 'f10-grpo')]), 1, pattern);
  });

  describe('Low items of run folders', () => {
    it('Low: checkpoint.json with a non-integer step is a clean error (eval, --resume), never "step":"two hundred" in metrics', () => {
      const run = copy(base, path.join(tmp, 'step-text'));
      editJson(path.join(run, 'checkpoints', 'step-2', 'checkpoint.json'), (c) => (c['step'] = 'two hundred'));
      const metrics = fs.readFileSync(path.join(run, 'metrics.jsonl'), 'utf8');
      cleanFailure(cli(['eval', '--run', run, '--limit', '1']), 1, /checkpoint\.json: "step" must be a non-negative integer \(got "two hundred"\)/);
      cleanFailure(cli(['train', 'sft', '--resume', '--eval-limit', '0', '--run', run]), 1, /"step" must be a non-negative integer/);
      assert.equal(fs.readFileSync(path.join(run, 'metrics.jsonl'), 'utf8'), metrics);
    });

    it('Low: --resume with --steps, --minutes or --preset is refused (exit 2), not silently ignored', () => {
      for (const extra of [['--steps', '50'], ['--preset', 'small'], ['--minutes', '3']]) {
        const r = cli(['train', 'sft', '--resume', ...extra, '--run', base]);
        assert.equal(r.code, 2, r.stderr);
        assert.doesNotMatch(r.stderr, /\n\s+at |internal error/);
        assert.match(r.stderr, new RegExp(`--resume continues the run with the settings in its config\\.json; ${extra[0]} cannot change them`));
      }
      const g = cli(['train', 'grpo', '--resume', '--steps', '9', '--run', base]);
      assert.equal(g.code, 2, g.stderr);
    });

    it('Low: checkpoints are pruned to the newest K (--keep-checkpoints), never latest nor one an eval used', async () => {
      const run = copy(base, path.join(tmp, 'prune'));
      editJson(path.join(run, 'config.json'), (c) => (c['budget'] = { steps: 8 }));
      // An eval used step-2: it must survive pruning.
      const ev = cli(['eval', '--run', run, '--checkpoint', 'step-2', '--limit', '1', '--json']);
      assert.equal(ev.code, 0, ev.stderr);
      const r = cli(['train', 'sft', '--resume', '--eval-limit', '0', '--checkpoint-every', '0', '--keep-checkpoints', '2', '--run', run]);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(listCheckpoints(run).map((c) => c.name), ['step-2', 'step-7', 'step-8']);
      assert.match(r.stderr, /pruned 1 old checkpoint\(s\).*step-3/);
      assert.deepEqual([...checkpointsUsedByEvals(run)].sort(), ['step-2']);
      // The primitive: latest and protected names survive.
      await initBackend('wasm');
      const dir = path.join(tmp, 'prune-unit');
      const m = StackModel.create({ vocab: 17, dModel: 16, layers: 1, heads: 2, kvHeads: 1, mlp: 24, maxSeq: 16, ropeBase: 10000 }, 1);
      for (const s of [1, 2, 3, 4, 5]) await saveCheckpoint(dir, s, m, null, {});
      fs.writeFileSync(path.join(dir, 'checkpoints', 'latest'), 'step-3\n');
      assert.deepEqual(pruneCheckpoints(dir, 1, new Set(['step-1'])), ['step-2']);
      assert.deepEqual(listCheckpoints(dir).map((c) => c.name), ['step-1', 'step-3']);
      m.dispose();
    });

    it('Low: a checkpoint written after the last update of latest (a save killed before it) is neither listed nor loadable', () => {
      const run = copy(base, path.join(tmp, 'uncommitted'));
      fs.cpSync(path.join(run, 'checkpoints', 'step-2'), path.join(run, 'checkpoints', 'step-5'), { recursive: true });
      editJson(path.join(run, 'checkpoints', 'step-5', 'checkpoint.json'), (c) => (c['step'] = 5));
      assert.deepEqual(listCheckpoints(run).map((c) => c.name), ['step-2']);
      assert.equal(latestCheckpoint(run), 'step-2');
      assert.throws(() => loadCheckpoint(run, 'step-5'), /written after the last committed checkpoint \(step-2\)/);
      cleanFailure(cli(['eval', '--run', run, '--checkpoint', 'step-5', '--limit', '1']), 1, /was written after the last committed checkpoint/);
    });

    it('Low: export --format trl-sft of an SFT run reports the max_len the run dropped at (its model context, 512), not 1024', () => {
      const out = path.join(tmp, 'export');
      const r = cli(['export', '--format', 'trl-sft', '--run', base, '--out', out]);
      assert.equal(r.code, 0, r.stderr);
      const manifest = JSON.parse(fs.readFileSync(path.join(out, 'sft', 'manifest.json'), 'utf8'));
      assert.equal(manifest.max_len, 512);
      assert.match(r.stdout, /longer than max_len 512 tokens: left out/);
    });

    it('Low: a question longer than the context says it does not fit (exit 1) instead of answering "(none)"', () => {
      const r = cli(['run', '--run', base, '--', 'What is '.repeat(400) + '2+2?']);
      cleanFailure(r, 1, /the question does not fit the student's context: the prompt is \d+ tokens, the context 512/);
      assert.doesNotMatch(r.stdout, /\(none\)/);
    });

    it('Low: GRPO keeps --eval-limit on --resume (a finished run resumed does not evaluate all 50 held-out tasks)', () => {
      const run = path.join(tmp, 'grpo');
      const first = cli(['train', 'grpo', '--from', base, '--steps', '1', '--group', '2', '--tasks', '1', '--eval-limit', '0', '--run', run], 120_000);
      assert.equal(first.code, 0, first.stderr);
      assert.equal(JSON.parse(fs.readFileSync(path.join(run, 'config.json'), 'utf8')).grpo.evalLimit, 0);
      const again = cli(['train', 'grpo', '--resume', '--run', run], 120_000);
      assert.equal(again.code, 0, again.stderr);
      const after = lines(path.join(run, 'metrics.jsonl'));
      const resumeAt = after.findIndex((l) => l['event'] === 'resume');
      assert.ok(resumeAt > 0);
      assert.deepEqual(after.slice(resumeAt + 1).filter((l) => l['phase'] === 'eval'), [], 'no evaluation after the resume');
    });
  });
});
