// The Stack transformer's state and forward pass (trainer/model/model.ts has the whole story: the
// architecture, the conventions, why the ops are laid out as they are): the parameters and
// their transposes, the RoPE tables, RMSNorm, the embedding and row gathers, and one block
// forward (saving what the backward pass needs). The backward pass and the losses build on
// it (trainer/model/modelTrain.ts), decoding on both (trainer/model/model.ts).
import * as tf from '@tensorflow/tfjs-core';
import { mulberry32 } from '../../core/mulberry32';
import { canReadSync, isLocalBackend } from './backend';
import { type BlasAttentionSave, MASK_NEG, type RopeArrays, blasAttentionForward } from './blasAttention';
import { activeSgemm } from './blasMatMul';
import type { Batch, PolicyStats } from './modelBatch';
import { IGNORE, ModelConfig, countParams, headDimOf, headWeightOf, normEpsOf, paramSpecs, prevTokensOf, ropeInvFreq, validateConfig } from './modelConfig';

let shortcutsOverride: boolean | null = null;
/**
 * Tests: force (true) or forbid (false) the JS shortcuts (embedding/row gathers and the
 * loss in JS) regardless of the backend; null restores the default (on for wasm and cpu).
 */
export function setJsShortcuts(on: boolean | null): void {
  shortcutsOverride = on;
}
export function useJs(): boolean {
  return shortcutsOverride ?? isLocalBackend();
}

/**
 * Per-step allocation (issue 32): on wasm a typed array handed to tf.tensor is copied into
 * the wasm heap at once (backend_wasm.move), so the JS-side buffers of the gathers, the
 * embedding gradient and the loss can be reused step after step instead of allocated anew
 * (each new multi-megabyte array is external memory that V8 answers with a full GC). The
 * cpu backend keeps the array itself as the tensor's storage: there a buffer is never reused.
 */
export class ScratchBuffers {
  private bufs = new Map<string, Float32Array>();
  /** A buffer of n floats (contents unspecified) for `key`, reused on wasm; a new one elsewhere. */
  get(key: string, n: number): Float32Array {
    if (tf.getBackend() !== 'wasm') return new Float32Array(n);
    let b = this.bufs.get(key);
    if (!b || b.length < n) this.bufs.set(key, (b = new Float32Array(Math.max(n, Math.ceil((b?.length ?? 0) * 1.25)))));
    return b.subarray(0, n);
  }
  /** The same, zeroed. */
  zeros(key: string, n: number): Float32Array {
    const b = this.get(key, n);
    if (tf.getBackend() === 'wasm') b.fill(0);
    return b;
  }
}

interface WasmInternals {
  dataIdMap?: { get(id: object): { memoryOffset?: number | null } | undefined };
  wasm?: { HEAPU8?: Uint8Array };
}

/**
 * A float32 tensor's values to read: on wasm a view of the heap (no copy; valid only until
 * the next tensor is made or freed, so read it at once), elsewhere dataSync(). Falls back to
 * dataSync() where the backend's internals are not what this expects.
 */
export function readNow(t: tf.Tensor): Float32Array {
  if (t.dtype === 'float32' && tf.getBackend() === 'wasm') {
    const b = tf.backend() as unknown as WasmInternals;
    const rec = b.dataIdMap?.get(t.dataId);
    const heap = b.wasm?.HEAPU8;
    if (rec && typeof rec.memoryOffset === 'number' && heap && rec.memoryOffset % 4 === 0) return new Float32Array(heap.buffer, rec.memoryOffset, t.size);
  }
  return t.dataSync() as Float32Array;
}

/** The Stack model's RMSNorm epsilon (a config's normEps overrides it: trainer/model/modelConfig.ts normEpsOf). */
export const NORM_EPS = 1e-5;

/**
 * A float32 one-hot matrix. tfjs-backend-wasm 4.22's OneHot kernel writes int32 bits whatever
 * dtype is asked (a float32 tensor holding 1 reads as 1.4e-45), so build it as int32 and cast.
 */
export function floatOneHot(indices: tf.Tensor1D, depth: number): tf.Tensor2D {
  return tf.cast(tf.oneHot(indices, depth), 'float32') as tf.Tensor2D;
}
export { MASK_NEG } from './blasAttention';
/** Queries per causal-attention block on the BLAS path (the default when `attnBlocks` is null). */
export const BLAS_QUERY_BLOCK = 128;

