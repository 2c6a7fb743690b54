// The curves panel's data logic without a browser: metrics.jsonl lines (core/protocol/
// metrics.ts, the same semantics as store/runStore.ts), the tail that reads only what
// was appended (a line still being written waits for its newline), and the charts built
// from the records: series per run, the std band, the "no gradient" regions.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LineSplitter, MetricRecord, latestRecords, parseMetricsLine, parseMetricsText } from '../../core/protocol/metrics';
import { MetricsTail } from '../../extension/panels/metricsTail';
import { writeSyntheticGrpoRun } from '../ui/fixtures';
import { buildCharts, chipText, formatTick, heldoutLossNote, lineCount, mergeRecords, phaseBoundaries, pointsOf, zeroStdRegions } from '../../webview-ui/curves/series';
import { buttonMessage, preflightTable } from '../../webview-ui/curves/preflight';
import { prescreenVerdict, summarisePrescreen } from '../../trainer/grpo/prescreen';
import { preflightLine, preflightViewOf, prescreenRows, runMetaOf } from '../../extension/runMeta';
import { isRunMeta, parseFromWebviewFor, parseToWebview } from '../../core/protocol/panels';

const sft = (step: number, loss: number, extra: Record<string, unknown> = {}): MetricRecord => ({ phase: 'sft', step, time: step / 2, loss, sup_acc: step / 100, ...extra });

describe('metrics lines (core/protocol/metrics.ts)', () => {
  it('parses records and resume events; a torn last line is still being written', () => {
    const text = [JSON.stringify(sft(1, 3)), '', JSON.stringify({ event: 'resume', step: 1 }), 'garbage', JSON.stringify([1]), JSON.stringify(sft(2, 2)), '{"phase":"sft","st'].join('\n');
    const { lines, badLines } = parseMetricsText(text);
    assert.equal(lines.length, 3);
    assert.deepEqual(badLines, [4, 5]);
    assert.equal(parseMetricsLine('{"phase":"rl","step":1,"time":0}'), null, 'an unknown phase');
    assert.equal(parseMetricsLine('{"phase":"sft","step":-1,"time":0}'), null);
    assert.equal(parseMetricsLine('{"phase":"sft","step":1}'), null, 'time is part of the contract');
  });

  it('keeps the last record per (phase, step) (store/runStore.ts re-exports this parsing)', () => {
    const text = [sft(1, 3), sft(2, 2.5), { event: 'resume', step: 1 }, sft(2, 2.4), { phase: "eval", step: 2, time: 1, split: "heldout", accuracy: 0.1 }, sft(3, 2)]
      .map((r) => JSON.stringify(r))
      .join('\n') + '\n';
    const ours = latestRecords(parseMetricsText(text).lines);
    assert.equal(ours.find((r) => r.phase === 'sft' && r.step === 2)!['loss'], 2.4);
  });

  it('splits appended text into complete lines only', () => {
    const s = new LineSplitter();
    assert.deepEqual(s.push('{"a":'), []);
    assert.equal(s.partial, '{"a":');
    assert.deepEqual(s.push('1}\n{"b"'), ['{"a":1}']);
    assert.deepEqual(s.push(':2}\n\n'), ['{"b":2}', '']);
    assert.equal(s.partial, '');
  });
});

