// LoRA (low-rank adaptation) over a frozen base model, with PEFT's semantics: on each chosen
// linear layer y = W x + (alpha / r) * B (A x), A [r, in] (small random init, PEFT's
// kaiming-uniform: U(-1/sqrt(in), 1/sqrt(in))), B [out, r] (zeros, so training starts at
// the base model exactly). The base weights never change; only A and B reach the optimiser.
//
// How it is computed: the Stack model (`net`) runs on merged weights W + s * (B A)^T (the
// lab stores [in, out]), rebuilt whenever the adapters change, and the adapter gradients
// come from the merged weight's gradient G = dL/dW_eff by the chain rule:
//   dA = s * B^T G^T   [r, in]        dB = s * G^T A^T   [out, r]
// The same equations as PEFT's unmerged forward (y = Wx + s B A x is linear in the merged
// weight), so every backend, the data-parallel workers and decoding run the model code
// unchanged. What it costs: the full weight gradient of each targeted layer is still
// computed (a LoRA step is not cheaper than a full one here; the optimiser state and the
// checkpoints are r/in-sized). docs/decisions.md, "LoRA", says why.
//
// Targets, in the lab's fused layout (trainer/model/model.ts) and transformers' names:
//   q, k, v   columns of layers.N.wqkv      self_attn.{q,k,v}_proj
//   o         layers.N.wo                   self_attn.o_proj
//   gate, up  layers.N.w_gate, w_up         mlp.gate_proj, mlp.up_proj
//   down      layers.N.w_down               mlp.down_proj
// Adapter parameters are named layers.N.<target>.lora_A / .lora_B, shaped as PEFT's
// (torch.nn.Linear's [out, in] of each factor), so a PEFT export only renames them.
//
// Added rows (spec.trainedRows): a base whose tokenizer lacked the wire-format specials gets
// them as new embedding rows after its vocabulary (trainer/hf/hfModel.ts withAddedRows). Those
// rows train too, as PEFT users train added tokens: `tok_embeddings.rows` [n, d] and, with an
// untied head, `lm_head.rows` [n, d] (a tied head is the embedding: the same rows). Every
// original row stays the base's; the net's embedding is the frozen rows with the trained ones
// below them, and the rows' gradients are those rows of the net's embedding (and head)
// gradient. A PEFT export saves them through `modules_to_save` (trainer/hf/hfExport.ts).
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { canReadSync } from './backend';
import type { Batch, Grads, LossStats } from './modelBatch';
import { ModelConfig, headDimOf } from './modelConfig';
import { makeRng } from './modelCore';
import type { StackModel } from './model';
import { HF_CONFIG_FILE } from '../../core/protocol/folders';

export const LORA_TARGETS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];

/** transformers' module name of each target (PEFT's target_modules). */
export const HF_MODULE: Record<LoraTarget, string> = {
  q: 'self_attn.q_proj',
  k: 'self_attn.k_proj',
  v: 'self_attn.v_proj',
  o: 'self_attn.o_proj',
  gate: 'mlp.gate_proj',
  up: 'mlp.up_proj',
  down: 'mlp.down_proj',
};

export interface LoraSpec {
  r: number;
  alpha: number;
  /** In LORA_TARGETS order, no repeats. */
  targets: LoraTarget[];
  /**
   * Embedding ids that train in full beside the adapters: the rows added after the base's
   * vocabulary (ascending, consecutive, the last rows of the model). Absent: none.
   */
  trainedRows?: number[];
}

/** The trained rows' parameter names: the embedding's, and an untied head's. */
export const EMBED_ROWS = 'tok_embeddings.rows';
export const HEAD_ROWS = 'lm_head.rows';

/** A file of the base folder as the run saw it: a changed size or time means other weights. */
export interface BaseFile {
  name: string;
  bytes: number;
  mtimeMs: number;
}

/** The frozen base a LoRA run trains on: its folder and what its files were. */
export interface LoraBase {
  dir: string;
  files: BaseFile[];
}

export const LORA_USAGE = '--lora r,alpha[,targets] (r an integer >= 1, alpha > 0, targets a comma list of q,k,v,o,gate,up,down; default all)';

