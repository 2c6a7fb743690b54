// GRPO end to end on the real model (tiny preset, wasm) from a short SFT run: the metrics
// contract per step, checkpoints, held-out points; the pre-flight checks refusing a
// drifted system prompt, a multiplicative-gate reward and greedy rollouts before any
// rollout; the training worker killed mid-step leaves every metrics line parseable and the
// run resumes from its checkpoint.
import * as assert from 'node:assert/strict';
import { fork, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { SYSTEM_PROMPT } from '../../core/env';
import { parseMetricsText } from '../../core/protocol/metrics';
import type { FromWorker, ToWorker } from '../../core/protocol/worker';
import { repoRoot } from '../support/reference';

const bin = path.join(repoRoot, 'bin', 'agent-lab');
const GRPO_KEYS = [
  'reward_mean',
  'reward_std',
  'accuracy',
  'frac_reward_zero_std',
  'skipped_groups',
  'kl',
  'clip_ratio',
  'gen_tokens',
  'completion_len',
  'steps_mean',
  'entropy',
  'tokens_per_s',
];

function lines(runDir: string): Record<string, unknown>[] {
  return readFileSync(path.join(runDir, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('GRPO runs (CLI and worker, tiny preset)', function () {
  this.timeout(600_000);
  let tmp: string;
  let sft: string;
  before(() => {
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-grpo-'));
    sft = path.join(tmp, 'sft');
    const r = spawnSync(process.execPath, [bin, 'train', 'sft', '--steps', '20', '--eval-limit', '0', '--run', sft], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('trains from an SFT run: every step a grpo line with the contract keys, held-out points before and after, a checkpoint', () => {
    const run = path.join(tmp, 'g');
    const r = spawnSync(
      process.execPath,
      [bin, 'train', 'grpo', '--from', sft, '--steps', '3', '--group', '3', '--tasks', '2', '--dynamic-sampling', 'off', '--eval-limit', '2', '--eval-every', '0', '--run', run],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /PASS {2}prompt drift/);
    assert.match(r.stderr, /PASS {2}reward audit/);
    const all = lines(run);
    const grpo = all.filter((l) => l['phase'] === 'grpo');
    assert.deepEqual(grpo.map((l) => l['step']), [1, 2, 3]);
    for (const l of grpo) {
      for (const k of GRPO_KEYS) assert.ok(k in l, `metrics key ${k}`);
      for (const k of ['reward_mean', 'reward_std', 'accuracy', 'frac_reward_zero_std', 'skipped_groups', 'gen_tokens', 'completion_len', 'steps_mean', 'tokens_per_s']) {
        assert.equal(typeof l[k], 'number', k);
      }
      assert.equal(l['groups'], 2);
      assert.ok((l['skipped_groups'] as number) <= 2);
      assert.ok((l['gen_tokens'] as number) > 0);
      // An update happened exactly when some group had spread.
      const updated = (l['skipped_groups'] as number) < 2;
      assert.equal(typeof l['kl'], updated ? 'number' : 'object', `kl ${String(l['kl'])}`);
      if (updated) assert.equal(l['clip_ratio'], 0, 'one pass per batch: nothing is clipped');
    }
    const evals = all.filter((l) => l['phase'] === 'eval');
    assert.deepEqual(evals.map((l) => l['step']), [0, 3]);
    assert.equal(readFileSync(path.join(run, 'checkpoints', 'latest'), 'utf8').trim(), 'step-3');
    const config = JSON.parse(readFileSync(path.join(run, 'config.json'), 'utf8'));
    assert.equal(config.kind, 'grpo');
    assert.equal(config.grpo.groupSize, 3);
    assert.equal(config.grpo.temperature, 0.8);
    assert.equal(config.grpo.reward, 'exact,step=0.05');
    assert.equal(config.grpo.warmupSteps, 5, "the table's default warm-up");
    assert.equal(config.optimiser.warmupSteps, 5, 'the optimiser warms up as config.json says');
    assert.ok(config.preflight.every((c: { ok: boolean }) => c.ok));
    const summary = JSON.parse(r.stdout.trim().split('\n').pop()!);
    assert.equal(summary.frac_reward_zero_std.length, 3);
    // The GRPO run folder is a run like any other: eval reads it alone.
    const ev = spawnSync(process.execPath, [bin, 'eval', '--run', run, '--limit', '2', '--json'], { encoding: 'utf8' });
    assert.equal(ev.status, 0, ev.stderr);
    assert.equal(JSON.parse(ev.stdout.trim().split('\n').pop()!).n, 2);
  });

  it('dynamic sampling: draws tasks until the step holds groups whose members differ in correctness, within the cap; counts drawn and dropped', () => {
    const run = path.join(tmp, 'dyn');
    const r = spawnSync(
      process.execPath,
      [bin, 'train', 'grpo', '--from', sft, '--steps', '2', '--group', '3', '--tasks', '2', '--max-draws', '6', '--scale-rewards', 'batch', '--warmup-steps', '0', '--eval-limit', '0', '--run', run],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    const grpo = lines(run).filter((l) => l['phase'] === 'grpo');
    assert.equal(grpo.length, 2);
    for (const l of grpo) {
      const drawn = l['groups_drawn'] as number;
      const kept = l['groups_kept'] as number;
      const dropped = l['groups_dropped'] as number;
      assert.ok(drawn >= 2 && drawn <= 6, `drawn ${drawn}`);
      assert.equal(drawn, kept + dropped, 'every drawn group is kept or dropped');
      assert.ok(kept <= 2);
      if (kept < 2) assert.equal(drawn, 6, 'short of informative groups only when the cap was reached');
      assert.equal(l['groups'], drawn);
      // Dropped: no spread, or a spread of step counts only (every member equally right or wrong).
      assert.ok((l['frac_reward_zero_std'] as number) <= dropped / drawn + 1e-12);
      assert.equal(l['groups_steps_only'], 0, 'dynamic sampling keeps no steps-only group');
    }
    const config = JSON.parse(readFileSync(path.join(run, 'config.json'), 'utf8'));
    assert.equal(config.grpo.dynamicSampling, true);
    assert.equal(config.grpo.maxDraws, 6);
    assert.equal(config.grpo.scaleRewards, 'batch');
    assert.equal(config.grpo.warmupSteps, 0);
    assert.equal(config.optimiser.warmupSteps, 0, '--warmup-steps 0: the first step at the full learning rate');
    assert.equal(config.grpo.pool, 'fresh-entities', 'the default pool: new-name training worlds, where no teacher exists');
  });

  // The wiring (flag, counters, checkpoint); what the queue draws is tested in revisit.test.ts
  // (this 20-step student seldom has a group with spread, so its queue may stay empty).
  it('--revisit on: tasks with spread are drawn first the next step; the queue is counted per step and kept in the checkpoint', () => {
    const run = path.join(tmp, 'revisit');
    const r = spawnSync(
      process.execPath,
      [bin, 'train', 'grpo', '--from', sft, '--steps', '4', '--group', '3', '--tasks', '2', '--max-draws', '6', '--revisit', 'on', '--checkpoint-every', '0', '--eval-limit', '0', '--run', run],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /tasks with spread revisited \(a queue of at most 64\)/);
    const grpo = lines(run).filter((l) => l['phase'] === 'grpo');
    assert.equal(grpo.length, 4);
    let queued = 0;
    for (const l of grpo) {
      const revisited = l['groups_revisited'] as number;
      // The queue before the step is drawn from first, up to the step's tasks.
      assert.equal(revisited, Math.min(queued, 2), `step ${String(l['step'])}: revisited ${revisited} of a queue of ${queued}`);
      // What was not drawn stays; every group with spread (drawn, not dropped) joins the tail.
      const informative = (l['groups_drawn'] as number) - (l['groups_dropped'] as number);
      assert.equal(l['revisit_queue'], Math.min(64, queued - revisited + informative), `step ${String(l['step'])}: the queue after it`);
      queued = l['revisit_queue'] as number;
    }
    const ck = JSON.parse(readFileSync(path.join(run, 'checkpoints', 'step-4', 'checkpoint.json'), 'utf8'));
    assert.equal(ck.extra.grpo_state.revisit.length, queued, 'the checkpoint keeps the queue a resume draws from');
    assert.equal(JSON.parse(readFileSync(path.join(run, 'config.json'), 'utf8')).grpo.revisit, true);
    // A saved queue that names no task of the pool, or a setting that is not a boolean, is refused on --resume, named.
    const ckFile = path.join(run, 'checkpoints', 'step-4', 'checkpoint.json');
    const saved = readFileSync(ckFile, 'utf8');
    writeFileSync(ckFile, JSON.stringify({ ...ck, extra: { ...ck.extra, grpo_state: { ...ck.extra.grpo_state, revisit: [999999] } } }));
    const bad = spawnSync(process.execPath, [bin, 'train', 'grpo', '--resume', '--run', run], { encoding: 'utf8' });
    assert.equal(bad.status, 1, bad.stderr);
    assert.match(bad.stderr, /extra\.grpo_state\.revisit entry 0 \(999999\) is not a task index below the pool's 2000/);
    writeFileSync(ckFile, saved);
    const configFile = path.join(run, 'config.json');
    const config = JSON.parse(readFileSync(configFile, 'utf8'));
    writeFileSync(configFile, JSON.stringify({ ...config, grpo: { ...config.grpo, revisit: 'yes' } }));
    const badConfig = spawnSync(process.execPath, [bin, 'train', 'grpo', '--resume', '--run', run], { encoding: 'utf8' });
    assert.notEqual(badConfig.status, 0);
    assert.match(badConfig.stderr, /"grpo\.revisit" must be true or false/);
  });

  // This 20-step student solves almost nothing, so nearly every group is all wrong: with the
  // teacher's transcript in place of one rollout each such group is kept and updates.
  it("--guide on: all-wrong groups get the stub teacher's transcript, are counted, kept and trained on", () => {
    const run = path.join(tmp, 'guide');
    const r = spawnSync(
      process.execPath,
      [bin, 'train', 'grpo', '--from', sft, '--steps', '3', '--group', '3', '--tasks', '2', '--max-draws', '6', '--guide', 'on', '--eval-limit', '0', '--run', run],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /all-wrong groups guided by the stub teacher's transcript/);
    const grpo = lines(run).filter((l) => l['phase'] === 'grpo');
    assert.equal(grpo.length, 3);
    let guided = 0;
    for (const l of grpo) {
      const g = l['groups_guided'] as number;
      assert.ok(g <= (l['groups_kept'] as number), `step ${String(l['step'])}: ${g} guided of ${String(l['groups_kept'])} kept`);
      // A guided group is kept, not dropped: kept + dropped = drawn.
      assert.equal((l['groups_kept'] as number) + (l['groups_dropped'] as number), l['groups_drawn']);
      guided += g;
      if (g > 0) assert.equal(typeof l['loss'], 'number', 'a step with a guided group updates');
    }
    assert.ok(guided >= 3, `guided groups over 3 steps: ${guided}`);
    assert.equal(JSON.parse(readFileSync(path.join(run, 'config.json'), 'utf8')).grpo.guide, true);
  });

  it('--objective rft: trains on the correct rollouts only (counted per step), no KL or advantages; refuses --guide', () => {
    const run = path.join(tmp, 'rft');
    const r = spawnSync(
      process.execPath,
      [bin, 'train', 'grpo', '--from', sft, '--objective', 'rft', '--pool', 'train', '--steps', '3', '--group', '4', '--tasks', '2', '--max-draws', '6', '--eval-limit', '0', '--prescreen', '0', '--run', run],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /RFT \(rejection-sampling fine-tuning on the student's verified rollouts\)/);
    const grpo = lines(run).filter((l) => l['phase'] === 'grpo');
    assert.equal(grpo.length, 3);
    for (const l of grpo) {
      const correct = Math.round((l['accuracy'] as number) * (l['groups_drawn'] as number) * 4);
      if (l['update'] === false) {
        assert.equal(l['groups_kept'], 0, 'no update only when no group had a correct rollout');
        continue;
      }
      const trained = l['rft_rollouts'] as number;
      // Every kept group has at least one correct rollout; only correct ones are trained on.
      assert.ok(trained >= (l['groups_kept'] as number) && trained <= correct, `step ${String(l['step'])}: ${trained} trained of ${correct} correct`);
      assert.equal(l['kl'], undefined, 'RFT computes no reference log-probs');
      assert.equal(typeof l['loss'], 'number');
    }
    assert.equal(JSON.parse(readFileSync(path.join(run, 'config.json'), 'utf8')).grpo.objective, 'rft');
    // Its closing lines name the comparison it needs: GRPO on the same pool, steps and seed.
    assert.match(r.stdout, /GRPO: agent-lab train grpo --from \S+ --objective grpo --pool train --steps 3 --seed 0 --run rft-grpo/);
    const g = spawnSync(process.execPath, [bin, 'train', 'grpo', '--from', sft, '--objective', 'rft', '--guide', 'on', '--steps', '1', '--run', path.join(tmp, 'rft-guide')], { encoding: 'utf8' });
    assert.notEqual(g.status, 0);
    assert.match(g.stderr, /--objective rft learns from the student's own verified rollouts only/);
  });

  it('--prescreen: predicts the informative share before step 1, records it, and changes no step', () => {
    const args = ['train', 'grpo', '--from', sft, '--steps', '1', '--group', '3', '--tasks', '2', '--eval-limit', '0'];
    const screened = path.join(tmp, 'screened');
    const r = spawnSync(process.execPath, [bin, ...args, '--prescreen', '4', '--run', screened], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /pre-screen: 4 tasks x 3 rollouts: pass rate \d+%, predicted informative groups \d+% at G = 3/);
    const config = JSON.parse(readFileSync(path.join(screened, 'config.json'), 'utf8'));
    assert.equal(config.prescreen.tasks, 4);
    assert.equal(config.prescreen.samples, 3);
    assert.equal(config.prescreen.group, 3);
    const kinds = Object.values(config.prescreen.byKind as Record<string, { tasks: number }>);
    assert.equal(kinds.reduce((a, k) => a + k.tasks, 0), 4, 'every screened task counted under its shape');
    assert.ok(config.prescreen.informativeShare >= 0 && config.prescreen.informativeShare <= 1);
    // The same run without the pre-screen samples the same step: the screen's seeds are its own.
    const plain = path.join(tmp, 'unscreened');
    const q = spawnSync(process.execPath, [bin, ...args, '--run', plain], { encoding: 'utf8' });
    assert.equal(q.status, 0, q.stderr);
    const stepOf = (run: string) => {
      const l = lines(run).find((x) => x['phase'] === 'grpo')!;
      return { reward_mean: l['reward_mean'], groups_drawn: l['groups_drawn'], gen_tokens: l['gen_tokens'], loss: l['loss'] };
    };
    assert.deepEqual(stepOf(screened), stepOf(plain));
    assert.equal(JSON.parse(readFileSync(path.join(plain, 'config.json'), 'utf8')).prescreen, undefined);
    // Fewer samples than the group cannot predict a group's spread: refused before anything is written.
    const bad = path.join(tmp, 'bad-screen');
    const b = spawnSync(process.execPath, [bin, ...args, '--prescreen', '2', '--prescreen-samples', '2', '--run', bad], { encoding: 'utf8' });
    assert.notEqual(b.status, 0);
    assert.match(b.stderr, /prescreen-samples must be >= the group size \(3\)/);
    assert.equal(existsSync(path.join(bad, 'config.json')), false);
  });

  it('--pool fresh-entities: RL on never-distilled worlds of its own seeds (never an evaluation split\'s)', () => {
    const run = path.join(tmp, 'fresh');
    const r = spawnSync(
      process.execPath,
      [bin, 'train', 'grpo', '--from', sft, '--steps', '1', '--group', '2', '--tasks', '1', '--pool', 'fresh-entities', '--eval-limit', '0', '--run', run],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    const config = JSON.parse(readFileSync(path.join(run, 'config.json'), 'utf8'));
    assert.equal(config.data.pool, 'fresh-entities');
    assert.equal(config.data.rlWorlds, 50);
    assert.ok(config.splits['fresh-entities'].seeds.length >= 10);
    // The pool's names against the split's, recorded for the benchmark to print: none shared.
    assert.equal(config.data.names.shared, 0);
    assert.ok(config.data.names.pool > 100 && config.data.names.evaluation > 100, JSON.stringify(config.data.names));
    assert.match(r.stderr, /pool fresh-entities/);
  });

  it('says so in words when every group stays flat (near-greedy sampling): stderr, and the metrics line', () => {
    const run = path.join(tmp, 'flat');
    const r = spawnSync(
      process.execPath,
      [bin, 'train', 'grpo', '--from', sft, '--steps', '5', '--group', '2', '--tasks', '1', '--temperature', '0.01', '--eval-limit', '0', '--run', run],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    const grpo = lines(run).filter((l) => l['phase'] === 'grpo');
    assert.deepEqual(grpo.map((l) => l['frac_reward_zero_std']), [1, 1, 1, 1, 1], 'near-greedy rollouts: every group flat');
    assert.match(r.stderr, /frac_reward_zero_std has been 1\.0 for 5 steps/);
    assert.match(r.stderr, /temperature \(0\.01\) is too low/);
    assert.match(String(grpo[4]!['warning']), /no gradient/);
    assert.ok(grpo.slice(0, 4).every((l) => !('warning' in l)));
  });

  it('refuses before any rollout: a system prompt one character off, a multiplicative gate, greedy sampling', () => {
    const cases: { args: string[]; expect: RegExp[] }[] = [
      {
        args: ['--system-prompt', SYSTEM_PROMPT.replace('narrow', 'Narrow')],
        expect: [/FAIL {2}prompt drift/, new RegExp(`first differing byte: ${'<|system|>'.length + SYSTEM_PROMPT.indexOf('narrow')}\n`), /RL prefix/, /SFT prefix/],
      },
      { args: ['--reward', 'exact,step=0.05,gate=answer-tag'], expect: [/FAIL {2}reward audit/, /multiplicative gate/, /std 0\.00/] },
      { args: ['--temperature', '0'], expect: [/FAIL {2}sampled rollouts/, /identical/] },
    ];
    for (const [i, c] of cases.entries()) {
      const run = path.join(tmp, `refused-${i}`);
      const r = spawnSync(process.execPath, [bin, 'train', 'grpo', '--from', sft, '--steps', '2', ...c.args, '--run', run], { encoding: 'utf8' });
      assert.equal(r.status, 1, `exit 1 (refused), got ${r.status}: ${r.stderr}`);
      assert.match(r.stderr, /refused to start/);
      assert.match(r.stderr, /nothing was rolled out/);
      for (const e of c.expect) assert.match(r.stderr, e);
      assert.ok(!existsSync(path.join(run, 'metrics.jsonl')), 'no metrics: no rollout happened');
      assert.ok(!existsSync(path.join(run, 'config.json')));
    }
  });

  it('the worker killed mid-step leaves every metrics line parseable; --resume continues from the checkpoint', async () => {
    const run = path.join(tmp, 'killed');
    const worker = fork(path.join(repoRoot, 'dist', 'worker.js'), [], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
    const seen: number[] = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the worker wrote no GRPO metrics in time')), 300_000);
      worker.on('message', (m: FromWorker) => {
        if (m.type === 'failed') reject(new Error(m.error));
        if (m.type === 'metrics' && m.record['phase'] === 'grpo') seen.push(m.record['step'] as number);
        // Kill while the next step's rollouts are under way (reported as they start).
        if (m.type === 'progress' && m.phase === 'grpo rollouts' && seen.length >= 2 && m.done === 0) {
          clearTimeout(timer);
          worker.kill('SIGKILL');
          resolve();
        }
      });
      const start: ToWorker = {
        type: 'start',
        job: { kind: 'grpo', runDir: run, from: sft, steps: 6, groupSize: 2, tasksPerStep: 2, evalLimit: 0, checkpointEverySeconds: 0 },
      };
      worker.send(start);
    });
    await new Promise((r) => worker.once('exit', r));
    const text = readFileSync(path.join(run, 'metrics.jsonl'), 'utf8');
    const parsed = parseMetricsText(text);
    assert.deepEqual(parsed.badLines, [], 'every line parses');
    for (const l of text.split('\n').filter((x) => x !== '')) JSON.parse(l);
    assert.ok(parsed.lines.filter((l) => 'phase' in l && l.phase === 'grpo').length >= 2);
    const r = spawnSync(process.execPath, [bin, 'train', 'grpo', '--resume', '--eval-limit', '0', '--run', run], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const after = lines(run);
    const resume = after.find((l) => l['event'] === 'resume');
    assert.ok(resume, 'a resume marker');
    const grpoAfter = after.slice(after.indexOf(resume!) + 1).filter((l) => l['phase'] === 'grpo');
    assert.equal(grpoAfter[0]!['step'], (resume!['step'] as number) + 1, 'continues at checkpoint + 1');
    assert.equal(grpoAfter.at(-1)!['step'], 6);
    assert.deepEqual(parseMetricsText(readFileSync(path.join(run, 'metrics.jsonl'), 'utf8')).badLines, []);
  });
});
