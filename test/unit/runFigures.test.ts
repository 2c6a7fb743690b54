// One figure per run (issue 35): the finish message of a training job, the Evaluate result
// and the Runs view name each held-out figure's split, task count (of the split's), the
// checkpoint and which evaluation made it, with the accuracy per shape; the Runs view never
// swaps one figure for another silently; evaluation progress counts the whole split.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { evaluateFinishMessage, figureShort, figureText, grpoOutcomeText, heldoutFigures, minutesText, rlBaselineLines, shapeLine, trainingFigure, trainingFinishMessage } from '../../core/figures';
import type { EvalJobSummary, GrpoSummary, SftSummary } from '../../core/protocol/worker';
import { describeRun, evalDescription, readRun, runFigureLines } from '../../extension/runFolders';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import { makeTaskPool } from '../../core/world';
import { initBackend } from '../../trainer/model/backend';
import { StackModel, presetConfig } from '../../trainer/model/model';
import { evaluateModel } from '../../trainer/run/jobEval';

const repoRoot = path.resolve(__dirname, '..', '..');
const bin = path.join(repoRoot, 'bin', 'agent-lab');
const byKind = { compare: { n: 12, accuracy: 10 / 12 }, lookup: { n: 10, accuracy: 0.5 }, sum: { n: 28, accuracy: 0 } };