/** Parse `r,alpha[,t1,t2...]`; an Error naming what is wrong. */
export function parseLoraSpec(text: string): LoraSpec {
  const parts = text.split(',').map((s) => s.trim());
  if (parts.length < 2 || parts.some((p) => p === '')) throw new Error(`--lora ${JSON.stringify(text)} does not parse: ${LORA_USAGE}`);
  const [rText, aText, ...names] = parts as [string, string, ...string[]];
  if (!/^-?\d+$/.test(rText)) throw new Error(`--lora ${JSON.stringify(text)}: r ${JSON.stringify(rText)} is not an integer (${LORA_USAGE})`);
  const r = Number(rText);
  if (!(r >= 1) || !Number.isSafeInteger(r)) throw new Error(`--lora ${JSON.stringify(text)}: r must be >= 1 (got ${rText})`);
  const alpha = Number(aText);
  if (!/^[-+0-9.eE]+$/.test(aText) || !Number.isFinite(alpha) || !(alpha > 0)) throw new Error(`--lora ${JSON.stringify(text)}: alpha must be a number > 0 (got ${JSON.stringify(aText)})`);
  for (const n of names) {
    if (!(LORA_TARGETS as readonly string[]).includes(n)) throw new Error(`--lora ${JSON.stringify(text)}: unknown target ${JSON.stringify(n)} (targets: ${LORA_TARGETS.join(', ')})`);
  }
  const targets = names.length ? LORA_TARGETS.filter((t) => names.includes(t)) : [...LORA_TARGETS];
  return { r, alpha, targets };
}

/** A spec read back from a config.json or checkpoint.json: an Error naming the field when it is not one. */
export function checkLoraRecord(x: unknown, where: string): LoraSpec {
  const o = typeof x === 'object' && x !== null && !Array.isArray(x) ? (x as Record<string, unknown>) : null;
  const r = o?.['r'];
  const alpha = o?.['alpha'];
  const targets = o?.['targets'];
  if (!o || !Number.isSafeInteger(r) || (r as number) < 1) throw new Error(`${where}: "lora.r" must be an integer >= 1 (got ${JSON.stringify(r)})`);
  if (typeof alpha !== 'number' || !Number.isFinite(alpha) || alpha <= 0) throw new Error(`${where}: "lora.alpha" must be a number > 0 (got ${JSON.stringify(alpha)})`);
  if (!Array.isArray(targets) || targets.length === 0 || !targets.every((t) => (LORA_TARGETS as readonly unknown[]).includes(t)) || new Set(targets).size !== targets.length) {
    throw new Error(`${where}: "lora.targets" must be a list of ${LORA_TARGETS.join(', ')} (got ${JSON.stringify(targets)})`);
  }
  const rows = o['trainedRows'];
  if (rows !== undefined && !(Array.isArray(rows) && rows.length > 0 && rows.every((id, i) => Number.isSafeInteger(id) && (id as number) >= 0 && (i === 0 || id === (rows[i - 1] as number) + 1)))) {
    throw new Error(`${where}: "lora.trainedRows" must be a list of consecutive embedding ids (got ${JSON.stringify(rows)})`);
  }
  return { r: r as number, alpha, targets: LORA_TARGETS.filter((t) => (targets as string[]).includes(t)), ...(rows !== undefined ? { trainedRows: [...(rows as number[])] } : {}) };
}

/**
 * Where a spec's trained rows sit: the first id and how many, which must be the model's last
 * rows (the ids added after the base's vocabulary). Null when it trains none; an Error naming
 * the ids otherwise.
 */
export function trainedRowRange(cfg: ModelConfig, spec: LoraSpec): { first: number; count: number } | null {
  const ids = spec.trainedRows;
  if (!ids || ids.length === 0) return null;
  const first = ids[0]!;
  if (first + ids.length !== cfg.vocab || ids.some((id, i) => id !== first + i)) {
    throw new Error(`LoRA trained rows ${first}..${ids[ids.length - 1]} are not the last rows of a ${cfg.vocab}-row embedding (the ids added after the base's vocabulary)`);
  }
  return { first, count: ids.length };
}

/** The trained rows' parameters: tok_embeddings.rows [n, d] and, untied, lm_head.rows [n, d]. */
export function rowParamSpecs(cfg: ModelConfig, spec: LoraSpec): { name: string; shape: number[] }[] {
  const range = trainedRowRange(cfg, spec);
  if (!range) return [];
  const shape = [range.count, cfg.dModel];
  return [{ name: EMBED_ROWS, shape }, ...(cfg.tiedHead === false ? [{ name: HEAD_ROWS, shape: [...shape] }] : [])];
}

export const loraScale = (s: LoraSpec): number => s.alpha / s.r;

