// The curves panel's data logic without a browser: metrics.jsonl lines (core/protocol/
// metrics.ts, the same semantics as trainer/runStore.ts), the tail that reads only what
// was appended (a line still being written waits for its newline), and the charts built
// from the records: series per run, the std band, the "no gradient" regions.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LineSplitter, MetricRecord, latestRecords, parseMetricsLine, parseMetricsText } from '../../core/protocol/metrics';
import { MetricsTail } from '../../extension/panels/metricsTail';
import { writeSyntheticGrpoRun } from '../ui/fixtures';
import { buildCharts, lineCount, mergeRecords, pointsOf, zeroStdRegions } from '../../webview-ui/curves/series';

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

  it('keeps the last record per (phase, step) (trainer/runStore.ts re-exports this parsing)', () => {
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
    assert.deepEqual(charts.map((c) => c.id), ['heldout-acc', 'grpo-reward', 'grpo-zero-std', 'grpo-kl', 'grpo-clip', 'grpo-len']);
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
