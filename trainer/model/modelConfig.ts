// The Stack model's configuration: its dimensions, the presets (tiny ... stack-100m), the
// parameter names and shapes in their canonical order (checkpoints and flat gradient
// buffers use it), and the label value of a position that is not a loss target. No
// tensors here: the CLI, the extension and the run folders read presets without tfjs.
// (Split out of trainer/model/model.ts, which re-exports all of it.)
import { IGNORE_INDEX } from '../../core/sftFormat';

export interface ModelConfig {
  /** Embedding rows (the tokenizer's vocabulary size, or that padded up; see padVocabTo). */
  vocab: number;
  dModel: number;
  layers: number;
  /** Query heads; head dim = dModel / heads unless `headDim` says otherwise. */
  heads: number;
  /** Key/value heads (grouped-query attention); divides `heads`. */
  kvHeads: number;
  /** SwiGLU inner size. */
  mlp: number;
  /** Context length (the longest sequence the model accepts). */
  maxSeq: number;
  /** RoPE base. */
  ropeBase: number;
  /**
   * Previous-token embeddings (0 or absent: none): position t's input is tok_embeddings[x_t]
   * plus prev_embeddings.k[x_{t-k}] for k = 1..prevTokens (row `vocab`: before the start).
   * The n-gram context a first-layer attention head needs to match "the tokens before this
   * one" without learning a previous-token head first: what makes digit copying learnable
   * in a 2-layer student (docs/results.md, "Copying needs the previous token").
   */
  prevTokens?: number;
  /**
   * Decoding only, no weights (0 or absent: none): while the student is in the middle of a
   * word that begins like a word of the user's question, the logits of the tokens that
   * continue that word are raised by this much (core/copyBias.ts). Kept with the model so
   * that every road that decodes it (eval, GRPO, run, the editor) decodes it alike.
   */
  copyBias?: number;
  /**
   * Decoding only, with copyBias: the tokens that run on past a whole name of the question
   * ("Marmar" -> "Marmarmar", "Mifa" -> "Mifa-40M") are lowered by copyBias too (core/copyBias.ts
   * copyOverruns). Absent: false, so a run trained before it decodes as it did.
   */
  copyStop?: boolean;
  /**
   * Decoding only, with copyBias: the numbers of a calc expression or a final answer are copied
   * from the question or the tools' results; digits that would write another are lowered by
   * twice copyBias (core/copyBias.ts numberDrifts). Absent: false, so older runs decode as they did.
   */
  copyValues?: boolean;
  // The fields below let a Hugging Face Llama/Qwen2 checkpoint be loaded as it is
  // (trainer/hf/hfModel.ts). Absent, each keeps the Stack model's own choice, so every preset
  // and every existing checkpoint.json reads as before.
  /** Head size (absent: dModel / heads); HF's `head_dim`, which may differ from it. */
  headDim?: number;
  /** RMSNorm epsilon (absent: 1e-5); HF's `rms_norm_eps`. */
  normEps?: number;
  /** Biases on the q, k and v projections (Qwen2): weight `layers.{i}.bqkv` (absent/false: none). */
  qkvBias?: boolean;
  /** The output head is tok_embeddings (absent/true) or its own weight `lm_head` [vocab, d] (false). */
  tiedHead?: boolean;
  /** RoPE frequency scaling as transformers computes it (HF's `rope_scaling`; absent: none). */
  ropeScaling?: RopeScaling;
}

/** transformers' `linear` (every frequency / factor) and `llama3` (Llama 3.1/3.2: low frequencies / factor, a smooth band between) RoPE scalings. */
export type RopeScaling =
  | { type: 'linear'; factor: number }
  | { type: 'llama3'; factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPositions: number };

export type PresetName = 'tiny' | 'tiny-plain' | 'tiny-deep' | 'small' | 'long' | 'stack-100m';
export const PRESET_NAMES: readonly PresetName[] = ['tiny', 'tiny-plain', 'tiny-deep', 'small', 'long', 'stack-100m'];