/** Where a target sits in the lab's weights: the fused weight, its column range, and the layer's in/out sizes. */
export function targetSlot(cfg: ModelConfig, target: LoraTarget): { weight: 'wqkv' | 'wo' | 'w_gate' | 'w_up' | 'w_down'; col: number; cols: number; in: number; out: number } {
  const hd = headDimOf(cfg);
  const d = cfg.dModel;
  const q = cfg.heads * hd;
  const kv = cfg.kvHeads * hd;
  const W1 = q + 2 * kv;
  switch (target) {
    case 'q':
      return { weight: 'wqkv', col: 0, cols: W1, in: d, out: q };
    case 'k':
      return { weight: 'wqkv', col: q, cols: W1, in: d, out: kv };
    case 'v':
      return { weight: 'wqkv', col: q + kv, cols: W1, in: d, out: kv };
    case 'o':
      return { weight: 'wo', col: 0, cols: d, in: q, out: d };
    case 'gate':
      return { weight: 'w_gate', col: 0, cols: cfg.mlp, in: d, out: cfg.mlp };
    case 'up':
      return { weight: 'w_up', col: 0, cols: cfg.mlp, in: d, out: cfg.mlp };
    case 'down':
      return { weight: 'w_down', col: 0, cols: d, in: cfg.mlp, out: d };
  }
}

/**
 * The trainable parameters, in order: layers.N.<target>.lora_A [r, in] and .lora_B [out, r],
 * then the trained rows (rowParamSpecs) when the spec has any.
 */
export function loraParamSpecs(cfg: ModelConfig, spec: LoraSpec): { name: string; shape: number[] }[] {
  const out: { name: string; shape: number[] }[] = [];
  for (let i = 0; i < cfg.layers; i++) {
    for (const t of spec.targets) {
      const s = targetSlot(cfg, t);
      out.push({ name: `layers.${i}.${t}.lora_A`, shape: [spec.r, s.in] }, { name: `layers.${i}.${t}.lora_B`, shape: [s.out, spec.r] });
    }
  }
  return [...out, ...rowParamSpecs(cfg, spec)];
}

export function countLoraParams(cfg: ModelConfig, spec: LoraSpec): number {
  return loraParamSpecs(cfg, spec).reduce((n, s) => n + s.shape[0]! * s.shape[1]!, 0);
}

/** The base weights a spec adapts (layers.N.wqkv ...), each once. */
export function adaptedWeights(cfg: ModelConfig, spec: LoraSpec): string[] {
  const names = new Set<string>();
  for (let i = 0; i < cfg.layers; i++) for (const t of spec.targets) names.add(`layers.${i}.${targetSlot(cfg, t).weight}`);
  return [...names];
}

/**
 * Merged weights in JS: base + (alpha/r) * (B A)^T on every adapted weight, and the trained
 * rows in place of the base's last rows of the embedding (and untied head): a copy of each
 * weight that changes, the others are the base's own arrays. `base` has the model's rows
 * (withAddedRows). What a LoRA checkpoint loads as, and what the merged export writes.
 */
export function mergeLora(cfg: ModelConfig, base: Record<string, Float32Array>, spec: LoraSpec, adapters: Record<string, Float32Array>): Record<string, Float32Array> {
  const out: Record<string, Float32Array> = { ...base };
  const range = trainedRowRange(cfg, spec);
  if (range) {
    for (const [weight, rows] of [
      ['tok_embeddings', EMBED_ROWS],
      ['lm_head', HEAD_ROWS],
    ] as const) {
      if (weight === 'lm_head' && cfg.tiedHead !== false) continue;
      const w = new Float32Array(base[weight]!);
      w.set(adapters[rows]!, range.first * cfg.dModel);
      out[weight] = w;
    }
  }
  const s = loraScale(spec);
  const r = spec.r;
  for (let i = 0; i < cfg.layers; i++) {
    for (const t of spec.targets) {
      const slot = targetSlot(cfg, t);
      const name = `layers.${i}.${slot.weight}`;
      if (out[name] === base[name]) out[name] = new Float32Array(base[name]!);
      const W = out[name]!;
      const A = adapters[`layers.${i}.${t}.lora_A`]!;
      const B = adapters[`layers.${i}.${t}.lora_B`]!;
      // W[x, col + o] += s * sum_k B[o, k] A[k, x]
      const row = new Float32Array(slot.out);
      for (let x = 0; x < slot.in; x++) {
        row.fill(0);
        for (let k = 0; k < r; k++) {
          const a = A[k * slot.in + x]!;
          if (a === 0) continue;
          for (let o = 0; o < slot.out; o++) row[o]! += B[o * r + k]! * a;
        }
        const base0 = x * slot.cols + slot.col;
        for (let o = 0; o < slot.out; o++) W[base0 + o]! += s * row[o]!;
      }
    }
  }
  return out;
}