describe('metrics tail (extension/panels/metricsTail.ts)', () => {
  it('reads only what was appended, waits for a torn line, starts over when the file shrinks', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-tail-'));
    const file = path.join(dir, 'metrics.jsonl');
    const tail = new MetricsTail(file);
    assert.equal(tail.poll(), null, 'no file yet');
    fs.writeFileSync(file, `${JSON.stringify(sft(1, 3))}\n{"phase":"sft","step":2,`);
    let u = tail.poll()!;
    assert.deepEqual(u.records.map((r) => r.step), [1]);
    assert.equal(u.reset, false);
    assert.equal(tail.poll(), null, 'nothing new');
    fs.appendFileSync(file, `"time":1,"loss":2}\nnot json\n`);
    u = tail.poll()!;
    assert.deepEqual(u.records.map((r) => r.step), [2]);
    assert.deepEqual(u.problems, ['line 3: not a metrics line']);
    // A resume cuts a torn line: the file shrinks, the tail starts over.
    fs.writeFileSync(file, `${JSON.stringify(sft(1, 3))}\n`);
    u = tail.poll()!;
    assert.equal(u.reset, true);
    assert.deepEqual(u.records.map((r) => r.step), [1]);
    // Multi-byte characters split across polls decode whole.
    fs.appendFileSync(file, Buffer.from(`${JSON.stringify(sft(4, 1, { note: 'é€' }))}\n`).subarray(0, 40));
    tail.poll();
    fs.appendFileSync(file, Buffer.from(`${JSON.stringify(sft(4, 1, { note: 'é€' }))}\n`).subarray(40));
    const last = tail.poll()!;
    assert.equal(last.records[0]!['note'], 'é€');
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('curves model (webview-ui/curves/series.ts)', () => {
  it('merges records as they arrive: the later record for a (phase, step) wins', () => {
    const a = mergeRecords([], [sft(1, 3), sft(2, 2)]);
    const b = mergeRecords(a, [sft(2, 1.5), sft(3, 1)]);
    assert.deepEqual(b.map((r) => [r.step, r['loss']]), [[1, 3], [2, 1.5], [3, 1]]);
  });

  it('an SFT run: loss, supervised-token accuracy and held-out accuracy charts, one series each', () => {
    const records = mergeRecords([], [sft(1, 3), sft(2, 2, { heldout_loss: 2.5 }), { phase: 'eval', step: 2, time: 1, split: 'heldout', accuracy: 0.2 }, { phase: 'eval', step: 2, time: 1, split: 'train', accuracy: 0.9 } as MetricRecord]);
    const charts = buildCharts([{ id: 'r', label: 'run', records }]);
    assert.deepEqual(charts.map((c) => c.id), ['sft-loss', 'sft-acc', 'heldout-acc']);
    const loss = charts[0]!;
    assert.equal(lineCount(loss), 2, 'loss and held-out loss');
    assert.deepEqual(loss.series.map((s) => s.role), ['line', 'dashed']);
    assert.deepEqual(charts[2]!.series[0]!.points, [{ x: 2, y: 0.2 }], 'the train-split accuracy is not held-out');
  });

  it('several runs overlay: one series per run, coloured by the run’s place', () => {
    const charts = buildCharts([
      { id: 'a', label: 'a', records: [sft(1, 3)] },
      { id: 'b', label: 'b', records: [sft(1, 2), sft(2, 1)] },
    ]);
    const loss = charts.find((c) => c.id === 'sft-loss')!;
    assert.deepEqual(loss.series.map((s) => [s.label, s.runIndex, s.points.length]), [['a', 0, 1], ['b', 1, 2]]);
    const hidden = buildCharts([{ id: 'a', label: 'a', records: [sft(1, 3)] }, { id: 'b', label: 'b', records: [sft(1, 2)] }], new Set(['a']));
    assert.equal(lineCount(hidden[0]!), 1);
    assert.equal(hidden[0]!.series[0]!.runIndex, 1, 'a hidden run keeps the others’ colours');
  });

  it("GRPO: a run's flat-line warning is said under the zero-spread chart (the latest one per run)", () => {
    const g = (step: number, extra: Record<string, unknown> = {}): MetricRecord => ({ phase: 'grpo', step, time: step, frac_reward_zero_std: 1, reward_mean: 1, reward_std: 0, ...extra });
    const records = [g(1), g(5, { warning: 'flat for 5 steps: too easy' }), g(10, { warning: 'flat for 10 steps: too easy' })];
    const chart = buildCharts([{ id: 'g', label: 'grpo-a', records }]).find((c) => c.id === 'grpo-zero-std')!;
    const lines = chart.note!.split('\n');
    assert.match(lines[0]!, /^Shaded: every group/);
    assert.deepEqual(lines.slice(1), ['grpo-a, step 10: flat for 10 steps: too easy']);
    const quiet = buildCharts([{ id: 'g', label: 'grpo-a', records: [g(1)] }]).find((c) => c.id === 'grpo-zero-std')!;
    assert.equal(quiet.note!.split('\n').length, 1);
    const hidden = buildCharts([{ id: 'g', label: 'grpo-a', records }, { id: 'h', label: 'b', records: [g(1)] }], new Set(['g']));
    assert.equal(hidden.find((c) => c.id === 'grpo-zero-std')!.note!.split('\n').length, 1, 'a hidden run says nothing');
  });

  it('GRPO: the reward band (mean ± std), the zero-spread regions, the other figures', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-grpo-'));
    writeSyntheticGrpoRun(dir, 30);
    const records = latestRecords(parseMetricsText(fs.readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8')).lines);
    fs.rmSync(dir, { recursive: true, force: true });
    const charts = buildCharts([{ id: 'g', label: 'grpo', records }]);
    // A GRPO run's accuracy is on its own axis (GRPO steps), not the SFT one.
    assert.deepEqual(charts.map((c) => c.id), ['grpo-heldout-acc', 'grpo-reward', 'grpo-zero-std', 'grpo-kl', 'grpo-clip', 'grpo-len']);
    assert.ok(charts.every((c) => c.xLabel === 'GRPO step'));
    const reward = charts.find((c) => c.id === 'grpo-reward')!;
    assert.deepEqual(reward.series.map((s) => s.role), ['bandLow', 'bandHigh', 'line']);
    assert.equal(lineCount(reward), 1, 'a band is not a series');
    const mean = reward.series[2]!.points;
    reward.series[0]!.points.forEach((p, i) => assert.ok(p.y <= mean[i]!.y && reward.series[1]!.points[i]!.y >= mean[i]!.y));
    const zero = charts.find((c) => c.id === 'grpo-zero-std')!;
    assert.deepEqual(zero.regions, [{ runId: 'g', from: 0.5, to: 10.5 }]);
    assert.match(charts.find((c) => c.id === 'grpo-clip')!.note ?? '', /epochs-per-batch/);
  });

  it('zero-spread regions: runs of 1.0, widened by half a step', () => {
    const pts = [0, 1, 1, 0.5, 1, 1, 1].map((y, i) => ({ x: i + 1, y }));
    assert.deepEqual(zeroStdRegions(pts, 'r'), [
      { runId: 'r', from: 1.5, to: 3.5 },
      { runId: 'r', from: 4.5, to: 7.5 },
    ]);
    assert.deepEqual(zeroStdRegions([], 'r'), []);
  });

  it('skips values that are not finite numbers (null from a NaN) and says nothing for an empty run', () => {
    assert.deepEqual(pointsOf([sft(1, 2), { ...sft(2, 0), loss: null } as unknown as MetricRecord], 'sft', 'loss'), [{ x: 1, y: 2 }]);
    assert.deepEqual(buildCharts([{ id: 'e', label: 'e', records: [] }]), []);
  });
});

describe('curves: what the charts say (issue 35, item 8)', () => {
  const curriculum = [
    { fraction: 0.25, turns: 'first', batch: 4 },
    { fraction: 0.75, turns: 'all', batch: 2 },
  ];
  const phased = (n: number, change: number): MetricRecord[] =>
    Array.from({ length: n }, (_, i) => sft(i + 1, i + 1 === change ? 4 : 2, { curriculum: i + 1 < change ? 0 : 1, batch: i + 1 < change ? 4 : 2, ...((i + 1) % 50 === 0 ? { heldout_loss: 1.5 } : {}) }));

  it('marks the curriculum phase change on the SFT charts, named from the recipe', () => {
    const records = phased(600, 401);
    assert.deepEqual(phaseBoundaries(records, curriculum), [{ step: 401, index: 1, label: 'phase 2 of 2: whole transcripts, batch 2' }]);
    assert.deepEqual(phaseBoundaries(records), [{ step: 401, index: 1, label: 'phase 2, batch 2' }], 'without the recipe: from the record');
    assert.deepEqual(phaseBoundaries(phased(10, 99)), [], 'no change, no mark');
    const meta = { kind: 'sft', recipe: 'copy', curriculum, preflight: null };
    const charts = buildCharts([{ id: 'r', label: 'run', records, meta }]);
    const loss = charts.find((c) => c.id === 'sft-loss')!;
    assert.deepEqual(loss.markers, [{ runId: 'r', runIndex: 0, x: 401, label: 'phase 2 of 2: whole transcripts, batch 2' }]);
    assert.match(loss.note ?? '', /curriculum moved to its next phase/);
    assert.equal(charts.find((c) => c.id === 'sft-acc')!.markers.length, 1);
    // An accuracy chart measured only after the change has no mark (and no note about one).
    const late = [...records, { phase: 'eval', step: 500, time: 1, split: 'heldout', accuracy: 0.3 } as MetricRecord, { phase: 'eval', step: 600, time: 1, split: 'heldout', accuracy: 0.4 } as MetricRecord];
    const acc = buildCharts([{ id: 'r', label: 'run', records: late, meta }]).find((c) => c.id === 'heldout-acc')!;
    assert.deepEqual(acc.markers, []);
    assert.doesNotMatch(acc.note ?? '', /curriculum/);
    const around = [...late, { phase: 'eval', step: 300, time: 1, split: 'heldout', accuracy: 0.2 } as MetricRecord];
    assert.equal(buildCharts([{ id: 'r', label: 'run', records: around, meta }]).find((c) => c.id === 'heldout-acc')!.markers.length, 1);
    assert.equal(loss.xLabel, 'SFT step');
  });

  it('the held-out loss says how often it is measured, and where it ends when it ends early', () => {
    const records = phased(600, 401);
    const loss = buildCharts([{ id: 'r', label: 'run', records }]).find((c) => c.id === 'sft-loss')!;
    assert.deepEqual(loss.series.map((s) => s.label), ['run', 'run · held-out (every 50 steps)']);
    assert.match(heldoutLossNote({ id: 'r', label: 'run', records })!, /every 50 steps on the held-out transcripts \(the dashed line\)\.$/);
    const cut = records.map((r) => (r.step > 400 ? { ...r, heldout_loss: undefined } : r));
    assert.match(heldoutLossNote({ id: 'r', label: 'run', records: cut })!, /last point is step 400, .* to step 600/);
    assert.equal(heldoutLossNote({ id: 'r', label: 'run', records: [sft(1, 2)] }), null);
    const nan = records.map((r) => (r.step > 400 && r['heldout_loss'] !== undefined ? { ...r, heldout_loss: null } : r));
    assert.match(heldoutLossNote({ id: 'r', label: 'run', records: nan })!, /from step 450 it is not a finite number \(recorded as null in 4 lines: the held-out loss overflowed\), so the line stops at step 400\.$/);
  });

  it('the held-out loss says where it falls and when it runs under the batch loss, along the bottom of the chart', () => {
    // As a default-recipe run: high while the warm-up trains first turns only, then far under the noisy batch loss.
    const held: Record<number, number> = { 800: 2.58, 1600: 2.96, 2400: 0.097, 3200: 0.051, 4000: 0.0035 };
    const records = Array.from({ length: 4000 }, (_, i) => sft(i + 1, 0.3 + ((i * 7) % 10) / 20, held[i + 1] !== undefined ? { heldout_loss: held[i + 1] } : {}));
    const note = heldoutLossNote({ id: 'r', label: 'run', records })!;
    assert.match(note, /it falls from 2\.96 to 0\.097 between steps 1600 and 2400/);
    assert.match(note, /it ends at 0\.0035, under the training batches' median 0\.55 over the run's second half/);
    // A line that stays with the batches says neither.
    const level = Array.from({ length: 600 }, (_, i) => sft(i + 1, 0.5, (i + 1) % 100 === 0 ? { heldout_loss: 0.45 } : {}));
    assert.match(heldoutLossNote({ id: 'r', label: 'run', records: level })!, /the dashed line\)\.$/);
  });

  it('GRPO steps get their own axis: an SFT run and a GRPO run overlaid draw two accuracy charts', () => {
    const sftRun = { id: 's', label: 'sft', records: [sft(1000, 1), { phase: 'eval', step: 1000, time: 1, split: 'heldout', accuracy: 0.6 } as MetricRecord] };
    const grpoRun = {
      id: 'g',
      label: 'grpo',
      records: [{ phase: 'eval', step: 0, time: 0, split: 'heldout', accuracy: 0.6 }, { phase: 'grpo', step: 1, time: 1, reward_mean: 0.5, reward_std: 0.1 }, { phase: 'eval', step: 60, time: 9, split: 'heldout', accuracy: 0.62 }] as MetricRecord[],
    };
    const charts = buildCharts([sftRun, grpoRun]);
    const sftAcc = charts.find((c) => c.id === 'heldout-acc')!;
    const grpoAcc = charts.find((c) => c.id === 'grpo-heldout-acc')!;
    assert.deepEqual(sftAcc.series.map((s) => s.runId), ['s']);
    assert.deepEqual(grpoAcc.series.map((s) => [s.runId, s.points.map((p) => p.x)]), [['g', [0, 60]]]);
    assert.equal(sftAcc.xLabel, 'SFT step');
    assert.equal(grpoAcc.xLabel, 'GRPO step');
    // The config's kind wins over the records (a GRPO run refused before step 1 has no grpo line).
    const early = buildCharts([{ id: 'g', label: 'g', records: [grpoRun.records[0]!], meta: { kind: 'grpo', recipe: null, curriculum: [], preflight: null } }]);
    assert.deepEqual(early.map((c) => c.id), ['grpo-heldout-acc']);
  });

  it('a title names only the lines drawn', () => {
    const held = { phase: 'eval', step: 2, time: 1, split: 'heldout', accuracy: 0.2 } as MetricRecord;
    const dev = { phase: 'eval', step: 2, time: 1, split: 'dev', accuracy: 0.3 } as MetricRecord;
    const fresh = { phase: 'eval', step: 2, time: 1, split: 'fresh-values', accuracy: 0.1 } as MetricRecord;
    const title = (records: MetricRecord[]) => buildCharts([{ id: 'r', label: 'r', records: [sft(1, 2), ...records] }]).find((c) => c.id === 'heldout-acc')!.title;
    assert.equal(title([held, dev]), 'Accuracy (exact match): held-out, dev');
    assert.equal(title([held, dev, fresh]), 'Accuracy (exact match): held-out, dev, fresh values');
    assert.equal(title([held]), 'Accuracy (exact match): held-out');
  });

  it('axis ticks in few significant digits (a KL of 3e-5 is not "3.000000E-5")', () => {
    assert.equal(formatTick(0.00003, 0.00001), '3e-5');
    assert.equal(formatTick(0.000035, 0.000005), '3.5e-5');
    assert.equal(formatTick(0.00012, 0.00002), '1.2e-4');
    assert.equal(formatTick(0, 0.00001), '0');
    assert.equal(formatTick(0.25, 0.05), '0.25');
    assert.equal(formatTick(0.3, 0.1), '0.3');
    assert.equal(formatTick(1.5, 0.5), '1.5');
    assert.equal(formatTick(1200, 200), '1200');
    assert.equal(formatTick(2, 0.5), '2');
    assert.equal(formatTick(0.004, 0.001), '0.004');
    assert.equal(formatTick(250000, 50000), '2.5e5');
    assert.equal(formatTick(-0.00002, 0.00001), '-2e-5');
  });

  it("a run's chip says what its number counts", () => {
    const records = [sft(1, 3), sft(412, 2), { phase: 'eval', step: 412, time: 1, split: 'heldout', accuracy: 0.2 } as MetricRecord];
    const chip = chipText({ records, meta: { kind: 'sft', recipe: 'copy', curriculum: [], preflight: null } });
    assert.equal(chip.count, 'step 412');
    assert.equal(chip.title, '412 SFT steps, 1 evaluation: 3 records read from metrics.jsonl; recipe copy');
    const g = chipText({ records: [{ phase: 'grpo', step: 3, time: 1 }] });
    assert.equal(g.count, 'GRPO step 3');
    assert.equal(chipText({ records: [] }).count, 'no steps yet');
  });
});

describe('GRPO pre-flight from config.json (issue 33: the editor shows the table)', () => {
  const config = {
    kind: 'grpo',
    preflight: [
      { name: 'prompt prefix', ok: true, detail: 'byte-identical' },
      { name: 'reward audit', ok: true, detail: 'std 0.4' },
    ],
    prescreen: {
      tasks: 24,
      passRate: 0.5,
      informativeShare: 0.34,
      interval: [0.22, 0.47],
      samples: 8,
      group: 8,
      byKind: { lookup: { tasks: 12, passRate: 0.8, informativeShare: 0.4, interval: [0.2, 0.6] }, sum: { tasks: 12, passRate: 0.2, informativeShare: 0.28, interval: [0.1, 0.5] } },
      drawsPerGroup: 2.9,
      allRight: 3,
      allWrong: 4,
      stepsOnly: 0,
    },
    prescreenVerdict: { ok: true, bound: 0.47, threshold: 0.05 },
  };

  it('reads the checks, the prediction per shape and the verdict', () => {
    const view = preflightViewOf(config)!;
    assert.equal(view.checks.length, 2);
    assert.deepEqual(prescreenRows(view), [
      ['all', '24', '50%', '34%', '22%–47%'],
      ['lookup', '12', '80%', '40%', '20%–60%'],
      ['sum', '12', '20%', '28%', '10%–50%'],
    ]);
    assert.equal(
      preflightLine(view),
      'pre-flight: 2 checks passed · pre-screen PASS: 34% (90% 22%–47%) of groups of 8 predicted with a spread in correctness (lookup 40%, sum 28%); 24 tasks x 8 rollouts',
    );
    const t = preflightTable(view);
    assert.equal(t.verdictClass, 'pass');
    assert.equal(t.rows[0]![0], 'all shapes');
    assert.equal(t.head[3], 'groups with a spread (G = 8)');
    assert.equal(t.next, null);
    assert.equal(t.headline, 'PASS · 34% of groups predicted with a spread (90% 22%–47%)');
    assert.equal(preflightViewOf({ kind: 'sft' }), null, 'an SFT run has none');
    assert.equal(preflightViewOf({ kind: 'grpo' }), null, 'nothing recorded yet');
  });

  it('a refused run: the cause and the next step', () => {
    const refused = {
      ...config,
      refused: true,
      prescreenVerdict: { ok: false, bound: 0.03, threshold: 0.05, cause: 'memorised', detail: 'every rollout solves the pool', next: '`--pool fresh-values` (training worlds with new values, never distilled)' },
    };
    const view = preflightViewOf(refused)!;
    assert.match(preflightLine(view), /pre-screen FAIL: .*; cause \(memorised\): every rollout solves the pool$/);
    const t = preflightTable(view);
    assert.equal(t.verdictClass, 'fail');
    assert.match(t.verdict, /^FAIL: refused before step 1: the predicted share is below 5% \(bound 3%\)/);
    assert.equal(t.next, 'Next: --pool fresh-values (training worlds with new values, never distilled); or Train Anyway (--force).');
    assert.equal(t.refused, true, 'the card offers to train again');
    assert.equal(t.pool, 'fresh-values', 'with the pool the next step names');
    const forced = preflightTable(preflightViewOf({ ...refused, refused: false, forced: true })!);
    assert.equal(forced.verdictClass, 'forced');
    assert.equal(forced.refused, false, 'a forced run trains: nothing to offer');
    assert.equal(preflightTable(preflightViewOf(config)!).pool, null);
    // The card's button: validated like every webview message.
    assert.ok(parseFromWebviewFor('curves', { type: 'curves/retryGrpo', id: '/runs/g', pool: 'fresh-values', force: false }).ok);
    assert.ok(parseFromWebviewFor('curves', { type: 'curves/retryGrpo', id: '/runs/g', pool: null, force: true }).ok);
    assert.ok(!parseFromWebviewFor('curves', { type: 'curves/retryGrpo', id: '/runs/g', pool: '--force', force: false }).ok, 'a pool is a name');
    assert.ok(!parseFromWebviewFor('curves', { type: 'curves/retryGrpo', id: '/runs/g', pool: null }).ok, 'force is required');
  });

  it("an old run folder (no actions recorded): the pool button read from the verdict's text, then Train Anyway", () => {
    const old = { ...config, refused: true, prescreenVerdict: { ok: false, bound: 0.03, threshold: 0.05, cause: 'memorised', detail: 'd', next: '`--pool fresh-values` (training worlds with new values, never distilled)' } };
    const view = preflightViewOf(old)!;
    assert.equal(view.verdict!.actions, null, 'nothing recorded: null, not []');
    const t = preflightTable(view);
    assert.deepEqual(t.buttons.map((b) => b.label), ['Train with --pool fresh-values', 'Train Anyway']);
    assert.deepEqual(buttonMessage('/runs/g', t.buttons[0]!), { type: 'curves/retryGrpo', id: '/runs/g', pool: 'fresh-values', force: false });
    assert.deepEqual(buttonMessage('/runs/g', t.buttons[1]!), { type: 'curves/retryGrpo', id: '/runs/g', pool: null, force: true });
    const noPool = preflightTable(preflightViewOf({ ...old, prescreenVerdict: { ...old.prescreenVerdict, next: '`--temperature 1.2` (hotter rollouts differ more)' } })!);
    assert.deepEqual(noPool.buttons.map((b) => b.label), ['Train Anyway'], 'an old folder gets no regex for the other flags');
    const unknownPool = preflightTable(preflightViewOf({ ...old, prescreenVerdict: { ...old.prescreenVerdict, next: '`--pool elsewhere`' } })!);
    assert.deepEqual(unknownPool.buttons.map((b) => b.label), ['Train Anyway'], 'only a pool the trainer knows');
  });

  it("a refused run's recorded actions: one button each, in the verdict's order, each posting a message the extension accepts", () => {
    const screen = (correct: number) => summarisePrescreen(Array.from({ length: 72 }, () => ({ kind: 'sum' as const, correct })), 8, 8);
    const ctx = { pool: 'fresh-entities' as const, noFreshPools: false, fromRun: '/runs/sft', dynamicSampling: true };
    // A verdict as trainer/grpo/grpo.ts writes it into config.json (JSON round trip).
    const record = (v: ReturnType<typeof prescreenVerdict>) => ({ ...config, refused: true, prescreenVerdict: JSON.parse(JSON.stringify(v)) as unknown });
    const hard = preflightTable(preflightViewOf(record(prescreenVerdict(screen(0), ctx)))!);
    assert.deepEqual(hard.buttons.map((b) => b.label), ['Train SFT More…', 'Train with --pool fresh-values', 'Train with --guide on', 'Train Anyway']);
    assert.equal(hard.pool, 'fresh-values');
    const messages = hard.buttons.map((b) => buttonMessage('/runs/g', b));
    assert.deepEqual(messages, [
      { type: 'curves/sftMore', id: '/runs/g' },
      { type: 'curves/retryGrpo', id: '/runs/g', pool: 'fresh-values', force: false },
      { type: 'curves/retryGrpo', id: '/runs/g', pool: null, force: false, guide: 'on' },
      { type: 'curves/retryGrpo', id: '/runs/g', pool: null, force: true },
    ]);
    for (const m of messages) assert.deepEqual(parseFromWebviewFor('curves', m), { ok: true, message: m });
    const confident = preflightTable(preflightViewOf(record(prescreenVerdict(summarisePrescreen(Array.from({ length: 72 }, (_, i) => ({ kind: 'sum' as const, correct: i % 2 ? 8 : 0 })), 8, 8), ctx)))!);
    assert.deepEqual(confident.buttons.map((b) => b.label), ['Train with --temperature 1.2', 'Train Anyway']);
    assert.deepEqual(buttonMessage('/runs/g', confident.buttons[0]!), { type: 'curves/retryGrpo', id: '/runs/g', pool: null, force: false, temperature: 1.2 });
    assert.equal(confident.pool, null);
    // A forced or passing run offers nothing; a damaged action in the record is dropped, the rest kept.
    assert.deepEqual(preflightTable(preflightViewOf({ ...record(prescreenVerdict(screen(0), ctx)), refused: false, forced: true })!).buttons, []);
    assert.deepEqual(preflightTable(preflightViewOf(config)!).buttons, []);
    const damaged = record(prescreenVerdict(screen(0), ctx));
    (damaged.prescreenVerdict as { actions: unknown[] }).actions.push({ kind: 'grpo', flags: { temperature: -1 } }, { kind: 'rm -rf' }, { kind: 'grpo', flags: {} });
    assert.equal(preflightViewOf(damaged)!.verdict!.actions!.length, 3);
    assert.ok(isRunMeta(runMetaOf(damaged)));
  });

  it('the retry messages: temperature and guide validated strictly; sftMore carries only the run', () => {
    const retry = { type: 'curves/retryGrpo', id: '/runs/g', pool: null, force: false };
    assert.ok(parseFromWebviewFor('curves', { ...retry, temperature: 1.2 }).ok);
    assert.ok(parseFromWebviewFor('curves', { ...retry, temperature: 10 }).ok, 'the CLI bound is inclusive');
    assert.ok(parseFromWebviewFor('curves', { ...retry, pool: 'train', guide: 'on' }).ok);
    const refused = (m: unknown, why: RegExp) => {
      const r = parseFromWebviewFor('curves', m);
      assert.ok(!r.ok, JSON.stringify(m));
      assert.match(r.error, why);
    };
    refused({ ...retry, temperature: 11 }, /temperature must be a number from 0 to 10/);
    refused({ ...retry, temperature: -0.5 }, /temperature/);
    refused({ ...retry, temperature: '1.2' }, /temperature/);
    refused({ ...retry, temperature: Number.NaN }, /temperature/);
    refused({ ...retry, guide: 'off' }, /guide must be 'on'/);
    refused({ ...retry, guide: true }, /guide/);
    refused({ ...retry, steps: 5 }, /curves\/retryGrpo/);
    assert.deepEqual(parseFromWebviewFor('curves', { type: 'curves/sftMore', id: '/runs/g' }), { ok: true, message: { type: 'curves/sftMore', id: '/runs/g' } });
    refused({ type: 'curves/sftMore', id: '/runs/g', steps: 100 }, /curves\/sftMore: id must be a run folder/);
    refused({ type: 'curves/sftMore', id: 3 }, /curves\/sftMore/);
    assert.ok(!parseFromWebviewFor('grammar', { type: 'curves/sftMore', id: '/runs/g' }).ok, "another panel's webview cannot send it");
    // The view's actions are checked on the way to the webview too.
    const meta = runMetaOf({ ...config, refused: true, prescreenVerdict: { ok: false, bound: 0, threshold: 0.05, actions: [{ kind: 'sft-more' }] } });
    const msg = { type: 'curves/run', run: { id: 'a', label: 'a', dir: '/a' }, records: [], reset: true, live: false, problems: [], meta };
    assert.ok(parseToWebview(msg).ok);
    const bad = structuredClone(meta);
    bad.preflight!.verdict!.actions = [{ kind: 'grpo', flags: { guide: 'maybe' } }] as never;
    assert.ok(!parseToWebview({ ...msg, meta: bad }).ok, 'an unknown guide value is refused');
    bad.preflight!.verdict!.actions = [{ kind: 'grpo', flags: { pool: 'elsewhere' } }] as never;
    assert.ok(!parseToWebview({ ...msg, meta: bad }).ok, 'an unknown pool is refused');
    delete (bad.preflight!.verdict as Partial<NonNullable<typeof bad.preflight>['verdict'] & object>).actions;
    assert.ok(!parseToWebview({ ...msg, meta: bad }).ok, 'actions: null or a list, never left out');
  });

  it('a run meta travels in the curves message and is validated', () => {
    const meta = runMetaOf({ ...config, recipe: { name: 'copy', curriculum: [{ fraction: 0.25, turns: 'first', batch: 4 }] } });
    assert.equal(meta.recipe, 'copy');
    assert.deepEqual(meta.curriculum, [{ fraction: 0.25, turns: 'first', batch: 4 }]);
    assert.ok(isRunMeta(meta));
    const msg = { type: 'curves/run', run: { id: 'a', label: 'a', dir: '/a' }, records: [], reset: true, live: false, problems: [], meta };
    assert.ok(parseToWebview(msg).ok);
    assert.ok(parseToWebview({ ...msg, meta: null }).ok);
    assert.ok(!parseToWebview({ ...msg, meta: { ...meta, curriculum: [{ fraction: 'x' }] } }).ok, 'a bad curriculum is refused');
    assert.ok(!parseToWebview({ ...msg, meta: { ...meta, preflight: { checks: 'no' } } }).ok, 'a bad pre-flight is refused');
    assert.deepEqual(runMetaOf({ kind: 'sft', recipe: { name: 'x', curriculum: [{ fraction: 1 }] } }).curriculum, [], 'a damaged curriculum is none');
  });
});