export interface Preset {
  /** Model dimensions; the vocabulary comes from the tokenizer (padded up to padVocabTo). */
  model: Omit<ModelConfig, 'vocab'> & { padVocabTo?: number };
  /** Sequences per optimiser step. */
  batch: number;
  /** Peak learning rate (AdamW). */
  lr: number;
  /** Default training budget in minutes (optimiser time), when the preset has no `steps`. */
  minutes: number;
  /** Default training budget in optimiser steps (wins over `minutes`): reproducible under load. */
  steps?: number;
  betas: [number, number];
  weightDecay: number;
  /** Global gradient-norm clip. */
  clip: number;
  warmupSteps: number;
  /** Cosine decay ends at lr * minLrRatio. */
  minLrRatio: number;
  /** Where the preset is meant to run. */
  device: 'cpu' | 'gpu';
  summary: string;
}

/**
 * The copy bias every preset decodes with (ModelConfig.copyBias): the strongest of 2, 4, 8,
 * 16 that lost no task on the dev split of the textbook world or of a user's world
 * (docs/decisions.md, "A copy bias").
 */
export const COPY_BIAS = 4;
/**
 * Every preset that decodes with the copy bias keeps copied names whole too (ModelConfig.copyStop):
 * chosen on the dev splits, where it lost no task (docs/decisions.md, "A copy stop").
 */
export const COPY_STOP = true;
/**
 * And copies the numbers of calc expressions and answers from the question and the tools
 * (ModelConfig.copyValues): chosen on the dev splits, where it lost no task (docs/decisions.md,
 * "A number copy").
 */
export const COPY_VALUES = true;

const TINY: Preset = {
  model: { dModel: 128, layers: 2, heads: 4, kvHeads: 2, mlp: 352, maxSeq: 512, ropeBase: 10000, prevTokens: 2, copyBias: COPY_BIAS, copyStop: COPY_STOP, copyValues: COPY_VALUES },
  batch: 2,
  lr: 4e-3,
  // 12 minutes is about 8,000 steps on a quiet 2-core machine. The default recipe
  // (trainer/sft/recipes.ts DEFAULT_RECIPE) was chosen at 8,000 steps (docs/results.md). With
  // data and evaluations the run stays inside 20 minutes of wall.
  minutes: 12,
  betas: [0.9, 0.95],
  weightDecay: 0.1,
  clip: 1,
  warmupSteps: 50,
  minLrRatio: 0.1,
  device: 'cpu',
  summary: '~657k parameters at vocab 749 (192k of them previous-token embeddings): the student that learns to copy on 2 CPU cores (12 minutes by default)',
};

export const PRESETS: Record<PresetName, Preset> = {
  tiny: TINY,
  'tiny-plain': {
    ...TINY,
    model: { ...TINY.model, prevTokens: 0 },
    summary: 'tiny without previous-token embeddings (~465k parameters): the student of the earlier measurements',
  },
  'tiny-deep': {
    ...TINY,
    model: { ...TINY.model, layers: 3 },
    // 8,000 steps took 15.6 optimiser minutes alone on 2 cores (tiny: about 10).
    minutes: 18,
    summary: 'tiny with a third layer (~842k parameters at vocab 749): 1.5 times the time per step; measured no better than tiny at 8,000 steps (docs/results.md)',
  },
  small: {
    model: { dModel: 192, layers: 3, heads: 6, kvHeads: 2, mlp: 512, maxSeq: 512, ropeBase: 10000, copyBias: COPY_BIAS, copyStop: COPY_STOP, copyValues: COPY_VALUES },
    batch: 2,
    lr: 3e-3,
    minutes: 20,
    betas: [0.9, 0.95],
    weightDecay: 0.1,
    clip: 1,
    warmupSteps: 50,
    minLrRatio: 0.1,
    device: 'cpu',
    summary: '~1.3M parameters: more capacity, fewer steps per minute',
  },
  long: {
    model: { dModel: 128, layers: 3, heads: 4, kvHeads: 2, mlp: 352, maxSeq: 512, ropeBase: 10000, copyBias: COPY_BIAS, copyStop: COPY_STOP, copyValues: COPY_VALUES },
    batch: 2,
    lr: 4e-3,
    minutes: 60,
    betas: [0.9, 0.95],
    weightDecay: 0.1,
    clip: 1,
    warmupSteps: 100,
    minLrRatio: 0.1,
    device: 'cpu',
    summary: "~650k parameters (tiny's width, one more layer) for a 60-minute CPU budget",
  },
  'stack-100m': {
    model: { dModel: 512, layers: 30, heads: 8, kvHeads: 2, mlp: 1408, maxSeq: 2048, ropeBase: 10000, padVocabTo: 32768, copyBias: COPY_BIAS, copyStop: COPY_STOP, copyValues: COPY_VALUES },
    batch: 8,
    lr: 6e-4,
    minutes: 120,
    betas: [0.9, 0.95],
    weightDecay: 0.1,
    clip: 1,
    warmupSteps: 200,
    minLrRatio: 0.1,
    device: 'gpu',
    summary: "the seed's ~101M-parameter Stack (d 512, 30 layers, 8 q / 2 kv heads, head 64): for a GPU",
  },
};

