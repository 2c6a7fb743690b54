// The optimiser and the training step: AdamW (PyTorch's formula, decoupled weight decay on
// matrices only), a linear warm-up then cosine (or linear, or no) decay, global-norm
// gradient clipping, and `Trainer`, which runs one optimiser step on a batch — split over
// worker threads when data-parallel gradients are on (trainer/model/parallel.ts).
import * as tf from '@tensorflow/tfjs-core';
import { Batch, Grads, IGNORE, LossStats, PolicyStats, StackModel } from './model';
import { canReadSync, isLocalBackend } from './backend';
import { GradientPool, ParallelOptions, combineFlat, combineShardGrads, splitBatch } from './parallel';
import { LoraModel } from './lora';
import { mark } from './stepClock';
import { readNow } from './modelCore';

/** What AdamW and the Trainer train: a StackModel's own weights, or LoRA adapters over a frozen one (trainer/model/lora.ts). */
export type TrainableModel = StackModel | LoraModel;

/** The model whose forward runs (the worker threads replicate it): the model itself, or LoRA's merged one. */
function netOf(m: TrainableModel): StackModel {
  return m instanceof LoraModel ? m.net : m;
}

/** Gradients of the net's weights as the trainable parameters' (LoRA: the adapters'; disposes the net's). */
function paramGrads(m: TrainableModel, g: Grads): Grads {
  return m instanceof LoraModel ? m.gradsFromNet(g) : g;
}

export type Schedule = 'cosine' | 'linear' | 'constant';

export interface OptimConfig {
  /** Peak learning rate. */
  lr: number;
  /** AdamW betas; default [0.9, 0.95]. */
  betas?: [number, number];
  /** AdamW epsilon; default 1e-8. */
  eps?: number;
  /** Decoupled weight decay for matrices (norm gains are never decayed); default 0.1. */
  weightDecay?: number;
  /** Global gradient-norm clip; default 1; 0 or Infinity: no clipping. */
  clip?: number;
  /** Linear warm-up from lr/warmupSteps to lr over this many steps; default 0. */
  warmupSteps?: number;
  /** Steps of the whole run (the decay ends there); default: no decay (constant after warm-up). */
  totalSteps?: number;
  /** Decay after warm-up; default 'cosine' when totalSteps is given. */
  schedule?: Schedule;
  /** The decay ends at lr * minLrRatio; default 0.1. */
  minLrRatio?: number;
}

export interface ResolvedOptim {
  lr: number;
  betas: [number, number];
  eps: number;
  weightDecay: number;
  clip: number;
  warmupSteps: number;
  totalSteps: number | null;
  schedule: Schedule;
  minLrRatio: number;
}

export function resolveOptim(c: OptimConfig): ResolvedOptim {
  if (!(c.lr > 0)) throw new Error('optimiser: lr must be > 0');
  const betas = c.betas ?? [0.9, 0.95];
  if (!(betas[0] >= 0 && betas[0] < 1 && betas[1] >= 0 && betas[1] < 1)) throw new Error('optimiser: betas must be in [0, 1)');
  return {
    lr: c.lr,
    betas,
    eps: c.eps ?? 1e-8,
    weightDecay: c.weightDecay ?? 0.1,
    clip: c.clip ?? 1,
    warmupSteps: Math.max(0, Math.floor(c.warmupSteps ?? 0)),
    totalSteps: c.totalSteps !== undefined && c.totalSteps > 0 ? Math.floor(c.totalSteps) : null,
    schedule: c.schedule ?? (c.totalSteps ? 'cosine' : 'constant'),
    minLrRatio: c.minLrRatio ?? 0.1,
  };
}

/**
 * The learning rate of optimiser step `step` (1-based). Warm-up: lr * step / warmupSteps.
 * After it, the decay follows `progress` in [0, 1] — by default (step - warmup) /
 * (totalSteps - warmup); a time-budgeted run passes its elapsed share of the budget instead.
 */
