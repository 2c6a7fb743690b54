// The "Stack" transformer: a decoder-only language model in TensorFlow.js.
//
// Architecture: token embedding tied with the output head; per layer a pre-norm RMSNorm,
// grouped-query causal self-attention with RoPE, a residual add, a pre-norm RMSNorm, a
// SwiGLU MLP, a residual add; a final RMSNorm; no biases anywhere.
//
// Conventions (the checkpoint format documents the same; see trainer/checkpoint.ts):
// - Weights are stored [in, out] (y = x @ W). Parameter names and shapes:
//     tok_embeddings            [vocab, d]        rows are tokens; the head is h @ tok_embeddings^T
//     layers.{i}.attn_norm      [d]
//     layers.{i}.wqkv           [d, (heads + 2*kvHeads) * headDim]   columns: q heads, k heads, v heads
//     layers.{i}.wo             [heads * headDim, d]
//     layers.{i}.mlp_norm       [d]
//     layers.{i}.w_gate         [d, mlp]          SwiGLU: (silu(h @ w_gate) * (h @ w_up)) @ w_down
//     layers.{i}.w_up           [d, mlp]
//     layers.{i}.w_down         [mlp, d]
//     final_norm                [d]
// - RMSNorm: x * rsqrt(mean(x^2) + 1e-5) * g.
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
// threads (trainer/parallel.ts).
//
// WebGPU reads back asynchronously only: the *Async methods (lossAndGradsAsync,
// evaluateAsync, tokenLogprobsAsync, logitsAsync, exportWeightsAsync, prefillAsync,
// stepBatchAsync) run the same code with every read deferred to one awaited flush
// (Readback), GRPO's per-token surrogate as tensor ops; where reads are synchronous they are
// the sync methods themselves, so wasm runs exactly what it ran before.
//
// Decoding: `prefill` / `step` / `stepBatch` with a KvCache (keys after RoPE, transposed).
import * as tf from '@tensorflow/tfjs-core';
import { mulberry32 } from '../core/mulberry32';
import { canReadSync, isLocalBackend } from './backend';
import { KvCache } from './kvCache';
import type { Batch, EvalResult, Grads, LossStats, PolicyGradient, PolicyStats } from './modelBatch';
import { IGNORE, ModelConfig, countParams, paramSpecs, validateConfig } from './modelConfig';

// The configuration, the batch/loss types and the decoding cache live in their own files;
// everything that imported them from here still does.
export * from './modelConfig';
export * from './modelBatch';
export { KvCache } from './kvCache';

let shortcutsOverride: boolean | null = null;
/**
 * Tests: force (true) or forbid (false) the JS shortcuts (embedding/row gathers and the
 * loss in JS) regardless of the backend; null restores the default (on for wasm and cpu).
 */
export function setJsShortcuts(on: boolean | null): void {
  shortcutsOverride = on;
}
function useJs(): boolean {
  return shortcutsOverride ?? isLocalBackend();
}

const NORM_EPS = 1e-5;

/**
 * A float32 one-hot matrix. tfjs-backend-wasm 4.22's OneHot kernel writes int32 bits whatever
 * dtype is asked (a float32 tensor holding 1 reads as 1.4e-45), so build it as int32 and cast.
 */
function floatOneHot(indices: tf.Tensor1D, depth: number): tf.Tensor2D {
  return tf.cast(tf.oneHot(indices, depth), 'float32') as tf.Tensor2D;
}
const MASK_NEG = -1e9;

type Readable = Float32Array | Int32Array | Uint8Array;

/**
 * Reads of tensors made inside a tidy. Synchronous (`dataSync`, at once) where the backend
 * reads synchronously; otherwise (webgpu: tfjs's readSync there needs OffscreenCanvas) the
 * tensor is kept and read by `flush()` after the tidy, all reads at once.
 */
class Readback {
  private pending: { t: tf.Tensor; use: (d: Readable) => void }[] = [];
  constructor(readonly sync: boolean) {}
  read(t: tf.Tensor, use: (d: Readable) => void): void {
    if (this.sync) use(t.dataSync() as Readable);
    else this.pending.push({ t: tf.keep(t), use });
  }
  async flush(): Promise<void> {
    const todo = this.pending;
    this.pending = [];
    try {
      const data = await Promise.all(todo.map((p) => p.t.data() as Promise<Readable>));
      todo.forEach((p, i) => p.use(data[i]!));
    } finally {
      for (const p of todo) p.t.dispose();
    }
  }
}

/** Statistics a loss head fills in (at once, or when its Readback is flushed). */
type HeadStats = { ceSum: number; lossSum: number; correct: number; pg?: PolicyStats };

/** Deterministic PRNG (mulberry32) and a normal sampler, so init is the same on every backend. */
export function makeRng(seed: number): { uniform: () => number; normal: () => number } {
  const uniform = mulberry32(seed);
  let spare: number | null = null;
  const normal = (): number => {
    if (spare !== null) {
      const s = spare;
      spare = null;
      return s;
    }
    let u = 0;
    while (u === 0) u = uniform();
    const v = uniform();
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  };
  return { uniform, normal };
}

/**
 * A key/value cache for incremental decoding of one sequence. Holds, per layer, the keys
 * (after RoPE) transposed, [kvHeads*headDim, length], and the values, [length,
 * kvHeads*headDim]. `clone()` copies it (e.g. to branch several samples from one prompt).
 */

interface NormSave {
  xhat: tf.Tensor2D;
  r: tf.Tensor2D;
}

/** Per row of the batch: what the attention backward needs. */
interface RowSave {
  /** [(H+K)*hd, T]: q and k after RoPE, transposed (query rows scaled by 1/sqrt(hd)). */
  qkT: tf.Tensor2D;
  /** [K*hd, T]: values, transposed. */
  vT: tf.Tensor2D;
  /** Per kv group and query block [b0, b1): the group's query heads stacked, [rep*(b1-b0), hd] (head-major rows). */
  q: tf.Tensor2D[][];
  /** Per kv group and query block: attention probabilities, [rep*(b1-b0), b1]. */
  probs: tf.Tensor2D[][];
  /** Per kv group and query block: the attention output, [rep*(b1-b0), hd] (for rowsum(dP*P) = rowsum(dO*O)). */
  outs: tf.Tensor2D[][];
}

interface LayerSave {
  n1: NormSave;
  h1: tf.Tensor2D;
  rows: RowSave[];
  o: tf.Tensor2D;
  n2: NormSave;
  h2: tf.Tensor2D;
  sig: tf.Tensor2D;
  silu: tf.Tensor2D;
  up: tf.Tensor2D;
  act: tf.Tensor2D;
}

interface RopeTables {
  /** [(H+K)*hd, T]: cos per (head row, position), query rows scaled by 1/sqrt(hd). */
  cosT: tf.Tensor2D;
  /** The same for sin, with the rotate-half sign folded in (-1 on each head's first half). */
  sinT: tf.Tensor2D;
  /** Query blocks [start, end) of the causal attention (keys 0..end-1 for block [start, end)). */
  blocks: [number, number][];
  /** Per block, [rep*(end-start), end]: the additive causal mask of a kv group's stacked query heads. */
  masks: tf.Tensor2D[];
}

/** Which positions of a batch are computed and which are loss targets. */
interface Prepared {
  rows: number;
  T: number;
  ids: Int32Array; // rows*T
  /** Flat positions (in rows*T) with a label, in order. */
  supIdx: Int32Array;
  supLabels: Int32Array;
  supW: Float32Array;
  weightSum: number;
  /** Policy-gradient inputs gathered at supIdx (pg batches only). */
  supPg: { adv: Float32Array; old: Float32Array | null; ref: Float32Array } | null;
}