export type Readable = Float32Array | Int32Array | Uint8Array;

/**
 * Reads of tensors made inside a tidy. Synchronous (`dataSync`, at once) where the backend
 * reads synchronously; otherwise (webgpu: tfjs's readSync there needs OffscreenCanvas) the
 * tensor is kept and read by `flush()` after the tidy, all reads at once.
 */
export class Readback {
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
export type HeadStats = { ceSum: number; lossSum: number; correct: number; pg?: PolicyStats };

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

export interface NormSave {
  xhat: tf.Tensor2D;
  r: tf.Tensor2D;
}

/** Per row of the batch: what the attention backward needs. */
export interface RowSave {
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

export interface LayerSave {
  n1: NormSave;
  h1: tf.Tensor2D;
  /** The tensor path's attention saves (empty when the BLAS path ran: `blas`). */
  rows: RowSave[];
  /** The BLAS path's attention save (trainer/model/blasAttention.ts). */
  blas?: BlasAttentionSave;
  o: tf.Tensor2D;
  n2: NormSave;
  h2: tf.Tensor2D;
  sig: tf.Tensor2D;
  silu: tf.Tensor2D;
  up: tf.Tensor2D;
  act: tf.Tensor2D;
}

export interface RopeTables {
  /** Query blocks [start, end) of the causal attention (keys 0..end-1 for block [start, end)). */
  blocks: [number, number][];
  /** The tensor path's tables. */
  tensors(): RopeTensors;
  /** The BLAS path's (trainer/model/blasAttention.ts). */
  arrays(): RopeArrays;
}

export interface RopeTensors {
  /** [(H+K)*hd, T]: cos per (head row, position), query rows scaled by 1/sqrt(hd). */
  cosT: tf.Tensor2D;
  /** The same for sin, with the rotate-half sign folded in (-1 on each head's first half). */
  sinT: tf.Tensor2D;
  /** Per block, [rep*(end-start), end]: the additive causal mask of a kv group's stacked query heads. */
  masks: tf.Tensor2D[];
}

/** Which positions of a batch are computed and which are loss targets. */
export interface Prepared {
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

/** [rows, cols] -> [cols, rows]. */
function transpose(x: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = x[r * cols + c]!;
  return out;
}

/** The model's weights and its forward pass; StackModel (trainer/model/model.ts) is the class to use. */
export abstract class ModelCore {
  readonly config: ModelConfig;
  readonly headDim: number;
  /** RMSNorm epsilon (config.normEps, default 1e-5). */
  protected readonly normEps: number;
  /** The weight the output head multiplies by, transposed (tok_embeddings when tied, else lm_head). */
  protected readonly headWeight: 'tok_embeddings' | 'lm_head';
  private params = new Map<string, tf.Tensor>();
  private transposed = new Map<string, tf.Tensor2D>();
  private ropeCache = new Map<string, RopeTensors>();
  protected rot: tf.Tensor2D;
  private rotT: tf.Tensor2D;
  private invFreq: Float64Array;
  /** Bumped whenever the weights change. */
  version = 0;
  /**
   * Query blocks of the causal attention (training and evaluate): block j of T/n positions
   * only meets keys up to its end, so n blocks do (n+1)/(2n) of the score work. null: blocks
   * of BLAS_QUERY_BLOCK queries where the products run on the BLAS (a block's keys are read in
   * place), else 1, because XNNPACK repacks each block's keys and the extra column slices cost
   * more than the matMul saved (docs/results.md, "Causal attention in query blocks").
   */
  attnBlocks: number | null = null;

  protected constructor(cfg: ModelConfig) {
    validateConfig(cfg);
    this.config = { ...cfg };
    this.headDim = headDimOf(cfg);
    this.normEps = normEpsOf(cfg);
    this.headWeight = headWeightOf(cfg);
    const hd = this.headDim;
    const h2 = hd / 2;
    this.invFreq = ropeInvFreq(cfg);
    // rot(x) = x @ R with rot([x1, x2]) = [-x2, x1].
    const r = new Float32Array(hd * hd);
    for (let j = 0; j < h2; j++) {
      r[(j + h2) * hd + j] = -1;
      r[j * hd + (j + h2)] = 1;
    }
    this.rot = tf.keep(tf.tensor2d(r, [hd, hd]));
    this.rotT = tf.keep(tf.transpose(this.rot));
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
        // a copy: the cpu backend would alias the array (wasm copies it into its heap itself)
        t = tf.tensor(tf.getBackend() === 'wasm' ? value : value.slice(), shape, 'float32');
      }
      tf.keep(t);
      this.params.get(name)?.dispose();
      this.params.set(name, t);
    }
    for (const s of specs.keys()) if (!this.params.has(s)) throw new Error(`setWeights: parameter '${s}' missing`);
    for (const t of this.transposed.values()) t.dispose();
    this.transposed.clear();
    this.embData.clear();
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