export function lrAt(step: number, c: ResolvedOptim, progress?: number): number {
  if (c.warmupSteps > 0 && step <= c.warmupSteps) return (c.lr * step) / c.warmupSteps;
  if (c.schedule === 'constant') return c.lr;
  let p: number;
  if (progress !== undefined) p = progress;
  else if (c.totalSteps === null) return c.lr;
  else p = (step - c.warmupSteps) / Math.max(1, c.totalSteps - c.warmupSteps);
  p = Math.min(1, Math.max(0, p));
  const min = c.lr * c.minLrRatio;
  if (c.schedule === 'linear') return c.lr - (c.lr - min) * p;
  return min + 0.5 * (c.lr - min) * (1 + Math.cos(Math.PI * p));
}

/**
 * The sum of tensors by pairwise adds: tfjs-backend-webgpu 4.22's AddN binds every input at
 * once and, past the device's storage-buffer limit (8 on SwiftShader), its pipeline fails
 * validation and the result is garbage, with only a console warning.
 */
function addAll(ts: tf.Tensor[]): tf.Tensor {
  return ts.reduce((a, b) => tf.add(a, b));
}

/** globalNorm of tensors read back asynchronously (backends without synchronous reads: webgpu). */
export async function globalNormAsync(grads: Iterable<tf.Tensor>): Promise<number> {
  const list = [...grads];
  if (list.length === 0) return 0;
  const total = tf.tidy(() => addAll(list.map((g) => tf.sum(tf.square(g)))));
  try {
    return Math.sqrt((await total.data())[0]!);
  } finally {
    total.dispose();
  }
}

/** sqrt(sum of squares) over every gradient (one read-back), or over a flat buffer. */
export function globalNorm(grads: Iterable<tf.Tensor> | Float32Array): number {
  if (grads instanceof Float32Array) {
    let s = 0;
    for (let i = 0; i < grads.length; i++) s += grads[i]! * grads[i]!;
    return Math.sqrt(s);
  }
  return tf.tidy(() => {
    const parts = [...grads].map((g) => tf.sum(tf.square(g)));
    if (parts.length === 0) return 0;
    return Math.sqrt(tf.addN(parts).dataSync()[0]!);
  });
}

export interface AdamState {
  /** Optimiser steps taken. */
  t: number;
  m: Record<string, Float32Array>;
  v: Record<string, Float32Array>;
}

interface Slot {
  name: string;
  shape: number[];
  offset: number;
  size: number;
  decay: boolean;
}

/**
 * AdamW over a StackModel's weights. Two equivalent implementations: 'js' keeps weights,
 * gradients and moments in flat Float32Arrays and updates them in one loop (wasm/cpu, where
 * reading tensors back is a cheap copy and ~180 small tensor ops would cost more than the
 * arithmetic); 'tensor' keeps the moments as tensors on the backend (native/GPU backends,
 * where weights should not leave the device).
 */
export class AdamW {
  t = 0;
  readonly mode: 'js' | 'tensor';
  private readonly slots: Slot[];
  private readonly total: number;
  // tensor mode
  private m = new Map<string, tf.Tensor>();
  private v = new Map<string, tf.Tensor>();
  // js mode
  private fm: Float32Array | null = null;
  private fv: Float32Array | null = null;
  private fp: Float32Array | null = null;
  private fpVersion = -1;

  constructor(
    private readonly model: TrainableModel,
    readonly cfg: ResolvedOptim,
    mode?: 'js' | 'tensor',
  ) {
    this.mode = mode ?? (isLocalBackend() ? 'js' : 'tensor');
    // js mode reads weights and gradients back synchronously, once per step.
    if (this.mode === 'js' && !canReadSync()) throw new Error(`AdamW: the 'js' optimizer needs synchronous reads, which the ${tf.getBackend()} backend lacks; use 'tensor'`);
    let offset = 0;
    this.slots = model.paramSpecs().map((s) => {
      const size = s.shape.reduce((a, b) => a * b, 1);
      const slot = { name: s.name, shape: s.shape, offset, size, decay: AdamW.decays(s.shape) };
      offset += size;
      return slot;
    });
    this.total = offset;
  }

