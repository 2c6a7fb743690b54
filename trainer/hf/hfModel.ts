// A Hugging Face model folder as a StackModel: `config.json` of LlamaForCausalLM or
// Qwen2ForCausalLM, weights from `model.safetensors` or the shards of
// `model.safetensors.index.json` (F32, F16, BF16: converted to float32, what the backends
// compute in). The Stack model is already Llama-shaped (pre-norm RMSNorm, rotate-half RoPE
// with HF's inv_freq, repeat_kv GQA, SwiGLU, no biases, tied head: trainer/model/model.ts); what
// a checkpoint adds is in the config's optional fields (headDim, normEps, qkvBias for
// Qwen2, tiedHead false for an lm_head, ropeScaling for `linear` and `llama3` RoPE scaling).
// Anything the lab does not compute exactly as transformers does (another rope_scaling
// type, a sliding window in use, MoE, another activation,
// Llama's attention_bias or mlp_bias, quantisation, dropout) is refused in one line naming
// the config field: never a silent approximation.
//
// Weight names (transformers) -> the lab's (trainer/model/model.ts); torch.nn.Linear stores
// [out, in], the lab [in, out], so every projection is transposed:
//   model.embed_tokens.weight [V, d]                       tok_embeddings [V, d]
//   model.layers.N.self_attn.{q,k,v}_proj.weight [o, d]     layers.N.wqkv [d, (H+2K)*hd] (q | k | v columns)
//   model.layers.N.self_attn.{q,k,v}_proj.bias (Qwen2)      layers.N.bqkv [(H+2K)*hd]
//   model.layers.N.self_attn.o_proj.weight [d, H*hd]        layers.N.wo [H*hd, d]
//   model.layers.N.mlp.{gate,up}_proj.weight [mlp, d]       layers.N.w_{gate,up} [d, mlp]
//   model.layers.N.mlp.down_proj.weight [d, mlp]            layers.N.w_down [mlp, d]
//   model.layers.N.{input,post_attention}_layernorm.weight  layers.N.{attn,mlp}_norm
//   model.norm.weight                                       final_norm
//   lm_head.weight [V, d] (untied only)                     lm_head [V, d]
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  type BpeTokenizer,
  HfTokenizer,
  type SpecialToken,
  anyTokenizerFromJsonText,
  parseTokenizerJson,
  tokenizerFromJsonText,
  tokenizerHash,
  tokenizerJsonSize,
  withWireSpecials,
} from '../../core/tokenizer';
import type { GivenTokenizer } from '../sft/prepare';
import { INPUT_LIMITS, InputError, readInputObject, readInputText } from '../../store/files';
import { ModelConfig, RopeScaling, StackModel, countParams, headDimOf, paramSpecs, validateConfig } from '../model/model';
import { SafetensorsModel, StDtype } from './safetensorsFile';
import { HF_CONFIG_FILE, HF_WEIGHTS_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE } from '../../core/protocol/folders';

/** The q, k and v projections in the order the lab's fused wqkv (and bqkv) holds them, with their widths. */
export function qkvProjections(cfg: ModelConfig): readonly (readonly ['q_proj' | 'k_proj' | 'v_proj', number])[] {
  const hd = headDimOf(cfg);
  return [
    ['q_proj', cfg.heads * hd],
    ['k_proj', cfg.kvHeads * hd],
    ['v_proj', cfg.kvHeads * hd],
  ];
}

export type HfArchitecture = 'LlamaForCausalLM' | 'Qwen2ForCausalLM';
export const HF_ARCHITECTURES: readonly HfArchitecture[] = ['LlamaForCausalLM', 'Qwen2ForCausalLM'];
const MODEL_TYPE: Record<HfArchitecture, string> = { LlamaForCausalLM: 'llama', Qwen2ForCausalLM: 'qwen2' };

export interface HfConfig {
  architecture: HfArchitecture;
  /** The lab's model config for it. */
  model: ModelConfig;
  /** config.json as read. */
  raw: Record<string, unknown>;
}

export interface HfModelFolder extends HfConfig {
  dir: string;
  /** Every weight of paramSpecs(model), float32. */
  weights: Record<string, Float32Array>;
  /** The dtypes the checkpoint stores, e.g. ["BF16"]. */
  dtypes: StDtype[];
  /** Shard files (1 for model.safetensors). */
  files: number;
  params: number;
}

