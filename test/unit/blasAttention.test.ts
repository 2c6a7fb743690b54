// The attention on the BLAS (trainer/model/blasAttention.ts) against the tensor path it
// replaces on wasm (the same model with its products on XNNPACK): the same losses, logits,
// token log-probabilities, policy-gradient statistics and every parameter's gradient, on
// every model shape the lab trains (grouped kv heads 4:2, 4:1 and 4:4, previous-token tables,
// q/k/v biases with an untied head and a head dimension of its own), in one and in several
// query blocks, on rows of different lengths.
import * as assert from 'node:assert/strict';
import { initBackend } from '../../trainer/model/backend';
import { blasMatMulState, describeBlas, setBlasMatMul } from '../../trainer/model/blasMatMul';
import { Batch, Grads, IGNORE, ModelConfig, StackModel, makeRng } from '../../trainer/model/model';

const BASE: ModelConfig = { vocab: 29, dModel: 32, layers: 2, heads: 4, kvHeads: 2, mlp: 40, maxSeq: 96, ropeBase: 10000 };
const SHAPES: [string, ModelConfig][] = [
  ['4 heads over 2 kv heads', BASE],
  ['4 heads over 1 kv head', { ...BASE, kvHeads: 1 }],
  ['4 heads over 4 kv heads', { ...BASE, kvHeads: 4 }],
  ['2 previous-token tables', { ...BASE, prevTokens: 2 }],
  ['q/k/v biases, untied head, head dim 6, eps 1e-6', { ...BASE, headDim: 6, qkvBias: true, tiedHead: false, normEps: 1e-6 }],
];

function batchOf(cfg: ModelConfig, rows: number, seq: number, seed: number, pg = false): Batch {
  const rng = makeRng(seed);
  const n = rows * seq;
  const inputIds = Int32Array.from({ length: n }, () => Math.floor(rng.uniform() * cfg.vocab));
  // rows end at different places: the last labels of row r are cut r*7 positions early
  const labels = Int32Array.from({ length: n }, (_, i) => (rng.uniform() < 0.35 || i % seq >= seq - 7 * Math.floor(i / seq) ? IGNORE : Math.floor(rng.uniform() * cfg.vocab)));
  if (!pg) return { inputIds, labels, weights: Float32Array.from({ length: n }, () => (rng.uniform() < 0.2 ? 3 : 1)), batch: rows, seq };
  return {
    inputIds,
    labels,
    batch: rows,
    seq,
    pg: {
      advantages: Float32Array.from({ length: n }, (_, i) => (Math.floor(i / seq) % 2 ? 0.8 : -1.1)),
      oldLogp: Float32Array.from({ length: n }, () => -1 - rng.uniform()),
      refLogp: Float32Array.from({ length: n }, () => -1.5 - rng.uniform()),
      clip: 0.2,
      beta: 0.04,
    },
  };
}

/** A model whose attention is peaked (q/k/v weights x4): at the initial scale it is near uniform and q/k gradients near 0. */
function peakedModel(cfg: ModelConfig, seed: number): StackModel {
  const w = StackModel.create(cfg, seed).exportWeights();
  for (const [k, a] of Object.entries(w)) if (k.endsWith('.wqkv') || k.endsWith('.bqkv')) for (let i = 0; i < a.length; i++) a[i] = a[i]! * 4;
  return StackModel.fromWeights(cfg, w);
}

/** |a - b| within 1e-4 absolute, and within 0.2% of the reference's largest entry. */
function close(fast: ArrayLike<number>, ref: ArrayLike<number>): { ok: boolean; diff: number; scale: number } {
  const diff = maxAbs(fast, ref);
  let scale = 0;
  for (let i = 0; i < ref.length; i++) if (Number.isFinite(ref[i]!)) scale = Math.max(scale, Math.abs(ref[i]!));
  return { ok: diff <= 1e-4 && diff <= 2e-3 * scale + 1e-7, diff, scale };
}

function gradArrays(g: Grads): Map<string, Float32Array> {
  return new Map([...g].map(([k, t]) => [k, new Float32Array(t.dataSync())]));
}