  /** Whether a parameter is decayed: matrices yes, norm gains (rank 1) no. */
  static decays(shape: readonly number[]): boolean {
    return shape.length >= 2;
  }

  /** Gradients as one flat buffer in paramSpecs order (a copy). */
  flatten(grads: Grads): Float32Array {
    return this.flattenInto(grads, new Float32Array(this.total));
  }

  private scratchFlat: Float32Array | null = null;

  /**
   * flatten() into one buffer this optimiser reuses: valid until the next call (a step's
   * gradient is consumed by its update before the next step flattens).
   */
  flattenScratch(grads: Grads): Float32Array {
    return this.flattenInto(grads, (this.scratchFlat ??= new Float32Array(this.total)));
  }

  private flattenInto(grads: Grads, out: Float32Array): Float32Array {
    for (const s of this.slots) {
      const g = grads.get(s.name);
      if (!g) throw new Error(`AdamW: no gradient for ${s.name}`);
      out.set(readNow(g), s.offset);
    }
    return out;
  }

  /**
   * One update with gradients already scaled by `gradScale` (clipping), at learning rate lr.
   * PyTorch's AdamW: p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
   * p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
   * `grads`: tensors by name, or (js mode) a flat buffer in paramSpecs order.
   */
  update(grads: Grads | Float32Array, lr: number, gradScale = 1): void {
    if (this.mode === 'js') return this.updateJs(grads instanceof Float32Array ? grads : this.flatten(grads), lr, gradScale);
    if (grads instanceof Float32Array) {
      const map: Grads = new Map(this.slots.map((s) => [s.name, tf.tensor(grads.subarray(s.offset, s.offset + s.size), s.shape, 'float32')]));
      try {
        return this.updateTensors(map, lr, gradScale);
      } finally {
        for (const g of map.values()) g.dispose();
      }
    }
    return this.updateTensors(grads, lr, gradScale);
  }

  private updateJs(g: Float32Array, lr: number, gradScale: number): void {
    if (g.length !== this.total) throw new Error(`AdamW: ${g.length} gradient values, the model has ${this.total}`);
    const [b1, b2] = this.cfg.betas;
    const eps = this.cfg.eps;
    this.t++;
    const bc1 = 1 - Math.pow(b1, this.t);
    const sbc2 = Math.sqrt(1 - Math.pow(b2, this.t));
    const stepSize = lr / bc1;
    if (!this.fp || this.fpVersion !== this.model.version) {
      // (re)read the weights: first step, or someone changed them since our last update
      const w = this.model.weights();
      this.fp = new Float32Array(this.total);
      for (const s of this.slots) this.fp.set(w.get(s.name)!.dataSync() as Float32Array, s.offset);
    }
    this.fm ??= new Float32Array(this.total);
    this.fv ??= new Float32Array(this.total);
    const p = this.fp;
    const m = this.fm;
    const v = this.fv;
    for (const s of this.slots) {
      const keep = s.decay ? 1 - lr * this.cfg.weightDecay : 1;
      const end = s.offset + s.size;
      for (let i = s.offset; i < end; i++) {
        const gi = g[i]! * gradScale;
        const mi = b1 * m[i]! + (1 - b1) * gi;
        const vi = b2 * v[i]! + (1 - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i]! * keep - (stepSize * mi) / (Math.sqrt(vi) / sbc2 + eps);
      }
    }
    const next: Record<string, Float32Array> = {};
    for (const s of this.slots) next[s.name] = p.subarray(s.offset, s.offset + s.size);
    this.model.setWeights(next);
    this.fpVersion = this.model.version;
  }

