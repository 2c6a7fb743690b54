// AdamW against a hand-computed reference, the learning-rate schedule, clipping, and
// data-parallel gradients (2 worker threads) against single-threaded ones.
import * as assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs-core';
import { initBackend } from '../../trainer/model/backend';
import { Batch, Grads, IGNORE, ModelConfig, StackModel, makeRng, paramSpecs } from '../../trainer/model/model';
import { AdamW, Trainer, globalNorm, lrAt, resolveOptim } from '../../trainer/model/optim';
import { combineShardGrads, splitBatch } from '../../trainer/model/parallel';

const MICRO: ModelConfig = { vocab: 19, dModel: 16, layers: 1, heads: 2, kvHeads: 1, mlp: 20, maxSeq: 64, ropeBase: 10000 };

function batchOf(cfg: ModelConfig, rows: number, seq: number, seed: number, lengths?: number[]): Batch {
  const rng = makeRng(seed);
  const inputIds = new Int32Array(rows * seq);
  const labels = new Int32Array(rows * seq).fill(IGNORE);
  const weights = new Float32Array(rows * seq);
  for (let r = 0; r < rows; r++) {
    const len = lengths?.[r] ?? seq;
    for (let t = 0; t < seq; t++) {
      const i = r * seq + t;
      inputIds[i] = t < len ? Math.floor(rng.uniform() * cfg.vocab) : 2;
      if (t < len && rng.uniform() < 0.6) labels[i] = Math.floor(rng.uniform() * cfg.vocab);
      weights[i] = rng.uniform() < 0.25 ? 5 : 1;
    }
    labels[r * seq + len - 1] = 1; // every row ends with a label
  }
  return { inputIds, labels, weights, batch: rows, seq };
}

function arrays(g: Grads): Record<string, Float32Array> {
  const out: Record<string, Float32Array> = {};
  for (const [k, t] of g) out[k] = new Float32Array(t.dataSync());
  return out;
}