export class StackModel {
  readonly config: ModelConfig;
  readonly headDim: number;
  private params = new Map<string, tf.Tensor>();
  private transposed = new Map<string, tf.Tensor2D>();
  private ropeCache = new Map<string, RopeTables>();
  private rot: tf.Tensor2D;
  private rotT: tf.Tensor2D;
  private invFreq: Float64Array;
  /** Bumped whenever the weights change. */
  version = 0;
  /**
   * Query blocks of the causal attention (training and evaluate): block j of T/n positions
   * only meets keys up to its end, so n blocks do (n+1)/(2n) of the score work. null: 1.
   * Measured on wasm at T ~420: 3 blocks save ~2 ms of matMul per row and layer pair but
   * XNNPACK repacks each block's keys and the extra column slices cost ~9 ms, so 1 wins
   * there; on a backend with cheap slices and batched matMuls more blocks may pay.
   */
  attnBlocks: number | null = null;

  private constructor(cfg: ModelConfig) {
    validateConfig(cfg);
    this.config = { ...cfg };
    this.headDim = cfg.dModel / cfg.heads;
    const hd = this.headDim;
    const h2 = hd / 2;
    this.invFreq = new Float64Array(h2);
    for (let i = 0; i < h2; i++) this.invFreq[i] = Math.pow(cfg.ropeBase, (-2 * i) / hd);
    // rot(x) = x @ R with rot([x1, x2]) = [-x2, x1].
    const r = new Float32Array(hd * hd);
    for (let j = 0; j < h2; j++) {
      r[(j + h2) * hd + j] = -1;
      r[j * hd + (j + h2)] = 1;
    }
    this.rot = tf.keep(tf.tensor2d(r, [hd, hd]));
    this.rotT = tf.keep(tf.transpose(this.rot));
  }