  private updateTensors(grads: Grads, lr: number, gradScale: number): void {
    const [b1, b2] = this.cfg.betas;
    this.t++;
    const bc1 = 1 - Math.pow(b1, this.t);
    const bc2 = 1 - Math.pow(b2, this.t);
    const next = new Map<string, tf.Tensor>();
    for (const s of this.slots) {
      const p = this.model.weights().get(s.name)!;
      const g0 = grads.get(s.name);
      if (!g0) throw new Error(`AdamW: no gradient for ${s.name}`);
      const decay = s.decay ? this.cfg.weightDecay : 0;
      const res = tf.tidy(() => {
        const g = gradScale === 1 ? g0 : tf.mul(g0, gradScale);
        const mOld = this.m.get(s.name);
        const vOld = this.v.get(s.name);
        const m = mOld ? tf.add(tf.mul(mOld, b1), tf.mul(g, 1 - b1)) : tf.mul(g, 1 - b1);
        const v = vOld ? tf.add(tf.mul(vOld, b2), tf.mul(tf.square(g), 1 - b2)) : tf.mul(tf.square(g), 1 - b2);
        const denom = tf.add(tf.div(tf.sqrt(v), Math.sqrt(bc2)), this.cfg.eps);
        const decayed = decay > 0 ? tf.mul(p, 1 - lr * decay) : p;
        const np = tf.sub(decayed, tf.mul(tf.div(m, denom), lr / bc1));
        return { m, v, np };
      });
      this.m.get(s.name)?.dispose();
      this.v.get(s.name)?.dispose();
      this.m.set(s.name, res.m);
      this.v.set(s.name, res.v);
      next.set(s.name, res.np);
    }
    this.model.setWeights(next);
  }

  exportState(): AdamState {
    const m: Record<string, Float32Array> = {};
    const v: Record<string, Float32Array> = {};
    for (const s of this.slots) {
      if (this.mode === 'js') {
        m[s.name] = this.fm ? this.fm.slice(s.offset, s.offset + s.size) : new Float32Array(s.size);
        v[s.name] = this.fv ? this.fv.slice(s.offset, s.offset + s.size) : new Float32Array(s.size);
      } else {
        m[s.name] = this.m.has(s.name) ? new Float32Array(this.m.get(s.name)!.dataSync()) : new Float32Array(s.size);
        v[s.name] = this.v.has(s.name) ? new Float32Array(this.v.get(s.name)!.dataSync()) : new Float32Array(s.size);
      }
    }
    return { t: this.t, m, v };
  }

  /** exportState on any backend (webgpu included), read back asynchronously. */
  async exportStateAsync(): Promise<AdamState> {
    if (this.mode === 'js' || canReadSync()) return this.exportState();
    const read = async (map: Map<string, tf.Tensor>, s: Slot): Promise<Float32Array> => {
      const t = map.get(s.name);
      return t ? new Float32Array((await t.data()) as Float32Array) : new Float32Array(s.size);
    };
    const m: Record<string, Float32Array> = {};
    const v: Record<string, Float32Array> = {};
    for (const s of this.slots) {
      m[s.name] = await read(this.m, s);
      v[s.name] = await read(this.v, s);
    }
    return { t: this.t, m, v };
  }

  importState(st: AdamState): void {
    this.disposeMoments();
    this.t = st.t;
    if (this.mode === 'js') {
      this.fm = new Float32Array(this.total);
      this.fv = new Float32Array(this.total);
    }
    for (const s of this.slots) {
      const m = st.m[s.name];
      const v = st.v[s.name];
      if (!m || !v || m.length !== s.size || v.length !== s.size) throw new Error(`optimizer state: ${s.name} missing or of the wrong size`);
      if (this.mode === 'js') {
        this.fm!.set(m, s.offset);
        this.fv!.set(v, s.offset);
      } else {
        this.m.set(s.name, tf.keep(tf.tensor(m, s.shape, 'float32')));
        this.v.set(s.name, tf.keep(tf.tensor(v, s.shape, 'float32')));
      }
    }
  }

  private disposeMoments(): void {
    for (const t of [...this.m.values(), ...this.v.values()]) t.dispose();
    this.m.clear();
    this.v.clear();
    this.fm = null;
    this.fv = null;
  }

  dispose(): void {
    this.disposeMoments();
    this.fp = null;
  }
}

export interface TrainerOptions extends OptimConfig {
  /**
   * Data-parallel gradients over worker threads (each with its own tfjs backend). A number
   * is the count of extra worker threads (the calling thread computes a shard too); 'auto':
   * one per further core, up to batch-1, on wasm/cpu only; 0: off. Default 0.
   */
  parallel?: number | 'auto' | ParallelOptions;
}