/** The ModelConfig of a preset for a tokenizer of `vocab` tokens (padded up when the preset says so). */
export function presetConfig(name: PresetName, vocab: number): ModelConfig {
  const p = PRESETS[name];
  if (!p) throw new Error(`unknown preset '${name}' (known: ${PRESET_NAMES.join(', ')})`);
  const { padVocabTo, ...dims } = p.model;
  return { vocab: padVocabTo !== undefined ? Math.max(vocab, padVocabTo) : vocab, ...dims };
}

export function validateConfig(cfg: ModelConfig): void {
  const ints: ('vocab' | 'dModel' | 'layers' | 'heads' | 'kvHeads' | 'mlp' | 'maxSeq')[] = ['vocab', 'dModel', 'layers', 'heads', 'kvHeads', 'mlp', 'maxSeq'];
  for (const k of ints) {
    if (!Number.isInteger(cfg[k]) || cfg[k] < 1) throw new Error(`model config: ${k} must be a positive integer (got ${cfg[k]})`);
  }
  if (cfg.headDim !== undefined) {
    if (!Number.isInteger(cfg.headDim) || cfg.headDim < 1) throw new Error(`model config: headDim must be a positive integer (got ${String(cfg.headDim)})`);
  } else if (cfg.dModel % cfg.heads !== 0) throw new Error(`model config: dModel ${cfg.dModel} is not a multiple of heads ${cfg.heads}`);
  if (cfg.heads % cfg.kvHeads !== 0) throw new Error(`model config: heads ${cfg.heads} is not a multiple of kvHeads ${cfg.kvHeads}`);
  if (headDimOf(cfg) % 2 !== 0) throw new Error('model config: the head dim must be even (RoPE)');
  if (cfg.normEps !== undefined && !(typeof cfg.normEps === 'number' && cfg.normEps > 0 && cfg.normEps < 1)) {
    throw new Error(`model config: normEps must be a number in (0, 1) (got ${String(cfg.normEps)})`);
  }
  const rs = cfg.ropeScaling;
  if (rs !== undefined) {
    const pos = (x: unknown): boolean => typeof x === 'number' && Number.isFinite(x) && x > 0;
    const ok =
      typeof rs === 'object' &&
      rs !== null &&
      pos(rs.factor) &&
      (rs.type === 'linear' || (rs.type === 'llama3' && pos(rs.lowFreqFactor) && pos(rs.highFreqFactor) && rs.highFreqFactor > rs.lowFreqFactor && pos(rs.originalMaxPositions)));
    if (!ok) throw new Error(`model config: ropeScaling must be {type: 'linear', factor} or {type: 'llama3', factor, lowFreqFactor < highFreqFactor, originalMaxPositions} (got ${JSON.stringify(rs)})`);
  }
  for (const k of ['qkvBias', 'tiedHead', 'copyStop', 'copyValues'] as const) {
    if (cfg[k] !== undefined && typeof cfg[k] !== 'boolean') throw new Error(`model config: ${k} must be true or false (got ${String(cfg[k])})`);
  }
  if (!(cfg.ropeBase > 1)) throw new Error('model config: ropeBase must be > 1');
  const n = cfg.prevTokens ?? 0;
  if (!Number.isInteger(n) || n < 0 || n > 4) throw new Error(`model config: prevTokens must be an integer in 0..4 (got ${String(cfg.prevTokens)})`);
  const c = cfg.copyBias ?? 0;
  if (typeof c !== 'number' || !Number.isFinite(c) || c < 0 || c > 50) throw new Error(`model config: copyBias must be a number in 0..50 (got ${String(cfg.copyBias)})`);
}

