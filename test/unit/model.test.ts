// The Stack model: its hand-written backward pass against tfjs autodiff of a plain
// implementation and against finite differences, KV-cache decoding against the full
// forward, and a tiny overfit. Micro configs keep every test to about a second.
import * as assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-core/dist/register_all_gradients';
import { initBackend } from '../../trainer/model/backend';
import { Batch, IGNORE, ModelConfig, PRESETS, StackModel, countParams, makeRng, paramSpecs, presetConfig, setJsShortcuts } from '../../trainer/model/model';
import { Trainer } from '../../trainer/model/optim';

const MICRO: ModelConfig = { vocab: 23, dModel: 16, layers: 2, heads: 4, kvHeads: 2, mlp: 24, maxSeq: 32, ropeBase: 10000 };
/** MICRO with two previous-token embedding tables (config.prevTokens). */
const MICRO_PREV: ModelConfig = { ...MICRO, prevTokens: 2 };
const MICRO_BASE = MICRO;
/** MICRO with what Hugging Face Qwen2/Llama checkpoints bring: q/k/v biases, an untied head, head_dim apart from d/heads, eps 1e-6. */
const MICRO_HF: ModelConfig = { ...MICRO, headDim: 6, qkvBias: true, tiedHead: false, normEps: 1e-6 };

/** What a test names about a config beyond MICRO. */
function cfgNote(cfg: ModelConfig): string {
  if (cfg.prevTokens) return `, ${cfg.prevTokens} previous-token tables`;
  if (cfg.qkvBias || cfg.tiedHead === false) return ', q/k/v biases, untied head, headDim apart';
  return '';
}

/** Weights of a fresh model with non-zero q/k/v biases (create() makes them zero). */
function weightsOf(cfg: ModelConfig, seed: number): Record<string, Float32Array> {
  const m = StackModel.create(cfg, seed);
  const w = m.exportWeights();
  m.dispose();
  const rng = makeRng(seed + 1000);
  for (const [k, a] of Object.entries(w)) if (k.endsWith('.bqkv')) for (let i = 0; i < a.length; i++) a[i] = 0.5 * rng.normal();
  return w;
}

/** A batch of `rows` x `seq` with some ignored labels, a padded tail and uneven weights. */
function microBatch(cfg: ModelConfig, rows: number, seq: number, seed: number, padTail = 0): Batch {
  const rng = makeRng(seed);
  const inputIds = new Int32Array(rows * seq);
  const labels = new Int32Array(rows * seq);
  const weights = new Float32Array(rows * seq);
  for (let i = 0; i < rows * seq; i++) {
    inputIds[i] = Math.floor(rng.uniform() * cfg.vocab);
    labels[i] = rng.uniform() < 0.3 ? IGNORE : Math.floor(rng.uniform() * cfg.vocab);
    weights[i] = rng.uniform() < 0.2 ? 5 : 1;
  }
  for (let r = 0; r < rows; r++) {
    for (let t = seq - padTail; t < seq; t++) {
      inputIds[r * seq + t] = 2;
      labels[r * seq + t] = IGNORE;
    }
  }
  return { inputIds, labels, weights, batch: rows, seq };
}

// ---- a plain implementation with tfjs autodiff (the reference) -------------------------