/** The files of a base folder that hold the model (config.json, the weights and their index), by size and time. */
export function baseFiles(dir: string): BaseFile[] {
  return fs
    .readdirSync(dir)
    .filter((n) => n === HF_CONFIG_FILE || n.endsWith('.safetensors') || n.endsWith('.safetensors.index.json'))
    .sort()
    .map((name) => {
      const st = fs.statSync(path.join(dir, name));
      return { name, bytes: st.size, mtimeMs: Math.floor(st.mtimeMs) };
    });
}

/** Null when `dir` still holds the files a run recorded; otherwise one line on what changed. */
export function baseChanged(base: LoraBase): string | null {
  let now: BaseFile[];
  try {
    now = baseFiles(base.dir);
  } catch {
    return `${base.dir} is gone`;
  }
  const was = new Map(base.files.map((f) => [f.name, f]));
  for (const f of now) {
    const w = was.get(f.name);
    if (!w) return `${path.join(base.dir, f.name)} was not there`;
    if (w.bytes !== f.bytes || w.mtimeMs !== f.mtimeMs) {
      return `${path.join(base.dir, f.name)} is ${f.bytes} bytes modified ${new Date(f.mtimeMs).toISOString()}, the run recorded ${w.bytes} bytes modified ${new Date(w.mtimeMs).toISOString()}`;
    }
    was.delete(f.name);
  }
  const gone = [...was.keys()];
  return gone.length ? `${path.join(base.dir, gone[0]!)} is missing` : null;
}

/**
 * A frozen StackModel with LoRA adapters (and trained added rows): what the Trainer trains
 * (paramSpecs, weights, setWeights, version and lossAndGrads over those only). `net` is the model with the
 * merged weights: evaluation, decoding and the data-parallel workers use it as any model.
 */
export class LoraModel {
  readonly config: ModelConfig;
  readonly scale: number;
  private params = new Map<string, tf.Tensor>();
  /** The base values of the adapted weights (never changed; on the backend: no JS copy of a large model). */
  private frozen = new Map<string, tf.Tensor2D>();
  /** The trained rows' weights (tok_embeddings, an untied lm_head) -> their original rows, frozen [first, d]. */
  private frozenRows = new Map<'tok_embeddings' | 'lm_head', tf.Tensor2D>();
  private readonly rows: { first: number; count: number } | null;
  private readonly specs: { name: string; shape: number[] }[];
  version = 0;

  private constructor(
    readonly net: StackModel,
    readonly spec: LoraSpec,
    readonly base: LoraBase,
  ) {
    this.config = net.config;
    this.scale = loraScale(spec);
    this.specs = loraParamSpecs(net.config, spec);
    this.rows = trainedRowRange(net.config, spec);
    const w = net.weights();
    for (const name of adaptedWeights(net.config, spec)) this.frozen.set(name, tf.keep(tf.clone(w.get(name)! as tf.Tensor2D)));
    if (this.rows) {
      for (const weight of this.rowWeights()) {
        this.frozenRows.set(weight, tf.keep(tf.slice(w.get(weight)! as tf.Tensor2D, [0, 0], [this.rows.first, this.config.dModel])));
      }
    }
  }

  /** The weights whose last rows train: the embedding, and the head when it is untied. */
  private rowWeights(): ('tok_embeddings' | 'lm_head')[] {
    return this.config.tiedHead === false ? ['tok_embeddings', 'lm_head'] : ['tok_embeddings'];
  }

  /**
   * New adapters on a model holding the base weights: A ~ U(-1/sqrt(in), 1/sqrt(in)) (seeded),
   * B = 0; trained rows start as the net's (withAddedRows' mean), so step 0 is the base exactly.
   */
  static create(net: StackModel, spec: LoraSpec, base: LoraBase, seed: number): LoraModel {
    const m = new LoraModel(net, spec, base);
    const rng = makeRng(seed ^ 0x10a4);
    const init: Record<string, Float32Array | tf.Tensor> = {};
    if (m.rows) {
      const w = net.weights();
      const { first, count } = m.rows;
      init[EMBED_ROWS] = tf.slice(w.get('tok_embeddings')! as tf.Tensor2D, [first, 0], [count, m.config.dModel]);
      if (m.config.tiedHead === false) init[HEAD_ROWS] = tf.slice(w.get('lm_head')! as tf.Tensor2D, [first, 0], [count, m.config.dModel]);
    }
    for (const s of m.specs) {
      if (s.name === EMBED_ROWS || s.name === HEAD_ROWS) continue;
      const a = new Float32Array(s.shape[0]! * s.shape[1]!);
      if (s.name.endsWith('.lora_A')) {
        const bound = 1 / Math.sqrt(s.shape[1]!);
        for (let i = 0; i < a.length; i++) a[i] = (2 * rng.uniform() - 1) * bound;
      }
      init[s.name] = a;
    }
    m.setWeights(init);
    return m;
  }