function checkFolder(dir: string): string {
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch {
    throw new InputError(`${dir}: no such folder (a Hugging Face model folder: config.json and model.safetensors)`);
  }
  if (!st.isDirectory()) throw new InputError(`${dir} is not a folder (a Hugging Face model folder: config.json and model.safetensors)`);
  const file = path.join(dir, HF_CONFIG_FILE);
  if (!fs.existsSync(file)) throw new InputError(`${dir}: no config.json (not a Hugging Face model folder)`);
  return file;
}

/** Read and check `dir/config.json`: the lab's ModelConfig for it, or an InputError naming the field. */
export function readHfConfig(dir: string): HfConfig {
  const file = checkFolder(dir);
  const raw = readInputObject(file, 'the model config');
  const fail = (field: string, what: string): never => {
    throw new InputError(`${file}: "${field}" ${what}`);
  };
  const archs = raw['architectures'];
  if (!Array.isArray(archs) || archs.length !== 1 || typeof archs[0] !== 'string') {
    fail('architectures', `must name one architecture (got ${JSON.stringify(archs)}; supported: ${HF_ARCHITECTURES.join(', ')})`);
  }
  const arch = (archs as string[])[0]!;
  if (!(HF_ARCHITECTURES as readonly string[]).includes(arch)) fail('architectures', `${JSON.stringify(arch)} is not supported (supported: ${HF_ARCHITECTURES.join(', ')})`);
  const architecture = arch as HfArchitecture;
  const isQwen = architecture === 'Qwen2ForCausalLM';
  if (raw['model_type'] !== undefined && raw['model_type'] !== MODEL_TYPE[architecture]) {
    fail('model_type', `${JSON.stringify(raw['model_type'])} does not match ${architecture} (expected "${MODEL_TYPE[architecture]}")`);
  }
  const present = (k: string): boolean => raw[k] !== undefined && raw[k] !== null;
  const int = (k: string, dflt?: number): number => {
    const v = raw[k] ?? dflt;
    if (v === undefined) fail(k, 'is missing');
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) fail(k, `must be a positive integer (got ${JSON.stringify(v)})`);
    return v as number;
  };
  const num = (k: string, dflt: number): number => {
    const v = raw[k] ?? dflt;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) fail(k, `must be a positive number (got ${JSON.stringify(v)})`);
    return v as number;
  };
  const bool = (k: string, dflt: boolean): boolean => {
    const v = raw[k] ?? dflt;
    if (typeof v !== 'boolean') fail(k, `must be true or false (got ${JSON.stringify(v)})`);
    return v as boolean;
  };

  // What the lab does not compute: refused, one field at a time.
  const act = raw['hidden_act'] ?? 'silu';
  if (act !== 'silu') fail('hidden_act', `${JSON.stringify(act)} is not supported (only "silu": SwiGLU)`);
  let ropeScaling: RopeScaling | undefined;
  if (present('rope_scaling')) {
    const rs = raw['rope_scaling'];
    const o = typeof rs === 'object' && rs !== null && !Array.isArray(rs) ? (rs as Record<string, unknown>) : {};
    const type = o['rope_type'] ?? o['type'];
    const known: Record<string, string[]> = { default: [], linear: ['factor'], llama3: ['factor', 'low_freq_factor', 'high_freq_factor', 'original_max_position_embeddings'] };
    if (typeof type !== 'string' || !(type in known)) fail('rope_scaling', `${JSON.stringify(rs)} is not implemented (implemented: null, "default", "linear", "llama3")`);
    const keys = known[type as string]!;
    const extra = Object.keys(o).filter((k) => k !== 'rope_type' && k !== 'type' && !keys.includes(k));
    if (extra.length) fail('rope_scaling', `${JSON.stringify(rs)}: ${extra.join(', ')} ${extra.length > 1 ? 'are' : 'is'} not implemented for type "${type as string}"`);
    const v = (k: string): number => {
      const x = o[k];
      if (typeof x !== 'number' || !Number.isFinite(x) || x <= 0) fail('rope_scaling', `.${k} must be a positive number (got ${JSON.stringify(x)})`);
      return x as number;
    };
    if (type === 'linear') ropeScaling = { type: 'linear', factor: v('factor') };
    else if (type === 'llama3') {
      ropeScaling = {
        type: 'llama3',
        factor: v('factor'),
        lowFreqFactor: v('low_freq_factor'),
        highFreqFactor: v('high_freq_factor'),
        originalMaxPositions: v('original_max_position_embeddings'),
      };
    }
  }
  if (present('partial_rotary_factor') && raw['partial_rotary_factor'] !== 1) fail('partial_rotary_factor', `${JSON.stringify(raw['partial_rotary_factor'])} is not implemented (RoPE on the whole head)`);
  if (isQwen) {
    if (bool('use_sliding_window', false)) fail('use_sliding_window', 'is true: sliding-window attention is not implemented');
    const lt = raw['layer_types'];
    if (lt !== undefined && lt !== null && !(Array.isArray(lt) && lt.every((t) => t === 'full_attention'))) fail('layer_types', 'asks for attention other than "full_attention" (a sliding window): not implemented');
  } else {
    if (present('sliding_window')) fail('sliding_window', `${JSON.stringify(raw['sliding_window'])}: sliding-window attention is not implemented`);
    if (bool('attention_bias', false)) fail('attention_bias', 'is true: Llama attention biases (q, k, v and o) are not implemented');
  }
  if (bool('mlp_bias', false)) fail('mlp_bias', 'is true: MLP biases are not implemented');
  for (const k of ['num_experts', 'num_local_experts', 'n_routed_experts', 'num_experts_per_tok', 'moe_intermediate_size', 'decoder_sparse_step']) {
    if (present(k) && raw[k] !== 0) fail(k, `${JSON.stringify(raw[k])}: mixture-of-experts layers are not implemented`);
  }
  if (present('quantization_config')) fail('quantization_config', 'is set: quantised weights are not read (F32, F16, BF16 only)');
  const drop = raw['attention_dropout'] ?? 0;
  if (drop !== 0) fail('attention_dropout', `${JSON.stringify(drop)}: attention dropout is not implemented (0 only)`);
  // pretraining_tp > 1 only slices the same matmuls in transformers (the same function): checked, then read as 1.
  if (present('pretraining_tp')) int('pretraining_tp');

  const d = int('hidden_size');
  const heads = int('num_attention_heads');
  const kvHeads = int('num_key_value_heads', heads);
  if (heads % kvHeads !== 0) fail('num_key_value_heads', `${kvHeads} does not divide num_attention_heads ${heads}`);
  const headDim = present('head_dim') ? int('head_dim') : d / heads;
  if (!Number.isInteger(headDim)) fail('hidden_size', `${d} is not a multiple of num_attention_heads ${heads} (and no head_dim is given)`);
  if (headDim % 2 !== 0) fail('head_dim', `${headDim} is odd: RoPE needs an even head size`);
  const tied = bool('tie_word_embeddings', false);
  const model: ModelConfig = {
    vocab: int('vocab_size'),
    dModel: d,
    layers: int('num_hidden_layers'),
    heads,
    kvHeads,
    mlp: int('intermediate_size'),
    maxSeq: int('max_position_embeddings', isQwen ? 32768 : 2048),
    ropeBase: num('rope_theta', 10000),
    ...(headDim !== d / heads ? { headDim } : {}),
    normEps: num('rms_norm_eps', 1e-6),
    ...(isQwen ? { qkvBias: true } : {}),
    ...(tied ? {} : { tiedHead: false }),
    ...(ropeScaling ? { ropeScaling } : {}),
  };
  try {
    validateConfig(model);
  } catch (err) {
    throw new InputError(`${file}: ${(err as Error).message}`);
  }
  return { architecture, model, raw };
}