function refLoss(cfg: ModelConfig, W: Record<string, tf.Tensor>, b: Batch): tf.Scalar {
  const { dModel: d, heads: H, kvHeads: K, vocab: V } = cfg;
  const hd = cfg.headDim ?? d / H;
  const B = b.batch;
  const T = b.seq;
  const eps = cfg.normEps ?? 1e-5;
  const norm = (x: tf.Tensor, g: tf.Tensor): tf.Tensor => tf.mul(tf.mul(x, tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), eps))), g);
  const inv = Array.from({ length: hd / 2 }, (_, i) => Math.pow(cfg.ropeBase, (-2 * i) / hd));
  const ang: number[] = [];
  for (let t = 0; t < T; t++) for (let j = 0; j < hd; j++) ang.push(t * inv[j % (hd / 2)]!);
  const cos = tf.reshape(tf.tensor(ang.map(Math.cos)), [1, T, 1, hd]);
  const sin = tf.reshape(tf.tensor(ang.map(Math.sin)), [1, T, 1, hd]);
  const rope = (x: tf.Tensor): tf.Tensor => {
    const [x1, x2] = tf.split(x, 2, -1);
    return tf.add(tf.mul(x, cos), tf.mul(tf.concat([tf.neg(x2!), x1!], -1), sin));
  };
  const maskData: number[] = [];
  for (let i = 0; i < T; i++) for (let j = 0; j < T; j++) maskData.push(j > i ? -1e9 : 0);
  const mask = tf.tensor(maskData, [1, 1, T, T]);
  let x: tf.Tensor = tf.gather(W['tok_embeddings']!, tf.tensor1d(b.inputIds, 'int32'));
  for (let k = 1; k <= (cfg.prevTokens ?? 0); k++) {
    // The id k positions back in the same row; row V of the table before the row's start.
    const prev = Array.from(b.inputIds, (_, i) => (i % T >= k ? b.inputIds[i - k]! : V));
    x = tf.add(x, tf.gather(W[`prev_embeddings.${k}`]!, tf.tensor1d(prev, 'int32')));
  }
  for (let i = 0; i < cfg.layers; i++) {
    const p = `layers.${i}.`;
    const h = norm(x, W[p + 'attn_norm']!);
    const proj = tf.matMul(h, W[p + 'wqkv']!);
    const qkv = tf.reshape(cfg.qkvBias ? tf.add(proj, W[p + 'bqkv']!) : proj, [B, T, H + 2 * K, hd]);
    const q = rope(tf.slice(qkv, [0, 0, 0, 0], [B, T, H, hd]));
    const k = rope(tf.slice(qkv, [0, 0, H, 0], [B, T, K, hd]));
    const v = tf.slice(qkv, [0, 0, H + K, 0], [B, T, K, hd]);
    const groupOf = Array.from({ length: H }, (_, h) => Math.floor(h / (H / K)));
    const kH = tf.transpose(tf.gather(k, tf.tensor1d(groupOf, 'int32'), 2), [0, 2, 1, 3]);
    const vH = tf.transpose(tf.gather(v, tf.tensor1d(groupOf, 'int32'), 2), [0, 2, 1, 3]);
    const qH = tf.transpose(q, [0, 2, 1, 3]);
    const att = tf.softmax(tf.add(tf.div(tf.matMul(qH, kH, false, true), Math.sqrt(hd)), mask));
    const o = tf.reshape(tf.transpose(tf.matMul(att, vH), [0, 2, 1, 3]), [B * T, H * hd]);
    x = tf.add(x, tf.matMul(o, W[p + 'wo']!));
    const h2 = norm(x, W[p + 'mlp_norm']!);
    const g = tf.matMul(h2, W[p + 'w_gate']!);
    const u = tf.matMul(h2, W[p + 'w_up']!);
    x = tf.add(x, tf.matMul(tf.mul(tf.mul(g, tf.sigmoid(g)), u), W[p + 'w_down']!));
  }
  const logits = tf.matMul(norm(x, W['final_norm']!), W[cfg.tiedHead === false ? 'lm_head' : 'tok_embeddings']!, false, true);
  const labels = Array.from(b.labels);
  const sup = labels.map((l) => (l === IGNORE ? 0 : 1));
  const w = labels.map((_, i) => sup[i]! * (b.weights ? b.weights[i]! : 1));
  const onehot = tf.oneHot(
    tf.tensor1d(
      labels.map((l) => (l === IGNORE ? 0 : l)),
      'int32',
    ),
    V,
  );
  const ce = tf.neg(tf.sum(tf.mul(tf.logSoftmax(logits), onehot), -1));
  return tf.div(
    tf.sum(tf.mul(ce, tf.tensor1d(w))),
    w.reduce((a, c) => a + c, 0),
  ) as tf.Scalar;
}