  /** A freshly initialised model: N(0, 0.02) weights (residual outputs scaled by 1/sqrt(2*layers)), unit norms. */
  static create(cfg: ModelConfig, seed: number): StackModel {
    const m = new StackModel(cfg);
    const rng = makeRng(seed);
    const weights: Record<string, Float32Array> = {};
    const residualStd = 0.02 / Math.sqrt(2 * cfg.layers);
    for (const spec of paramSpecs(cfg)) {
      const n = spec.shape.reduce((a, b) => a * b, 1);
      const data = new Float32Array(n);
      if (spec.shape.length === 1) data.fill(1);
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

  paramCount(): number {
    return countParams(this.config);
  }

  paramSpecs(): { name: string; shape: number[] }[] {
    return paramSpecs(this.config);
  }

  /** The weight tensors by name (owned by the model: do not dispose). */
  weights(): ReadonlyMap<string, tf.Tensor> {
    return this.params;
  }

  /**
   * Replace weights. Accepts Float32Arrays (copied) or tensors (the model takes ownership).
   * Every name must be a parameter; names not given keep their value. Shapes are checked.
   */
  setWeights(weights: Record<string, Float32Array | tf.Tensor> | Map<string, Float32Array | tf.Tensor>): void {
    const specs = new Map(paramSpecs(this.config).map((s) => [s.name, s.shape]));
    const entries = weights instanceof Map ? [...weights.entries()] : Object.entries(weights);
    for (const [name, value] of entries) {
      const shape = specs.get(name);
      if (!shape) throw new Error(`setWeights: unknown parameter '${name}'`);
      const n = shape.reduce((a, b) => a * b, 1);
      let t: tf.Tensor;
      if (value instanceof tf.Tensor) {
        if (value.size !== n) throw new Error(`setWeights: ${name} has ${value.size} values, expected ${n}`);
        t = value.shape.join() === shape.join() ? value : tf.reshape(value, shape);
        if (t !== value) value.dispose();
      } else {
        if (value.length !== n) throw new Error(`setWeights: ${name} has ${value.length} values, expected ${n}`);
        t = tf.tensor(value.slice(), shape, 'float32'); // a copy: the cpu backend would alias the array
      }
      tf.keep(t);
      this.params.get(name)?.dispose();
      this.params.set(name, t);
    }
    for (const s of specs.keys()) if (!this.params.has(s)) throw new Error(`setWeights: parameter '${s}' missing`);
    for (const t of this.transposed.values()) t.dispose();
    this.transposed.clear();
    this.embData = null;
    this.version++;
  }

  /** A copy of every weight as Float32Arrays, by name (canonical order). */
  exportWeights(): Record<string, Float32Array> {
    const out: Record<string, Float32Array> = {};
    for (const s of paramSpecs(this.config)) out[s.name] = new Float32Array(this.params.get(s.name)!.dataSync() as Float32Array);
    return out;
  }

  /** exportWeights on any backend (webgpu included), read back asynchronously. */
  async exportWeightsAsync(): Promise<Record<string, Float32Array>> {
    if (canReadSync()) return this.exportWeights();
    const specs = paramSpecs(this.config);
    const data = await Promise.all(specs.map((s) => this.params.get(s.name)!.data() as Promise<Float32Array>));
    const out: Record<string, Float32Array> = {};
    specs.forEach((s, i) => (out[s.name] = new Float32Array(data[i]!)));
    return out;
  }

  dispose(): void {
    for (const t of this.params.values()) t.dispose();
    for (const t of this.transposed.values()) t.dispose();
    for (const r of this.ropeCache.values()) {
      r.cosT.dispose();
      r.sinT.dispose();
      for (const m of r.masks) m.dispose();
    }
    this.params.clear();
    this.transposed.clear();
    this.ropeCache.clear();
    this.rot.dispose();
    this.rotT.dispose();
  }

  // ---- helpers ------------------------------------------------------------------------

  private p2(name: string): tf.Tensor2D {
    return this.params.get(name) as tf.Tensor2D;
  }
  private p1(name: string): tf.Tensor1D {
    return this.params.get(name) as tf.Tensor1D;
  }
  /** The transpose of a weight, cached until the weights change. */
  private pT(name: string): tf.Tensor2D {
    let t = this.transposed.get(name);
    if (!t) {
      const w = this.p2(name);
      t = tf.keep(tf.tidy(() => tf.transpose(w)));
      this.transposed.set(name, t);
    }
    return t;
  }

  /** cos/sin of one position's rotary angles, one row of (heads + kvHeads) * hd, q rows scaled by 1/sqrt(hd). */
  private fillAngles(cos: Float32Array, sin: Float32Array, base: number, position: number): void {
    const { heads, kvHeads } = this.config;
    const hd = this.headDim;
    const h2 = hd / 2;
    const scale = 1 / Math.sqrt(hd);
    for (let j = 0; j < hd; j++) {
      const a = position * this.invFreq[j % h2]!;
      const c = Math.cos(a);
      const s = Math.sin(a);
      for (let h = 0; h < heads + kvHeads; h++) {
        const k = h < heads ? scale : 1;
        cos[base + h * hd + j] = c * k;
        sin[base + h * hd + j] = s * k;
      }
    }
  }

  private angleTables(positions: number, offset: number, rows: number): { cos: tf.Tensor2D; sin: tf.Tensor2D } {
    const { heads, kvHeads } = this.config;
    const hd = this.headDim;
    const width = (heads + kvHeads) * hd;
    const cos = new Float32Array(rows * positions * width);
    const sin = new Float32Array(rows * positions * width);
    for (let t = 0; t < positions; t++) this.fillAngles(cos, sin, t * width, offset + t);
    for (let r = 1; r < rows; r++) {
      cos.copyWithin(r * positions * width, 0, positions * width);
      sin.copyWithin(r * positions * width, 0, positions * width);
    }
    return { cos: tf.tensor2d(cos, [rows * positions, width]), sin: tf.tensor2d(sin, [rows * positions, width]) };
  }

  private causalMask(q: number, k: number, offset: number): tf.Tensor2D {
    const m = new Float32Array(q * k);
    for (let i = 0; i < q; i++) for (let j = offset + i + 1; j < k; j++) m[i * k + j] = MASK_NEG;
    return tf.tensor2d(m, [q, k]);
  }

  /** Transposed RoPE tables and the causal masks for sequences of T positions (cached). */
  private tables(T: number): RopeTables {
    const nb = Math.max(1, Math.min(T, this.attnBlocks ?? 1));
    const key = `${T}/${nb}`;
    let r = this.ropeCache.get(key);
    if (r) {
      this.ropeCache.delete(key);
      this.ropeCache.set(key, r); // LRU order
      return r;
    }
    const { heads: H, kvHeads: K } = this.config;
    const hd = this.headDim;
    const h2 = hd / 2;
    const rep = H / K;
    const scale = 1 / Math.sqrt(hd);
    const W1 = (H + K) * hd;
    const cos = new Float32Array(W1 * T);
    const sin = new Float32Array(W1 * T);
    for (let h = 0; h < H + K; h++) {
      const k = h < H ? scale : 1;
      for (let j = 0; j < hd; j++) {
        const row = (h * hd + j) * T;
        const sign = j < h2 ? -1 : 1;
        const f = this.invFreq[j % h2]!;
        for (let t = 0; t < T; t++) {
          cos[row + t] = Math.cos(t * f) * k;
          sin[row + t] = Math.sin(t * f) * k * sign;
        }
      }
    }
    const size = Math.ceil(T / nb);
    const blocks: [number, number][] = [];
    for (let s0 = 0; s0 < T; s0 += size) blocks.push([s0, Math.min(T, s0 + size)]);
    const masks = blocks.map(([b0, b1]) => {
      const n = b1 - b0;
      const m = new Float32Array(rep * n * b1);
      for (let h = 0; h < rep; h++) for (let i = 0; i < n; i++) m.fill(MASK_NEG, (h * n + i) * b1 + b0 + i + 1, (h * n + i + 1) * b1);
      return tf.keep(tf.tensor2d(m, [rep * n, b1]));
    });
    r = { cosT: tf.keep(tf.tensor2d(cos, [W1, T])), sinT: tf.keep(tf.tensor2d(sin, [W1, T])), blocks, masks };
    this.ropeCache.set(key, r);
    while (this.ropeCache.size > 8) {
      const [oldKey, old] = this.ropeCache.entries().next().value as [string, RopeTables];
      old.cosT.dispose();
      old.sinT.dispose();
      for (const m of old.masks) m.dispose();
      this.ropeCache.delete(oldKey);
    }
    return r;
  }

  /**
   * Per head (blocks of hd rows), swap the two halves of the rows: [a; b] -> [b; a]. With the
   * sign folded into the sin table this is rotate-half in the transposed layout; it is its
   * own transpose, so the backward uses it too. Only contiguous copies.
   */
  private swapHalves(x: tf.Tensor2D): tf.Tensor2D {
    const [rows, T] = x.shape;
    const nh = rows / this.headDim;
    const L = (this.headDim / 2) * T;
    const x3 = tf.reshape(x, [nh, 2, L]);
    const swapped = tf.concat([tf.slice(x3, [0, 1, 0], [nh, 1, L]), tf.slice(x3, [0, 0, 0], [nh, 1, L])], 1);
    return tf.reshape(swapped, [rows, T]);
  }

  /** [rep*hd, T] (head-major rows) <-> [rep*T, hd] (head-major rows). */
  private headsToRows(xT: tf.Tensor2D, rep: number): tf.Tensor2D {
    const T = xT.shape[1];
    const hd = this.headDim;
    return tf.reshape(tf.transpose(tf.reshape(xT, [rep, hd, T]), [0, 2, 1]), [rep * T, hd]);
  }
  private rowsToHeads(x: tf.Tensor2D, rep: number): tf.Tensor2D {
    const hd = this.headDim;
    const T = x.shape[0] / rep;
    return tf.reshape(tf.transpose(tf.reshape(x, [rep, T, hd]), [0, 2, 1]), [rep * hd, T]);
  }

  private rmsNorm(x: tf.Tensor2D, g: tf.Tensor1D): { y: tf.Tensor2D; save: NormSave } {
    const r = tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), NORM_EPS)) as tf.Tensor2D;
    const xhat = tf.mul(x, r) as tf.Tensor2D;
    return { y: tf.mul(xhat, g) as tf.Tensor2D, save: { xhat, r } };
  }

  /** Backward of rmsNorm: returns dx and dg. */
  private rmsNormBack(dy: tf.Tensor2D, g: tf.Tensor1D, s: NormSave): { dx: tf.Tensor2D; dg: tf.Tensor1D } {
    const dg = tf.sum(tf.mul(dy, s.xhat), 0) as tf.Tensor1D;
    const dxhat = tf.mul(dy, g);
    const m = tf.mean(tf.mul(dxhat, s.xhat), -1, true);
    const dx = tf.mul(tf.sub(dxhat, tf.mul(s.xhat, m)), s.r) as tf.Tensor2D;
    return { dx, dg };
  }

  /** x @ R per head: rotate-half over [N, nHeads*hd]. */
  private rotate(x: tf.Tensor2D, r: tf.Tensor2D): tf.Tensor2D {
    const [n, w] = x.shape;
    const hd = this.headDim;
    return tf.reshape(tf.matMul(tf.reshape(x, [(n * w) / hd, hd]), r), [n, w]);
  }

  private prepare(b: Batch, trim: boolean): Prepared {
    const { batch: rows, seq } = b;
    if (!(rows >= 1 && seq >= 1)) throw new Error('batch: batch and seq must be >= 1');
    if (b.inputIds.length !== rows * seq || b.labels.length !== rows * seq) {
      throw new Error(`batch: inputIds/labels must have batch*seq = ${rows * seq} entries`);
    }
    if (b.weights && b.weights.length !== rows * seq) throw new Error('batch: weights must have batch*seq entries');
    // Positions after the last labelled one of every row cannot change the loss.
    let T = seq;
    if (trim) {
      T = 1;
      for (let r = 0; r < rows; r++) {
        for (let t = seq - 1; t >= T; t--) {
          if (b.labels[r * seq + t] !== IGNORE) {
            T = t + 1;
            break;
          }
        }
      }
    }
    if (T > this.config.maxSeq) throw new Error(`batch: sequence length ${T} exceeds the model's context ${this.config.maxSeq}`);
    const V = this.config.vocab;
    const ids = new Int32Array(rows * T);
    const sup: number[] = [];
    for (let r = 0; r < rows; r++) {
      for (let t = 0; t < T; t++) {
        const id = b.inputIds[r * seq + t]!;
        if (!(id >= 0 && id < V)) throw new Error(`batch: token id ${id} out of range [0, ${V})`);
        ids[r * T + t] = id;
        const lab = b.labels[r * seq + t]!;
        if (lab !== IGNORE) {
          if (!(lab >= 0 && lab < V)) throw new Error(`batch: label ${lab} out of range [0, ${V})`);
          sup.push(r * seq + t, r * T + t);
        }
      }
    }
    const n = sup.length / 2;
    const supIdx = new Int32Array(n);
    const supLabels = new Int32Array(n);
    const supW = new Float32Array(n);
    const pg = b.pg;
    if (pg) {
      if (b.weights) throw new Error('batch: a policy-gradient batch takes no weights (its loss is a token mean)');
      for (const [name, arr] of [['advantages', pg.advantages], ['refLogp', pg.refLogp], ['oldLogp', pg.oldLogp]] as const) {
        if (arr && arr.length !== rows * seq) throw new Error(`batch: pg.${name} must have batch*seq entries`);
      }
    }
    const supPg = pg ? { adv: new Float32Array(n), old: pg.oldLogp ? new Float32Array(n) : null, ref: new Float32Array(n) } : null;
    let weightSum = 0;
    for (let i = 0; i < n; i++) {
      const src = sup[2 * i]!;
      supIdx[i] = sup[2 * i + 1]!;
      supLabels[i] = b.labels[src]!;
      const w = b.weights ? b.weights[src]! : 1;
      if (!(w >= 0) || !Number.isFinite(w)) throw new Error(`batch: weight ${w} must be finite and >= 0`);
      supW[i] = w;
      weightSum += w;
      if (supPg) {
        supPg.adv[i] = pg!.advantages[src]!;
        supPg.ref[i] = pg!.refLogp[src]!;
        if (supPg.old) supPg.old[i] = pg!.oldLogp![src]!;
      }
    }
    return { rows, T, ids, supIdx, supLabels, supW, weightSum, supPg };
  }

  /** The embedding matrix read back to JS, once per weights version (decoding reads it per token). */
  private embData: { version: number; data: Float32Array } | null = null;

  /** Embedding rows for ids: [ids.length, d]. */
  private embed(ids: Int32Array): tf.Tensor2D {
    const E = this.p2('tok_embeddings');
    const d = this.config.dModel;
    if (useJs()) {
      if (!this.embData || this.embData.version !== this.version) this.embData = { version: this.version, data: E.dataSync() as Float32Array };
      const e = this.embData.data;
      const out = new Float32Array(ids.length * d);
      for (let i = 0; i < ids.length; i++) out.set(e.subarray(ids[i]! * d, ids[i]! * d + d), i * d);
      return tf.tensor2d(out, [ids.length, d]);
    }
    return tf.gather(E, tf.tensor1d(ids, 'int32')) as tf.Tensor2D;
  }

  /** Rows `idx` of x: [idx.length, cols]. */
  private gatherRows(x: tf.Tensor2D, idx: Int32Array): tf.Tensor2D {
    const cols = x.shape[1];
    if (useJs()) {
      const src = x.dataSync() as Float32Array;
      const out = new Float32Array(idx.length * cols);
      for (let i = 0; i < idx.length; i++) out.set(src.subarray(idx[i]! * cols, idx[i]! * cols + cols), i * cols);
      return tf.tensor2d(out, [idx.length, cols]);
    }
    return tf.gather(x, tf.tensor1d(idx, 'int32')) as tf.Tensor2D;
  }

  /** Rows of x placed at `idx` of an all-zero [n, cols]. */
  private scatterRows(x: tf.Tensor2D, idx: Int32Array, n: number): tf.Tensor2D {
    const cols = x.shape[1];
    if (useJs()) {
      const src = x.dataSync() as Float32Array;
      const out = new Float32Array(n * cols);
      for (let i = 0; i < idx.length; i++) out.set(src.subarray(i * cols, i * cols + cols), idx[i]! * cols);
      return tf.tensor2d(out, [n, cols]);
    }
    return tf.scatterND(tf.tensor2d(idx, [idx.length, 1], 'int32'), x, [n, cols]) as tf.Tensor2D;
  }

  // ---- the forward pass ---------------------------------------------------------------

  /**
   * One block over rows*T positions; saves what the backward needs when `save` is given.
   * Attention runs per row and kv group in a transposed layout where every slice and concat
   * is a contiguous copy: the group's query heads are stacked into one [rep*T, hd] operand,
   * so one matMul, one mask add and one softmax serve `rep` heads.
   */
  private block(i: number, x: tf.Tensor2D, rows: number, T: number, tb: RopeTables, save: LayerSave[] | null): tf.Tensor2D {
    const { heads: H, kvHeads: K } = this.config;
    const hd = this.headDim;
    const rep = H / K;
    const W1 = (H + K) * hd;
    const pre = `layers.${i}.`;
    const n1 = this.rmsNorm(x, this.p1(pre + 'attn_norm'));
    const h1 = n1.y;
    const qkv = tf.matMul(h1, this.p2(pre + 'wqkv')) as tf.Tensor2D;
    const rowSaves: RowSave[] = [];
    const rowOuts: tf.Tensor2D[] = [];
    for (let r = 0; r < rows; r++) {
      const qkvR = rows === 1 ? qkv : tf.slice(qkv, [r * T, 0], [T, qkv.shape[1]]);
      const qkvT = tf.transpose(qkvR);
      const qkRawT = tf.slice(qkvT, [0, 0], [W1, T]);
      const vT = tf.slice(qkvT, [W1, 0], [K * hd, T]);
      const qkT = tf.add(tf.mul(qkRawT, tb.cosT), tf.mul(this.swapHalves(qkRawT), tb.sinT)) as tf.Tensor2D;
      const qs: tf.Tensor2D[][] = [];
      const outs: tf.Tensor2D[][] = [];
      const probs: tf.Tensor2D[][] = [];
      const outsT: tf.Tensor2D[] = [];
      const nb = tb.blocks.length;
      for (let g = 0; g < K; g++) {
        const qT = tf.slice(qkT, [g * rep * hd, 0], [rep * hd, T]);
        const kT = tf.slice(qkT, [(H + g) * hd, 0], [hd, T]);
        const v = tf.transpose(tf.slice(vT, [g * hd, 0], [hd, T])) as tf.Tensor2D;
        const gq: tf.Tensor2D[] = [];
        const gp: tf.Tensor2D[] = [];
        const go: tf.Tensor2D[] = [];
        const gout: tf.Tensor2D[] = [];
        // Causal attention by query blocks: block [b0, b1) only meets keys 0..b1-1.
        tb.blocks.forEach(([b0, b1], j) => {
          const q = this.headsToRows(nb === 1 ? qT : tf.slice(qT, [0, b0], [rep * hd, b1 - b0]), rep);
          const kTj = b1 === T ? kT : tf.slice(kT, [0, 0], [hd, b1]);
          const p = tf.softmax(tf.add(tf.matMul(q, kTj), tb.masks[j]!)) as tf.Tensor2D;
          const vj = b1 === T ? v : tf.slice(v, [0, 0], [b1, hd]);
          const o = tf.matMul(p, vj) as tf.Tensor2D;
          gout.push(this.rowsToHeads(o, rep));
          gq.push(q);
          gp.push(p);
          go.push(o);
        });
        outsT.push(nb === 1 ? gout[0]! : tf.concat(gout, 1));
        qs.push(gq);
        probs.push(gp);
        outs.push(go);
      }
      rowOuts.push(tf.transpose(K === 1 ? outsT[0]! : tf.concat(outsT, 0)));
      rowSaves.push({ qkT, vT, q: qs, probs, outs });
    }
    const o = rows === 1 ? rowOuts[0]! : tf.concat(rowOuts, 0);
    const x1 = tf.add(x, tf.matMul(o, this.p2(pre + 'wo'))) as tf.Tensor2D;
    const n2 = this.rmsNorm(x1, this.p1(pre + 'mlp_norm'));
    const h2 = n2.y;
    const gate = tf.matMul(h2, this.p2(pre + 'w_gate')) as tf.Tensor2D;
    const up = tf.matMul(h2, this.p2(pre + 'w_up')) as tf.Tensor2D;
    const sig = tf.sigmoid(gate) as tf.Tensor2D;
    const silu = tf.mul(gate, sig) as tf.Tensor2D;
    const act = tf.mul(silu, up) as tf.Tensor2D;
    const x2 = tf.add(x1, tf.matMul(act, this.p2(pre + 'w_down'))) as tf.Tensor2D;
    if (save) save.push({ n1: n1.save, h1, rows: rowSaves, o, n2: n2.save, h2, sig, silu, up, act });
    return x2;
  }

  /**
   * dW = x^T dy. XNNPACK repacks a matMul's right operand whenever it is a new tensor (cost
   * ~K*N), so the narrower of x and dy is made the right operand: dW = (dy^T x)^T when x has
   * fewer columns. `dyT`, when the caller has it, saves a transpose.
   */
  private weightGrad(x: tf.Tensor2D, dy: tf.Tensor2D, dyT?: tf.Tensor2D): tf.Tensor2D {
    if (x.shape[1] <= dy.shape[1]) return tf.transpose(tf.matMul(dyT ?? tf.transpose(dy), x)) as tf.Tensor2D;
    return tf.matMul(tf.transpose(x), dy) as tf.Tensor2D;
  }

  /** Backward of one block: dx2 -> dx, putting weight gradients into `grads`. */
  private blockBack(i: number, dx2: tf.Tensor2D, rows: number, T: number, tb: RopeTables, s: LayerSave, grads: Grads): tf.Tensor2D {
    const { heads: H, kvHeads: K } = this.config;
    const hd = this.headDim;
    const rep = H / K;
    const pre = `layers.${i}.`;
    // MLP
    const dact = tf.matMul(dx2, this.pT(pre + 'w_down'));
    grads.set(pre + 'w_down', this.weightGrad(s.act, dx2));
    const dup = tf.mul(dact, s.silu) as tf.Tensor2D;
    // silu'(g) = sig + silu * (1 - sig)
    const dgate = tf.mul(tf.mul(dact, s.up), tf.add(s.sig, tf.mul(s.silu, tf.sub(1, s.sig)))) as tf.Tensor2D;
    grads.set(pre + 'w_gate', this.weightGrad(s.h2, dgate));
    grads.set(pre + 'w_up', this.weightGrad(s.h2, dup)); // same right operand: XNNPACK's packing is reused
    const dh2 = tf.add(tf.matMul(dgate, this.pT(pre + 'w_gate')), tf.matMul(dup, this.pT(pre + 'w_up'))) as tf.Tensor2D;
    const nb2 = this.rmsNormBack(dh2, this.p1(pre + 'mlp_norm'), s.n2);
    grads.set(pre + 'mlp_norm', nb2.dg);
    const dx1 = tf.add(dx2, nb2.dx) as tf.Tensor2D;
    // attention
    const dO = tf.matMul(dx1, this.pT(pre + 'wo')) as tf.Tensor2D;
    grads.set(pre + 'wo', this.weightGrad(s.o, dx1));
    const dqkvTRows: tf.Tensor2D[] = [];
    for (let r = 0; r < rows; r++) {
      const rs = s.rows[r]!;
      const dOT = tf.transpose(rows === 1 ? dO : tf.slice(dO, [r * T, 0], [T, dO.shape[1]]));
      const dQT: tf.Tensor2D[] = [];
      const dKT: tf.Tensor2D[] = [];
      const dVT: tf.Tensor2D[] = [];
      const nb = tb.blocks.length;
      for (let g = 0; g < K; g++) {
        const dOTg = tf.slice(dOT, [g * rep * hd, 0], [rep * hd, T]);
        const vTg = tf.slice(rs.vT, [g * hd, 0], [hd, T]);
        const k = tf.transpose(tf.slice(rs.qkT, [(H + g) * hd, 0], [hd, T])) as tf.Tensor2D;
        const dQTs: tf.Tensor2D[] = [];
        let dK: tf.Tensor2D | null = null;
        let dV: tf.Tensor2D | null = null;
        tb.blocks.forEach(([b0, b1], j) => {
          const p = rs.probs[g]![j]!;
          const q = rs.q[g]![j]!;
          const dOg = this.headsToRows(nb === 1 ? dOTg : tf.slice(dOTg, [0, b0], [rep * hd, b1 - b0]), rep);
          const dP = tf.matMul(dOg, b1 === T ? vTg : tf.slice(vTg, [0, 0], [hd, b1]));
          // softmax backward: dS = p * (dP - rowsum(dP * p)), and rowsum(dP * p) = rowsum(dO * o)
          // (a [rows, hd] product instead of a [rows, keys] one)
          const dS = tf.mul(p, tf.sub(dP, tf.sum(tf.mul(dOg, rs.outs[g]![j]!), -1, true))) as tf.Tensor2D;
          dQTs.push(this.rowsToHeads(tf.matMul(dS, b1 === T ? k : tf.slice(k, [0, 0], [b1, hd])) as tf.Tensor2D, rep));
          // dK = dS^T q and dV = p^T dO: explicit transposes keep the right operands narrow
          const pad = (x: tf.Tensor2D): tf.Tensor2D => (b1 === T ? x : (tf.concat([x, tf.zeros([T - b1, hd])], 0) as tf.Tensor2D));
          const dKj = pad(tf.matMul(tf.transpose(dS), q) as tf.Tensor2D);
          const dVj = pad(tf.matMul(tf.transpose(p), dOg) as tf.Tensor2D);
          dK = dK ? (tf.add(dK, dKj) as tf.Tensor2D) : dKj;
          dV = dV ? (tf.add(dV, dVj) as tf.Tensor2D) : dVj;
        });
        dQT.push(nb === 1 ? dQTs[0]! : (tf.concat(dQTs, 1) as tf.Tensor2D));
        dKT.push(tf.transpose(dK!) as tf.Tensor2D);
        dVT.push(tf.transpose(dV!) as tf.Tensor2D);
      }
      const dqkT = tf.concat([...dQT, ...dKT], 0) as tf.Tensor2D;
      const dqkRawT = tf.add(tf.mul(dqkT, tb.cosT), this.swapHalves(tf.mul(dqkT, tb.sinT) as tf.Tensor2D));
      dqkvTRows.push(tf.concat([dqkRawT, ...dVT], 0) as tf.Tensor2D);
    }
    const dqkv = rows === 1 ? (tf.transpose(dqkvTRows[0]!) as tf.Tensor2D) : (tf.concat(dqkvTRows.map((t) => tf.transpose(t)), 0) as tf.Tensor2D);
    grads.set(pre + 'wqkv', this.weightGrad(s.h1, dqkv, rows === 1 ? dqkvTRows[0]! : undefined));
    const dh1 = tf.matMul(dqkv, this.pT(pre + 'wqkv')) as tf.Tensor2D;
    const nb1 = this.rmsNormBack(dh1, this.p1(pre + 'attn_norm'), s.n1);
    grads.set(pre + 'attn_norm', nb1.dg);
    return tf.add(dx1, nb1.dx) as tf.Tensor2D;
  }

  /** Softmax cross-entropy of logits [S, V] against labels: stats, dlogits (normalised by weightSum). */
  private crossEntropy(
    logits: tf.Tensor2D,
    labels: Int32Array,
    w: Float32Array,
    weightSum: number,
    wantGrad: boolean,
    reads: Readback,
    into: HeadStats,
  ): tf.Tensor2D | null {
    const [S, V] = logits.shape;
    if (useJs()) {
      const probs = tf.softmax(logits);
      const p = probs.dataSync() as Float32Array;
      let ceSum = 0;
      let lossSum = 0;
      let correct = 0;
      let logitData: Float32Array | null = null;
      const grad = wantGrad ? new Float32Array(p) : null;
      for (let i = 0; i < S; i++) {
        const base = i * V;
        const y = labels[i]!;
        let best = 0;
        let bestV = p[base]!;
        for (let j = 1; j < V; j++) {
          const pv = p[base + j]!;
          if (pv > bestV) {
            bestV = pv;
            best = j;
          }
        }
        if (best === y) correct++;
        let ce: number;
        const py = p[base + y]!;
        if (py > 1e-30) ce = -Math.log(py);
        else {
          // Underflow: recompute log-softmax for this row from the logits.
          logitData ??= logits.dataSync() as Float32Array;
          let mx = -Infinity;
          for (let j = 0; j < V; j++) mx = Math.max(mx, logitData[base + j]!);
          let z = 0;
          for (let j = 0; j < V; j++) z += Math.exp(logitData[base + j]! - mx);
          ce = mx + Math.log(z) - logitData[base + y]!;
        }
        ceSum += ce;
        lossSum += w[i]! * ce;
        if (grad) {
          const k = weightSum > 0 ? w[i]! / weightSum : 0;
          grad[base + y]! -= 1;
          for (let j = 0; j < V; j++) grad[base + j]! *= k;
        }
      }
      probs.dispose();
      into.ceSum = ceSum;
      into.lossSum = lossSum;
      into.correct = correct;
      return grad ? tf.tensor2d(grad, [S, V]) : null;
    }
    // The gradient tensor is the tidy's result, so it belongs to the caller's scope.
    const dlogits = tf.tidy(() => {
      const lab = tf.tensor1d(labels, 'int32');
      const onehot = floatOneHot(lab, V);
      const logp = tf.logSoftmax(logits);
      const ce = tf.neg(tf.sum(tf.mul(logp, onehot), 1));
      const wt = tf.tensor1d(w);
      reads.read(tf.sum(ce), (d) => (into.ceSum = d[0]!));
      reads.read(tf.sum(tf.mul(ce, wt)), (d) => (into.lossSum = d[0]!));
      reads.read(tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), lab), 'int32')), (d) => (into.correct = d[0]!));
      if (!wantGrad) return tf.zeros([0]);
      const k = weightSum > 0 ? tf.div(wt, weightSum) : tf.zerosLike(wt);
      return tf.mul(tf.sub(tf.exp(logp), onehot), tf.reshape(k, [S, 1])) as tf.Tensor2D;
    });
    if (wantGrad) return dlogits as tf.Tensor2D;
    dlogits.dispose();
    return null;
  }

  /**
   * GRPO's head: per labelled position the clipped surrogate and the k3 KL, their token mean
   * over the batch's weightSum (the count of labelled positions), and its gradient w.r.t. the
   * logits. d(loss)/d(logits) = -(dl/dlogp) * (softmax - onehot), so the CE form below with
   * k = -(dl/dlogp) / W serves both (dl/dlogp = -A*r on unclipped tokens + beta*(1 - e^(ref-new))).
   */
  private policyGradient(
    logits: tf.Tensor2D,
    labels: Int32Array,
    inputs: NonNullable<Prepared['supPg']>,
    pg: PolicyGradient,
    W: number,
    reads: Readback,
    into: HeadStats,
  ): tf.Tensor2D {
    if (!reads.sync) return this.policyGradientTensors(logits, labels, inputs, pg, W, reads, into);
    const [S, V] = logits.shape;
    const out = { ceSum: 0, lossSum: 0, correct: 0, pg: { klSum: 0, clipped: 0, entropySum: 0 } };
    // logp = logSoftmax(logits / T), so d/dlogits carries a 1/T beside the (softmax - onehot).
    const temperature = pg.temperature ?? 1;
    const dlogits = tf.tidy(() => {
      const lab = tf.tensor1d(labels, 'int32');
      const onehot = floatOneHot(lab, V);
      const logp = tf.logSoftmax(temperature === 1 ? logits : tf.div(logits, temperature));
      const probs = tf.exp(logp);
      const newLp = tf.sum(tf.mul(logp, onehot), 1).dataSync() as Float32Array;
      out.pg.entropySum = tf.neg(tf.sum(tf.mul(probs, logp))).dataSync()[0]!;
      out.correct = tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), lab), 'int32')).dataSync()[0]!;
      const k = new Float32Array(S);
      const lo = 1 - pg.clip;
      const hi = 1 + pg.clip;
      for (let i = 0; i < S; i++) {
        const lp = newLp[i]!;
        const a = inputs.adv[i]!;
        const ratio = inputs.old ? Math.exp(lp - inputs.old[i]!) : 1;
        const clippedRatio = Math.min(hi, Math.max(lo, ratio));
        const unclippedTerm = ratio * a;
        const clippedTerm = clippedRatio * a;
        const isClipped = clippedTerm < unclippedTerm;
        const surr = isClipped ? clippedTerm : unclippedTerm;
        const d = inputs.ref[i]! - lp;
        const ed = Math.exp(d);
        const kl = ed - d - 1;
        out.ceSum -= lp;
        out.lossSum += -(surr - pg.beta * kl);
        out.pg.klSum += kl;
        if (isClipped) out.pg.clipped++;
        const dLdLogp = -(isClipped ? 0 : a * ratio) + pg.beta * (1 - ed);
        k[i] = W > 0 ? -dLdLogp / (W * temperature) : 0;
      }
      return tf.mul(tf.sub(probs, onehot), tf.reshape(tf.tensor1d(k), [S, 1])) as tf.Tensor2D;
    });
    Object.assign(into, out);
    return dlogits;
  }

  /**
   * policyGradient as tensor ops (backends without synchronous reads: the per-token terms
   * cannot come back to JS mid-step). The same formulas in float32; the sums are read after.
   */
  private policyGradientTensors(
    logits: tf.Tensor2D,
    labels: Int32Array,
    inputs: NonNullable<Prepared['supPg']>,
    pg: PolicyGradient,
    W: number,
    reads: Readback,
    into: HeadStats,
  ): tf.Tensor2D {
    const [S, V] = logits.shape;
    const stats: PolicyStats = { klSum: 0, clipped: 0, entropySum: 0 };
    into.pg = stats;
    const temperature = pg.temperature ?? 1;
    return tf.tidy(() => {
      const lab = tf.tensor1d(labels, 'int32');
      const onehot = floatOneHot(lab, V);
      const logp = tf.logSoftmax(temperature === 1 ? logits : tf.div(logits, temperature));
      const probs = tf.exp(logp);
      const lp = tf.sum(tf.mul(logp, onehot), 1);
      const adv = tf.tensor1d(inputs.adv);
      const ratio = inputs.old ? tf.exp(tf.sub(lp, tf.tensor1d(inputs.old))) : tf.onesLike(lp);
      const unclippedTerm = tf.mul(ratio, adv);
      const clippedTerm = tf.mul(tf.clipByValue(ratio, 1 - pg.clip, 1 + pg.clip), adv);
      const isClipped = tf.less(clippedTerm, unclippedTerm);
      const surr = tf.where(isClipped, clippedTerm, unclippedTerm);
      const d = tf.sub(tf.tensor1d(inputs.ref), lp);
      const ed = tf.exp(d);
      const kl = tf.sub(tf.sub(ed, d), 1);
      reads.read(tf.neg(tf.sum(lp)), (x) => (into.ceSum = x[0]!));
      reads.read(tf.neg(tf.sum(tf.sub(surr, tf.mul(kl, pg.beta)))), (x) => (into.lossSum = x[0]!));
      reads.read(tf.sum(kl), (x) => (stats.klSum = x[0]!));
      reads.read(tf.sum(tf.cast(isClipped, 'int32')), (x) => (stats.clipped = x[0]!));
      reads.read(tf.neg(tf.sum(tf.mul(probs, logp))), (x) => (stats.entropySum = x[0]!));
      reads.read(tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), lab), 'int32')), (x) => (into.correct = x[0]!));
      const dLdLogp = tf.add(tf.neg(tf.where(isClipped, tf.zerosLike(adv), tf.mul(adv, ratio))), tf.mul(tf.sub(1, ed), pg.beta));
      const k = W > 0 ? tf.div(tf.neg(dLdLogp), W * temperature) : tf.zerosLike(dLdLogp);
      return tf.mul(tf.sub(probs, onehot), tf.reshape(k, [S, 1])) as tf.Tensor2D;
    });
  }

  // ---- public API ---------------------------------------------------------------------

  /**
   * One training step's forward and backward. Loss = sum(w*CE)/sum(w) over positions with a
   * label. Returns the statistics and the gradients of that loss (a Map the caller
   * disposes; every parameter has an entry).
   */
  lossAndGrads(b: Batch): LossStats & { grads: Grads } {
    return this.lossAndGradsWith(b, new Readback(true));
  }

  /** lossAndGrads on any backend (webgpu included): the statistics are read back asynchronously. */
  async lossAndGradsAsync(b: Batch): Promise<LossStats & { grads: Grads }> {
    const reads = new Readback(canReadSync());
    const r = this.lossAndGradsWith(b, reads);
    try {
      await reads.flush();
    } catch (err) {
      for (const g of r.grads.values()) g.dispose();
      throw err;
    }
    r.loss = r.weightSum > 0 ? r.lossSum / r.weightSum : 0;
    return r;
  }

  private lossAndGradsWith(b: Batch, reads: Readback): LossStats & { grads: Grads } {
    const prep = this.prepare(b, true);
    const { rows, T } = prep;
    const N = rows * T;
    const L = this.config.layers;
    const stats: LossStats = { loss: 0, lossSum: 0, weightSum: prep.weightSum, ceSum: 0, correct: 0, supervised: prep.supIdx.length };
    if (prep.supPg) stats.pg = { klSum: 0, clipped: 0, entropySum: 0 };
    const gradList = tf.tidy(() => {
      const grads: Grads = new Map();
      const tb = this.tables(T);
      const x0 = this.embed(prep.ids);
      const saves: LayerSave[] = [];
      let x = x0;
      for (let i = 0; i < L; i++) x = this.block(i, x, rows, T, tb, saves);
      const nf = this.rmsNorm(x, this.p1('final_norm'));
      const E = this.p2('tok_embeddings');
      const S = prep.supIdx.length;
      let dxf: tf.Tensor2D;
      let dEhead: tf.Tensor2D | null = null;
      if (S > 0) {
        const hs = this.gatherRows(nf.y, prep.supIdx);
        const logits = tf.matMul(hs, this.pT('tok_embeddings')) as tf.Tensor2D;
        const dl = prep.supPg
          ? this.policyGradient(logits, prep.supLabels, prep.supPg, b.pg!, prep.weightSum, reads, stats)
          : this.crossEntropy(logits, prep.supLabels, prep.supW, prep.weightSum, true, reads, stats)!;
        const dhs = tf.matMul(dl, E) as tf.Tensor2D;
        dEhead = tf.matMul(tf.transpose(dl), hs) as tf.Tensor2D; // right operand hs: narrow
        dxf = this.scatterRows(dhs, prep.supIdx, N);
      } else {
        dxf = tf.zeros([N, this.config.dModel]);
      }
      const nbf = this.rmsNormBack(dxf, this.p1('final_norm'), nf.save);
      grads.set('final_norm', nbf.dg);
      let dx = nbf.dx;
      for (let i = L - 1; i >= 0; i--) dx = this.blockBack(i, dx, rows, T, tb, saves[i]!, grads);
      // Embedding gradient: scatter-add the input gradient rows onto their tokens.
      const dEin = this.embedGrad(prep.ids, dx);
      grads.set('tok_embeddings', dEhead ? tf.add(dEhead, dEin) : dEin);
      return paramSpecs(this.config).map((s) => grads.get(s.name)!);
    });
    stats.loss = prep.weightSum > 0 ? stats.lossSum / prep.weightSum : 0;
    const grads: Grads = new Map();
    paramSpecs(this.config).forEach((s, k) => grads.set(s.name, gradList[k]!));
    // `stats` itself, not a copy: deferred reads (webgpu) fill it at flush.
    return Object.assign(stats, { grads });
  }

  private embedGrad(ids: Int32Array, dx: tf.Tensor2D): tf.Tensor2D {
    const { vocab: V, dModel: d } = this.config;
    if (useJs()) {
      const g = dx.dataSync() as Float32Array;
      const out = new Float32Array(V * d);
      for (let i = 0; i < ids.length; i++) {
        const o = ids[i]! * d;
        const s = i * d;
        for (let j = 0; j < d; j++) out[o + j]! += g[s + j]!;
      }
      return tf.tensor2d(out, [V, d]);
    }
    return tf.unsortedSegmentSum(dx, tf.tensor1d(ids, 'int32'), V) as tf.Tensor2D;
  }

  /** Hidden states after the final norm for a batch (no gradients): [rows*T, d]. */
  private hidden(prep: Prepared): tf.Tensor2D {
    const tb = this.tables(prep.T);
    let x = this.embed(prep.ids);
    for (let i = 0; i < this.config.layers; i++) x = this.block(i, x, prep.rows, prep.T, tb, null);
    return this.rmsNorm(x, this.p1('final_norm')).y;
  }

  /**
   * Loss and accuracy without gradients; with `argmax`, the argmax token at every position
   * (batch*seq, row-major; every position is computed then).
   */
  evaluate(b: Batch, opts: { argmax?: boolean } = {}): EvalResult {
    return this.evaluateWith(b, opts, new Readback(true));
  }

  /** evaluate on any backend (webgpu included), read back asynchronously. */
  async evaluateAsync(b: Batch, opts: { argmax?: boolean } = {}): Promise<EvalResult> {
    const reads = new Readback(canReadSync());
    const r = this.evaluateWith(b, opts, reads);
    await reads.flush();
    r.loss = r.weightSum > 0 ? r.lossSum / r.weightSum : 0;
    return r;
  }

  private evaluateWith(b: Batch, opts: { argmax?: boolean }, reads: Readback): EvalResult {
    const prep = this.prepare(b, !opts.argmax);
    const stats: EvalResult = { loss: 0, lossSum: 0, weightSum: prep.weightSum, ceSum: 0, correct: 0, supervised: prep.supIdx.length };
    tf.tidy(() => {
      const hf = this.hidden(prep);
      if (prep.supIdx.length > 0) {
        const hs = this.gatherRows(hf, prep.supIdx);
        const logits = tf.matMul(hs, this.pT('tok_embeddings')) as tf.Tensor2D;
        this.crossEntropy(logits, prep.supLabels, prep.supW, prep.weightSum, false, reads, stats);
      }
      if (opts.argmax) {
        // prep.T === b.seq here (no trimming)
        reads.read(tf.argMax(tf.matMul(hf, this.pT('tok_embeddings')), 1), (am) => (stats.argmax = Int32Array.from(am)));
      }
    });
    stats.loss = prep.weightSum > 0 ? stats.lossSum / prep.weightSum : 0;
    return stats;
  }

  /**
   * Log-prob of every label under this model (no gradients), per position (batch*seq; NaN
   * where there is no label), and the summed entropy over labelled positions, of
   * softmax(logits / temperature). GRPO's reference and old-policy log-probs.
   */
  tokenLogprobs(b: Pick<Batch, 'inputIds' | 'labels' | 'batch' | 'seq'>, temperature = 1): { logp: Float32Array; entropySum: number } {
    return this.tokenLogprobsWith(b, new Readback(true), temperature);
  }

  /** tokenLogprobs on any backend (webgpu included), read back asynchronously. */
  async tokenLogprobsAsync(b: Pick<Batch, 'inputIds' | 'labels' | 'batch' | 'seq'>, temperature = 1): Promise<{ logp: Float32Array; entropySum: number }> {
    const reads = new Readback(canReadSync());
    const r = this.tokenLogprobsWith(b, reads, temperature);
    await reads.flush();
    return { logp: r.logp, entropySum: r.entropy.sum };
  }

  private tokenLogprobsWith(
    b: Pick<Batch, 'inputIds' | 'labels' | 'batch' | 'seq'>,
    reads: Readback,
    temperature: number,
  ): { logp: Float32Array; entropySum: number; entropy: { sum: number } } {
    const prep = this.prepare({ inputIds: b.inputIds, labels: b.labels, batch: b.batch, seq: b.seq }, true);
    const out = new Float32Array(b.batch * b.seq).fill(NaN);
    const entropy = { sum: 0 };
    if (prep.supIdx.length === 0) return { logp: out, entropySum: 0, entropy };
    tf.tidy(() => {
      const hs = this.gatherRows(this.hidden(prep), prep.supIdx);
      const logits = tf.matMul(hs, this.pT('tok_embeddings')) as tf.Tensor2D;
      const logp = tf.logSoftmax(temperature === 1 ? logits : tf.div(logits, temperature));
      const onehot = floatOneHot(tf.tensor1d(prep.supLabels, 'int32'), logits.shape[1]);
      reads.read(tf.sum(tf.mul(logp, onehot), 1), (lp) => {
        // supIdx is in rows*T (trimmed); map back to rows*seq.
        for (let i = 0; i < prep.supIdx.length; i++) {
          const f = prep.supIdx[i]!;
          const r = Math.floor(f / prep.T);
          out[r * b.seq + (f % prep.T)] = lp[i]!;
        }
      });
      reads.read(tf.neg(tf.sum(tf.mul(tf.exp(logp), logp))), (e) => (entropy.sum = e[0]!));
    });
    // (sync reads have filled `entropy` by now; async ones fill it at flush)
    return { logp: out, entropySum: entropy.sum, entropy };
  }

  /** Full-sequence logits, [batch*seq*vocab] row-major (for tests and analysis). */
  logits(inputIds: Int32Array, batch: number, seq: number): Float32Array {
    const labels = new Int32Array(batch * seq).fill(IGNORE);
    const prep = this.prepare({ inputIds, labels, batch, seq }, false);
    return tf.tidy(() => tf.matMul(this.hidden(prep), this.pT('tok_embeddings')).dataSync() as Float32Array);
  }

  /** logits on any backend (webgpu included), read back asynchronously. */
  async logitsAsync(inputIds: Int32Array, batch: number, seq: number): Promise<Float32Array> {
    const labels = new Int32Array(batch * seq).fill(IGNORE);
    const prep = this.prepare({ inputIds, labels, batch, seq }, false);
    const t = tf.tidy(() => tf.matMul(this.hidden(prep), this.pT('tok_embeddings')));
    try {
      return (await t.data()) as Float32Array;
    } finally {
      t.dispose();
    }
  }

  // ---- incremental decoding -----------------------------------------------------------

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
    if (this.scratchBuf.length < n) this.scratchBuf = new Float32Array(Math.max(n, this.config.maxSeq));
    return this.scratchBuf;
  }


  /**
   * Feed `ids` after what the cache already holds (an empty cache: a prompt; a filled one:
   * e.g. a tool result appended mid-dialogue). Returns the logits of the last position
   * (length vocab; with a padded vocabulary the caller masks ids past the tokenizer's).
   */
  prefill(ids: readonly number[], cache: KvCache): Float32Array {
    if (ids.length === 0) throw new Error('prefill: no tokens');
    const { heads: H, kvHeads: K, vocab: V, layers: L } = this.config;
    const hd = this.headDim;
    const c = ids.length;
    const p = cache.length;
    if (p + c > this.config.maxSeq) throw new Error(`prefill: ${p + c} tokens exceed the model's context ${this.config.maxSeq}`);
    for (const id of ids) if (!(Number.isInteger(id) && id >= 0 && id < V)) throw new Error(`prefill: token id ${id} out of range`);
    cache.reserve(p + c);
    const W = K * hd;
    const len = p + c;
    const out = tf.tidy(() => {
      const { cos, sin } = this.angleTables(c, p, 1);
      const mask = c > 1 ? this.causalMask(c, len, p) : null;
      let x = this.embed(Int32Array.from(ids));
      for (let i = 0; i < L; i++) {
        const pre = `layers.${i}.`;
        const h1 = this.rmsNorm(x, this.p1(pre + 'attn_norm')).y;
        const qkv = tf.matMul(h1, this.p2(pre + 'wqkv')) as tf.Tensor2D;
        const qkRaw = tf.slice(qkv, [0, 0], [c, (H + K) * hd]);
        const vNew = tf.slice(qkv, [0, (H + K) * hd], [c, W]);
        const qk = tf.add(tf.mul(qkRaw, cos), tf.mul(this.rotate(qkRaw, this.rot), sin)) as tf.Tensor2D;
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
      return tf.matMul(hf, this.pT('tok_embeddings'));
    });
    cache.length = p + c;
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
    const qkv = tf.matMul(h1, this.p2(pre + 'wqkv')) as tf.Tensor2D;
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
    if (ids.length === 0) throw new Error('prefill: no tokens');
    const { heads: H, kvHeads: K, vocab: V, layers: L } = this.config;
    const hd = this.headDim;
    const c = ids.length;
    const p = cache.length;
    if (p + c > this.config.maxSeq) throw new Error(`prefill: ${p + c} tokens exceed the model's context ${this.config.maxSeq}`);
    for (const id of ids) if (!(Number.isInteger(id) && id >= 0 && id < V)) throw new Error(`prefill: token id ${id} out of range`);
    cache.reserve(p + c);
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
      let x = tf.tidy(() => this.embed(Int32Array.from(ids)));
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
      const out = tf.tidy(() => tf.matMul(this.rmsNorm(tf.slice(x, [c - 1, 0], [1, this.config.dModel]), this.p1('final_norm')).y, this.pT('tok_embeddings')));
      live.push(out);
      const logits = (await out.data()) as Float32Array;
      cache.length = p + c;
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
    if (caches.length !== B) throw new Error('stepBatch: one cache per token');
    if (new Set(caches).size !== B) throw new Error('stepBatch: the caches must be distinct');
    const { heads: H, kvHeads: K, vocab: V, layers: L } = this.config;
    const hd = this.headDim;
    const W1 = (H + K) * hd;
    for (const [b, id] of ids.entries()) {
      if (!(Number.isInteger(id) && id >= 0 && id < V)) throw new Error(`stepBatch: token id ${id} out of range`);
      if (caches[b]!.length + 1 > this.config.maxSeq) throw new Error(`stepBatch: sequence ${b} would exceed the model's context ${this.config.maxSeq}`);
    }
    for (const c of caches) c.reserve(c.length + 1);
    const live: tf.Tensor[] = [];
    try {
      const cos = new Float32Array(B * W1);
      const sin = new Float32Array(B * W1);
      for (let b = 0; b < B; b++) this.fillAngles(cos, sin, b * W1, caches[b]!.length);
      const cosT = tf.tensor2d(cos, [B, W1]);
      const sinT = tf.tensor2d(sin, [B, W1]);
      live.push(cosT, sinT);
      let x = tf.tidy(() => this.embed(Int32Array.from(ids)));
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
      const out = tf.tidy(() => tf.matMul(this.rmsNorm(x, this.p1('final_norm')).y, this.pT('tok_embeddings')));
      live.push(out);
      const all = (await out.data()) as Float32Array;
      for (const c of caches) c.length++;
      return Array.from({ length: B }, (_, b) => all.slice(b * V, (b + 1) * V));
    } finally {
      for (const t of live) t.dispose();
    }
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
    if (caches.length !== B) throw new Error('stepBatch: one cache per token');
    if (new Set(caches).size !== B) throw new Error('stepBatch: the caches must be distinct');
    const { heads: H, kvHeads: K, vocab: V, layers: L } = this.config;
    const hd = this.headDim;
    const W1 = (H + K) * hd;
    for (const [b, id] of ids.entries()) {
      if (!(Number.isInteger(id) && id >= 0 && id < V)) throw new Error(`stepBatch: token id ${id} out of range`);
      if (caches[b]!.length + 1 > this.config.maxSeq) throw new Error(`stepBatch: sequence ${b} would exceed the model's context ${this.config.maxSeq}`);
    }
    for (const c of caches) c.reserve(c.length + 1);
    const out = tf.tidy(() => {
      // RoPE tables, one row per sequence at its own position
      const cos = new Float32Array(B * W1);
      const sin = new Float32Array(B * W1);
      for (let b = 0; b < B; b++) this.fillAngles(cos, sin, b * W1, caches[b]!.length);
      const cosT = tf.tensor2d(cos, [B, W1]);
      const sinT = tf.tensor2d(sin, [B, W1]);
      let x = this.embed(Int32Array.from(ids));
      for (let i = 0; i < L; i++) {
        const pre = `layers.${i}.`;
        const h1 = this.rmsNorm(x, this.p1(pre + 'attn_norm')).y;
        const qkv = tf.matMul(h1, this.p2(pre + 'wqkv')) as tf.Tensor2D;
        const qkRaw = tf.slice(qkv, [0, 0], [B, W1]);
        const vNew = tf.slice(qkv, [0, W1], [B, K * hd]);
        const qk = tf.add(tf.mul(qkRaw, cosT), tf.mul(this.rotate(qkRaw, this.rot), sinT)) as tf.Tensor2D;
        // New keys/values into each cache, then each row's attention over its own cache.
        const qkData = qk.dataSync() as Float32Array;
        const vData = vNew.dataSync() as Float32Array;
        const att = new Float32Array(B * H * hd);
        for (let b = 0; b < B; b++) {
          const cache = caches[b]!;
          const at = cache.length;
          cache.k[i]!.set(qkData.subarray(b * W1 + H * hd, (b + 1) * W1), at * K * hd);
          cache.v[i]!.set(vData.subarray(b * K * hd, (b + 1) * K * hd), at * K * hd);
          this.attendOne(qkData, b * W1, cache, i, at + 1, att, b * H * hd);
        }
        const o = tf.tensor2d(att, [B, H * hd]);
        x = tf.add(x, tf.matMul(o, this.p2(pre + 'wo'))) as tf.Tensor2D;
        const h2 = this.rmsNorm(x, this.p1(pre + 'mlp_norm')).y;
        const gate = tf.matMul(h2, this.p2(pre + 'w_gate'));
        const act = tf.mul(tf.mul(gate, tf.sigmoid(gate)), tf.matMul(h2, this.p2(pre + 'w_up')));
        x = tf.add(x, tf.matMul(act, this.p2(pre + 'w_down'))) as tf.Tensor2D;
      }
      return tf.matMul(this.rmsNorm(x, this.p1('final_norm')).y, this.pT('tok_embeddings'));
    });
    for (const c of caches) c.length++;
    const all = out.dataSync() as Float32Array;
    out.dispose();
    return Array.from({ length: B }, (_, b) => all.slice(b * V, (b + 1) * V));
  }
}