/** [rows, cols] row-major -> its transpose written into dst [cols, dstCols] at column offset `colOff`. */
function transposeInto(src: Float32Array, rows: number, cols: number, dst: Float32Array, dstCols: number, colOff: number): void {
  const B = 32; // blocks keep both sides in cache
  for (let r0 = 0; r0 < rows; r0 += B) {
    const r1 = Math.min(rows, r0 + B);
    for (let c0 = 0; c0 < cols; c0 += B) {
      const c1 = Math.min(cols, c0 + B);
      for (let r = r0; r < r1; r++) {
        const s = r * cols;
        for (let c = c0; c < c1; c++) dst[c * dstCols + colOff + r] = src[s + c]!;
      }
    }
  }
}

/** Tensors a checkpoint may hold that carry nothing the forward pass reads. */
const IGNORED = /^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$/;

/** Load a Hugging Face model folder: its config and every weight, as the lab names them. */
export function loadHfFolder(dir: string): HfModelFolder {
  return readHfFolder(dir, true);
}

/**
 * Check a folder as loadHfFolder does (config, every weight's name, shape and dtype)
 * without reading the weights: `weights` is empty. What `model inspect` reports.
 */
export function inspectHfFolder(dir: string): HfModelFolder {
  return readHfFolder(dir, false);
}