  /** Trained adapters (a checkpoint's) on a model holding the base weights. */
  static fromAdapters(net: StackModel, spec: LoraSpec, base: LoraBase, adapters: Record<string, Float32Array>): LoraModel {
    const m = new LoraModel(net, spec, base);
    m.setWeights(adapters);
    return m;
  }

  paramSpecs(): { name: string; shape: number[] }[] {
    return this.specs.map((s) => ({ name: s.name, shape: [...s.shape] }));
  }

  paramCount(): number {
    return countLoraParams(this.config, this.spec);
  }

  /** The adapter (and trained row) tensors by name (owned here: do not dispose). */
  weights(): ReadonlyMap<string, tf.Tensor> {
    return this.params;
  }

  /** The base values of an adapted weight, read back (for tests: they never change). */
  frozenWeight(name: string): Float32Array | undefined {
    const t = this.frozen.get(name);
    return t ? new Float32Array(t.dataSync() as Float32Array) : undefined;
  }

  /** Replace adapters (every one must be given the first time), then re-merge the net's weights. */
  setWeights(weights: Record<string, Float32Array | tf.Tensor> | Map<string, Float32Array | tf.Tensor>): void {
    const shapes = new Map(this.specs.map((s) => [s.name, s.shape]));
    const entries = weights instanceof Map ? [...weights.entries()] : Object.entries(weights);
    for (const [name, value] of entries) {
      const shape = shapes.get(name);
      if (!shape) throw new Error(`LoRA setWeights: unknown adapter '${name}'`);
      const n = shape[0]! * shape[1]!;
      let t: tf.Tensor;
      if (value instanceof tf.Tensor) {
        if (value.size !== n) throw new Error(`LoRA setWeights: ${name} has ${value.size} values, expected ${n}`);
        t = value.shape.join() === shape.join() ? value : tf.reshape(value, shape);
        if (t !== value) value.dispose();
      } else {
        if (value.length !== n) throw new Error(`LoRA setWeights: ${name} has ${value.length} values, expected ${n}`);
        t = tf.tensor(value.slice(), shape, 'float32');
      }
      tf.keep(t);
      this.params.get(name)?.dispose();
      this.params.set(name, t);
    }
    for (const s of this.specs) if (!this.params.has(s.name)) throw new Error(`LoRA setWeights: adapter '${s.name}' missing`);
    this.merge();
    this.version++;
  }

  /**
   * The net's adapted weights := base + s * (B A)^T, as tensor ops (XNNPACK or the GPU: the
   * r*in*out products in JS would cost ~1 s a step at SmolLM2-135M's size). mergeLora, the
   * JS form checkpoints load with, agrees to float32 rounding.
   */
  private merge(): void {
    const next = new Map<string, tf.Tensor>();
    for (const [name, base] of this.frozen) {
      const i = Number(/^layers\.(\d+)\./.exec(name)![1]);
      const weight = name.slice(name.lastIndexOf('.') + 1);
      next.set(
        name,
        tf.tidy(() => {
          const cols: tf.Tensor2D[] = [];
          let at = 0;
          const [rows, width] = base.shape;
          for (const t of LORA_TARGETS) {
            const slot = targetSlot(this.config, t);
            if (slot.weight !== weight) continue;
            if (slot.col > at) cols.push(tf.zeros([rows, slot.col - at]));
            // (B A)^T = A^T B^T: [in, out]; plain 2-D matMuls only (wasm's transposed matMul is a slow fallback)
            cols.push(
              this.spec.targets.includes(t)
                ? tf.matMul(tf.transpose(this.params.get(`layers.${i}.${t}.lora_A`)!), tf.transpose(this.params.get(`layers.${i}.${t}.lora_B`)!))
                : tf.zeros([rows, slot.out]),
            );
            at = slot.col + slot.out;
          }
          if (at < width) cols.push(tf.zeros([rows, width - at]));
          const delta = cols.length === 1 ? cols[0]! : tf.concat(cols, 1);
          return tf.add(base, tf.mul(delta, this.scale));
        }),
      );
    }
    // The original rows, then the trained ones below them.
    for (const [weight, top] of this.frozenRows) next.set(weight, tf.concat([top, this.params.get(weight === 'lm_head' ? HEAD_ROWS : EMBED_ROWS)!], 0));
    this.net.setWeights(next);
  }