function refLossAndGrads(cfg: ModelConfig, weights: Record<string, Float32Array>, b: Batch): { loss: number; grads: Record<string, Float32Array> } {
  const names = paramSpecs(cfg).map((s) => s.name);
  const shapes = paramSpecs(cfg).map((s) => s.shape);
  return tf.tidy(() => {
    const tensors = names.map((n, i) => tf.tensor(weights[n]!, shapes[i]));
    const f = (...ws: tf.Tensor[]): tf.Scalar => refLoss(cfg, Object.fromEntries(names.map((n, i) => [n, ws[i]!])), b);
    const { value, grads } = tf.valueAndGrads(f)(tensors);
    const out: Record<string, Float32Array> = {};
    names.forEach((n, i) => (out[n] = new Float32Array(grads[i]!.dataSync())));
    return { loss: value.dataSync()[0]!, grads: out };
  });
}

function gradsToArrays(g: Map<string, tf.Tensor>): Record<string, Float32Array> {
  const out: Record<string, Float32Array> = {};
  for (const [k, t] of g) {
    out[k] = new Float32Array(t.dataSync());
    t.dispose();
  }
  return out;
}

function maxRelDiff(a: Float32Array, b: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num = Math.max(num, Math.abs(a[i]! - b[i]!));
    den = Math.max(den, Math.abs(b[i]!));
  }
  return num / Math.max(den, 1e-12);
}