/** Everything the model computes for a batch, on the path `blas` picks. */
function readings(m: StackModel, b: Batch, blas: boolean, blocks: number | null) {
  setBlasMatMul(blas);
  try {
    m.attnBlocks = blocks;
    const lg = m.lossAndGrads(b);
    const out = { loss: lg.loss, ce: lg.ceSum, pg: lg.pg ?? null, grads: gradArrays(lg.grads) };
    for (const t of lg.grads.values()) t.dispose();
    const ev = m.evaluate({ ...b, pg: undefined }, { argmax: true });
    const logits = m.logits(b.inputIds, b.batch, b.seq);
    const lp = m.tokenLogprobs(b).logp;
    return { ...out, evalLoss: ev.loss, argmax: ev.argmax!, logits, lp };
  } finally {
    setBlasMatMul(true);
    m.attnBlocks = null;
  }
}

function maxAbs(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(a[i]!) && Number.isNaN(b[i]!)) continue; // an unlabelled position's log-prob on both
    const d = Math.abs(a[i]! - b[i]!);
    m = Number.isNaN(d) ? Infinity : Math.max(m, d);
  }
  return m;
}

describe('trainer: the attention on the BLAS equals the tensor path (wasm)', function () {
  this.timeout(120000);
  before(async function () {
    await initBackend('wasm');
    if (!blasMatMulState().blas) {
      console.log(`      not run: ${describeBlas()} (apt-get install libopenblas0-pthread)`);
      this.skip();
    }
  });

  for (const [name, cfg] of SHAPES) {
    for (const blocks of [1, 3, null]) {
      for (const pg of [false, true]) {
        it(`${name}, ${blocks === null ? 'the default blocks' : `${blocks} query block(s)`}${pg ? ', a policy-gradient batch' : ''}: loss, logits, log-probs and every gradient within 1e-4`, () => {
          const m = peakedModel(cfg, 7);
          const b = batchOf(cfg, 3, 90, 11, pg);
          const before = blasMatMulState().products;
          const fast = readings(m, b, true, blocks);
          assert.ok(blasMatMulState().products > before, 'the BLAS ran');
          const ref = readings(m, b, false, blocks);
          assert.ok(Math.abs(fast.loss - ref.loss) <= 1e-5 * Math.max(1, Math.abs(ref.loss)), `loss ${fast.loss} vs ${ref.loss}`);
          assert.ok(Math.abs(fast.evalLoss - ref.evalLoss) <= 1e-5 * Math.max(1, ref.evalLoss));
          if (pg) {
            assert.ok(fast.pg && ref.pg);
            assert.ok(Math.abs(fast.pg.klSum - ref.pg.klSum) <= 1e-4, `kl ${fast.pg.klSum} vs ${ref.pg.klSum}`);
            assert.equal(fast.pg.clipped, ref.pg.clipped);
          }
          assert.ok(maxAbs(fast.logits, ref.logits) <= 1e-4, `logits ${maxAbs(fast.logits, ref.logits)}`);
          assert.ok(maxAbs(fast.lp, ref.lp) <= 1e-4, `log-probs ${maxAbs(fast.lp, ref.lp)}`);
          assert.deepEqual([...fast.grads.keys()].sort(), [...ref.grads.keys()].sort());
          for (const [k, g] of ref.grads) {
            const c = close(fast.grads.get(k)!, g);
            assert.ok(c.ok, `${k}: ${c.diff} (largest ${c.scale})`);
          }
          m.dispose();
        });
      }
    }
  }

  it('one row of one position, short rows, and one row of a whole context', () => {
    const m = peakedModel(BASE, 3);
    for (const [rows, seq] of [
      [1, 1],
      [2, 5],
      [1, 95],
    ] as const) {
      const rng = makeRng(rows * 100 + seq);
      const inputIds = Int32Array.from({ length: rows * seq }, () => Math.floor(rng.uniform() * BASE.vocab));
      const labels = Int32Array.from(inputIds, (v) => (v + 1) % BASE.vocab);
      const b: Batch = { inputIds, labels, batch: rows, seq };
      const fast = readings(m, b, true, null);
      const ref = readings(m, b, false, null);
      assert.ok(Math.abs(fast.loss - ref.loss) <= 1e-5, `${rows}x${seq}: ${fast.loss} vs ${ref.loss}`);
      for (const [k, g] of ref.grads) assert.ok(close(fast.grads.get(k)!, g).ok, `${rows}x${seq} ${k}`);
    }
    m.dispose();
  });
});