  /** Gradients of the net's weights -> the adapters' (dA = s B^T G^T, dB = s G^T A^T); disposes `g`. */
  gradsFromNet(g: Grads): Grads {
    const out: Grads = new Map();
    try {
      for (let i = 0; i < this.config.layers; i++) {
        for (const t of this.spec.targets) {
          const slot = targetSlot(this.config, t);
          const G0 = g.get(`layers.${i}.${slot.weight}`);
          if (!G0) throw new Error(`LoRA: no gradient for layers.${i}.${slot.weight}`);
          const A = this.params.get(`layers.${i}.${t}.lora_A`)!;
          const B = this.params.get(`layers.${i}.${t}.lora_B`)!;
          const [dA, dB] = tf.tidy(() => {
            const G = slot.out === slot.cols ? (G0 as tf.Tensor2D) : tf.slice(G0 as tf.Tensor2D, [0, slot.col], [slot.in, slot.out]);
            // dA = (s G B)^T and dB = (s A G)^T: plain matMuls, the small results transposed
            return [tf.transpose(tf.mul(tf.matMul(G, B), this.scale)), tf.transpose(tf.mul(tf.matMul(A, G), this.scale))];
          });
          out.set(`layers.${i}.${t}.lora_A`, dA!);
          out.set(`layers.${i}.${t}.lora_B`, dB!);
        }
      }
      // The trained rows' gradients: those rows of the net's (a tied head's part is in the embedding's).
      if (this.rows) {
        for (const weight of this.rowWeights()) {
          const G = g.get(weight);
          if (!G) throw new Error(`LoRA: no gradient for ${weight}`);
          out.set(weight === 'lm_head' ? HEAD_ROWS : EMBED_ROWS, tf.slice(G as tf.Tensor2D, [this.rows.first, 0], [this.rows.count, this.config.dModel]));
        }
      }
    } catch (err) {
      for (const x of out.values()) x.dispose();
      throw err;
    } finally {
      for (const x of g.values()) x.dispose();
    }
    return out;
  }

  /**
   * The net's weights whose gradients the adapters and trained rows need (no other weight
   * gradient is computed). The rows' come from the whole embedding's (and head's) gradient:
   * a scatter-add and the head's [vocab, d] product a step, as a full fine-tune computes.
   */
  private get adapted(): ReadonlySet<string> {
    return new Set([...this.frozen.keys(), ...(this.rows ? this.rowWeights() : [])]);
  }

  lossAndGrads(b: Batch): LossStats & { grads: Grads } {
    const r = this.net.lossAndGrads(b, this.adapted);
    return { ...r, grads: this.gradsFromNet(r.grads) };
  }

  async lossAndGradsAsync(b: Batch): Promise<LossStats & { grads: Grads }> {
    const r = await this.net.lossAndGradsAsync(b, this.adapted);
    return { ...r, grads: this.gradsFromNet(r.grads) };
  }

  /** A copy of every adapter, by name (paramSpecs order). */
  exportWeights(): Record<string, Float32Array> {
    const out: Record<string, Float32Array> = {};
    for (const s of this.specs) out[s.name] = new Float32Array(this.params.get(s.name)!.dataSync() as Float32Array);
    return out;
  }

  async exportWeightsAsync(): Promise<Record<string, Float32Array>> {
    if (canReadSync()) return this.exportWeights();
    const data = await Promise.all(this.specs.map((s) => this.params.get(s.name)!.data() as Promise<Float32Array>));
    const out: Record<string, Float32Array> = {};
    this.specs.forEach((s, i) => (out[s.name] = new Float32Array(data[i]!)));
    return out;
  }

  /** Disposes the adapters and the net. */
  dispose(): void {
    for (const t of this.params.values()) t.dispose();
    for (const t of this.frozen.values()) t.dispose();
    for (const t of this.frozenRows.values()) t.dispose();
    this.params.clear();
    this.frozen.clear();
    this.frozenRows.clear();
    this.net.dispose();
  }
}