describe('trainer/model/model: the Stack transformer', function () {
  this.timeout(120000);

  after(async () => {
    setJsShortcuts(null);
  });

  it('the backend picker falls back to wasm here and says why; a named backend that is missing throws', async () => {
    const auto = await initBackend('auto');
    assert.equal(auto.asked, 'auto');
    assert.ok(['tfjs-node-gpu', 'tfjs-node', 'wasm'].includes(auto.used));
    if (auto.used === 'wasm') assert.match(auto.note ?? '', /tfjs-node-gpu is not installed/);
    assert.equal(tf.getBackend(), auto.used === 'wasm' ? 'wasm' : 'tensorflow');
    if (auto.used === 'wasm') await assert.rejects(initBackend('tfjs-node'), /tfjs-node is not installed/);
    assert.equal((await initBackend('cpu')).used, 'cpu');
    assert.equal(tf.getBackend(), 'cpu');
  });

  it('presets have the documented sizes', () => {
    const tiny = presetConfig('tiny', 748);
    assert.equal(tiny.dModel, 128);
    assert.equal(tiny.layers, 2);
    assert.equal(tiny.mlp, 352);
    assert.equal(tiny.maxSeq, 512);
    assert.equal(tiny.prevTokens, 2);
    // 465,024 in the blocks, the tied head and the token table; two previous-token tables of (748 + 1) x 128.
    assert.equal(countParams(tiny), 465024 + 2 * 749 * 128);
    assert.equal(countParams(presetConfig('tiny-plain', 748)), 465024);
    // tiny-deep: one more block (attention, MLP, norms) of tiny's width.
    assert.equal(countParams(presetConfig('tiny-deep', 749)) - countParams(presetConfig('tiny', 749)), 184576);
    const big = presetConfig('stack-100m', 748);
    assert.equal(big.vocab, 32768);
    assert.equal(big.dModel / big.heads, 64);
    assert.ok(countParams(big) > 95e6 && countParams(big) < 110e6, String(countParams(big)));
    for (const p of Object.values(PRESETS)) assert.ok(p.model.dModel % p.model.heads === 0 && p.model.heads % p.model.kvHeads === 0);
  });

  const variants: { backend: 'cpu' | 'wasm'; shortcuts: boolean; blocks: number; cfg: ModelConfig }[] = [
    { backend: 'cpu', shortcuts: true, blocks: 1, cfg: MICRO },
    { backend: 'cpu', shortcuts: false, blocks: 2, cfg: MICRO },
    { backend: 'wasm', shortcuts: true, blocks: 1, cfg: MICRO },
    { backend: 'wasm', shortcuts: true, blocks: 2, cfg: MICRO },
    { backend: 'wasm', shortcuts: true, blocks: 3, cfg: MICRO },
    { backend: 'wasm', shortcuts: true, blocks: 1, cfg: MICRO_PREV },
    { backend: 'cpu', shortcuts: false, blocks: 1, cfg: MICRO_PREV },
    { backend: 'cpu', shortcuts: true, blocks: 1, cfg: MICRO_HF },
    { backend: 'cpu', shortcuts: false, blocks: 2, cfg: MICRO_HF },
    { backend: 'wasm', shortcuts: true, blocks: 2, cfg: MICRO_HF },
  ];
  for (const { backend, shortcuts, blocks, cfg } of variants) {
    const prevNote = cfgNote(cfg);
    it(`hand-written gradients equal tfjs autodiff (${backend}${shortcuts ? '' : ', tensor-op path'}, ${blocks} attention block${blocks > 1 ? 's' : ''}${prevNote})`, async () => {
      await initBackend('cpu');
      const weights = weightsOf(cfg, 7);
      const b = microBatch(cfg, 2, 9, 3);
      const ref = refLossAndGrads(cfg, weights, b);
      await initBackend(backend);
      setJsShortcuts(shortcuts);
      const m = StackModel.fromWeights(cfg, weights);
      m.attnBlocks = blocks;
      const out = m.lossAndGrads(b);
      const grads = gradsToArrays(out.grads);
      const ev = m.evaluate(b);
      m.dispose();
      setJsShortcuts(null);
      assert.ok(Math.abs(out.loss - ref.loss) < 1e-5, `loss ${out.loss} vs ${ref.loss}`);
      assert.ok(Math.abs(ev.loss - ref.loss) < 1e-5, `evaluate loss ${ev.loss} vs ${ref.loss}`);
      for (const s of paramSpecs(cfg)) {
        const rel = maxRelDiff(grads[s.name]!, ref.grads[s.name]!);
        assert.ok(rel < 1e-4, `${s.name}: relative difference ${rel}`);
      }
    });
  }

  for (const cfg of [MICRO, MICRO_PREV, MICRO_HF])
    it(`gradients agree with central finite differences, parameter by parameter${cfgNote(cfg)}`, async () => {
      await initBackend('cpu');
      // Larger weights than the init (std 0.3, norm gains 1 +- 0.3) so that every parameter's
      // directional derivative is well above float32 finite-difference noise.
      const wr = makeRng(12);
      const base: Record<string, Float32Array> = {};
      for (const s of paramSpecs(cfg)) {
        const n = s.shape.reduce((a, c) => a * c, 1);
        base[s.name] = Float32Array.from({ length: n }, () => (s.shape.length === 1 ? 1 : 0) + 0.3 * wr.normal());
      }
      const m = StackModel.fromWeights(cfg, base);
      const b = microBatch(cfg, 2, 8, 5);
      const grads = gradsToArrays(m.lossAndGrads(b).grads);
      const rng = makeRng(99);
      const eps = 1e-2;
      for (const s of paramSpecs(cfg)) {
        // Directional derivative along a random unit direction within this parameter.
        const n = base[s.name]!.length;
        const u = new Float32Array(n);
        let norm = 0;
        for (let i = 0; i < n; i++) norm += (u[i] = rng.normal()) ** 2;
        norm = Math.sqrt(norm);
        let analytic = 0;
        for (let i = 0; i < n; i++) {
          u[i] = u[i]! / norm;
          analytic += u[i]! * grads[s.name]![i]!;
        }
        const at = (sign: number): number => {
          const w = new Float32Array(base[s.name]!);
          for (let i = 0; i < n; i++) w[i] = w[i]! + sign * eps * u[i]!;
          m.setWeights({ [s.name]: w });
          return m.evaluate(b).loss;
        };
        const numeric = (at(1) - at(-1)) / (2 * eps);
        m.setWeights({ [s.name]: base[s.name]! });
        const tol = 2e-4 + 0.01 * Math.abs(analytic);
        assert.ok(Math.abs(numeric - analytic) < tol, `${s.name}: finite difference ${numeric} vs gradient ${analytic}`);
      }
      m.dispose();
    });

  it('positions after the last label change nothing; weights scale as documented', async () => {
    await initBackend('wasm');
    const m = StackModel.create(MICRO, 3);
    const b = microBatch(MICRO, 2, 12, 8, 4);
    const full = m.lossAndGrads(b);
    const g1 = gradsToArrays(full.grads);
    // The same rows cut to 8 positions.
    const cut: Batch = { batch: 2, seq: 8, inputIds: new Int32Array(16), labels: new Int32Array(16), weights: new Float32Array(16) };
    for (let r = 0; r < 2; r++) {
      cut.inputIds.set(b.inputIds.subarray(r * 12, r * 12 + 8), r * 8);
      cut.labels.set(b.labels.subarray(r * 12, r * 12 + 8), r * 8);
      cut.weights!.set(b.weights!.subarray(r * 12, r * 12 + 8), r * 8);
    }
    const short = m.lossAndGrads(cut);
    const g2 = gradsToArrays(short.grads);
    assert.ok(Math.abs(full.loss - short.loss) < 1e-6);
    for (const k of Object.keys(g1)) assert.ok(maxRelDiff(g1[k]!, g2[k]!) < 1e-5, k);
    // evaluate agrees with the training loss, and the weighted loss is sum(w*ce)/sum(w)
    const ev = m.evaluate(b);
    assert.ok(Math.abs(ev.loss - full.loss) < 1e-6);
    assert.equal(ev.supervised, full.supervised);
    assert.ok(Math.abs(ev.lossSum / ev.weightSum - ev.loss) < 1e-9);
    m.dispose();
  });

  for (const shortcuts of [true, false])
    it(`evaluate with argmax matches the full logits${shortcuts ? '' : ' (tensor-op path)'}`, async () => {
      await initBackend('wasm');
      setJsShortcuts(shortcuts);
      const m = StackModel.create(MICRO, 4);
      const b = microBatch(MICRO, 2, 10, 9);
      const ev = m.evaluate(b, { argmax: true });
      const logits = m.logits(b.inputIds, 2, 10);
      const V = MICRO.vocab;
      let correct = 0;
      for (let i = 0; i < 20; i++) {
        let best = 0;
        for (let j = 1; j < V; j++) if (logits[i * V + j]! > logits[i * V + best]!) best = j;
        assert.equal(ev.argmax![i], best);
        if (b.labels[i] !== IGNORE && best === b.labels[i]) correct++;
      }
      assert.equal(ev.correct, correct);
      m.dispose();
      setJsShortcuts(null);
    });

  for (const [backend, MICRO] of [
    ['wasm', MICRO_BASE],
    ['cpu', MICRO_BASE],
    ['wasm', MICRO_PREV],
    ['wasm', MICRO_HF],
  ] as const) {
    it(`KV-cache decoding equals the full forward (${backend}${cfgNote(MICRO)})`, async () => {
      await initBackend(backend);
      const m = StackModel.fromWeights(MICRO, weightsOf(MICRO, 21));
      const rng = makeRng(5);
      const ids = Array.from({ length: 20 }, () => Math.floor(rng.uniform() * MICRO.vocab));
      m.attnBlocks = 3; // the full forward in query blocks, decoding in one piece
      const full = m.logits(Int32Array.from(ids), 1, ids.length);
      const V = MICRO.vocab;
      const cache = m.newCache();
      const check = (got: Float32Array, pos: number): void => {
        for (let j = 0; j < V; j++) {
          const want = full[pos * V + j]!;
          assert.ok(Math.abs(got[j]! - want) < 1e-4, `position ${pos}, token ${j}: ${got[j]} vs ${want}`);
        }
      };
      check(m.prefill(ids.slice(0, 7), cache), 6);
      for (let t = 7; t < 12; t++) check(m.step(ids[t]!, cache), t);
      check(m.prefill(ids.slice(12, 17), cache), 16); // a chunk appended mid-sequence
      const branch = cache.clone();
      for (let t = 17; t < 20; t++) check(m.step(ids[t]!, cache), t);
      check(m.step(ids[17]!, branch), 17);
      assert.equal(cache.length, 20);
      cache.dispose();
      branch.dispose();
      m.dispose();
    });
  }

  for (const MICRO of [MICRO_BASE, MICRO_PREV, MICRO_HF])
    it(`stepBatch (several sequences of different lengths) equals step() on each${cfgNote(MICRO)}`, async () => {
      await initBackend('wasm');
      const m = StackModel.fromWeights(MICRO, weightsOf(MICRO, 13));
      const rng = makeRng(8);
      const seqs = [5, 9, 1].map((n) => Array.from({ length: n }, () => Math.floor(rng.uniform() * MICRO.vocab)));
      const single = seqs.map((s) => {
        const c = m.newCache();
        m.prefill(s, c);
        return c;
      });
      const batched = single.map((c) => c.clone());
      for (let k = 0; k < 3; k++) {
        const next = seqs.map(() => Math.floor(rng.uniform() * MICRO.vocab));
        const want = next.map((id, i) => m.step(id, single[i]!));
        const got = m.stepBatch(next, batched);
        for (let i = 0; i < seqs.length; i++) {
          for (let j = 0; j < MICRO.vocab; j++) assert.ok(Math.abs(got[i]![j]! - want[i]![j]!) < 1e-5, `sequence ${i}, token ${j}`);
          assert.equal(batched[i]!.length, single[i]!.length);
        }
      }
      for (const c of [...single, ...batched]) c.dispose();
      m.dispose();
    });

  it('a tiny batch is overfit within a few dozen steps', async () => {
    await initBackend('wasm');
    const m = StackModel.create(MICRO, 1);
    const b = microBatch(MICRO, 2, 16, 2);
    const tr = new Trainer(m, { lr: 1e-2, warmupSteps: 5, totalSteps: 60, weightDecay: 0 });
    const first = tr.step(b);
    let last = first;
    for (let i = 0; i < 59; i++) last = tr.step(b);
    assert.ok(last.loss < first.loss * 0.2, `loss ${first.loss} -> ${last.loss}`);
    assert.ok(last.correct / last.supervised > 0.9, `accuracy ${last.correct}/${last.supervised}`);
    tr.dispose();
    m.dispose();
  });

  it('no tensors leak across steps', async () => {
    await initBackend('wasm');
    const m = StackModel.create(MICRO, 1);
    const b = microBatch(MICRO, 2, 16, 2);
    const tr = new Trainer(m, { lr: 1e-3 });
    tr.step(b);
    m.evaluate(b);
    const before = tf.memory().numTensors;
    for (let i = 0; i < 3; i++) {
      tr.step(b);
      m.evaluate(b, { argmax: true });
      const c = m.newCache();
      m.prefill([1, 2, 3], c);
      m.step(4, c);
      const c2 = c.clone();
      m.stepBatch([5, 6], [c, c2]);
      c.dispose();
      c2.dispose();
    }
    assert.equal(tf.memory().numTensors, before);
    tr.dispose();
    m.dispose();
  });
});
