// The "Stack" transformer: a decoder-only language model in TensorFlow.js.
//
// Architecture: token embedding tied with the output head, plus (config.prevTokens) the
// embeddings of the previous k tokens, so that a first-layer head can match "the tokens
// before this one" (the induction copy a 2-layer student otherwise learns late); per
// layer a pre-norm RMSNorm, grouped-query causal self-attention with RoPE, a residual add,
// a pre-norm RMSNorm, a SwiGLU MLP, a residual add; a final RMSNorm; no biases anywhere.
//
// Conventions (the checkpoint format documents the same; see trainer/run/checkpoint.ts):
// - Weights are stored [in, out] (y = x @ W). Parameter names and shapes:
//     tok_embeddings            [vocab, d]        rows are tokens; the head is h @ tok_embeddings^T
//     prev_embeddings.{k}       [vocab + 1, d]    k = 1..prevTokens (config; absent: none): added to
//                                                 position t's input at id x_{t-k}; row vocab = before the start
//     layers.{i}.attn_norm      [d]
//     layers.{i}.wqkv           [d, (heads + 2*kvHeads) * headDim]   columns: q heads, k heads, v heads
//     layers.{i}.wo             [heads * headDim, d]
//     layers.{i}.mlp_norm       [d]
//     layers.{i}.w_gate         [d, mlp]          SwiGLU: (silu(h @ w_gate) * (h @ w_up)) @ w_down
//     layers.{i}.w_up           [d, mlp]
//     layers.{i}.w_down         [mlp, d]
//     final_norm                [d]
//   Optional, for Hugging Face Llama/Qwen2 checkpoints (config fields; absent in the presets):
//     layers.{i}.bqkv           [(heads + 2*kvHeads) * headDim]   q/k/v biases (qkvBias), added after wqkv
//     lm_head                   [vocab, d]        an untied head (tiedHead false): h @ lm_head^T
//   headDim (default d / heads) may differ from d / heads; the attention width is heads * headDim.
// - RMSNorm: x * rsqrt(mean(x^2) + eps) * g, eps = config.normEps (default 1e-5).
// - RoPE, "rotate half" (GPT-NeoX / Llama layout): per head, x' = x*cos + rot(x)*sin with
//   rot([x1, x2]) = [-x2, x1], angle(pos, j) = pos * base^(-2(j mod hd/2)/hd); position =
//   index in the sequence (0-based). Applied to q and k; the 1/sqrt(hd) score scale is
//   folded into q's tables.
// - Query head h reads key/value head floor(h / (heads / kvHeads)).
// - Causal: position t attends to positions <= t of its own row only.
//
// Speed (wasm). The tfjs wasm backend is fast only for plain 2-D, non-transposed matMul
// (XNNPACK, ~20-27 GFLOP/s on one core here); transposed or batched matMuls take a scalar
// fallback ~10x slower; XNNPACK repacks a matMul's right operand whenever it is a new
// tensor (cost ~K*N); a 2-D slice or concat along columns copies row by row in JS. So
// this model does not use tfjs autodiff: `lossAndGrads` runs a hand-written backward pass
// in which every matMul is 2-D and non-transposed, with the narrow operand on the right
// (weight gradients pick their orientation by that rule); attention runs per row of the
// batch and per kv group in a transposed layout where every slice and concat is a
// contiguous copy, the group's query heads stacked into one [rep*T, hd] operand; the
// embedding rows, the supervised rows of the head and the softmax cross-entropy are done
// in JS (one copy each way), and only supervised positions reach the output head.
// The backward pass is checked against tfjs autodiff of a plain implementation and
// against finite differences (test/unit/model.test.ts). On native backends (tfjs-node)
// the same code runs, with tensor ops (gather, scatterND, unsortedSegmentSum, logSoftmax)
// instead of the JS shortcuts. The second core is reached by data parallelism over worker
// threads (trainer/model/parallel.ts).
//
// WebGPU reads back asynchronously only: the *Async methods (lossAndGradsAsync,
// evaluateAsync, tokenLogprobsAsync, logitsAsync, exportWeightsAsync, prefillAsync,
// stepBatchAsync) run the same code with every read deferred to one awaited flush
// (Readback), GRPO's per-token surrogate as tensor ops; where reads are synchronous they are
// the sync methods themselves, so wasm runs exactly what it ran before.
//
// Decoding: `prefill` / `step` / `stepBatch` with a KvCache (keys after RoPE, transposed).
import * as tf from '@tensorflow/tfjs-core';
import { canReadSync } from './backend';
import { type Sgemm, activeSgemm } from './blasMatMul';
import { KvCache } from './kvCache';
import { ModelConfig, paramSpecs, prevTokensOf } from './modelConfig';
import { MASK_NEG, makeRng, readNow } from './modelCore';
import { ModelTraining } from './modelTrain';

