// Ctrl-C and SIGTERM during long synchronous work (issue 36, finding 8): `train sft --world`
// on a big world ran 45 s past SIGTERM and two SIGINTs (the distillation never let the
// signal's handler run), and `train grpo --prescreen 100000 --prescreen-samples 1024` sat at
// 0/347 (one sampling call of 8 tasks x 1024 rollouts). Both now stop within about a second,
// exit 128 + the signal's number, and leave a run folder a retry accepts (or none at all).
// Through the executable, as a user runs it.
import * as assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { sampleInPieces } from '../../trainer/grpo/prescreen';
import { repoRoot } from '../support/reference';

const bin = path.join(repoRoot, 'bin', 'agent-lab');

/** The most a stop may take after the signal (measured: 0.3 s in preparation, 1.5 s in the pre-screen on a loaded 2-core machine). */
const STOP_MS = 6000;

interface Stopped {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  /** Milliseconds from the signal to the exit. */
  stopMs: number;
  /** Milliseconds from the signal to the job's "stopping after the current step" line (null: never said). */
  heardMs: number | null;
}

/** Runs the CLI, sends `signal` once stderr matches `started`, and waits for the exit (SIGKILL 60 s after the start, `graceMs` after the signal). */
function stopWhen(args: string[], started: RegExp, signal: NodeJS.Signals, graceMs = 15_000): Promise<Stopped> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    let sentAt: number | null = null;
    let heardAt: number | null = null;
    let killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr += chunk;
      if (sentAt !== null && heardAt === null && /: stopping after the current step/.test(stderr)) heardAt = Date.now();
      if (sentAt === null && started.test(stderr)) {
        sentAt = Date.now();
        child.kill(signal);
        clearTimeout(killer);
        killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      }
    });
    child.on('error', reject);
    child.on('close', (code, sig) => {
      clearTimeout(killer);
      if (sentAt === null) reject(new Error(`exited (${code ?? sig}) before ${started}: ${stderr.slice(-1000)}`));
      else resolve({ code, signal: sig, stderr, stopMs: Date.now() - sentAt, heardMs: heardAt === null ? null : heardAt - sentAt });
    });
  });
}

const lastLine = (s: string): string => s.trim().split('\n').pop()!;