function readHfFolder(dir: string, readData: boolean): HfModelFolder {
  const cfg = readHfConfig(dir);
  const { model, architecture } = cfg;
  const st = SafetensorsModel.open(dir);
  const where = st.index ?? path.join(dir, HF_WEIGHTS_FILE);
  try {
    const H = model.heads;
    const K = model.kvHeads;
    const hd = headDimOf(model);
    const d = model.dModel;
    const V = model.vocab;
    const used = new Set<string>();
    const dtypes = new Set<StDtype>();
    const EMPTY = new Float32Array(0);
    const get = (name: string, shape: number[], why = ''): Float32Array => {
      const e = st.entry(name);
      if (!e) throw new InputError(`${where}: weight ${name} is missing${why}`);
      if (e.shape.join() !== shape.join()) throw new InputError(`${where}: weight ${name} has shape [${e.shape}], config.json wants [${shape}]`);
      used.add(name);
      dtypes.add(e.dtype);
      return readData ? st.read(name) : EMPTY;
    };
    // Without reading, the transposes write nowhere: sizes 0 keep every loop empty.
    const alloc = (n: number): Float32Array => (readData ? new Float32Array(n) : EMPTY);
    const weights: Record<string, Float32Array> = {};
    weights['tok_embeddings'] = get('model.embed_tokens.weight', [V, d]);
    const W1 = (H + 2 * K) * hd;
    for (let i = 0; i < model.layers; i++) {
      const p = `model.layers.${i}.`;
      const wqkv = alloc(d * W1);
      const bqkv = model.qkvBias ? alloc(W1) : null;
      let col = 0;
      for (const [proj, n] of qkvProjections(model)) {
        const w = get(`${p}self_attn.${proj}.weight`, [n, d]);
        if (readData) transposeInto(w, n, d, wqkv, W1, col);
        if (bqkv) {
          const b = get(`${p}self_attn.${proj}.bias`, [n], ` (${architecture} has q/k/v biases)`);
          if (readData) bqkv.set(b, col);
        }
        col += n;
      }
      weights[`layers.${i}.attn_norm`] = get(`${p}input_layernorm.weight`, [d]);
      weights[`layers.${i}.wqkv`] = wqkv;
      if (bqkv) weights[`layers.${i}.bqkv`] = bqkv;
      const wo = alloc(H * hd * d);
      const o = get(`${p}self_attn.o_proj.weight`, [d, H * hd]);
      if (readData) transposeInto(o, d, H * hd, wo, d, 0);
      weights[`layers.${i}.wo`] = wo;
      weights[`layers.${i}.mlp_norm`] = get(`${p}post_attention_layernorm.weight`, [d]);
      for (const [proj, lab, rows, cols] of [
        ['gate_proj', 'w_gate', model.mlp, d],
        ['up_proj', 'w_up', model.mlp, d],
        ['down_proj', 'w_down', d, model.mlp],
      ] as const) {
        const out = alloc(rows * cols);
        const w = get(`${p}mlp.${proj}.weight`, [rows, cols]);
        if (readData) transposeInto(w, rows, cols, out, rows, 0);
        weights[`layers.${i}.${lab}`] = out;
      }
    }
    weights['final_norm'] = get('model.norm.weight', [d]);
    if (model.tiedHead === false) weights['lm_head'] = get('lm_head.weight', [V, d], ' (tie_word_embeddings is false: an untied head needs it)');
    else if (st.entry('lm_head.weight')) used.add('lm_head.weight'); // tied: transformers ties it to the embedding, so does the lab
    const extra = st.names().filter((n) => !used.has(n) && !IGNORED.test(n));
    if (extra.length) {
      throw new InputError(
        `${where}: weight ${extra[0]} is not part of a ${architecture} the lab computes${extra.length > 1 ? ` (and ${extra.length - 1} more)` : ''}: refusing to drop it`,
      );
    }
    if (readData) for (const s of paramSpecs(model)) if (!weights[s.name]) throw new Error(`hf load: ${s.name} was not filled`); // a bug, not bad input
    return { ...cfg, dir, weights: readData ? weights : {}, dtypes: [...dtypes].sort(), files: st.files.length, params: countParams(model) };
  } finally {
    st.close();
  }
}