// The configuration, the batch/loss types and the decoding cache live in their own files, the
// weights and forward pass in modelCore.ts, the backward pass and losses in modelTrain.ts
// (StackModel extends both); everything that imported them from here still does.
export * from './modelConfig';
export * from './modelBatch';
export { KvCache } from './kvCache';
export { makeRng, setJsShortcuts } from './modelCore';

/** The Stack transformer: weights and forward (ModelCore), training (ModelTraining), decoding (here). */
export class StackModel extends ModelTraining {
  private constructor(cfg: ModelConfig) {
    super(cfg);
  }

  /** A freshly initialised model: N(0, 0.02) weights (residual outputs scaled by 1/sqrt(2*layers)), unit norms, zero biases. */
  static create(cfg: ModelConfig, seed: number): StackModel {
    const m = new StackModel(cfg);
    const rng = makeRng(seed);
    const weights: Record<string, Float32Array> = {};
    const residualStd = 0.02 / Math.sqrt(2 * cfg.layers);
    for (const spec of paramSpecs(cfg)) {
      const n = spec.shape.reduce((a, b) => a * b, 1);
      const data = new Float32Array(n);
      if (spec.shape.length === 1) data.fill(/\.bqkv$/.test(spec.name) ? 0 : 1);
      else {
        const std = /\.(wo|w_down)$/.test(spec.name) ? residualStd : 0.02;
        for (let i = 0; i < n; i++) data[i] = rng.normal() * std;
      }
      weights[spec.name] = data;
    }
    m.setWeights(weights);
    return m;
  }

  /** A model with the given weights (every parameter of paramSpecs(cfg), by name). */
  static fromWeights(cfg: ModelConfig, weights: Record<string, Float32Array>): StackModel {
    const m = new StackModel(cfg);
    m.setWeights(weights);
    return m;
  }

  // ---- incremental decoding -----------------------------------------------------------

  /**
   * Previous-token ids for decoding (config.prevTokens): with `ids`, the new tokens of one
   * sequence fed after caches[0]'s; with null, one new token per cache (stepBatch).
   */
  private prevIdsAfter(caches: readonly KvCache[], ids: readonly number[] | null): Int32Array[] {
    const V = this.config.vocab;
    return Array.from({ length: prevTokensOf(this.config) }, (_, j) => {
      const k = j + 1;
      if (ids === null) return Int32Array.from(caches, (c) => c.ids[c.ids.length - k] ?? V);
      const seen = caches[0]!.ids;
      return Int32Array.from(ids, (_, i) => (i >= k ? ids[i - k]! : (seen[seen.length - (k - i)] ?? V)));
    });
  }

  newCache(): KvCache {
    return new KvCache(this.config.layers, this.config.kvHeads * this.headDim);
  }

