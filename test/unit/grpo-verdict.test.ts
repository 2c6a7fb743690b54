// Issue 33: GRPO predicts before step 1 whether its groups will carry a gradient, and says
// what to change. The verdict's causes on constructed screens (every rollout right, every
// rollout wrong, a spread of step counts alone, each task confident either way), the default
// screen's size, and end to end on the tiny preset: a refusal with its cause that leaves a
// readable run folder, --force recorded, and a run that stops itself after N flat steps.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseMetricsText } from '../../core/protocol/metrics';
import type { TaskKind } from '../../core/types';
import { latestCheckpoint, loadCheckpoint } from '../../trainer/run/checkpoint';
import {
  PRESCREEN_DEFAULTS,
  type PrescreenResult,
  type VerdictContext,
  defaultPrescreenTasks,
  formatVerdict,
  prescreenVerdict,
  summarisePrescreen,
  wilsonInterval,
} from '../../trainer/grpo/prescreen';
import { prescreenRefusal, suggestedPool } from '../../extension/progressText';
import { preflightViewOf } from '../../extension/runMeta';
import { preflightTable } from '../../webview-ui/curves/preflight';
import { grpoOutcomeText } from '../../core/figures';
import type { GrpoSummary } from '../../core/protocol/worker';
import { repoRoot } from '../support/reference';

const KINDS: TaskKind[] = ['sum', 'compare', 'lookup', 'double'];
/** `n` screened tasks of G = 8 rollouts each, task i with `correct(i)` right. */
const screen = (n: number, correct: (i: number) => number, rewardSpread: (i: number) => boolean = () => false, samples = 8) =>
  summarisePrescreen(
    Array.from({ length: n }, (_, i): PrescreenResult => ({ kind: KINDS[i % KINDS.length]!, correct: correct(i), rewardSpread: rewardSpread(i) })),
    samples,
    8,
  );
const textbook: VerdictContext = { pool: 'train', noFreshPools: false, fromRun: '/runs/sft', dynamicSampling: true };