/** What a folder's tokenizer.json is to the lab. */
export type HfTokenizerKind =
  | { kind: 'absent'; file: string }
  /** The lab's byte-level BPE with the wire-format specials as ids 0..8 (an exported run's). */
  | { kind: 'lab'; file: string; tokenizer: BpeTokenizer }
  /** Any other tokenizer (SmolLM's, Qwen's ...): `why` is the first thing the lab's reader refused. */
  | { kind: 'foreign'; file: string; why: string };

/** Classify `dir/tokenizer.json`: absent, the lab's own, or a foreign one. */
export function hfTokenizerKind(dir: string): HfTokenizerKind {
  const file = path.join(dir, TOKENIZER_FILE);
  if (!fs.existsSync(file)) return { kind: 'absent', file };
  const text = readInputText(file, 'the tokenizer', INPUT_LIMITS.tokenizer);
  try {
    JSON.parse(text);
  } catch (err) {
    throw new InputError(`${file} is not JSON (${(err as Error).message.split('\n')[0]})`);
  }
  try {
    return { kind: 'lab', file, tokenizer: tokenizerFromJsonText(text) };
  } catch (err) {
    return { kind: 'foreign', file, why: (err as Error).message.replace(/^tokenizer\.json: /, '') };
  }
}

/** A StackModel with a Hugging Face folder's weights (a tfjs backend must be initialised). */
export function hfModelFromFolder(dir: string): { model: StackModel; folder: HfModelFolder } {
  const folder = loadHfFolder(dir);
  return { model: StackModel.fromWeights(folder.model, folder.weights), folder };
}

/** A base model's own Hugging Face tokenizer, made the run's: the wire specials it lacked added after the embedding's rows. */
export interface OwnTokenizer {
  /** The base's tokenizer.json. */
  file: string;
  /** The run's tokenizer files (the base's plus the added tokens). */
  given: GivenTokenizer;
  /** The wire specials added, with their ids (empty when the tokenizer had them all). */
  added: { content: SpecialToken; id: number }[];
  /** The run's embedding rows: the model's vocab_size plus the added tokens. */
  vocab: number;
}

/** What `train sft --base DIR` starts from: the inspected folder, and the model's own tokenizer when it is not the lab's. */
export interface BaseStart {
  folder: HfModelFolder;
  own: OwnTokenizer | null;
}

/**
 * The run's tokenizer from a base model's own tokenizer.json: the wire specials it lacks
 * become special added tokens with ids from vocab_size on (new embedding rows, see
 * withAddedRows), tokenizer_config.json is the base's (or a minimal one) with them in its
 * added_tokens_decoder. A file that does not parse or load, or holds more ids than the model
 * has rows, is an InputError naming the file and the field.
 */
export function ownTokenizerOf(base: string, folder: HfModelFolder, file: string): OwnTokenizer {
  const fail = (err: unknown): never => {
    throw new InputError(`${file}: ${(err as Error).message.replace(/^tokenizer\.json: /, '')}`);
  };
  let obj: Record<string, unknown> = {};
  let size = 0;
  try {
    obj = parseTokenizerJson(readInputText(file, 'the tokenizer', INPUT_LIMITS.tokenizer));
    size = tokenizerJsonSize(obj);
  } catch (err) {
    if (err instanceof InputError) throw err;
    fail(err);
  }
  const V = folder.model.vocab;
  if (V < size) throw new InputError(`${path.join(base, HF_CONFIG_FILE)}: "vocab_size" ${V} is smaller than the ${size} ids of ${file}: those tokens would have no embedding row`);
  const { json, added } = withWireSpecials(obj, V);
  try {
    new HfTokenizer(json); // every wire special one special id, the whole file loads
  } catch (err) {
    fail(err);
  }
  const configFile = path.join(base, TOKENIZER_CONFIG_FILE);
  const config: Record<string, unknown> = fs.existsSync(configFile) ? readInputObject(configFile, 'the tokenizer config') : { tokenizer_class: 'PreTrainedTokenizerFast' };
  // transformers' default clean-up rewrites " ." to "." on decode: the wire format's text must round-trip.
  config['clean_up_tokenization_spaces'] = false;
  const dec = config['added_tokens_decoder'];
  if (typeof dec === 'object' && dec !== null && !Array.isArray(dec)) {
    for (const a of added) (dec as Record<string, unknown>)[String(a.id)] = { content: a.content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true };
  }
  const from = `${file} with ${added.length} wire-format special(s) added as tokens ${added.length ? `${added[0]!.id}..${added[added.length - 1]!.id}` : ''}`.trim();
  return { file, given: { json: JSON.stringify(json), config, from }, added, vocab: V + added.length };
}