  /**
   * One query row's attention over a cache layer (positions 0..len-1, the new one included):
   * per head, softmax(q . k) weighted values, written to out[outOffset..+heads*hd]. The query
   * carries RoPE and the 1/sqrt(hd) scale already (folded into the angle tables).
   */
  private attendOne(q: Float32Array, qOffset: number, cache: KvCache, layer: number, len: number, out: Float32Array, outOffset: number): void {
    const H = this.config.heads;
    const K = this.config.kvHeads;
    const hd = this.headDim;
    const rep = H / K;
    const W = K * hd;
    const keys = cache.k[layer]!;
    const vals = cache.v[layer]!;
    const sgemm = activeSgemm();
    if (sgemm) {
      // On the BLAS: per kv group, its query heads' scores [rep, len] in one product over the
      // cache's keys read in place (leading dimension W), the softmax here, then P V likewise.
      const scores = this.scratch(rep * len);
      for (let g = 0; g < K; g++) {
        sgemm(101, 111, 112, rep, len, hd, 1, q.subarray(qOffset + g * rep * hd), hd, keys.subarray(g * hd), W, 0, scores, len);
        for (let i = 0; i < rep; i++) {
          const row = i * len;
          let max = -Infinity;
          for (let t = row; t < row + len; t++) if (scores[t]! > max) max = scores[t]!;
          let sum = 0;
          for (let t = row; t < row + len; t++) sum += scores[t] = Math.exp(scores[t]! - max);
          const inv = 1 / sum;
          for (let t = row; t < row + len; t++) scores[t] = scores[t]! * inv;
        }
        sgemm(101, 111, 111, rep, hd, len, 1, scores, len, vals.subarray(g * hd), W, 0, out.subarray(outOffset + g * rep * hd), hd);
      }
      return;
    }
    const scores = this.scratch(len);
    for (let h = 0; h < H; h++) {
      const g = (h / rep) | 0;
      const qo = qOffset + h * hd;
      let max = -Infinity;
      for (let t = 0, ko = g * hd; t < len; t++, ko += W) {
        let dot = 0;
        for (let j = 0; j < hd; j++) dot += q[qo + j]! * keys[ko + j]!;
        scores[t] = dot;
        if (dot > max) max = dot;
      }
      let sum = 0;
      for (let t = 0; t < len; t++) {
        const e = Math.exp(scores[t]! - max);
        scores[t] = e;
        sum += e;
      }
      const oo = outOffset + h * hd;
      const inv = 1 / sum;
      for (let j = 0; j < hd; j++) out[oo + j] = 0;
      for (let t = 0, vo = g * hd; t < len; t++, vo += W) {
        const w = scores[t]! * inv;
        for (let j = 0; j < hd; j++) out[oo + j]! += w * vals[vo + j]!;
      }
    }
  }

  private scratchBuf = new Float32Array(0);
  /** A reused buffer of at least n floats (attention scores). */
  private scratch(n: number): Float32Array {
    if (this.scratchBuf.length < n) this.scratchBuf = new Float32Array(Math.max(n, this.config.maxSeq * (this.config.heads / this.config.kvHeads)));
    return this.scratchBuf;
  }

  /**
   * Feed `ids` after what the cache already holds (an empty cache: a prompt; a filled one:
   * e.g. a tool result appended mid-dialogue). Returns the logits of the last position
   * (length vocab; with a padded vocabulary the caller masks ids past the tokenizer's).
   */
  prefill(ids: readonly number[], cache: KvCache): Float32Array {
    const { heads: H, kvHeads: K, layers: L } = this.config;
    const hd = this.headDim;
    const c = ids.length;
    const p = cache.length;
    this.checkPrefill(ids, cache);
    const W = K * hd;
    const len = p + c;
    const out = tf.tidy(() => {
      const { cos, sin } = this.angleTables(c, p, 1);
      const mask = c > 1 ? this.causalMask(c, len, p) : null;
      let x = this.embed(Int32Array.from(ids), this.prevIdsAfter([cache], ids));
      for (let i = 0; i < L; i++) {
        const pre = `layers.${i}.`;
        const { qk, vNew } = this.layerQkv(x, pre, cos, sin);
        // The new keys and values join the cache (rows p..p+c-1).
        cache.k[i]!.set(tf.slice(qk, [0, H * hd], [c, W]).dataSync() as Float32Array, p * W);
        cache.v[i]!.set(vNew.dataSync() as Float32Array, p * W);
        let o: tf.Tensor2D;
        if (c === 1) {
          const qRow = tf.slice(qk, [0, 0], [1, H * hd]).dataSync() as Float32Array;
          const att = new Float32Array(H * hd);
          this.attendOne(qRow, 0, cache, i, len, att, 0);
          o = tf.tensor2d(att, [1, H * hd]);
        } else {
          o = this.cacheAttention(qk, cache, i, c, len, mask!);
        }
        x = this.layerTail(x, o, pre);
      }
      const last = tf.slice(x, [c - 1, 0], [1, this.config.dModel]);
      const hf = this.rmsNorm(last, this.p1('final_norm')).y;
      return this.headLogits(hf);
    });
    cache.length = p + c;
    cache.ids.push(...ids);
    const logits = out.dataSync() as Float32Array;
    out.dispose();
    return logits;
  }