type ShardStatsLike = { lossSum: number; weightSum: number; ceSum: number; correct: number; supervised: number; pg?: PolicyStats | undefined };

export interface StepResult {
  /** Optimiser step number after this step (1-based). */
  step: number;
  /** sum(w*CE)/sum(w) over the batch. */
  loss: number;
  /** Unweighted mean CE over supervised positions. */
  tokenLoss: number;
  correct: number;
  supervised: number;
  weightSum: number;
  /** Global gradient norm before clipping. */
  gradNorm: number;
  lr: number;
  /** Positions computed: per row, up to its last labelled position. */
  tokens: number;
  /** Shards the batch was split into (1 = no data parallelism). */
  shards: number;
  /** True when the gradient was not finite and the update was skipped. */
  skipped: boolean;
  /** Wall-clock milliseconds: forward+backward (all shards, combined), and the optimiser update. */
  ms: { grads: number; optimizer: number };
  /** Policy-gradient batches: KL, clipping and entropy sums over the labelled positions. */
  pg?: PolicyStats;
}

/** Positions that matter in a batch: per row, up to and including its last labelled one. */
export function effectiveTokens(b: Batch): number {
  let n = 0;
  for (let r = 0; r < b.batch; r++) {
    for (let t = b.seq - 1; t >= 0; t--) {
      if (b.labels[r * b.seq + t] !== IGNORE) {
        n += t + 1;
        break;
      }
    }
  }
  return n;
}

export class Trainer {
  readonly optim: ResolvedOptim;
  readonly adam: AdamW;
  private gradientPool: GradientPool | null = null;
  private poolNote: string | null = null;

  constructor(
    readonly model: TrainableModel,
    opts: TrainerOptions & { optimizerMode?: 'js' | 'tensor' },
  ) {
    this.optim = resolveOptim(opts);
    this.adam = new AdamW(model, this.optim, opts.optimizerMode);
    const par = opts.parallel ?? 0;
    if (par !== 0) {
      this.gradientPool = GradientPool.create(netOf(model).config, par);
      if (!this.gradientPool) this.poolNote = GradientPool.unavailable(typeof par === 'object' ? par.script : undefined);
    }
  }

  /** Optimiser steps taken so far. */
  get stepCount(): number {
    return this.adam.t;
  }

  /** The worker threads (null: single-threaded); GRPO samples rollouts on them too. */
  get pool(): GradientPool | null {
    return this.gradientPool;
  }

  /** Worker threads in use (0: single-threaded), the backend they run, and why none when some were asked for. */
  get workers(): { threads: number; backend: string | null; note: string | null } {
    return { threads: this.pool?.size ?? 0, backend: this.pool?.backend ?? null, note: this.poolNote };
  }