describe('one figure per run (issue 35)', () => {
  it('per shape: solved of evaluated, in the shapes\' order', () => {
    assert.equal(shapeLine(byKind), 'lookup 5/10, sum 0/28, compare 10/12');
    assert.equal(shapeLine(undefined), '');
  });

  it("the finish message of a training job names its split, task count of the split's, checkpoint and shapes", () => {
    const s: SftSummary = { runDir: '/r', steps: 1484, minutes: 4.1, wallMinutes: 4.3, backend: 'wasm', heldout_accuracy: 0.36, heldout_n: 50, heldout_of: 55, heldout_step: 1484, by_kind: byKind, curve: [], dev_curve: [] };
    assert.equal(
      trainingFinishMessage('sft', 'r', s, 1484),
      'SFT r finished: 1484 steps in 4.1 min of training (what the budget counts), 4.3 min in all with the held-out evaluations and checkpoints. ' +
        'Held-out exact match 36.0% on 50 of the 55 held-out tasks at step-1484 (lookup 5/10, sum 0/28, compare 10/12). Evaluate measures all 55.',
    );
    const whole = { ...s, heldout_n: 55, heldout_accuracy: 0.4 };
    assert.match(trainingFinishMessage('sft', 'r', whole, 1484), /40\.0% on 55 held-out tasks at step-1484 \(/);
    assert.doesNotMatch(trainingFinishMessage('sft', 'r', whole, 1484), /Evaluate measures/);
    const grpo = { runDir: '/g', from: '/r', steps: 5, minutes: 1, wallMinutes: 1, backend: 'wasm', heldout_accuracy_before: 0.327, heldout_accuracy: 0.327, heldout_n: 55, heldout_of: 55, heldout_step: 5, by_kind: byKind, frac_reward_zero_std: [], curve: [] };
    assert.match(trainingFinishMessage('grpo', 'g', grpo, 5), /Held-out exact match 32\.7% → 32\.7% on 55 held-out tasks at step-5 \(lookup 5\/10/);
    assert.match(trainingFinishMessage('sft', 'r', { ...s, heldout_accuracy: undefined }, 3), /No held-out evaluation in this run/);
  });

  it('a GRPO finish says the budget minutes apart from the wall minutes, and why the figure did not move (issue 35, item 9)', () => {
    const g: GrpoSummary = {
      runDir: '/g', from: '/r', steps: 60, minutes: 3.0, wallMinutes: 4.1, backend: 'wasm', heldout_accuracy_before: 0.327, heldout_accuracy: 0.327, heldout_n: 55, heldout_of: 55, heldout_step: 60,
      frac_reward_zero_std: [...Array(52).fill(1), ...Array(8).fill(0.75)], no_update_steps: 52, rollout_accuracy: 0.95, prescreen_minutes: 0.6, eval_minutes: 0.4, curve: [],
    };
    const msg = trainingFinishMessage('grpo', 'g', g, 60);
    assert.match(msg, /^GRPO g finished: 60 steps in 3\.0 min of rollouts and updates \(what the budget counts\), 4\.1 min in all: pre-screen 0\.6 min, held-out evaluations 0\.4 min, checkpoints and the rest 0\.1 min\. /);
    assert.match(msg, /32\.7% → 32\.7% on 55 held-out tasks at step-60\. Unchanged: 52 of 60 steps had no group to learn from \(a group whose rollouts differed\), so nothing was updated on them \(mean frac_reward_zero_std 0\.97\): the rollouts solved 95% of their tasks, so a group's rollouts were all right \(a pool the student knows/);
    assert.equal(grpoOutcomeText({ ...g, no_update_steps: 60, rollout_accuracy: 0.02, frac_reward_zero_std: Array(60).fill(1) }),
      'Unchanged: none of the 60 steps had a group to learn from (a group whose rollouts differed), so the policy was never updated (mean frac_reward_zero_std 1.00): the rollouts solved 2% of their tasks, so a group\'s rollouts were all wrong (too hard for this student: SFT more first).');
    assert.match(grpoOutcomeText({ ...g, no_update_steps: 0, frac_reward_zero_std: Array(60).fill(0.5) }), /^Unchanged although every step updated the policy/);
    assert.equal(grpoOutcomeText({ ...g, heldout_accuracy: 0.4, no_update_steps: 0 }), '', 'a figure that moved after updates needs no excuse');
    assert.match(grpoOutcomeText({ ...g, heldout_accuracy: 0.4 }), /^52 of 60 steps had no group to learn from \(a group whose rollouts differed\), so nothing was updated on them \(mean frac_reward_zero_std 0\.97\)\.$/);
    // An older summary without the new fields: the count from frac_reward_zero_std, no cause.
    const old = { ...g, no_update_steps: undefined, rollout_accuracy: undefined, prescreen_minutes: undefined, eval_minutes: undefined };
    assert.match(trainingFinishMessage('grpo', 'g', old, 60), /4\.1 min in all with the held-out evaluations and checkpoints\. .*Unchanged: 52 of 60 steps had no group to learn from/);
    // A measured run (tiny preset, 6 steps from a student that solved nothing): every group's rewards differed by step counts only.
    const measured: GrpoSummary = {
      runDir: '/g', from: '/s', steps: 6, minutes: 1.7184, wallMinutes: 2.3378, backend: 'wasm', heldout_accuracy_before: 0, heldout_accuracy: 0, heldout_n: 10, heldout_of: 50, heldout_step: 6,
      frac_reward_zero_std: [0, 0, 0, 0, 0, 0], no_update_steps: 6, rollout_accuracy: 0, prescreen_minutes: 0.4376, eval_minutes: 0.1724, curve: [],
    };
    assert.equal(
      trainingFinishMessage('grpo', 'ux-grpo', measured, 6),
      'GRPO ux-grpo finished: 6 steps in 1.7 min of rollouts and updates (what the budget counts), 2.3 min in all: pre-screen 0.4 min, held-out evaluations 0.2 min. ' +
        'Held-out exact match 0.0% → 0.0% on 10 of the 50 held-out tasks at step-6. Evaluate measures all 50. ' +
        'Unchanged: none of the 6 steps had a group to learn from (a group whose rollouts differed), so the policy was never updated ' +
        "(their rewards differed by step counts alone, which dynamic sampling drops): the rollouts solved 0% of their tasks, so a group's rollouts were all wrong (too hard for this student: SFT more first).",
    );
    assert.equal(minutesText('grpo', { ...g, wallMinutes: 3.02 }), '3.0 min.');
  });

  it('the Evaluate result names the checkpoint, shapes and failures by first mistake', () => {
    const s: EvalJobSummary = { split: 'heldout', accuracy: 18 / 55, n: 55, of: 55, by_kind: byKind, failures: { search: 0, not_in_question: 4, final: 3 }, span_accuracy: {}, contaminated: 0, steps_mean: 3, checkpoint: 'latest', step: 1484 };
    assert.equal(
      evaluateFinishMessage('r', s),
      'r: held-out exact match 32.7% on 55 held-out tasks at step-1484 (checkpoint latest, step-1484); per shape lookup 5/10, sum 0/28, compare 10/12; failures (first mistake) not_in_question 4, final 3.',
    );
    assert.match(evaluateFinishMessage('r', { ...s, n: 20, checkpoint: 'step-700', step: 700 }), /on 20 of the 55 held-out tasks at step-700 \(checkpoint step-700\)/);
  });

  it('the Runs view shows the last figure and says which evaluation made it; the tooltip keeps both', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-figures-'));
    try {
      fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ kind: 'sft', preset: 'tiny', budget: { minutes: 3 } }));
      const recs = [
        { phase: 'sft', step: 742, time: 100, loss: 1 },
        { phase: 'eval', step: 742, time: 100, split: 'heldout', accuracy: 0.3, n: 50, of: 55, by_kind: byKind, final: false },
        { phase: 'eval', step: 1484, time: 200, split: 'heldout', accuracy: 0.36, n: 50, of: 55, by_kind: byKind, final: true },
      ];
      fs.writeFileSync(path.join(dir, 'metrics.jsonl'), recs.map((r) => JSON.stringify(r)).join('\n') + '\n');
      let r = readRun(dir);
      assert.equal(r.heldout, 0.36);
      assert.match(describeRun(r), /held-out 36\.0% on 50 of 55 \(end of training, step-1484\)/);
      // Evaluate then measures the whole split: the line says so; the tooltip keeps both figures.
      fs.appendFileSync(path.join(dir, 'metrics.jsonl'), JSON.stringify({ phase: 'eval', step: 1484, time: 200, split: 'heldout', accuracy: 18 / 55, by_kind: byKind, n: 55, of: 55, checkpoint: 'latest' }) + '\n');
      fs.mkdirSync(path.join(dir, 'eval'));
      fs.writeFileSync(path.join(dir, 'eval', 'heldout.json'), JSON.stringify({ split: 'heldout', accuracy: 18 / 55, n: 55, of: 55, step: 1484, checkpoint: 'latest' }));
      r = readRun(dir);
      assert.equal(r.heldout, 18 / 55);
      assert.match(describeRun(r), /held-out 32\.7% of 55 \(Evaluate, step-1484\)/);
      assert.deepEqual(runFigureLines(r), [
        'held-out exact match 36.0% on 50 of the 55 held-out tasks at step-1484 (end of training): lookup 5/10, sum 0/28, compare 10/12',
        'held-out exact match 32.7% on 55 held-out tasks at step-1484 (Evaluate): lookup 5/10, sum 0/28, compare 10/12',
      ]);
      assert.equal(evalDescription(r.evals[0]!), '32.7% of 55 tasks at step-1484');
      // A later training point in the middle of a resumed run is not named as a final figure.
      fs.appendFileSync(path.join(dir, 'metrics.jsonl'), JSON.stringify({ phase: 'eval', step: 1600, time: 220, split: 'heldout', accuracy: 0.4, n: 50, final: false }) + '\n');
      r = readRun(dir);
      assert.equal(r.heldoutFigure, null);
      assert.match(describeRun(r), /held-out 40\.0%(?! of)/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('evaluation on both cores reports progress over the whole split, not one thread\'s half', async function () {
    this.timeout(300_000);
    await initBackend('wasm');
    const tok = trainDefaultTokenizer();
    const model = StackModel.create({ ...presetConfig('tiny', tok.vocabSize), layers: 1 }, 7);
    const tasks = makeTaskPool().heldout.slice(0, 10);
    const seen: [number, number][] = [];
    const hooks = { progress: (_phase: string, done: number, total: number) => void seen.push([done, total]), isCancelled: () => false };
    const out = await evaluateModel(model, tok, tasks, 'heldout', new Set(), [], hooks, 2);
    model.dispose();
    assert.equal(out.threads, 2, 'the second half ran in a worker thread');
    assert.ok(seen.every(([, total]) => total === 10), JSON.stringify(seen));
    assert.equal(Math.max(...seen.map(([d]) => d)), 10, JSON.stringify(seen));
    // Counts only grow.
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i]![0] >= seen[i - 1]![0], JSON.stringify(seen));
  });

  it('a real run: the SFT summary, its finish message, Evaluate and the Runs view agree on each figure', function () {
    this.timeout(600_000);
    if (!fs.existsSync(path.join(repoRoot, 'dist', 'cli.js'))) {
      const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
      assert.equal(b.status, 0, b.stderr);
    }
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-figures-run-'));
    const cli = (args: string[]) => spawnSync(process.execPath, [bin, ...args], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 << 20 });
    try {
      const src = path.join(tmp, 'rivers.csv');
      fs.writeFileSync(src, 'entity,attribute,value\nVolga,length in km,3530\nDanube,length in km,2850\nRhine,length in km,1233\nNile,length in km,6650\nAmazon,length in km,6400\nMississippi,length in km,3766\n');
      const world = path.join(tmp, 'rivers');
      const w = cli(['world', '--facts', src, '--out', world]);
      assert.equal(w.status, 0, w.stderr);
      const heldout = fs.readFileSync(path.join(world, 'heldout.jsonl'), 'utf8').trim().split('\n').length;
      assert.ok(heldout > 3, `held-out ${heldout}`);
      const run = path.join(tmp, 'run');
      const t = cli(['train', 'sft', '--world', world, '--recipe', 'plain', '--preset', 'tiny', '--steps', '4', '--eval-limit', '3', '--run', run]);
      assert.equal(t.status, 0, t.stderr);
      const lines = t.stdout.trim().split('\n');
      const sft = JSON.parse(lines.at(-1)!) as SftSummary;
      assert.equal(sft.heldout_n, 3);
      assert.equal(sft.heldout_of, heldout);
      assert.equal(sft.heldout_step, 4);
      const trained = trainingFigure(sft)!;
      // The CLI's line and the editor's message give the same figure.
      assert.ok(lines.at(-2)!.includes(figureText(trained, false)), lines.at(-2));
      assert.ok(trainingFinishMessage('sft', 'run', sft, 4).includes(`on 3 of the ${heldout} held-out tasks at step-4`));
      const e = cli(['eval', '--run', run, '--split', 'heldout']);
      assert.equal(e.status, 0, e.stderr);
      const evalSummary = JSON.parse(fs.readFileSync(path.join(run, 'eval', 'heldout.json'), 'utf8')) as EvalJobSummary;
      assert.equal(evalSummary.n, heldout);
      assert.equal(evalSummary.of, heldout);
      assert.equal(evalSummary.step, 4);
      assert.equal(evalSummary.checkpoint, 'latest');
      const printed = JSON.parse(e.stdout.trim().split('\n').at(-1)!) as { n: number; of: number; step: number; checkpoint: string };
      assert.deepEqual([printed.n, printed.of, printed.step, printed.checkpoint], [heldout, heldout, 4, 'latest']);
      assert.ok(e.stdout.includes(`held-out exact match ${(100 * evalSummary.accuracy).toFixed(1)}% on ${heldout} held-out tasks at step-4 (checkpoint latest`), e.stdout);
      const r = readRun(run);
      const figures = r.heldoutFigures!;
      assert.deepEqual(figures.map((f) => [f.source, f.n, f.of, f.step, f.accuracy]), [
        ['training', 3, heldout, 4, sft.heldout_accuracy],
        ['evaluate', heldout, heldout, 4, evalSummary.accuracy],
      ]);
      assert.deepEqual(r.heldoutFigure, figures[1]);
      assert.ok(describeRun(r).includes(figureShort(figures[1]!)), describeRun(r));
      assert.ok(evaluateFinishMessage('run', { ...evalSummary }).includes(figureText(figures[1]!, false)));
      assert.equal(runFigureLines(r).length, 2);
      assert.deepEqual(heldoutFigures([]), []);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});

describe('an RL run beside its SFT start in the Runs view (issue 28)', () => {
  let tmp: string;
  before(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-rlfig-'))));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const write = (file: string, v: unknown) => {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, typeof v === 'string' ? v : JSON.stringify(v));
  };

  it("per split measured on both: the start's Evaluate (or the run's step-0 point) against the run's latest figure; the objective and pool named", () => {
    const sft = path.join(tmp, 'student');
    write(path.join(sft, 'config.json'), { kind: 'sft' });
    write(path.join(sft, 'eval', 'fresh-entities.json'), { accuracy: 0.582, n: 500, of: 500 });
    write(path.join(sft, 'eval', 'fresh-values.json'), { accuracy: 0.9, n: 500 });
    const rl = path.join(tmp, 'rft');
    write(path.join(rl, 'config.json'), { kind: 'grpo', from: { run: sft, checkpoint: 'step-8000', step: 8000 }, grpo: { objective: 'rft', pool: 'fresh-entities' }, budget: { steps: 60 } });
    write(
      path.join(rl, 'metrics.jsonl'),
      [
        { phase: 'eval', step: 0, time: 0, split: 'heldout', accuracy: 0.88, n: 99, of: 99 },
        { phase: 'grpo', step: 60, time: 300, accuracy: 0.7 },
        { phase: 'eval', step: 60, time: 301, split: 'heldout', accuracy: 0.9, n: 99, of: 99, final: true },
      ]
        .map((l) => JSON.stringify(l) + '\n')
        .join(''),
    );
    write(path.join(rl, 'eval', 'fresh-entities.json'), { accuracy: 0.65, n: 500, of: 500, step: 60 });
    const r = readRun(rl);
    assert.deepEqual(r.rl, {
      from: sft,
      objective: 'rft',
      pool: 'fresh-entities',
      splits: [
        { split: 'heldout', start: 0.88, after: 0.9 },
        { split: 'fresh-entities', start: 0.582, after: 0.65 },
      ],
    });
    assert.match(runFigureLines(r)[0]!, /^RFT on pool fresh-entities from student: held-out 88\.0% → 90\.0% \(\+2\.0\) · fresh-entities 58\.2% → 65\.0% \(\+6\.8\)$/);
    assert.match(describeRun(r), /vs start held-out \+2\.0, fresh-entities \+6\.8$/);
    // An SFT run has no comparison; an RL run whose start has gone keeps its own step-0 point.
    assert.equal(readRun(sft).rl, undefined);
    fs.rmSync(sft, { recursive: true });
    assert.deepEqual(readRun(rl).rl?.splits, [{ split: 'heldout', start: 0.88, after: 0.9 }]);
  });
});

describe("an RL run's closing lines name its baselines (issue 28)", () => {
  const s = { runDir: '/runs/g', from: '/runs/s0', objective: 'grpo', pool: 'fresh-entities', seed: 2, steps: 60, minutes: 25.79, wallMinutes: 30, backend: 'wasm', frac_reward_zero_std: [], curve: [] };
  it('GRPO: RFT on the same pool, steps and seed; continued SFT for its minutes; the splits to compare', () => {
    const lines = rlBaselineLines(s, 'g');
    assert.equal(lines[1], '  no teacher (RFT: SFT on its own verified rollouts): agent-lab train grpo --from /runs/s0 --objective rft --pool fresh-entities --steps 60 --seed 2 --run g-rft');
    assert.equal(lines[2], '  more SFT for the same minutes: agent-lab train sft --from /runs/s0 --minutes 25.79 --seed 2 --run g-sft');
    assert.match(lines[3]!, /for each run and S in heldout, fresh-entities/);
    assert.match(lines[4]!, /what was measured on this pool .*docs\/results.md, "GRPO from the default students"/);
  });
  it('RFT: GRPO is its comparison; a train pool adds no reading split', () => {
    const lines = rlBaselineLines({ ...s, objective: 'rft', pool: 'train' }, 'r');
    assert.match(lines[0]!, /^RFT's lift/);
    assert.match(lines[1]!, /^ {2}GRPO: agent-lab train grpo --from \/runs\/s0 --objective grpo --pool train --steps 60 --seed 2 --run r-grpo$/);
    assert.match(lines[3]!, /S in heldout \(/);
    assert.equal(lines.length, 4, 'no measurement to cite for RFT on its own split');
  });
});
