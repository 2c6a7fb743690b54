// Per-step allocation removed (issue 32): on wasm the JS-side buffers of the embedding, the
// row gathers, the loss and the embedding gradient are reused from step to step, the
// gradient is flattened into one reused buffer and gradients are read from the wasm heap
// without a copy. These must change nothing: the same loss and gradients as a fresh model
// and as the tensor-op path, step after step with batches of different shapes.
import * as assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs-core';
import { initBackend } from '../../trainer/model/backend';
import { Batch, Grads, IGNORE, ModelConfig, StackModel, makeRng } from '../../trainer/model/model';
import { ScratchBuffers, readNow, setJsShortcuts } from '../../trainer/model/modelCore';
import { Trainer } from '../../trainer/model/optim';
import { GradientPool } from '../../trainer/model/parallel';

const CFG: ModelConfig = { vocab: 23, dModel: 16, layers: 1, heads: 2, kvHeads: 1, mlp: 20, maxSeq: 64, ropeBase: 10000, prevTokens: 2 };

function batchOf(rows: number, seq: number, seed: number): Batch {
  const rng = makeRng(seed);
  const inputIds = Int32Array.from({ length: rows * seq }, () => Math.floor(rng.uniform() * CFG.vocab));
  const labels = Int32Array.from(inputIds, (id, i) => (rng.uniform() < 0.4 && i % seq !== seq - 1 ? IGNORE : (id * 7 + 3) % CFG.vocab));
  return { inputIds, labels, batch: rows, seq };
}

function arrays(g: Grads): Record<string, Float32Array> {
  const out: Record<string, Float32Array> = {};
  for (const [k, t] of g) out[k] = new Float32Array(t.dataSync());
  return out;
}

function maxDiff(a: Record<string, Float32Array>, b: Record<string, Float32Array>): number {
  let m = 0;
  for (const k of Object.keys(a)) for (let i = 0; i < a[k]!.length; i++) m = Math.max(m, Math.abs(a[k]![i]! - b[k]![i]!));
  return m;
}

describe('trainer: reused step buffers and heap reads change nothing', function () {
  this.timeout(120000);
  afterEach(() => setJsShortcuts(null));

  it('gradients of batches of different shapes, one after another, equal a fresh model each (wasm) and the tensor-op path (cpu)', async () => {
    await initBackend('wasm');
    const w = StackModel.create(CFG, 5).exportWeights();
    const reused = StackModel.fromWeights(CFG, w);
    // long, short, long again: a buffer grown by the first must not leak values into the others
    const shapes = [
      [2, 40, 1],
      [3, 9, 2],
      [1, 33, 3],
      [2, 40, 4],
    ] as const;
    const got: { loss: number; grads: Record<string, Float32Array> }[] = [];
    for (const [rows, seq, seed] of shapes) {
      const b = batchOf(rows, seq, seed);
      const a = reused.lossAndGrads(b);
      const fresh = StackModel.fromWeights(CFG, w);
      const f = fresh.lossAndGrads(b);
      assert.equal(a.loss, f.loss);
      assert.equal(maxDiff(arrays(a.grads), arrays(f.grads)), 0, `batch ${rows}x${seq}`);
      got.push({ loss: a.loss, grads: arrays(a.grads) });
      for (const g of [a, f]) for (const x of g.grads.values()) x.dispose();
      fresh.dispose();
    }
    reused.dispose();
    // the tensor ops (tf.gather, scatterND, unsortedSegmentSum, logSoftmax) on cpu
    await initBackend('cpu');
    setJsShortcuts(false);
    const ref = StackModel.fromWeights(CFG, w);
    shapes.forEach(([rows, seq, seed], i) => {
      const t = ref.lossAndGrads(batchOf(rows, seq, seed));
      assert.ok(Math.abs(got[i]!.loss - t.loss) < 1e-5, `${got[i]!.loss} vs ${t.loss}`);
      assert.ok(maxDiff(got[i]!.grads, arrays(t.grads)) < 1e-4, `batch ${rows}x${seq}`);
      for (const x of t.grads.values()) x.dispose();
    });
    ref.dispose();
  });

  it('Trainer steps with the reused flat gradient equal steps with a fresh buffer each (wasm, js optimiser)', async () => {
    await initBackend('wasm');
    const w = StackModel.create(CFG, 6).exportWeights();
    const m1 = StackModel.fromWeights(CFG, w);
    const m2 = StackModel.fromWeights(CFG, w);
    const t1 = new Trainer(m1, { lr: 1e-2 });
    const t2 = new Trainer(m2, { lr: 1e-2 });
    // t2 flattens into a new buffer every step, as before
    (t2.adam as unknown as { flattenScratch: (g: Grads) => Float32Array }).flattenScratch = (g: Grads) => t2.adam.flatten(g);
    for (let i = 0; i < 4; i++) {
      const b = batchOf(2, 20 + 5 * i, 10 + i);
      const r1 = t1.step(b);
      const r2 = t2.step(b);
      assert.equal(r1.loss, r2.loss);
      assert.equal(r1.gradNorm, r2.gradNorm);
    }
    assert.equal(maxDiff(m1.exportWeights(), m2.exportWeights()), 0);
    t1.dispose();
    t2.dispose();
    m1.dispose();
    m2.dispose();
  });

  it('a worker reads the weights of the model it is given from shared memory, two models of the same version in turn', async () => {
    await initBackend('wasm');
    const a = StackModel.create(CFG, 7);
    const b = StackModel.create(CFG, 8);
    assert.equal(a.version, b.version); // what the pool must not take for the same weights
    const pool = GradientPool.create(CFG, 1)!;
    assert.ok(pool, 'no worker script');
    const shard = batchOf(2, 21, 9);
    const flatOf = (m: StackModel): Float32Array => {
      const r = m.lossAndGrads(shard);
      const out = Float32Array.from(m.paramSpecs().flatMap((s) => Array.from(r.grads.get(s.name)!.dataSync())));
      for (const g of r.grads.values()) g.dispose();
      return out;
    };
    for (const m of [a, b, a]) {
      pool.start(m, [shard]);
      const [remote] = pool.finish();
      const want = flatOf(m);
      let worst = 0;
      for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(want[i]! - remote!.flat[i]!));
      assert.ok(worst < 1e-6, `worker gradient differs by ${worst}`);
    }
    pool.dispose();
    a.dispose();
    b.dispose();
  });

  it('readNow reads a tensor as dataSync does; ScratchBuffers reuse only on wasm', async () => {
    await initBackend('wasm');
    const x = tf.tensor2d(Float32Array.from({ length: 12 }, (_, i) => i * 0.5 - 2), [3, 4]);
    assert.deepEqual(Array.from(readNow(x)), Array.from(x.dataSync()));
    const s = new ScratchBuffers();
    const a = s.get('k', 10);
    a.fill(7);
    assert.equal(s.get('k', 6).buffer, a.buffer); // reused
    assert.deepEqual(Array.from(s.zeros('k', 4)), [0, 0, 0, 0]);
    x.dispose();
    await initBackend('cpu');
    const c = new ScratchBuffers();
    const b = c.get('k', 10);
    assert.notEqual(c.get('k', 10).buffer, b.buffer); // the cpu backend keeps arrays as tensor storage: never reused
    const y = tf.tensor1d([1, 2, 3]);
    assert.deepEqual(Array.from(readNow(y)), [1, 2, 3]);
    y.dispose();
  });
});