describe('GRPO pre-screen verdict (issue 33)', () => {
  it('every rollout solves the pool: memorised, with the pool flag that changes it (a user world: says it has no fresh pool)', () => {
    const s = screen(72, () => 8);
    const v = prescreenVerdict(s, textbook);
    assert.equal(v.ok, false);
    assert.equal(v.cause, 'memorised');
    assert.match(v.detail!, /72 of 72 screened tasks were solved by all 8 rollouts/);
    assert.match(v.next!, /`--pool fresh-values`/);
    assert.match(prescreenVerdict(s, { ...textbook, pool: 'fresh-values' }).next!, /`--pool fresh-entities`/);
    const user = prescreenVerdict(s, { ...textbook, noFreshPools: true });
    assert.equal(user.cause, 'memorised');
    assert.doesNotMatch(user.next!, /--pool/, 'a documents world has no fresh pool to suggest');
    assert.match(user.next!, /no fact table to derive fresh pools from/);
    assert.match(formatVerdict(v), /FAIL.*\n {2}cause \(memorised\).*\n {2}next: .*`--force` to run anyway/);
  });

  it('every rollout fails: too hard, with the continued-SFT command and an easier pool', () => {
    const v = prescreenVerdict(screen(72, () => 0), { ...textbook, pool: 'fresh-entities' });
    assert.equal(v.ok, false);
    assert.equal(v.cause, 'too-hard');
    assert.match(v.detail!, /72 of 72 screened tasks were failed by all 8 rollouts \(pass rate 0%\)/);
    assert.match(v.next!, /agent-lab train sft --from \/runs\/sft --steps N --run NEW_SFT_RUN/);
    assert.match(v.next!, /`--pool fresh-values`/);
  });

  it('the no-teacher pool fresh-differences: never suggests the teacher-guided groups, which have no teacher to join them', () => {
    const hard = prescreenVerdict(screen(72, () => 0), { ...textbook, pool: 'fresh-differences' });
    assert.equal(hard.cause, 'too-hard');
    assert.match(hard.next!, /agent-lab train sft --from \/runs\/sft --steps N --run NEW_SFT_RUN/);
    assert.match(hard.next!, /`--pool fresh-values`/);
    assert.doesNotMatch(hard.next!, /--guide/);
    assert.match(prescreenVerdict(screen(72, () => 0), { ...textbook, pool: 'fresh-entities' }).next!, /--guide on/, 'a pool the teacher can solve keeps it');
    const solved = prescreenVerdict(screen(72, () => 8), { ...textbook, pool: 'fresh-entities' });
    assert.match(solved.next!, /`--pool fresh-differences`/);
    assert.match(prescreenVerdict(screen(72, () => 8), { ...textbook, pool: 'fresh-differences' }).next!, /--temperature 1\.2/);
  });

  it('groups that differ only by step counts: the reward has nothing but its length term', () => {
    const v = prescreenVerdict(screen(72, () => 0, () => true), textbook);
    assert.equal(v.ok, false);
    assert.equal(v.cause, 'length-only');
    assert.match(v.detail!, /differ only by step counts/);
    assert.match(v.detail!, /dynamic sampling drops/);
    assert.match(prescreenVerdict(screen(72, () => 0, () => true), { ...textbook, dynamicSampling: false }).detail!, /answering early/);
    // A spread of correctness is not a length-only spread, even when the rewards also differ.
    assert.equal(screen(72, (i) => (i % 2 ? 3 : 0), () => true).stepsOnly, 36);
  });

  it("the editor finds the verdict in a refused job's error (for its warning and Train Anyway), and nothing in another failure", () => {
    const v = prescreenVerdict(screen(72, () => 8), textbook);
    const error = `GRPO refused to start: the pre-screen predicts ...\npre-screen: 72 tasks x 8 rollouts ...\n${formatVerdict(v)}`;
    const line = prescreenRefusal(error);
    assert.ok(line);
    assert.match(line, /^pre-screen verdict: FAIL: .* cause \(memorised\): .* next: `--pool fresh-values`/);
    assert.doesNotMatch(line, /\n/);
    assert.equal(prescreenRefusal('GRPO refused to start: a pre-flight check failed (nothing was rolled out).'), null);
  });

  it("the refusal's suggested pool becomes a button of its own (only a pool the trainer knows)", () => {
    const memorised = prescreenRefusal(`x\n${formatVerdict(prescreenVerdict(screen(72, () => 8), textbook))}`)!;
    assert.equal(suggestedPool(memorised), 'fresh-values');
    const tooHard = prescreenRefusal(`x\n${formatVerdict(prescreenVerdict(screen(72, () => 0), { ...textbook, pool: 'fresh-entities' }))}`)!;
    assert.equal(suggestedPool(tooHard), 'fresh-values', tooHard);
    assert.equal(suggestedPool('pre-screen verdict: FAIL: x cause (memorised): y next: `--temperature 1.2`'), null);
    assert.equal(suggestedPool('pre-screen verdict: FAIL: x cause (memorised): y next: `--pool elsewhere`'), null);
  });

  it("each cause's next steps as actions, in the order the text names them (the editor's buttons)", () => {
    // memorised on pool train: the next pool up, nothing else.
    const memorised = prescreenVerdict(screen(72, () => 8), textbook);
    assert.deepEqual(memorised.actions, [{ kind: 'grpo', flags: { pool: 'fresh-values' } }]);
    assert.deepEqual(prescreenVerdict(screen(72, () => 8), { ...textbook, pool: 'fresh-values' }).actions, [{ kind: 'grpo', flags: { pool: 'fresh-entities' } }]);
    assert.deepEqual(prescreenVerdict(screen(72, () => 8), { ...textbook, pool: 'fresh-differences' }).actions, [{ kind: 'grpo', flags: { temperature: 1.2 } }]);
    // A documents world: no pool to suggest, only the hotter temperature its text names.
    assert.deepEqual(prescreenVerdict(screen(72, () => 8), { ...textbook, noFreshPools: true }).actions, [{ kind: 'grpo', flags: { temperature: 1.2 } }]);
    // too hard: SFT more, then the easier pool, then the guide, as the text says them.
    const hard = prescreenVerdict(screen(72, () => 0), { ...textbook, pool: 'fresh-entities' });
    assert.deepEqual(hard.actions, [{ kind: 'sft-more' }, { kind: 'grpo', flags: { pool: 'fresh-values' } }, { kind: 'grpo', flags: { guide: 'on' } }]);
    const order = ['SFT more', '`--pool fresh-values`', '`--guide on`'].map((x) => hard.next!.indexOf(x));
    assert.deepEqual([...order].sort((a, b) => a - b), order, hard.next);
    assert.ok(order.every((i) => i >= 0), hard.next);
    assert.deepEqual(prescreenVerdict(screen(72, () => 0), { ...textbook, pool: 'fresh-values' }).actions, [{ kind: 'sft-more' }, { kind: 'grpo', flags: { pool: 'train' } }, { kind: 'grpo', flags: { guide: 'on' } }]);
    // Pool train has no easier pool; fresh-differences has no teacher to guide a group.
    assert.deepEqual(prescreenVerdict(screen(72, () => 0), textbook).actions, [{ kind: 'sft-more' }, { kind: 'grpo', flags: { guide: 'on' } }]);
    assert.deepEqual(prescreenVerdict(screen(72, () => 0), { ...textbook, pool: 'fresh-differences' }).actions, [{ kind: 'sft-more' }, { kind: 'grpo', flags: { pool: 'fresh-values' } }]);
    // confident: the hotter temperature.
    assert.deepEqual(prescreenVerdict(screen(72, (i) => (i % 2 ? 8 : 0)), textbook).actions, [{ kind: 'grpo', flags: { temperature: 1.2 } }]);
    // length-only: the actions of the side the screen leans to (all wrong here: too hard's; all right: memorised's).
    const lengthWrong = prescreenVerdict(screen(72, () => 0, () => true), textbook);
    assert.equal(lengthWrong.cause, 'length-only');
    assert.deepEqual(lengthWrong.actions, [{ kind: 'sft-more' }, { kind: 'grpo', flags: { guide: 'on' } }]);
    const lengthRight = prescreenVerdict(screen(72, () => 8, () => true), textbook);
    assert.equal(lengthRight.cause, 'length-only');
    assert.deepEqual(lengthRight.actions, [{ kind: 'grpo', flags: { pool: 'fresh-values' } }]);
    assert.match(lengthRight.next!, /^make correctness vary: `--pool fresh-values`/);
    // A passing verdict names nothing to do.
    assert.equal(prescreenVerdict(screen(72, (i) => (i < 36 ? 4 : 8)), textbook).actions, undefined);
  });

  it('each task always or never solved: confident, with a hotter temperature', () => {
    const v = prescreenVerdict(screen(72, (i) => (i % 2 ? 8 : 0)), textbook);
    assert.equal(v.cause, 'confident');
    assert.match(v.next!, /--temperature 1\.2/);
  });

  it('passes a share like the measured default, and a flat screen too small to be sure; a whole flat pool is refused', () => {
    // 6 of 72 tasks with a spread (8%, the measured default drew 7.5%): not refused.
    assert.equal(prescreenVerdict(screen(72, (i) => (i < 6 ? 4 : 8)), textbook).ok, true);
    // One task in 72 with a spread: the bound is above the threshold, so not refused either.
    assert.equal(prescreenVerdict(screen(72, (i) => (i === 0 ? 4 : 8)), textbook).ok, true);
    // 24 flat tasks: the 90% interval reaches above 5%; the screen cannot tell, the run goes on.
    const small = screen(24, () => 8);
    assert.ok(small.interval[1] > PRESCREEN_DEFAULTS.threshold);
    assert.equal(prescreenVerdict(small, textbook).ok, true);
    // The same 24 as the whole pool: no task left unscreened, so the share itself is judged.
    assert.equal(prescreenVerdict({ ...small, wholePool: true }, textbook).cause, 'memorised');
  });

  it("the interval: Wilson's, 0 of n below 2.706 / (n + 2.706); the default screen costs 10% of the run's draws", () => {
    const [lo, hi] = wilsonInterval(0, 72);
    assert.equal(lo, 0);
    assert.ok(Math.abs(hi - 1.645 ** 2 / (72 + 1.645 ** 2)) < 1e-12, String(hi));
    const [a, b] = wilsonInterval(0.5, 100);
    assert.ok(a < 0.5 && b > 0.5 && Math.abs(0.5 - a - (b - 0.5)) < 1e-12);
    // The default run: 60 steps x at most 12 draws x G 8 = 5,760 rollouts; 72 tasks x 8 = 576.
    const d = defaultPrescreenTasks({ steps: 60, drawsPerStep: 12, group: 8, poolSize: 2000 });
    assert.deepEqual(d, { tasks: 72, runRollouts: 5760 });
    assert.ok((d.tasks * 8) / d.runRollouts <= PRESCREEN_DEFAULTS.budgetShare);
    assert.equal(defaultPrescreenTasks({ steps: 60, drawsPerStep: 12, group: 8, poolSize: 40 }).tasks, 40, 'at most the pool');
    assert.equal(defaultPrescreenTasks({ steps: 2, drawsPerStep: 6, group: 3, poolSize: 2000 }).tasks, 0, 'a short run: skipped');
  });
});