  /**
   * One optimiser step on `batch`. `progress` (0..1), when given, drives the decay instead
   * of step/totalSteps (for time-budgeted runs).
   */
  step(batchOrMicro: Batch | readonly Batch[], opts: { progress?: number } = {}): StepResult {
    const t0 = performance.now();
    // Micro-batches (gradient accumulation): each one's gradient, combined by its weight sum
    // exactly as data-parallel shards are, then one update. Bounds memory for large batches.
    if (Array.isArray(batchOrMicro) && batchOrMicro.length > 1) {
      const micro = batchOrMicro as readonly Batch[];
      const parts = micro.map((b) => this.gradients(b));
      const combined = combineFlat(parts[0]!, parts.slice(1));
      return this.apply(combined.flat, combined.stats, micro.reduce((n, b) => n + effectiveTokens(b), 0), parts.reduce((n, p) => n + p.shards, 0), t0, opts);
    }
    const batch = Array.isArray(batchOrMicro) ? (batchOrMicro as readonly Batch[])[0]! : (batchOrMicro as Batch);
    mark('split batch');
    const shards = this.pool ? splitBatch(batch, this.pool.size + 1) : [batch];
    const js = this.adam.mode === 'js';
    let grads: Grads | Float32Array;
    let stats: { lossSum: number; weightSum: number; ceSum: number; correct: number; supervised: number; pg?: PolicyStats | undefined };
    if (shards.length === 1) {
      const r = this.model.lossAndGrads(batch);
      stats = r;
      mark('flatten grads');
      grads = js ? this.adam.flattenScratch(r.grads) : r.grads;
      if (js) for (const g of r.grads.values()) g.dispose();
    } else {
      const pool = this.pool!;
      const net = netOf(this.model);
      mark('send shards');
      pool.start(net, shards.slice(1));
      const local = net.lossAndGrads(shards[0]!);
      mark('wait for workers');
      const remote = pool.finish();
      mark('combine shards');
      if (this.model instanceof LoraModel) {
        // The shards' gradients of the merged weights, combined, then through the adapters.
        const combined = combineShardGrads(net, local, remote);
        const g = paramGrads(this.model, combined.grads);
        grads = js ? this.adam.flatten(g) : g;
        if (js) for (const t of g.values()) t.dispose();
        stats = combined.stats;
      } else if (js) {
        mark('flatten grads');
        const flat = this.adam.flattenScratch(local.grads);
        for (const g of local.grads.values()) g.dispose();
        mark('combine shards');
        const combined = combineFlat({ stats: local, flat }, remote, { inPlace: true });
        grads = combined.flat;
        stats = combined.stats;
      } else {
        const combined = combineShardGrads(this.model, local, remote);
        grads = combined.grads;
        stats = combined.stats;
      }
    }
    return this.apply(grads, stats, effectiveTokens(batch), shards.length, t0, opts);
  }

  /**
   * step() on any backend. Where tensors read back synchronously (wasm, cpu, tfjs-node) it
   * is step() itself; on webgpu the gradients stay on the device (tensor optimizer, no
   * worker threads), micro-batch gradients are summed there, and the statistics and the
   * gradient norm are awaited: two readbacks per micro-batch and one per step.
   */
  async stepAsync(batchOrMicro: Batch | readonly Batch[], opts: { progress?: number } = {}): Promise<StepResult> {
    if (canReadSync()) return this.step(batchOrMicro, opts);
    if (this.pool) throw new Error(`data-parallel worker threads need a backend with synchronous reads (wasm, cpu), not ${tf.getBackend()}`);
    const t0 = performance.now();
    const micro: readonly Batch[] = Array.isArray(batchOrMicro) ? (batchOrMicro as readonly Batch[]) : [batchOrMicro as Batch];
    const parts: (LossStats & { grads: Grads })[] = [];
    try {
      for (const b of micro) parts.push(await this.model.lossAndGradsAsync(b));
    } catch (err) {
      for (const p of parts) for (const g of p.grads.values()) g.dispose();
      throw err;
    }
    let grads: Grads;
    let stats: ShardStatsLike;
    if (parts.length === 1) {
      grads = parts[0]!.grads;
      stats = parts[0]!;
    } else {
      // As data-parallel shards combine: g = sum_i (W_i / W) g_i, summed on the device.
      const W = parts.reduce((n, p) => n + p.weightSum, 0);
      stats = { lossSum: 0, weightSum: 0, ceSum: 0, correct: 0, supervised: 0 };
      for (const p of parts) {
        stats.lossSum += p.lossSum;
        stats.weightSum += p.weightSum;
        stats.ceSum += p.ceSum;
        stats.correct += p.correct;
        stats.supervised += p.supervised;
        if (p.pg) {
          stats.pg ??= { klSum: 0, clipped: 0, entropySum: 0 };
          stats.pg.klSum += p.pg.klSum;
          stats.pg.clipped += p.pg.clipped;
          stats.pg.entropySum += p.pg.entropySum;
        }
      }
      grads = new Map();
      for (const spec of this.model.paramSpecs()) {
        const acc = tf.tidy(() => addAll(parts.map((p) => tf.mul(p.grads.get(spec.name)!, W > 0 ? p.weightSum / W : 0))));
        for (const p of parts) p.grads.get(spec.name)!.dispose();
        grads.set(spec.name, acc);
      }
    }
    const tokens = micro.reduce((n, b) => n + effectiveTokens(b), 0);
    const t1 = performance.now();
    let gradNorm: number;
    try {
      gradNorm = await globalNormAsync(grads.values());
    } catch (err) {
      for (const g of grads.values()) g.dispose();
      throw err;
    }
    return this.finish(grads, gradNorm, stats, tokens, micro.length, t0, t1, opts);
  }