  protected p2(name: string): tf.Tensor2D {
    return this.params.get(name) as tf.Tensor2D;
  }
  protected p1(name: string): tf.Tensor1D {
    return this.params.get(name) as tf.Tensor1D;
  }
  /** The output head's matrix, [d, vocab]: h @ headT() are the logits. */
  protected headT(): tf.Tensor2D {
    return this.pT(this.headWeight);
  }

  /** x @ W^T for the weight `name`: on the BLAS a transposed operand (no copy), elsewhere the cached transpose. */
  protected mulWT(x: tf.Tensor2D, name: string): tf.Tensor2D {
    return (activeSgemm() ? tf.matMul(x, this.p2(name), false, true) : tf.matMul(x, this.pT(name))) as tf.Tensor2D;
  }

  /** The logits of rows h: h @ headT(). */
  protected headLogits(h: tf.Tensor2D): tf.Tensor2D {
    return this.mulWT(h, this.headWeight);
  }

  /** The q/k/v projection of normed rows h: h @ wqkv (+ bqkv when the config has q/k/v biases). */
  protected qkvProj(h: tf.Tensor2D, pre: string): tf.Tensor2D {
    const y = tf.matMul(h, this.p2(pre + 'wqkv')) as tf.Tensor2D;
    return this.config.qkvBias ? (tf.add(y, this.p1(pre + 'bqkv')) as tf.Tensor2D) : y;
  }

  /** The transpose of a weight, cached until the weights change. */
  protected pT(name: string): tf.Tensor2D {
    let t = this.transposed.get(name);
    if (!t) {
      const w = this.p2(name);
      t = tf.keep(tf.tidy(() => tf.transpose(w)));
      this.transposed.set(name, t);
    }
    return t;
  }