describe('GRPO pre-screen verdict and auto-stop, end to end (tiny preset)', function () {
  this.timeout(600_000);
  const bin = path.join(repoRoot, 'bin', 'agent-lab');
  let tmp: string;
  let sft: string;
  const cli = (args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8' });
  const config = (run: string) => JSON.parse(readFileSync(path.join(run, 'config.json'), 'utf8')) as Record<string, unknown>;
  const grpoLines = (run: string) => {
    const parsed = parseMetricsText(readFileSync(path.join(run, 'metrics.jsonl'), 'utf8'));
    assert.deepEqual(parsed.badLines, [], 'every metrics line parses');
    return parsed.lines.filter((l) => 'phase' in l && l.phase === 'grpo') as unknown as Record<string, unknown>[];
  };
  before(() => {
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-verdict-'));
    sft = path.join(tmp, 'sft');
    // 20 steps: a student that solves no task yet.
    const r = cli(['train', 'sft', '--steps', '20', '--eval-limit', '0', '--run', sft]);
    assert.equal(r.status, 0, r.stderr);
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('refuses a pool every rollout fails (exit 1, cause and next step, readable folder, no step); --force runs it and records that', () => {
    const run = path.join(tmp, 'hard');
    const args = ['train', 'grpo', '--from', sft, '--steps', '1', '--group', '2', '--tasks', '1', '--prescreen', '60', '--eval-limit', '0', '--run', run];
    const r = cli(args);
    assert.equal(r.status, 1, `refused with the pre-flight's exit code: ${r.stderr}`);
    assert.match(r.stderr, /GRPO refused to start: the pre-screen predicts/);
    assert.match(r.stderr, /cause \(too-hard\): every rollout fails: 60 of 60 screened tasks/);
    assert.match(r.stderr, /next: SFT more \(`agent-lab train sft --from /);
    const refused = config(run);
    assert.equal(refused['refused'], true);
    assert.equal((refused['prescreenVerdict'] as { cause: string }).cause, 'too-hard');
    assert.equal((refused['prescreen'] as { tasks: number }).tasks, 60);
    // The next steps as data beside the text, and the editor's card reads them as its buttons.
    assert.deepEqual((refused['prescreenVerdict'] as { actions: unknown }).actions, [{ kind: 'sft-more' }, { kind: 'grpo', flags: { pool: 'fresh-values' } }, { kind: 'grpo', flags: { guide: 'on' } }]);
    assert.deepEqual(
      preflightTable(preflightViewOf(refused)!).buttons.map((b) => b.label),
      ['Train SFT More…', 'Train with --pool fresh-values', 'Train with --guide on', 'Train Anyway'],
    );
    assert.deepEqual(grpoLines(run), [], 'no step was trained');
    assert.equal(latestCheckpoint(run), null);
    // A refused run is not resumed past its verdict.
    const resumed = cli(['train', 'grpo', '--resume', '--run', run]);
    assert.equal(resumed.status, 2);
    assert.match(resumed.stderr, /the pre-screen refused the run/);
    // The same command with --force, in the same folder: it trains, and says it was forced.
    const f = cli([...args, '--force']);
    assert.equal(f.status, 0, f.stderr);
    assert.match(f.stderr, /pre-screen verdict: FAIL \(forced: running anyway/);
    const forced = config(run);
    assert.equal(forced['forced'], true);
    assert.equal(forced['refused'], undefined);
    assert.equal((forced['prescreenVerdict'] as { ok: boolean }).ok, false);
    assert.equal(grpoLines(run).length, 1);
  });

  it('stops itself after --stop-flat fully flat steps: warning with the cause, zero-spread share from step 1, a readable folder', () => {
    const run = path.join(tmp, 'flat');
    const r = cli(['train', 'grpo', '--from', sft, '--steps', '8', '--group', '2', '--tasks', '1', '--temperature', '0.01', '--stop-flat', '2', '--prescreen', '0', '--eval-limit', '0', '--run', run]);
    assert.equal(r.status, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /pre-screen:/, '--prescreen 0: no screen');
    assert.match(r.stderr, /grpo 1\/8 {2}step 1: .*flat groups (\d)\/\1 \(zero-spread 100%\)/);
    assert.match(r.stdout, /stopped itself: stopped after 2 fully flat steps in a row \(--stop-flat 2; 0: never\), checkpoint step-2 kept: .*temperature \(0\.01\) is too low/);
    const grpo = grpoLines(run);
    assert.deepEqual(grpo.map((l) => l['step']), [1, 2], 'stopped at step 2 of 8');
    assert.deepEqual(grpo.map((l) => l['frac_reward_zero_std']), [1, 1]);
    assert.equal(grpo[1]!['stopped'], 'flat');
    assert.equal((config(run)['grpo'] as { stopFlat: number }).stopFlat, 2);
    const summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as GrpoSummary;
    assert.equal(summary.steps, 2);
    assert.match(summary.stopped_flat ?? '', /fully flat/);
    // What the finish message explains an unchanged figure with (issue 35, item 9): both steps updated nothing.
    assert.equal(summary.no_update_steps, 2);
    assert.equal(typeof summary.rollout_accuracy, 'number');
    assert.equal(summary.prescreen_minutes, 0, '--prescreen 0');
    assert.equal(summary.eval_minutes, 0, '--eval-limit 0');
    assert.match(grpoOutcomeText(summary), /none of the 2 steps had a group to learn from \(a group whose rollouts differed\), so the policy was never updated/);
    const ck = loadCheckpoint(run, 'latest');
    assert.equal(ck.step, 2);
    assert.ok(existsSync(path.join(run, 'tokenizer.json')));
  });
});