  /** One batch's gradient as a flat buffer with its statistics (shards combined). */
  private gradients(batch: Batch): { stats: ShardStatsLike; flat: Float32Array; shards: number } {
    const shards = this.pool ? splitBatch(batch, this.pool.size + 1) : [batch];
    if (shards.length === 1) {
      const r = this.model.lossAndGrads(batch);
      const flat = this.adam.flatten(r.grads);
      for (const g of r.grads.values()) g.dispose();
      return { stats: r, flat, shards: 1 };
    }
    const pool = this.pool!;
    const net = netOf(this.model);
    pool.start(net, shards.slice(1));
    const local = net.lossAndGrads(shards[0]!);
    const remote = pool.finish();
    if (this.model instanceof LoraModel) {
      const combined = combineShardGrads(net, local, remote);
      const g = paramGrads(this.model, combined.grads);
      const flat = this.adam.flatten(g);
      for (const t of g.values()) t.dispose();
      return { stats: combined.stats, flat, shards: shards.length };
    }
    const flat = this.adam.flatten(local.grads);
    for (const g of local.grads.values()) g.dispose();
    const combined = combineFlat({ stats: local, flat }, remote);
    return { stats: combined.stats, flat: combined.flat, shards: shards.length };
  }

  /** Clip and apply a gradient; the step's report. */
  private apply(
    grads: Grads | Float32Array,
    stats: ShardStatsLike,
    tokens: number,
    shards: number,
    t0: number,
    opts: { progress?: number },
  ): StepResult {
    mark('clip norm');
    const t1 = performance.now();
    const gradNorm = grads instanceof Float32Array ? globalNorm(grads) : globalNorm(grads.values());
    return this.finish(grads, gradNorm, stats, tokens, shards, t0, t1, opts);
  }

  /** Clip by a known gradient norm and apply; the step's report. */
  private finish(
    grads: Grads | Float32Array,
    gradNorm: number,
    stats: ShardStatsLike,
    tokens: number,
    shards: number,
    t0: number,
    t1: number,
    opts: { progress?: number },
  ): StepResult {
    mark('AdamW update');
    const lr = lrAt(this.adam.t + 1, this.optim, opts.progress);
    const finite = Number.isFinite(gradNorm);
    if (finite) {
      // PyTorch's clip_grad_norm_: scale by min(1, clip / (norm + 1e-6)).
      const scale = this.optim.clip > 0 && Number.isFinite(this.optim.clip) ? Math.min(1, this.optim.clip / (gradNorm + 1e-6)) : 1;
      this.adam.update(grads, lr, scale);
    }
    if (!(grads instanceof Float32Array)) for (const g of grads.values()) g.dispose();
    const t2 = performance.now();
    mark(null);
    return {
      step: this.adam.t,
      loss: stats.weightSum > 0 ? stats.lossSum / stats.weightSum : 0,
      tokenLoss: stats.supervised > 0 ? stats.ceSum / stats.supervised : 0,
      correct: stats.correct,
      supervised: stats.supervised,
      weightSum: stats.weightSum,
      gradNorm,
      lr,
      tokens,
      shards,
      skipped: !finite,
      ms: { grads: t1 - t0, optimizer: t2 - t1 },
      ...(stats.pg ? { pg: stats.pg } : {}),
    };
  }

  exportState(): AdamState {
    return this.adam.exportState();
  }

  /** exportState on any backend (webgpu included). */
  exportStateAsync(): Promise<AdamState> {
    return this.adam.exportStateAsync();
  }

  importState(s: AdamState): void {
    this.adam.importState(s);
  }

  dispose(): void {
    this.adam.dispose();
    this.gradientPool?.dispose();
    this.gradientPool = null;
  }
}