  /** Attention of c new positions (rows of qk, RoPE applied) over a cache layer's first len positions. */
  private cacheAttention(qk: tf.Tensor2D, cache: KvCache, i: number, c: number, len: number, mask: tf.Tensor2D): tf.Tensor2D {
    const { heads: H, kvHeads: K } = this.config;
    const hd = this.headDim;
    const rep = H / K;
    const W = K * hd;
    const keys = tf.tensor2d(cache.k[i]!.subarray(0, len * W), [len, W]);
    const vals = tf.tensor2d(cache.v[i]!.subarray(0, len * W), [len, W]);
    const outs: tf.Tensor2D[] = [];
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / rep);
      const q = tf.slice(qk, [0, h * hd], [c, hd]);
      const kT = tf.transpose(tf.slice(keys, [0, g * hd], [len, hd]));
      const pr = tf.softmax(tf.add(tf.matMul(q, kT), mask));
      outs.push(tf.matMul(pr, tf.slice(vals, [0, g * hd], [len, hd])) as tf.Tensor2D);
    }
    return outs.length === 1 ? outs[0]! : (tf.concat(outs, 1) as tf.Tensor2D);
  }

  /** What prefill and prefillAsync refuse (more than the context, an id outside the vocabulary); then room in the cache. */
  private checkPrefill(ids: readonly number[], cache: KvCache): void {
    if (ids.length === 0) throw new Error('prefill: no tokens');
    const c = ids.length;
    const p = cache.length;
    if (p + c > this.config.maxSeq) throw new Error(`prefill: ${p + c} tokens exceed the model's context ${this.config.maxSeq}`);
    for (const id of ids) if (!(Number.isInteger(id) && id >= 0 && id < this.config.vocab)) throw new Error(`prefill: token id ${id} out of range`);
    cache.reserve(p + c);
  }

  /** What stepBatch and stepBatchAsync refuse; then room for one more token in each cache. */
  private checkStepBatch(ids: readonly number[], caches: readonly KvCache[]): void {
    const B = ids.length;
    if (caches.length !== B) throw new Error('stepBatch: one cache per token');
    if (new Set(caches).size !== B) throw new Error('stepBatch: the caches must be distinct');
    for (const [b, id] of ids.entries()) {
      if (!(Number.isInteger(id) && id >= 0 && id < this.config.vocab)) throw new Error(`stepBatch: token id ${id} out of range`);
      if (caches[b]!.length + 1 > this.config.maxSeq) throw new Error(`stepBatch: sequence ${b} would exceed the model's context ${this.config.maxSeq}`);
    }
    for (const c of caches) c.reserve(c.length + 1);
  }

  /** A decoding layer after attention: the output projection, its residual, the MLP and its residual. */
  private layerTail(x: tf.Tensor2D, o: tf.Tensor2D, pre: string): tf.Tensor2D {
    const x1 = tf.add(x, tf.matMul(o, this.p2(pre + 'wo'))) as tf.Tensor2D;
    const h2 = this.rmsNorm(x1, this.p1(pre + 'mlp_norm')).y;
    const gate = tf.matMul(h2, this.p2(pre + 'w_gate'));
    const act = tf.mul(tf.mul(gate, tf.sigmoid(gate)), tf.matMul(h2, this.p2(pre + 'w_up')));
    return tf.add(x1, tf.matMul(act, this.p2(pre + 'w_down'))) as tf.Tensor2D;
  }

  /** A decoding layer before attention: rows' q and k (RoPE applied) and v. */
  private layerQkv(x: tf.Tensor2D, pre: string, cos: tf.Tensor2D, sin: tf.Tensor2D): { qk: tf.Tensor2D; vNew: tf.Tensor2D } {
    const { heads: H, kvHeads: K } = this.config;
    const hd = this.headDim;
    const n = x.shape[0];
    const h1 = this.rmsNorm(x, this.p1(pre + 'attn_norm')).y;
    const qkv = this.qkvProj(h1, pre);
    const qkRaw = tf.slice(qkv, [0, 0], [n, (H + K) * hd]);
    const vNew = tf.slice(qkv, [0, (H + K) * hd], [n, K * hd]);
    const qk = tf.add(tf.mul(qkRaw, cos), tf.mul(this.rotate(qkRaw, this.rot), sin)) as tf.Tensor2D;
    return { qk, vNew };
  }

  /**
   * prefill on any backend (webgpu included). Attention over the cache runs as in prefill
   * (the cache stays in JS), so each layer's new keys and values are read back (awaited)
   * before its attention: L readbacks per call, each a GPU sync point. Keeping the cache on
   * the GPU would save them; on the software adapter the shaders, not the readbacks, dominate.
   */
  async prefillAsync(ids: readonly number[], cache: KvCache): Promise<Float32Array> {
    if (canReadSync()) return this.prefill(ids, cache);
    const { heads: H, kvHeads: K, layers: L } = this.config;
    const hd = this.headDim;
    const c = ids.length;
    const p = cache.length;
    this.checkPrefill(ids, cache);
    const W = K * hd;
    const W1 = (H + K) * hd;
    const len = p + c;
    const live: tf.Tensor[] = [];
    try {
      const [cos, sin, mask] = tf.tidy(() => {
        const a = this.angleTables(c, p, 1);
        return [a.cos, a.sin, c > 1 ? this.causalMask(c, len, p) : tf.zeros([1, 1])] as tf.Tensor2D[];
      });
      live.push(cos!, sin!, mask!);
      let x = tf.tidy(() => this.embed(Int32Array.from(ids), this.prevIdsAfter([cache], ids)));
      for (let i = 0; i < L; i++) {
        const pre = `layers.${i}.`;
        const { qk, vNew } = tf.tidy(() => this.layerQkv(x, pre, cos!, sin!));
        live.push(qk, vNew);
        const [qkData, vData] = (await Promise.all([qk.data(), vNew.data()])) as Float32Array[];
        for (let r = 0; r < c; r++) {
          cache.k[i]!.set(qkData!.subarray(r * W1 + H * hd, (r + 1) * W1), (p + r) * W);
          cache.v[i]!.set(vData!.subarray(r * W, (r + 1) * W), (p + r) * W);
        }
        const next = tf.tidy(() => {
          let o: tf.Tensor2D;
          if (c === 1) {
            const att = new Float32Array(H * hd);
            this.attendOne(qkData!, 0, cache, i, len, att, 0);
            o = tf.tensor2d(att, [1, H * hd]);
          } else {
            o = this.cacheAttention(qk, cache, i, c, len, mask!);
          }
          return this.layerTail(x, o, pre);
        });
        x.dispose();
        x = next;
      }
      live.push(x);
      const out = tf.tidy(() => this.headLogits(this.rmsNorm(tf.slice(x, [c - 1, 0], [1, this.config.dModel]), this.p1('final_norm')).y));
      live.push(out);
      const logits = (await out.data()) as Float32Array;
      cache.length = p + c;
      cache.ids.push(...ids);
      return logits;
    } finally {
      for (const t of live) t.dispose();
    }
  }

  /** stepBatch on any backend (webgpu included): each layer's new keys/values read back (awaited), as in prefillAsync. */
  async stepBatchAsync(ids: readonly number[], caches: readonly KvCache[]): Promise<Float32Array[]> {
    if (canReadSync()) return this.stepBatch(ids, caches);
    const B = ids.length;
    if (B === 0) return [];
    this.checkStepBatch(ids, caches);
    const { heads: H, kvHeads: K, vocab: V, layers: L } = this.config;
    const hd = this.headDim;
    const W1 = (H + K) * hd;
    const live: tf.Tensor[] = [];
    try {
      const cos = new Float32Array(B * W1);
      const sin = new Float32Array(B * W1);
      for (let b = 0; b < B; b++) this.fillAngles(cos, sin, b * W1, caches[b]!.length);
      const cosT = tf.tensor2d(cos, [B, W1]);
      const sinT = tf.tensor2d(sin, [B, W1]);
      live.push(cosT, sinT);
      let x = tf.tidy(() => this.embed(Int32Array.from(ids), this.prevIdsAfter(caches, null)));
      for (let i = 0; i < L; i++) {
        const pre = `layers.${i}.`;
        const { qk, vNew } = tf.tidy(() => this.layerQkv(x, pre, cosT, sinT));
        live.push(qk, vNew);
        const [qkData, vData] = (await Promise.all([qk.data(), vNew.data()])) as Float32Array[];
        const att = new Float32Array(B * H * hd);
        for (let b = 0; b < B; b++) {
          const cache = caches[b]!;
          const at = cache.length;
          cache.k[i]!.set(qkData!.subarray(b * W1 + H * hd, (b + 1) * W1), at * K * hd);
          cache.v[i]!.set(vData!.subarray(b * K * hd, (b + 1) * K * hd), at * K * hd);
          this.attendOne(qkData!, b * W1, cache, i, at + 1, att, b * H * hd);
        }
        const next = tf.tidy(() => this.layerTail(x, tf.tensor2d(att, [B, H * hd]), pre));
        x.dispose();
        x = next;
      }
      live.push(x);
      const out = tf.tidy(() => this.headLogits(this.rmsNorm(x, this.p1('final_norm')).y));
      live.push(out);
      const all = (await out.data()) as Float32Array;
      caches.forEach((c, b) => {
        c.length++;
        c.ids.push(ids[b]!);
      });
      return Array.from({ length: B }, (_, b) => all.slice(b * V, (b + 1) * V));
    } finally {
      for (const t of live) t.dispose();
    }
  }

  /**
   * One new query per row over its own cache (the new position included), every row at once:
   * each kv group's query heads' scores over the keys read in place, into one [B*H, longest]
   * matrix (a shorter cache's columns masked), one softmax for all of it (XNNPACK's vectorised
   * exp, where V8's Math.exp is far slower per element and the exps are most of this), then P V.
   * The only tensors: the scores in and the probabilities out, read in place.
   */
  private attendRows(sgemm: Sgemm, qkv: Float32Array, Wq: number, caches: readonly KvCache[], layer: number, att: Float32Array): void {
    const { heads: H, kvHeads: K } = this.config;
    const hd = this.headDim;
    const rep = H / K;
    const W = K * hd;
    const B = caches.length;
    let longest = 0;
    for (const c of caches) longest = Math.max(longest, c.length + 1);
    const scores = this.stepBufs.get('decode.scores', B * H * longest);
    for (let b = 0; b < B; b++) {
      const len = caches[b]!.length + 1;
      const keys = caches[b]!.k[layer]!;
      for (let g = 0; g < K; g++) {
        const r0 = (b * H + g * rep) * longest;
        sgemm(101, 111, 112, rep, len, hd, 1, qkv.subarray(b * Wq + g * rep * hd), hd, keys.subarray(g * hd), W, 0, scores.subarray(r0), longest);
        if (len < longest) for (let i = 0; i < rep; i++) scores.fill(MASK_NEG, r0 + i * longest + len, r0 + (i + 1) * longest);
      }
    }
    const s = tf.tensor2d(scores, [B * H, longest]);
    const p = tf.softmax(s);
    s.dispose();
    try {
      const probs = readNow(p);
      for (let b = 0; b < B; b++) {
        const len = caches[b]!.length + 1;
        const vals = caches[b]!.v[layer]!;
        for (let g = 0; g < K; g++) {
          const r0 = (b * H + g * rep) * longest;
          sgemm(101, 111, 111, rep, hd, len, 1, probs.subarray(r0), longest, vals.subarray(g * hd), W, 0, att.subarray((b * H + g * rep) * hd), hd);
        }
      }
    } finally {
      p.dispose();
    }
  }

  /**
   * stepBatch on the BLAS (wasm with trainer/model/blasMatMul.ts): the whole step in JS and
   * sgemm calls on the weights read in place from the wasm heap, no tfjs kernel (a decoding
   * step's ~60 small kernels cost more than their arithmetic). The same maths as the tensor
   * path: RMSNorm, the projections, rotate-half RoPE, attendOne, SwiGLU, the head.
   */
  private stepBatchBlas(sgemm: Sgemm, ids: readonly number[], caches: readonly KvCache[]): Float32Array[] {
    const { heads: H, kvHeads: K, vocab: V, layers: L, dModel: d, mlp } = this.config;
    const hd = this.headDim;
    const B = ids.length;
    const W1 = (H + K) * hd;
    const Wq = (H + 2 * K) * hd;
    const KW = K * hd;
    const half = hd / 2;
    const buf = (key: string, n: number): Float32Array => this.stepBufs.get(`decode.${key}`, n);
    // Weights are read in place at each use (the attention's softmax makes tensors, which may
    // move the heap under an older view).
    const x = buf('x', B * d);
    x.set(this.embedRows(Int32Array.from(ids), this.prevIdsAfter(caches, null)));
    const h = buf('h', B * d);
    const qkv = buf('qkv', B * Wq);
    const att = buf('att', B * H * hd);
    const gate = buf('gate', B * mlp);
    const up = buf('up', B * mlp);
    const cos = buf('cos', B * W1);
    const sin = buf('sin', B * W1);
    for (let b = 0; b < B; b++) this.fillAngles(cos, sin, b * W1, caches[b]!.length);
    const eps = this.normEps;
    const norm = (g: Float32Array): void => {
      for (let b = 0; b < B; b++) {
        const o = b * d;
        let ss = 0;
        for (let j = 0; j < d; j++) ss += x[o + j]! * x[o + j]!;
        const r = 1 / Math.sqrt(ss / d + eps);
        for (let j = 0; j < d; j++) h[o + j] = x[o + j]! * r * g[j]!;
      }
    };
    for (let i = 0; i < L; i++) {
      const pre = `layers.${i}.`;
      norm(readNow(this.p1(pre + 'attn_norm')));
      sgemm(101, 111, 111, B, Wq, d, 1, h, d, readNow(this.p2(pre + 'wqkv')), Wq, 0, qkv, Wq);
      if (this.config.qkvBias) {
        const bias = readNow(this.p1(pre + 'bqkv'));
        for (let b = 0; b < B; b++) for (let j = 0; j < Wq; j++) qkv[b * Wq + j] = qkv[b * Wq + j]! + bias[j]!;
      }
      for (let b = 0; b < B; b++) {
        const row = b * Wq;
        const tab = b * W1;
        // rotate-half RoPE of the q and k columns, in place: y = x cos + rot(x) sin, rot([x1, x2]) = [-x2, x1]
        for (let c0 = 0; c0 < W1; c0 += hd) {
          for (let j = 0; j < half; j++) {
            const a = row + c0 + j;
            const x1 = qkv[a]!;
            const x2 = qkv[a + half]!;
            qkv[a] = x1 * cos[tab + c0 + j]! - x2 * sin[tab + c0 + j]!;
            qkv[a + half] = x2 * cos[tab + c0 + j + half]! + x1 * sin[tab + c0 + j + half]!;
          }
        }
        const cache = caches[b]!;
        const at = cache.length;
        cache.k[i]!.set(qkv.subarray(row + H * hd, row + W1), at * KW);
        cache.v[i]!.set(qkv.subarray(row + W1, row + Wq), at * KW);
      }
      this.attendRows(sgemm, qkv, Wq, caches, i, att);
      // x += att Wo; then the MLP
      sgemm(101, 111, 111, B, d, H * hd, 1, att, H * hd, readNow(this.p2(pre + 'wo')), d, 1, x, d);
      norm(readNow(this.p1(pre + 'mlp_norm')));
      sgemm(101, 111, 111, B, mlp, d, 1, h, d, readNow(this.p2(pre + 'w_gate')), mlp, 0, gate, mlp);
      sgemm(101, 111, 111, B, mlp, d, 1, h, d, readNow(this.p2(pre + 'w_up')), mlp, 0, up, mlp);
      for (let j = 0; j < B * mlp; j++) {
        const g = gate[j]!;
        gate[j] = (g / (1 + Math.exp(-g))) * up[j]!;
      }
      sgemm(101, 111, 111, B, d, mlp, 1, gate, mlp, readNow(this.p2(pre + 'w_down')), d, 1, x, d);
    }
    norm(readNow(this.p1('final_norm')));
    const logits = buf('logits', B * V);
    // logits = h E^T (E: [vocab, d], the tied embedding or lm_head)
    sgemm(101, 111, 112, B, V, d, 1, h, d, readNow(this.p2(this.headWeight)), d, 0, logits, V);
    caches.forEach((c, b) => {
      c.length++;
      c.ids.push(ids[b]!);
    });
    return Array.from({ length: B }, (_, b) => logits.slice(b * V, (b + 1) * V));
  }

  /** Feed one token; the logits of its position. */
  step(id: number, cache: KvCache): Float32Array {
    return this.prefill([id], cache);
  }

  /**
   * One token for each of several sequences at once (e.g. GRPO's group of samples): caches
   * may hold different lengths. The projections and the MLP run batched; attention runs per
   * sequence. Returns each sequence's logits (length vocab). Same results as step() each.
   */
  stepBatch(ids: readonly number[], caches: readonly KvCache[]): Float32Array[] {
    const B = ids.length;
    if (B === 0) return [];
    this.checkStepBatch(ids, caches);
    const sgemm = activeSgemm();
    if (sgemm) return this.stepBatchBlas(sgemm, ids, caches);
    const { heads: H, kvHeads: K, vocab: V, layers: L } = this.config;
    const hd = this.headDim;
    const W1 = (H + K) * hd;
    const out = tf.tidy(() => {
      // RoPE tables, one row per sequence at its own position
      const cos = new Float32Array(B * W1);
      const sin = new Float32Array(B * W1);
      for (let b = 0; b < B; b++) this.fillAngles(cos, sin, b * W1, caches[b]!.length);
      const cosT = tf.tensor2d(cos, [B, W1]);
      const sinT = tf.tensor2d(sin, [B, W1]);
      let x = this.embed(Int32Array.from(ids), this.prevIdsAfter(caches, null));
      for (let i = 0; i < L; i++) {
        const pre = `layers.${i}.`;
        const { qk, vNew } = this.layerQkv(x, pre, cosT, sinT);
        // New keys/values into each cache, then each row's attention over its own cache.
        // In place on wasm (readNow): no tensor is made until the attention below is done.
        const qkData = readNow(qk);
        const vData = readNow(vNew);
        const att = new Float32Array(B * H * hd);
        for (let b = 0; b < B; b++) {
          const cache = caches[b]!;
          const at = cache.length;
          cache.k[i]!.set(qkData.subarray(b * W1 + H * hd, (b + 1) * W1), at * K * hd);
          cache.v[i]!.set(vData.subarray(b * K * hd, (b + 1) * K * hd), at * K * hd);
          this.attendOne(qkData, b * W1, cache, i, at + 1, att, b * H * hd);
        }
        x = this.layerTail(x, tf.tensor2d(att, [B, H * hd]), pre);
      }
      return this.headLogits(this.rmsNorm(x, this.p1('final_norm')).y);
    });
    caches.forEach((c, b) => {
      c.length++;
      c.ids.push(ids[b]!);
    });
    const all = readNow(out);
    const rows = Array.from({ length: B }, (_, b) => all.slice(b * V, (b + 1) * V));
    out.dispose();
    return rows;
  }
}