describe('Ctrl-C and SIGTERM during long synchronous work (issue 36, finding 8)', function () {
  this.timeout(120_000);
  let tmp: string;
  let world: string;
  before(function () {
    this.timeout(240_000);
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = fs.mkdtempSync(path.join(tmpdir(), 'agent-lab-signals-'));
    // 2000 facts: the stub teacher distills ~3000 training tasks against 2000 passages, half a minute at least.
    const rows = ['entity,attribute,value'];
    const attributes = { mass: 7, height: 11, age: 13, weight: 17 };
    for (let i = 0; i < 500; i++) for (const [a, k] of Object.entries(attributes)) rows.push(`Thing${i},${a},${((i + 1) * k) % 9973}`);
    fs.writeFileSync(path.join(tmp, 'facts.csv'), rows.join('\n') + '\n');
    world = path.join(tmp, 'world');
    const w = spawnSync(process.execPath, [bin, 'world', '--facts', path.join(tmp, 'facts.csv'), '--out', world], { encoding: 'utf8' });
    assert.equal(w.status, 0, w.stderr);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  for (const [signal, code] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const) {
    it(`issue 36: train sft --world on a 2000-fact world stops within seconds of ${signal} during data preparation (exit ${code}) and writes no run folder`, async () => {
      const run = path.join(tmp, `sft-${signal}`);
      const r = await stopWhen(
        ['train', 'sft', '--world', world, '--steps', '1', '--eval-limit', '0', '--run', run],
        /the recipe's augmentation|distilling world with the stub teacher/,
        signal,
      );
      assert.equal(r.signal, null, `killed ${r.stopMs} ms after ${signal} (the signal was ignored): ${r.stderr.slice(-600)}`);
      assert.ok(r.stopMs < STOP_MS, `stopped ${r.stopMs} ms after ${signal}`);
      assert.equal(r.code, code, r.stderr);
      assert.doesNotMatch(r.stderr, /\n\s+at |internal error/, r.stderr);
      assert.match(
        lastLine(r.stderr),
        new RegExp(`^agent-lab train: stopped by ${signal} during the data preparation; nothing half-written: nothing was written to `),
      );
      // Nothing of the preparation is there, so a retry prepares it afresh (no "refusing to build over it").
      assert.equal(fs.existsSync(run), false, `${run} was left: ${fs.existsSync(run) ? fs.readdirSync(run).join(', ') : ''}`);
    });
  }

  it('issue 36: train grpo --prescreen 100000 --prescreen-samples 1024 stops within seconds of SIGTERM during the pre-screen (exit 143); the same folder is accepted by a retry', async () => {
    const sft = path.join(tmp, 'sft');
    const s = spawnSync(process.execPath, [bin, 'train', 'sft', '--steps', '1', '--eval-limit', '0', '--run', sft], { encoding: 'utf8' });
    assert.equal(s.status, 0, s.stderr);
    const run = path.join(tmp, 'grpo');
    const args = ['train', 'grpo', '--from', sft, '--steps', '1', '--group', '2', '--tasks', '1', '--eval-limit', '0', '--run', run];
    const r = await stopWhen([...args, '--prescreen', '100000', '--prescreen-samples', '1024'], /grpo pre-screen 0\//, 'SIGTERM');
    assert.equal(r.signal, null, `killed ${r.stopMs} ms after SIGTERM (the signal was ignored): ${r.stderr.slice(-600)}`);
    assert.ok(r.stopMs < STOP_MS, `stopped ${r.stopMs} ms after SIGTERM`);
    assert.equal(r.code, 143, r.stderr);
    assert.match(
      lastLine(r.stderr),
      /^agent-lab train: stopped by SIGTERM during the GRPO pre-screen; nothing half-written: .* the same command starts it again$/,
    );
    // No config.json, checkpoint or metrics of a run that never made a step: a retry is not "already holds a GRPO run".
    assert.deepEqual(
      fs.readdirSync(run).filter((f) => ['config.json', 'metrics.jsonl', 'checkpoints'].includes(f)),
      [],
    );
    const again = spawnSync(process.execPath, [bin, ...args, '--prescreen', '1', '--prescreen-samples', '2'], { encoding: 'utf8' });
    assert.equal(again.status, 0, again.stderr);
    assert.equal((JSON.parse(fs.readFileSync(path.join(run, 'config.json'), 'utf8')) as { prescreen: { tasks: number } }).prescreen.tasks, 1);
  });

  it('train grpo hears SIGTERM during its rollouts (a round decoded without a yield was deaf for minutes) and stops with a readable run folder', async () => {
    const sft = path.join(tmp, 'sft-rollouts');
    const s = spawnSync(process.execPath, [bin, 'train', 'sft', '--steps', '1', '--eval-limit', '0', '--run', sft], { encoding: 'utf8' });
    assert.equal(s.status, 0, s.stderr);
    const run = path.join(tmp, 'grpo-rollouts');
    // 12 tasks x 8 rollouts a round from a 1-step student: every rollout runs to its token limits.
    const args = ['train', 'grpo', '--from', sft, '--steps', '20', '--group', '8', '--tasks', '12', '--prescreen', '0', '--eval-limit', '0', '--run', run];
    const r = await stopWhen(args, /grpo rollouts 0\/\d+ +step 1/, 'SIGTERM', 90_000);
    // Heard at once (decoding yields every 100 ms); the step's round ends, then the run stops.
    assert.ok(r.heardMs !== null && r.heardMs < STOP_MS, `SIGTERM heard after ${r.heardMs} ms: ${r.stderr.slice(-600)}`);
    assert.equal(r.signal, null, `killed ${r.stopMs} ms after SIGTERM: ${r.stderr.slice(-600)}`);
    assert.equal(r.code, 0, r.stderr);
    for (const line of fs.readFileSync(path.join(run, 'metrics.jsonl'), 'utf8').split('\n').filter((l) => l.trim() !== '')) JSON.parse(line);
    console.log(`      (heard ${r.heardMs} ms and stopped ${r.stopMs} ms after SIGTERM)`);
    JSON.parse(fs.readFileSync(path.join(run, 'config.json'), 'utf8'));
  });

  it("train grpo hears SIGINT during its step-0 held-out evaluation (an evaluation was deaf for its whole length)", async () => {
    const sft = path.join(tmp, 'sft-rollouts');
    if (!fs.existsSync(sft)) {
      const s = spawnSync(process.execPath, [bin, 'train', 'sft', '--steps', '1', '--eval-limit', '0', '--run', sft], { encoding: 'utf8' });
      assert.equal(s.status, 0, s.stderr);
    }
    const run = path.join(tmp, 'grpo-eval');
    const args = ['train', 'grpo', '--from', sft, '--steps', '20', '--group', '2', '--tasks', '1', '--prescreen', '0', '--eval-limit', '50', '--run', run];
    const r = await stopWhen(args, /eval heldout [1-9]\d*\//, 'SIGINT', 90_000);
    assert.ok(r.heardMs !== null && r.heardMs < STOP_MS, `SIGINT heard after ${r.heardMs} ms: ${r.stderr.slice(-600)}`);
    assert.equal(r.signal, null, `killed ${r.stopMs} ms after SIGINT: ${r.stderr.slice(-600)}`);
    for (const line of fs.readFileSync(path.join(run, 'metrics.jsonl'), 'utf8').split('\n').filter((l) => l.trim() !== '')) JSON.parse(line);
    console.log(`      (heard ${r.heardMs} ms and stopped ${r.stopMs} ms after SIGINT)`);
  });
});

describe('sampleInPieces: the pre-screen sampled in pieces a stop can come between (issue 36)', () => {
  const sample = async (xs: readonly number[]): Promise<number[]> => xs.map((x) => x * 10);
  it('returns what one call would, in order; pieces grow from min to max while they are quick', async () => {
    const sizes: number[] = [];
    const items = Array.from({ length: 100 }, (_, i) => i);
    const out = await sampleInPieces(
      items,
      async (xs) => (sizes.push(xs.length), sample(xs)),
      async () => false,
      { min: 2, max: 16, targetMs: 1000 },
    );
    assert.deepEqual(out, await sample(items));
    assert.deepEqual(sizes.slice(0, 5), [2, 4, 8, 16, 16]);
  });
  it('asks stop() before every piece and returns null when it says stop (the rest is never sampled)', async () => {
    let asked = 0;
    let sampled = 0;
    const out = await sampleInPieces(
      Array.from({ length: 50 }, (_, i) => i),
      async (xs) => ((sampled += xs.length), sample(xs)),
      async () => ++asked > 2,
      { min: 4, max: 4, targetMs: 1000 },
    );
    assert.equal(out, null);
    assert.equal(asked, 3);
    assert.equal(sampled, 8);
  });
});
