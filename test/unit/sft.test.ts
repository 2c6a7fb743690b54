// SFT end to end on the real model (tiny preset, wasm): the loss falls, metrics lines and
// checkpoints are written; a run killed with SIGKILL mid-training (plus a torn last
// metrics line) resumes from its last checkpoint with the same metrics file.
import * as assert from 'node:assert/strict';
import { fork, spawn, spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseFromWorker, type ToWorker } from '../../core/protocol/worker';
import { repoRoot } from '../support/reference';

const bin = path.join(repoRoot, 'bin', 'agent-lab');

function metricsLines(runDir: string): Record<string, unknown>[] {
  const text = readFileSync(path.join(runDir, 'metrics.jsonl'), 'utf8');
  assert.ok(text.endsWith('\n'), 'metrics.jsonl ends with a complete line');
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('SFT training (CLI, tiny preset)', function () {
  this.timeout(300_000);
  let tmp: string;
  before(() => {
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-sft-'));
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('trains: the loss falls, every step is a metrics line, the last step is checkpointed', () => {
    const run = path.join(tmp, 'short');
    const r = spawnSync(process.execPath, [bin, 'train', 'sft', '--steps', '40', '--recipe', 'plain', '--eval-limit', '0', '--run', run], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    const lines = metricsLines(run).filter((l) => l['phase'] === 'sft');
    assert.deepEqual(
      lines.map((l) => l['step']),
      Array.from({ length: 40 }, (_, i) => i + 1),
    );
    for (const l of lines) for (const k of ['loss', 'sup_acc', 'lr', 'tokens_per_s', 'grad_norm', 'time']) assert.equal(typeof l[k], 'number', k);
    const first = lines.slice(0, 5).reduce((a, l) => a + (l['loss'] as number), 0) / 5;
    const last = lines.slice(-5).reduce((a, l) => a + (l['loss'] as number), 0) / 5;
    assert.ok(last < first * 0.7, `loss fell: ${first.toFixed(3)} -> ${last.toFixed(3)}`);
    assert.equal(readFileSync(path.join(run, 'checkpoints', 'latest'), 'utf8').trim(), 'step-40');
    const config = JSON.parse(readFileSync(path.join(run, 'config.json'), 'utf8'));
    assert.equal(config.preset, 'tiny');
    assert.equal(config.recipe.name, 'plain');
    assert.match(config.tokenizer.sha256, /^sha256:[0-9a-f]{64}$/);
    assert.ok(['wasm', 'cpu', 'tfjs-node', 'tfjs-node-gpu'].includes(config.backend.used));
  });

  it("continued SFT (--from) trains in the recipe's last phase, at a constant learning rate, from the run's last checkpoint", () => {
    const base = path.join(tmp, 'from-base');
    const first = spawnSync(process.execPath, [bin, 'train', 'sft', '--steps', '8', '--recipe', 'copy', '--eval-limit', '0', '--run', base], {
      encoding: 'utf8',
    });
    assert.equal(first.status, 0, first.stderr);
    // The base run went through both phases of `copy` (first-turn warm-up, then whole transcripts).
    assert.deepEqual(
      [
        ...new Set(
          metricsLines(base)
            .filter((l) => l['phase'] === 'sft')
            .map((l) => l['curriculum']),
        ),
      ],
      [0, 1],
    );
    const more = path.join(tmp, 'from-more');
    const r = spawnSync(process.execPath, [bin, 'train', 'sft', '--from', base, '--minutes', '0.05', '--eval-limit', '0', '--run', more], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const lines = metricsLines(more).filter((l) => l['phase'] === 'sft');
    assert.ok(lines.length > 0, 'continued SFT made steps');
    assert.deepEqual([...new Set(lines.map((l) => l['curriculum']))], [1], 'every step in the last phase');
    assert.deepEqual([...new Set(lines.map((l) => l['batch']))], [2], "the last phase's batch");
    assert.equal(new Set(lines.map((l) => l['lr'])).size, 1, 'a constant learning rate');
    assert.equal(JSON.parse(readFileSync(path.join(more, 'config.json'), 'utf8')).recipe.name, 'copy');
  });

  it('a run killed mid-training resumes from its last checkpoint; every metrics line parses', async () => {
    const run = path.join(tmp, 'killed');
    const args = [bin, 'train', 'sft', '--steps', '60', '--eval-limit', '0', '--checkpoint-every', '0', '--run', run];
    const child = spawn(process.execPath, args, { stdio: 'ignore' });
    // Wait for a few checkpoints, then kill without warning.
    const latest = path.join(run, 'checkpoints', 'latest');
    const deadline = Date.now() + 120_000;
    for (;;) {
      const step = existsSync(latest) ? Number(readFileSync(latest, 'utf8').trim().slice('step-'.length)) : 0;
      if (step >= 8) break;
      assert.ok(Date.now() < deadline, 'no checkpoint appeared');
      await new Promise((r) => setTimeout(r, 100));
    }
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const checkpointed = Number(readFileSync(latest, 'utf8').trim().slice('step-'.length));
    // A crash mid-write leaves a torn last line; the resume must cut it.
    appendFileSync(path.join(run, 'metrics.jsonl'), '{"phase": "sft", "step": 99');

    const r = spawnSync(process.execPath, [bin, 'train', 'sft', '--resume', '--eval-limit', '0', '--run', run], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`resumed from step ${checkpointed}`));
    const lines = metricsLines(run); // throws if any line does not parse
    const resume = lines.findIndex((l) => l['event'] === 'resume');
    assert.ok(resume > 0, 'a resume marker');
    assert.equal(lines[resume]!['step'], checkpointed);
    const after = lines.slice(resume + 1).filter((l) => l['phase'] === 'sft');
    assert.equal(after[0]!['step'], checkpointed + 1, 'training continues at the step after the checkpoint');
    assert.equal(after[after.length - 1]!['step'], 60);
    assert.equal(readFileSync(latest, 'utf8').trim(), 'step-60');
  });

  it('two runs with the same seed and --steps write identical loss columns; the lr decays over the steps', () => {
    const losses = (name: string) => {
      const run = path.join(tmp, name);
      const r = spawnSync(process.execPath, [bin, 'train', 'sft', '--steps', '60', '--recipe', 'balanced', '--seed', '3', '--eval-limit', '0', '--run', run], {
        encoding: 'utf8',
      });
      assert.equal(r.status, 0, r.stderr);
      return metricsLines(run).filter((l) => l['phase'] === 'sft');
    };
    const a = losses('same-a');
    const b = losses('same-b');
    assert.equal(a.length, 60);
    assert.deepEqual(
      b.map((l) => l['loss']),
      a.map((l) => l['loss']),
    );
    // Warm-up is the preset's 50 steps; then the cosine decay reaches its floor (0.1 x peak) at step 60.
    const lrs = a.map((l) => l['lr'] as number);
    const peak = Math.max(...lrs);
    assert.ok(lrs[59]! < 0.2 * peak, `lr decays to its floor under --steps: peak ${peak}, last ${lrs[59]}`);
    assert.ok(lrs[54]! < peak && lrs[54]! > lrs[59]!, 'the decay is gradual');
  });

  it('a kill and --resume mid-epoch continues the same data order (loss column equal to an unbroken run)', async () => {
    const args = (run: string) => [bin, 'train', 'sft', '--steps', '30', '--recipe', 'balanced', '--eval-limit', '0', '--checkpoint-every', '0', '--run', run];
    const whole = path.join(tmp, 'order-whole');
    const w = spawnSync(process.execPath, args(whole), { encoding: 'utf8' });
    assert.equal(w.status, 0, w.stderr);
    const broken = path.join(tmp, 'order-broken');
    const child = spawn(process.execPath, args(broken), { stdio: 'ignore' });
    const latest = path.join(broken, 'checkpoints', 'latest');
    const deadline = Date.now() + 120_000;
    for (;;) {
      const step = existsSync(latest) ? Number(readFileSync(latest, 'utf8').trim().slice('step-'.length)) : 0;
      if (step >= 10) break;
      assert.ok(Date.now() < deadline, 'no checkpoint appeared');
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const r = spawnSync(process.execPath, [bin, 'train', 'sft', '--resume', '--eval-limit', '0', '--run', broken], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const lastPerStep = (run: string) => {
      const m = new Map<number, unknown>();
      for (const l of metricsLines(run)) if (l['phase'] === 'sft') m.set(l['step'] as number, l['loss']);
      return [...m.entries()].sort((x, y) => x[0] - y[0]).map((e) => e[1]);
    };
    assert.deepEqual(lastPerStep(broken), lastPerStep(whole));
  });

  it('a run recorded with an older tiny (no previous-token tables) resumes with the model it recorded', () => {
    const run = path.join(tmp, 'old-tiny');
    const first = spawnSync(
      process.execPath,
      [bin, 'train', 'sft', '--preset', 'tiny-plain', '--steps', '6', '--recipe', 'plain', '--eval-limit', '0', '--run', run],
      { encoding: 'utf8' },
    );
    assert.equal(first.status, 0, first.stderr);
    // What a run of the earlier tiny looks like: preset "tiny", a model without prevTokens.
    const configFile = path.join(run, 'config.json');
    const config = JSON.parse(readFileSync(configFile, 'utf8'));
    assert.equal(config.model.prevTokens ?? 0, 0);
    delete config.model.prevTokens;
    config.preset = 'tiny';
    config.budget = { steps: 10 };
    writeFileSync(configFile, JSON.stringify(config, null, 2));
    const again = spawnSync(process.execPath, [bin, 'train', 'sft', '--resume', '--run', run], { encoding: 'utf8' });
    assert.equal(again.status, 0, again.stderr);
    assert.equal(readFileSync(path.join(run, 'checkpoints', 'latest'), 'utf8').trim(), 'step-10');
    assert.equal(JSON.parse(readFileSync(configFile, 'utf8')).model.prevTokens ?? 0, 0);
  });

  it('refuses to overwrite a run, and to resume a folder without one (exit 2, clear message)', () => {
    const r = spawnSync(process.execPath, [bin, 'train', 'sft', '--steps', '5', '--run', path.join(tmp, 'short')], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /already holds an SFT run; pass --resume/);
    const r2 = spawnSync(process.execPath, [bin, 'train', 'sft', '--resume', '--run', path.join(tmp, 'nothing')], { encoding: 'utf8' });
    assert.equal(r2.status, 2);
    assert.match(r2.stderr, /has no SFT run to resume/);
  });

  it('eval --json prints the summary contract as its last line and saves every trajectory', () => {
    const run = path.join(tmp, 'short');
    const r = spawnSync(process.execPath, [bin, 'eval', '--run', run, '--split', 'heldout', '--limit', '4', '--json'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const last = JSON.parse(r.stdout.trim().split('\n').pop()!);
    assert.deepEqual(Object.keys(last).slice(0, 6), ['accuracy', 'n', 'by_kind', 'failures', 'span_accuracy', 'contaminated']);
    assert.equal(last.n, 4);
    assert.equal(last.contaminated, 0);
    for (const k of ['thought', 'query', 'expr', 'answer']) assert.equal(typeof last.span_accuracy[k], 'number', k);
    const rows = readFileSync(path.join(run, 'eval', 'heldout.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(rows.length, 4);
    for (const row of rows) {
      assert.deepEqual(Object.keys(row).slice(0, 9), ['question', 'gold', 'answer', 'solved', 'kind', 'failure', 'steps', 'reward', 'text']);
      assert.ok(row.text.startsWith('<|system|>'));
    }
  });

  it('the worker process ends an eval job with a typed done: its kind, the summary the extension validates', async () => {
    const run = path.join(tmp, 'short');
    const worker = fork(path.join(repoRoot, 'dist', 'worker.js'), [], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
    const messages: unknown[] = [];
    worker.on('message', (m: unknown) => messages.push(m));
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.send({ type: 'start', job: { kind: 'eval', runDir: run, split: 'heldout', limit: 2 } } satisfies ToWorker);
    await exited;
    const parsed = messages.map((m) => parseFromWorker(m));
    assert.deepEqual(
      parsed.filter((p) => !p.ok),
      [],
      'every message validates',
    );
    const done = parsed.flatMap((p) => (p.ok && p.message.type === 'done' ? [p.message] : []));
    assert.equal(done.length, 1, JSON.stringify(messages.at(-1)));
    assert.equal(done[0]!.kind, 'eval');
    if (done[0]!.kind !== 'eval') return;
    assert.equal(done[0]!.summary.n, 2);
    assert.equal(done[0]!.summary.checkpoint, 'latest');
    const metrics = parsed.flatMap((p) => (p.ok && p.message.type === 'metrics' ? [p.message.record] : []));
    assert.deepEqual(
      metrics.map((r) => [r.phase, r['split']]),
      [['eval', 'heldout']],
    );
  });

  it('run answers one question through the real loop and prints the trajectory', () => {
    const run = path.join(tmp, 'short');
    const q = 'What is the layer count of Stack-100M? Use the corpus.';
    const r = spawnSync(process.execPath, [bin, 'run', '--run', run, '--json', '--', q], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    assert.equal(out.question, q);
    assert.ok(out.text.startsWith(`<|system|>`) && out.text.includes(q), 'the wire-format trajectory');
    assert.ok(out.steps >= 1);
    const bad = spawnSync(process.execPath, [bin, 'run', '--run', path.join(tmp, 'nothing'), 'hi'], { encoding: 'utf8' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /is not a run folder/);
  });
});