describe('trainer/model/optim: AdamW, schedule, clipping, data parallelism', function () {
  this.timeout(120000);

  for (const mode of ['js', 'tensor'] as const) it(`one and two AdamW steps equal a float64 hand computation (PyTorch formula; ${mode} mode)`, async () => {
    await initBackend(mode === 'js' ? 'wasm' : 'cpu');
    const m = StackModel.create(MICRO, 5);
    const cfg = resolveOptim({ lr: 0.01, betas: [0.9, 0.95], eps: 1e-8, weightDecay: 0.1 });
    const adam = new AdamW(m, cfg, mode);
    assert.equal(adam.mode, mode);
    const p0 = m.exportWeights();
    const rng = makeRng(3);
    const gradSets = [0, 1].map(() => {
      const g: Record<string, Float32Array> = {};
      for (const s of paramSpecs(MICRO)) g[s.name] = Float32Array.from({ length: p0[s.name]!.length }, () => rng.normal() * 0.1);
      return g;
    });
    const lrs = [0.01, 0.004];
    const scale = 0.5;
    for (let k = 0; k < 2; k++) {
      const grads: Grads = new Map(paramSpecs(MICRO).map((s) => [s.name, tf.tensor(gradSets[k]![s.name]!, s.shape)]));
      adam.update(grads, lrs[k]!, scale);
      for (const g of grads.values()) g.dispose();
    }
    const got = m.exportWeights();
    for (const s of paramSpecs(MICRO)) {
      const decay = s.shape.length >= 2 ? 0.1 : 0;
      const p = Float64Array.from(p0[s.name]!);
      const mm = new Float64Array(p.length);
      const vv = new Float64Array(p.length);
      for (let t = 1; t <= 2; t++) {
        const lr = lrs[t - 1]!;
        for (let i = 0; i < p.length; i++) {
          const g = gradSets[t - 1]![s.name]![i]! * scale;
          p[i] = p[i]! * (1 - lr * decay);
          mm[i] = 0.9 * mm[i]! + 0.1 * g;
          vv[i] = 0.95 * vv[i]! + 0.05 * g * g;
          const denom = Math.sqrt(vv[i]!) / Math.sqrt(1 - 0.95 ** t) + 1e-8;
          p[i] = p[i]! - (lr / (1 - 0.9 ** t)) * (mm[i]! / denom);
        }
      }
      for (let i = 0; i < p.length; i++) {
        assert.ok(Math.abs(got[s.name]![i]! - p[i]!) < 1e-6 * Math.max(1, Math.abs(p[i]!)), `${s.name}[${i}]: ${got[s.name]![i]} vs ${p[i]}`);
      }
    }
    // the state survives export/import exactly, and a third step from imported state matches
    const st = adam.exportState();
    assert.equal(st.t, 2);
    const twin = StackModel.fromWeights(MICRO, m.exportWeights());
    const adam2 = new AdamW(twin, cfg, mode);
    adam2.importState(st);
    const again = adam2.exportState();
    for (const k of Object.keys(st.m)) assert.deepEqual(Array.from(again.m[k]!), Array.from(st.m[k]!));
    const g3 = (): Map<string, tf.Tensor> => new Map(paramSpecs(MICRO).map((s) => [s.name, tf.fill(s.shape, 0.01)]));
    const ga = g3();
    const gb = g3();
    adam.update(ga, 0.003);
    adam2.update(gb, 0.003);
    const wa = m.exportWeights();
    const wb = twin.exportWeights();
    for (const k of Object.keys(wa)) assert.deepEqual(Array.from(wa[k]!), Array.from(wb[k]!), k);
    for (const g of [...ga.values(), ...gb.values()]) g.dispose();
    adam.dispose();
    adam2.dispose();
    twin.dispose();
    m.dispose();
  });

  it('the js and tensor optimiser modes agree', async () => {
    await initBackend('wasm');
    const a = StackModel.create(MICRO, 8);
    const b = StackModel.fromWeights(MICRO, a.exportWeights());
    const ta = new Trainer(a, { lr: 0.01, warmupSteps: 1, optimizerMode: 'js' });
    const tb = new Trainer(b, { lr: 0.01, warmupSteps: 1, optimizerMode: 'tensor' });
    for (let k = 0; k < 3; k++) {
      const ra = ta.step(batchOf(MICRO, 2, 10, k));
      const rb = tb.step(batchOf(MICRO, 2, 10, k));
      assert.ok(Math.abs(ra.loss - rb.loss) < 1e-5);
      assert.ok(Math.abs(ra.gradNorm - rb.gradNorm) < 1e-5 * ra.gradNorm);
    }
    const wa = a.exportWeights();
    const wb = b.exportWeights();
    for (const k of Object.keys(wa)) for (let i = 0; i < wa[k]!.length; i++) assert.ok(Math.abs(wa[k]![i]! - wb[k]![i]!) < 1e-6, k);
    ta.dispose();
    tb.dispose();
    a.dispose();
    b.dispose();
  });

  it('warm-up, cosine and linear decay, and a progress override', () => {
    const c = resolveOptim({ lr: 1, warmupSteps: 10, totalSteps: 110, minLrRatio: 0.1 });
    assert.equal(lrAt(1, c), 0.1);
    assert.equal(lrAt(10, c), 1);
    assert.ok(Math.abs(lrAt(60, c) - 0.55) < 1e-12); // halfway: min + (max-min)/2
    assert.ok(Math.abs(lrAt(110, c) - 0.1) < 1e-12);
    assert.ok(Math.abs(lrAt(500, c) - 0.1) < 1e-12);
    assert.ok(Math.abs(lrAt(20, c, 0.5) - 0.55) < 1e-12);
    const lin = resolveOptim({ lr: 1, totalSteps: 11, warmupSteps: 1, schedule: 'linear', minLrRatio: 0 });
    assert.ok(Math.abs(lrAt(6, lin) - 0.5) < 1e-12);
    const constant = resolveOptim({ lr: 0.3 });
    assert.equal(lrAt(1000, constant), 0.3);
  });

  it('clips by global norm exactly as clip_grad_norm_ does', async () => {
    await initBackend('wasm');
    const a = StackModel.create(MICRO, 9);
    const b = StackModel.fromWeights(MICRO, a.exportWeights());
    const batch = batchOf(MICRO, 2, 12, 4);
    const tr = new Trainer(a, { lr: 0.01, clip: 0.05, weightDecay: 0.1 });
    assert.equal(tr.adam.mode, 'js'); // wasm: the flat optimiser
    const res = tr.step(batch);
    // by hand on the twin
    const r = b.lossAndGrads(batch);
    const norm = globalNorm(r.grads.values());
    assert.ok(Math.abs(norm - res.gradNorm) < 1e-6 * norm);
    assert.ok(norm > 0.05, 'the test needs a norm above the clip');
    const adam = new AdamW(b, resolveOptim({ lr: 0.01, clip: 0.05, weightDecay: 0.1 }));
    adam.update(r.grads, res.lr, 0.05 / (norm + 1e-6));
    const wa = a.exportWeights();
    const wb = b.exportWeights();
    for (const k of Object.keys(wa)) for (let i = 0; i < wa[k]!.length; i++) assert.ok(Math.abs(wa[k]![i]! - wb[k]![i]!) < 1e-7, k);
    for (const g of r.grads.values()) g.dispose();
    tr.dispose();
    adam.dispose();
    a.dispose();
    b.dispose();
  });

  it('splitBatch balances rows and combineShardGrads equals the whole-batch gradient', async () => {
    await initBackend('wasm');
    const m = StackModel.create(MICRO, 2);
    const batch = batchOf(MICRO, 3, 20, 7, [20, 9, 14]);
    const shards = splitBatch(batch, 2);
    assert.equal(shards.length, 2);
    assert.deepEqual(
      shards.map((s) => s.batch),
      [1, 2],
    );
    const whole = m.lossAndGrads(batch);
    const want = arrays(whole.grads);
    const local = m.lossAndGrads(shards[0]!);
    const remoteR = m.lossAndGrads(shards[1]!);
    const flat = new Float32Array(m.paramSpecs().reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0));
    let off = 0;
    for (const s of m.paramSpecs()) {
      const d = remoteR.grads.get(s.name)!.dataSync();
      flat.set(d, off);
      off += d.length;
    }
    const combined = combineShardGrads(m, local, [{ stats: remoteR, flat }]);
    const got = arrays(combined.grads);
    assert.ok(Math.abs(combined.stats.lossSum / combined.stats.weightSum - whole.loss) < 1e-6);
    assert.equal(combined.stats.supervised, whole.supervised);
    for (const k of Object.keys(want)) for (let i = 0; i < want[k]!.length; i++) assert.ok(Math.abs(got[k]![i]! - want[k]![i]!) < 1e-6, k);
    for (const g of [...whole.grads.values(), ...remoteR.grads.values(), ...combined.grads.values()]) g.dispose();
    m.dispose();
  });

  for (const mode of ['js', 'tensor'] as const) it(`two threads (a worker + this one) give the single-thread step within float tolerance (${mode} optimiser)`, async () => {
    await initBackend('wasm');
    const cfg: ModelConfig = { ...MICRO, layers: 2, heads: 4, kvHeads: 2, dModel: 32 };
    const a = StackModel.create(cfg, 1);
    const b = StackModel.fromWeights(cfg, a.exportWeights());
    const single = new Trainer(a, { lr: 0.005, warmupSteps: 2, optimizerMode: mode });
    const par = new Trainer(b, { lr: 0.005, warmupSteps: 2, parallel: 1, optimizerMode: mode });
    assert.equal(par.workers.threads, 1);
    for (let k = 0; k < 4; k++) {
      const batch = batchOf(cfg, 2, 24, 10 + k, [24, 17]);
      const r1 = single.step(batch);
      const r2 = par.step(batch);
      assert.equal(r2.shards, 2);
      assert.ok(Math.abs(r1.loss - r2.loss) < 1e-5, `step ${k}: loss ${r1.loss} vs ${r2.loss}`);
      assert.ok(Math.abs(r1.gradNorm - r2.gradNorm) < 1e-5 * r1.gradNorm, `step ${k}: grad norm ${r1.gradNorm} vs ${r2.gradNorm}`);
      assert.equal(r1.correct, r2.correct);
      assert.equal(r1.tokens, r2.tokens);
    }
    const wa = a.exportWeights();
    const wb = b.exportWeights();
    for (const k of Object.keys(wa)) {
      let worst = 0;
      for (let i = 0; i < wa[k]!.length; i++) worst = Math.max(worst, Math.abs(wa[k]![i]! - wb[k]![i]!));
      assert.ok(worst < 1e-5, `${k}: weights differ by ${worst} after 4 steps`);
    }
    single.dispose();
    par.dispose();
    a.dispose();
    b.dispose();
  });
});