/** The number of previous-token embedding tables of a config (0 when absent). */
export function prevTokensOf(cfg: ModelConfig): number {
  return cfg.prevTokens ?? 0;
}

/** The head size of a config (headDim, or dModel / heads). */
export function headDimOf(cfg: ModelConfig): number {
  return cfg.headDim ?? cfg.dModel / cfg.heads;
}

/**
 * RoPE's inverse frequencies, base^(-2i/hd) for i < hd/2, scaled as transformers scales them
 * (modeling_rope_utils: `linear` divides all by factor; `llama3` divides those whose
 * wavelength exceeds originalMaxPositions / lowFreqFactor, keeps those under
 * originalMaxPositions / highFreqFactor, and interpolates between).
 */
export function ropeInvFreq(cfg: ModelConfig): Float64Array {
  const hd = headDimOf(cfg);
  const inv = Float64Array.from({ length: hd / 2 }, (_, i) => Math.pow(cfg.ropeBase, (-2 * i) / hd));
  const rs = cfg.ropeScaling;
  if (!rs) return inv;
  if (rs.type === 'linear') return inv.map((f) => f / rs.factor);
  const lowWavelen = rs.originalMaxPositions / rs.lowFreqFactor;
  const highWavelen = rs.originalMaxPositions / rs.highFreqFactor;
  return inv.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    if (wavelen < highWavelen) return f;
    if (wavelen > lowWavelen) return f / rs.factor;
    const smooth = (rs.originalMaxPositions / wavelen - rs.lowFreqFactor) / (rs.highFreqFactor - rs.lowFreqFactor);
    return (1 - smooth) * (f / rs.factor) + smooth * f;
  });
}

/** The RMSNorm epsilon of a config (normEps, or the Stack model's 1e-5). */
export function normEpsOf(cfg: ModelConfig): number {
  return cfg.normEps ?? 1e-5;
}

/** The weight the output head multiplies by (transposed): tok_embeddings when tied, else lm_head. */
export function headWeightOf(cfg: ModelConfig): 'tok_embeddings' | 'lm_head' {
  return cfg.tiedHead === false ? 'lm_head' : 'tok_embeddings';
}

/** Parameter names and shapes, in the canonical order (checkpoints and flat buffers use it). */
export function paramSpecs(cfg: ModelConfig): { name: string; shape: number[] }[] {
  const hd = headDimOf(cfg);
  const d = cfg.dModel;
  const specs: { name: string; shape: number[] }[] = [{ name: 'tok_embeddings', shape: [cfg.vocab, d] }];
  for (let k = 1; k <= prevTokensOf(cfg); k++) specs.push({ name: `prev_embeddings.${k}`, shape: [cfg.vocab + 1, d] });
  for (let i = 0; i < cfg.layers; i++) {
    specs.push(
      { name: `layers.${i}.attn_norm`, shape: [d] },
      { name: `layers.${i}.wqkv`, shape: [d, (cfg.heads + 2 * cfg.kvHeads) * hd] },
      ...(cfg.qkvBias ? [{ name: `layers.${i}.bqkv`, shape: [(cfg.heads + 2 * cfg.kvHeads) * hd] }] : []),
      { name: `layers.${i}.wo`, shape: [cfg.heads * hd, d] },
      { name: `layers.${i}.mlp_norm`, shape: [d] },
      { name: `layers.${i}.w_gate`, shape: [d, cfg.mlp] },
      { name: `layers.${i}.w_up`, shape: [d, cfg.mlp] },
      { name: `layers.${i}.w_down`, shape: [cfg.mlp, d] },
    );
  }
  specs.push({ name: 'final_norm', shape: [d] });
  if (cfg.tiedHead === false) specs.push({ name: 'lm_head', shape: [cfg.vocab, d] });
  return specs;
}

export function countParams(cfg: ModelConfig): number {
  return paramSpecs(cfg).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}

/** Label value of a position that is not a loss target (the data's IGNORE_INDEX, one constant). */
export const IGNORE = IGNORE_INDEX;