/**
 * A base model's weights with `vocab` embedding rows: each new row (and, untied, each new
 * row of lm_head) the mean of the existing rows, so an added token starts as "an average
 * token" rather than noise or zero.
 */
export function withAddedRows(cfg: ModelConfig, weights: Record<string, Float32Array>, vocab: number): Record<string, Float32Array> {
  if (vocab === cfg.vocab) return weights;
  if (vocab < cfg.vocab) throw new Error(`withAddedRows: ${vocab} rows is fewer than the model's ${cfg.vocab}`);
  const d = cfg.dModel;
  const grow = (w: Float32Array): Float32Array => {
    const out = new Float32Array(vocab * d);
    out.set(w.subarray(0, cfg.vocab * d));
    const mean = new Float64Array(d);
    for (let r = 0; r < cfg.vocab; r++) for (let j = 0; j < d; j++) mean[j]! += w[r * d + j]!;
    for (let j = 0; j < d; j++) mean[j]! /= cfg.vocab;
    for (let r = cfg.vocab; r < vocab; r++) for (let j = 0; j < d; j++) out[r * d + j] = mean[j]!;
    return out;
  };
  const out: Record<string, Float32Array> = { ...weights, tok_embeddings: grow(weights['tok_embeddings']!) };
  if (weights['lm_head']) out['lm_head'] = grow(weights['lm_head']);
  return out;
}

/**
 * `train sft --base DIR`, checked before the run writes anything: the folder loads (config,
 * every weight's name, shape and dtype) and its tokenizer is usable. The lab's own tokenizer
 * (an exported run's) must be the run's (`runTokenizerFile`, which must exist: a new run
 * trains its own, whose ids would mean other strings to the model). A model's own Hugging
 * Face tokenizer becomes the run's (`own`: the wire specials it lacks added as tokens), so the
 * run folder must hold no other tokenizer.json. (With LoRA, the added rows train beside the
 * adapters: trainer/model/lora.ts.) Returns the inspected folder (no weights read).
 */
export function checkBaseFolder(base: string, runTokenizerFile: string): BaseStart {
  const folder = inspectHfFolder(base);
  const tok = hfTokenizerKind(base);
  if (tok.kind === 'absent') throw new InputError(`--base ${base}: no tokenizer.json (the tokenizer the model was trained with is needed)`);
  if (tok.kind === 'foreign') {
    const own = ownTokenizerOf(base, folder, tok.file);
    if (fs.existsSync(runTokenizerFile)) {
      const runTok = anyTokenizerFromJsonText(readInputText(runTokenizerFile, 'the tokenizer', INPUT_LIMITS.tokenizer));
      const want = new HfTokenizer(JSON.parse(own.given.json) as Record<string, unknown>);
      if (tokenizerHash(runTok) !== tokenizerHash(want)) {
        throw new InputError(
          `--base ${tok.file}: the run folder holds another tokenizer, ${runTokenizerFile} (${tokenizerHash(runTok)}): the model's own tokenizer needs a run folder without one (data/ may stay: it is tokenized with the model's)`,
        );
      }
    }
    return { folder, own };
  }
  if (!fs.existsSync(runTokenizerFile)) {
    throw new InputError(
      `--base ${base}: the run folder has no tokenizer.json yet, and a new run trains its own, whose ids would mean other strings to the model: ` +
        `start from a run folder holding the model's tokenizer.json and data (a copy of the run it was exported from)`,
    );
  }
  const runTok = tokenizerFromJsonText(readInputText(runTokenizerFile, 'the tokenizer', INPUT_LIMITS.tokenizer));
  if (tokenizerHash(runTok) !== tokenizerHash(tok.tokenizer)) {
    throw new InputError(`--base ${tok.file} (${tokenizerHash(tok.tokenizer)}) is not the run's tokenizer ${runTokenizerFile} (${tokenizerHash(runTok)}): the model's ids would mean other strings`);
  }
  if (folder.model.vocab < runTok.vocabSize) throw new InputError(`--base ${base}: vocab_size ${folder.model.vocab} is smaller than its tokenizer's ${runTok.vocabSize} tokens`);
  return { folder, own: null };
}