  /** cos/sin of one position's rotary angles, one row of (heads + kvHeads) * hd, q rows scaled by 1/sqrt(hd). */
  protected fillAngles(cos: Float32Array, sin: Float32Array, base: number, position: number): void {
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

  protected angleTables(positions: number, offset: number, rows: number): { cos: tf.Tensor2D; sin: tf.Tensor2D } {
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

  protected causalMask(q: number, k: number, offset: number): tf.Tensor2D {
    const m = new Float32Array(q * k);
    for (let i = 0; i < q; i++) for (let j = offset + i + 1; j < k; j++) m[i * k + j] = MASK_NEG;
    return tf.tensor2d(m, [q, k]);
  }

  /**
   * The RoPE tables and causal masks for sequences of T positions: the query blocks, the
   * tensor path's transposed tables and masks (built on first use, cached by length), and the
   * BLAS path's (one table of the model's whole context, read by prefix: no work per length).
   */
  protected tables(T: number): RopeTables {
    const nb = Math.max(1, Math.min(T, this.attnBlocks ?? (activeSgemm() ? Math.ceil(T / BLAS_QUERY_BLOCK) : 1)));
    const size = Math.ceil(T / nb);
    const blocks: [number, number][] = [];
    for (let s0 = 0; s0 < T; s0 += size) blocks.push([s0, Math.min(T, s0 + size)]);
    return {
      blocks,
      tensors: () => this.ropeTensors(T, blocks),
      arrays: () => ({ ...this.ropeRows(T), width: (this.config.heads + this.config.kvHeads) * this.headDim, blocks }),
    };
  }

  /**
   * cos/sin per (position, column), [rows, (H+K)*hd], for at least T positions: one table read by
   * prefix, grown (to a power of two, at most the context) when a longer sequence comes.
   */
  private ropeRowsCache: { rows: number; cos: Float32Array; sin: Float32Array } | null = null;
  private ropeRows(T: number): { cos: Float32Array; sin: Float32Array } {
    if (!this.ropeRowsCache || this.ropeRowsCache.rows < T) {
      const rows = Math.min(this.config.maxSeq, Math.max(T, 2 ** Math.ceil(Math.log2(Math.max(T, 64)))));
      const W1 = (this.config.heads + this.config.kvHeads) * this.headDim;
      const { cos, sin } = this.ropeColumns(rows);
      this.ropeRowsCache = { rows, cos: transpose(cos, W1, rows), sin: transpose(sin, W1, rows) };
    }
    return this.ropeRowsCache;
  }

  /** cos/sin per (column, position), [(H+K)*hd, T]: q columns scaled by 1/sqrt(hd), the rotate-half sign in sin. */
  private ropeColumns(T: number): { cos: Float32Array; sin: Float32Array } {
    const { heads: H, kvHeads: K } = this.config;
    const hd = this.headDim;
    const h2 = hd / 2;
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
    return { cos, sin };
  }

  /** The tensor path's tables for T positions in these query blocks (cached, the 8 latest lengths). */
  private ropeTensors(T: number, blocks: [number, number][]): RopeTensors {
    const key = `${T}/${blocks.length}`;
    let r = this.ropeCache.get(key);
    if (r) {
      this.ropeCache.delete(key);
      this.ropeCache.set(key, r); // LRU order
      return r;
    }
    const W1 = (this.config.heads + this.config.kvHeads) * this.headDim;
    const rep = this.config.heads / this.config.kvHeads;
    const { cos, sin } = this.ropeColumns(T);
    const masks = blocks.map(([b0, b1]) => {
      const n = b1 - b0;
      const m = new Float32Array(rep * n * b1);
      for (let h = 0; h < rep; h++) for (let i = 0; i < n; i++) m.fill(MASK_NEG, (h * n + i) * b1 + b0 + i + 1, (h * n + i + 1) * b1);
      return tf.keep(tf.tensor2d(m, [rep * n, b1]));
    });
    r = { cosT: tf.keep(tf.tensor2d(cos, [W1, T])), sinT: tf.keep(tf.tensor2d(sin, [W1, T])), masks };
    this.ropeCache.set(key, r);
    while (this.ropeCache.size > 8) {
      const [oldKey, old] = this.ropeCache.entries().next().value as [string, RopeTensors];
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
  protected swapHalves(x: tf.Tensor2D): tf.Tensor2D {
    const [rows, T] = x.shape;
    const nh = rows / this.headDim;
    const L = (this.headDim / 2) * T;
    const x3 = tf.reshape(x, [nh, 2, L]);
    const swapped = tf.concat([tf.slice(x3, [0, 1, 0], [nh, 1, L]), tf.slice(x3, [0, 0, 0], [nh, 1, L])], 1);
    return tf.reshape(swapped, [rows, T]);
  }

  /** [rep*hd, T] (head-major rows) <-> [rep*T, hd] (head-major rows). */
  protected headsToRows(xT: tf.Tensor2D, rep: number): tf.Tensor2D {
    const T = xT.shape[1];
    const hd = this.headDim;
    return tf.reshape(tf.transpose(tf.reshape(xT, [rep, hd, T]), [0, 2, 1]), [rep * T, hd]);
  }
  protected rowsToHeads(x: tf.Tensor2D, rep: number): tf.Tensor2D {
    const hd = this.headDim;
    const T = x.shape[0] / rep;
    return tf.reshape(tf.transpose(tf.reshape(x, [rep, T, hd]), [0, 2, 1]), [rep * hd, T]);
  }

  protected rmsNorm(x: tf.Tensor2D, g: tf.Tensor1D): { y: tf.Tensor2D; save: NormSave } {
    const r = tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), this.normEps)) as tf.Tensor2D;
    const xhat = tf.mul(x, r) as tf.Tensor2D;
    return { y: tf.mul(xhat, g) as tf.Tensor2D, save: { xhat, r } };
  }

  /** Backward of rmsNorm: returns dx and dg. */
  protected rmsNormBack(dy: tf.Tensor2D, g: tf.Tensor1D, s: NormSave): { dx: tf.Tensor2D; dg: tf.Tensor1D } {
    const dg = tf.sum(tf.mul(dy, s.xhat), 0) as tf.Tensor1D;
    const dxhat = tf.mul(dy, g);
    const m = tf.mean(tf.mul(dxhat, s.xhat), -1, true);
    const dx = tf.mul(tf.sub(dxhat, tf.mul(s.xhat, m)), s.r) as tf.Tensor2D;
    return { dx, dg };
  }

  /** x @ R per head: rotate-half over [N, nHeads*hd]. */
  protected rotate(x: tf.Tensor2D, r: tf.Tensor2D): tf.Tensor2D {
    const [n, w] = x.shape;
    const hd = this.headDim;
    return tf.reshape(tf.matMul(tf.reshape(x, [(n * w) / hd, hd]), r), [n, w]);
  }

  protected prepare(b: Batch, trim: boolean): Prepared {
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
      for (const [name, arr] of [
        ['advantages', pg.advantages],
        ['refLogp', pg.refLogp],
        ['oldLogp', pg.oldLogp],
      ] as const) {
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

  /** Embedding tables read back to JS, once per weights version (decoding reads them per token). */
  private embData = new Map<string, { version: number; data: Float32Array }>();

  /** JS-side buffers reused from step to step (wasm only: ScratchBuffers). */
  protected readonly stepBufs = new ScratchBuffers();

  /** An embedding table's values in JS, read once per weights version. */
  private tableData(name: string): Float32Array {
    let cached = this.embData.get(name);
    if (!cached || cached.version !== this.version) this.embData.set(name, (cached = { version: this.version, data: this.p2(name).dataSync() as Float32Array }));
    return cached.data;
  }

  /** Rows `ids` of the embedding table `name`: [ids.length, d]. */
  private tableRows(name: string, ids: Int32Array): tf.Tensor2D {
    const E = this.p2(name);
    const d = this.config.dModel;
    if (useJs()) {
      const e = this.tableData(name);
      const out = this.stepBufs.get('rows', ids.length * d);
      for (let i = 0; i < ids.length; i++) out.set(e.subarray(ids[i]! * d, ids[i]! * d + d), i * d);
      return tf.tensor2d(out, [ids.length, d]);
    }
    return tf.gather(E, tf.tensor1d(ids, 'int32')) as tf.Tensor2D;
  }

  /** embed's rows in JS, [ids.length * d] (a reused buffer: read it before the next call). */
  protected embedRows(ids: Int32Array, prev: readonly Int32Array[]): Float32Array {
    const d = this.config.dModel;
    const out = this.stepBufs.get('rows', ids.length * d);
    const e = this.tableData('tok_embeddings');
    for (let i = 0; i < ids.length; i++) out.set(e.subarray(ids[i]! * d, ids[i]! * d + d), i * d);
    prev.forEach((p, k) => {
      const pe = this.tableData(`prev_embeddings.${k + 1}`);
      for (let i = 0; i < p.length; i++) {
        const o = i * d;
        const src = p[i]! * d;
        for (let j = 0; j < d; j++) out[o + j] = out[o + j]! + pe[src + j]!;
      }
    });
    return out;
  }

  /**
   * Input rows for ids: [ids.length, d]. With previous-token embeddings (config.prevTokens)
   * `prev[k-1][i]` is the id k positions before ids[i] (config.vocab: before the start), and
   * its prev_embeddings.k row is added.
   */
  protected embed(ids: Int32Array, prev: readonly Int32Array[] = []): tf.Tensor2D {
    const n = prevTokensOf(this.config);
    if (prev.length !== n) throw new Error(`embed: ${prev.length} previous-token id arrays for a model with prevTokens ${n}`);
    // the tables' rows summed in JS (the same float32 sums, in the same order, as the adds
    // below): one tensor instead of 1 + prevTokens and their adds
    if (useJs() && prev.length > 0) return tf.tensor2d(this.embedRows(ids, prev), [ids.length, this.config.dModel]);
    let x = this.tableRows('tok_embeddings', ids);
    prev.forEach((p, k) => (x = tf.add(x, this.tableRows(`prev_embeddings.${k + 1}`, p)) as tf.Tensor2D));
    return x;
  }

  /** The previous-token ids of rows*T flat ids (each row its own sequence): one array per k = 1..prevTokens. */
  protected prevIdsOfRows(ids: Int32Array, rows: number, T: number): Int32Array[] {
    const V = this.config.vocab;
    return Array.from({ length: prevTokensOf(this.config) }, (_, j) => {
      const k = j + 1;
      const out = new Int32Array(rows * T);
      for (let r = 0; r < rows; r++) for (let t = 0; t < T; t++) out[r * T + t] = t >= k ? ids[r * T + t - k]! : V;
      return out;
    });
  }

  /** Rows `idx` of x: [idx.length, cols]. */
  protected gatherRows(x: tf.Tensor2D, idx: Int32Array): tf.Tensor2D {
    const cols = x.shape[1];
    if (useJs()) {
      const src = readNow(x);
      const out = this.stepBufs.get('gather', idx.length * cols);
      for (let i = 0; i < idx.length; i++) out.set(src.subarray(idx[i]! * cols, idx[i]! * cols + cols), i * cols);
      return tf.tensor2d(out, [idx.length, cols]);
    }
    return tf.gather(x, tf.tensor1d(idx, 'int32')) as tf.Tensor2D;
  }

  /** Rows of x placed at `idx` of an all-zero [n, cols]. */
  protected scatterRows(x: tf.Tensor2D, idx: Int32Array, n: number): tf.Tensor2D {
    const cols = x.shape[1];
    if (useJs()) {
      const src = readNow(x);
      const out = this.stepBufs.zeros('scatter', n * cols);
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
  protected block(i: number, x: tf.Tensor2D, rows: number, T: number, tb: RopeTables, save: LayerSave[] | null): tf.Tensor2D {
    const { heads: H, kvHeads: K } = this.config;
    const hd = this.headDim;
    const rep = H / K;
    const W1 = (H + K) * hd;
    const pre = `layers.${i}.`;
    const n1 = this.rmsNorm(x, this.p1(pre + 'attn_norm'));
    const h1 = n1.y;
    const qkv = this.qkvProj(h1, pre);
    const sgemm = activeSgemm();
    if (sgemm) {
      const a = blasAttentionForward(sgemm, { heads: H, kvHeads: K, headDim: hd }, qkv, rows, T, tb.arrays(), this.stepBufs, readNow, save ? `attn.${i}` : null);
      return this.blockRest(i, x, a.o, n1.save, h1, [], a.save ?? undefined, save);
    }
    const tt = tb.tensors();
    const rowSaves: RowSave[] = [];
    const rowOuts: tf.Tensor2D[] = [];
    for (let r = 0; r < rows; r++) {
      const qkvR = rows === 1 ? qkv : tf.slice(qkv, [r * T, 0], [T, qkv.shape[1]]);
      const qkvT = tf.transpose(qkvR);
      const qkRawT = tf.slice(qkvT, [0, 0], [W1, T]);
      const vT = tf.slice(qkvT, [W1, 0], [K * hd, T]);
      const qkT = tf.add(tf.mul(qkRawT, tt.cosT), tf.mul(this.swapHalves(qkRawT), tt.sinT)) as tf.Tensor2D;
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
          const p = tf.softmax(tf.add(tf.matMul(q, kTj), tt.masks[j]!)) as tf.Tensor2D;
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
    return this.blockRest(i, x, o, n1.save, h1, rowSaves, undefined, save);
  }

  /** The block after its attention: the output projection, the MLP, the residuals and the save. */
  private blockRest(i: number, x: tf.Tensor2D, o: tf.Tensor2D, n1: NormSave, h1: tf.Tensor2D, rowSaves: RowSave[], blas: BlasAttentionSave | undefined, save: LayerSave[] | null): tf.Tensor2D {
    const pre = `layers.${i}.`;
    const x1 = tf.add(x, tf.matMul(o, this.p2(pre + 'wo'))) as tf.Tensor2D;
    const n2 = this.rmsNorm(x1, this.p1(pre + 'mlp_norm'));
    const h2 = n2.y;
    const gate = tf.matMul(h2, this.p2(pre + 'w_gate')) as tf.Tensor2D;
    const up = tf.matMul(h2, this.p2(pre + 'w_up')) as tf.Tensor2D;
    const sig = tf.sigmoid(gate) as tf.Tensor2D;
    const silu = tf.mul(gate, sig) as tf.Tensor2D;
    const act = tf.mul(silu, up) as tf.Tensor2D;
    const x2 = tf.add(x1, tf.matMul(act, this.p2(pre + 'w_down'))) as tf.Tensor2D;
    if (save) save.push({ n1, h1, rows: rowSaves, ...(blas ? { blas } : {}), o, n2: n2.save, h2, sig, silu, up, act });
    return x2;
  }
}
