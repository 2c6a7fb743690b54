// A Stack model written as a Hugging Face model folder (the inverse of trainer/hf/hfModel.ts):
// config.json (LlamaForCausalLM; Qwen2ForCausalLM when the model has q/k/v biases),
// model.safetensors with transformers' weight names (F32, each projection transposed back to
// torch.nn.Linear's [out, in]), and the run's tokenizer.json / tokenizer_config.json beside
// them. Loading it back gives the same weights bit for bit (test/unit/hfExport.test.ts).
//
// The folder is built under a hidden staging name and renamed into place, and a folder that
// exists already is refused: an export never writes over a user's files, and a failed one
// leaves nothing half-written.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { InputError, checkDirCreatable, ensureDir, errnoText } from '../../store/files';
import { type HfArchitecture, qkvProjections } from './hfModel';
import { ModelConfig, headDimOf, normEpsOf, paramSpecs, prevTokensOf } from '../model/model';
import { EMBED_ROWS, HEAD_ROWS, HF_MODULE, LoraSpec, LoraTarget, loraParamSpecs } from '../model/lora';
import { StDtype, TensorToWrite, writeSafetensorsFile } from './safetensorsFile';
import { GENERATION_CONFIG_FILE, HF_CONFIG_FILE, HF_WEIGHTS_FILE, PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE, TOKENIZER_FILE } from '../../core/protocol/folders';

/** Presets whose students export (no previous-token tables): named when one does not. */
export const EXPORTABLE_HINT = 'tiny-plain, small, long and stack-100m export (tiny and tiny-deep add previous-token tables)';

/** The architecture a config exports as, or the one-line reason it has no Hugging Face counterpart. */
export function hfArchitectureOf(cfg: ModelConfig): { architecture: HfArchitecture } | { refused: string } {
  if (prevTokensOf(cfg) > 0) {
    return { refused: `the model has ${prevTokensOf(cfg)} previous-token embedding tables (prevTokens), which no Llama or Qwen2 model has: ${EXPORTABLE_HINT}` };
  }
  return { architecture: cfg.qkvBias ? 'Qwen2ForCausalLM' : 'LlamaForCausalLM' };
}

/** The wire format's bos, eos and pad ids: 0, 1, 2 in the lab's tokenizer; where a model's own tokenizer has them added. */
export interface WireTokenIds {
  bos_token_id: number;
  eos_token_id: number;
  pad_token_id: number;
}
const LAB_TOKEN_IDS: WireTokenIds = { bos_token_id: 0, eos_token_id: 1, pad_token_id: 2 };

/** The wire ids of a tokenizer.json's text, read from its added tokens (the lab's when it names none). */
export function wireTokenIdsOf(tokenizerJson: string | undefined): WireTokenIds {
  if (tokenizerJson === undefined) return LAB_TOKEN_IDS;
  let added: unknown;
  try {
    added = (JSON.parse(tokenizerJson) as { added_tokens?: unknown }).added_tokens;
  } catch {
    return LAB_TOKEN_IDS; // the run's loaders refuse such a file first
  }
  const idOf = (content: string, dflt: number): number => {
    const t = Array.isArray(added) ? (added as { content?: unknown; id?: unknown }[]).find((x) => x && x.content === content) : undefined;
    return typeof t?.id === 'number' ? t.id : dflt;
  };
  return { bos_token_id: idOf('<|bos|>', 0), eos_token_id: idOf('<|eos|>', 1), pad_token_id: idOf('<|pad|>', 2) };
}

/** The config.json of a model (special token ids: the wire format's, bos 0, eos 1, pad 2 in the lab's tokenizer). */
export function hfConfigOf(cfg: ModelConfig, architecture: HfArchitecture, dtype: 'float32' | 'bfloat16' | 'float16' = 'float32', ids: WireTokenIds = LAB_TOKEN_IDS): Record<string, unknown> {
  const qwen = architecture === 'Qwen2ForCausalLM';
  return {
    architectures: [architecture],
    model_type: qwen ? 'qwen2' : 'llama',
    vocab_size: cfg.vocab,
    hidden_size: cfg.dModel,
    intermediate_size: cfg.mlp,
    num_hidden_layers: cfg.layers,
    num_attention_heads: cfg.heads,
    num_key_value_heads: cfg.kvHeads,
    head_dim: headDimOf(cfg),
    hidden_act: 'silu',
    max_position_embeddings: cfg.maxSeq,
    rms_norm_eps: normEpsOf(cfg),
    rope_theta: cfg.ropeBase,
    rope_scaling: ropeScalingJson(cfg),
    tie_word_embeddings: cfg.tiedHead !== false,
    attention_dropout: 0.0,
    ...(qwen ? { use_sliding_window: false, sliding_window: null, max_window_layers: cfg.layers } : { attention_bias: false, mlp_bias: false, pretraining_tp: 1 }),
    ...ids,
    torch_dtype: dtype,
    use_cache: true,
  };
}

/** config.json's rope_scaling of a config (null: plain RoPE). */
function ropeScalingJson(cfg: ModelConfig): Record<string, unknown> | null {
  const rs = cfg.ropeScaling;
  if (!rs) return null;
  if (rs.type === 'linear') return { rope_type: 'linear', factor: rs.factor };
  return {
    rope_type: 'llama3',
    factor: rs.factor,
    low_freq_factor: rs.lowFreqFactor,
    high_freq_factor: rs.highFreqFactor,
    original_max_position_embeddings: rs.originalMaxPositions,
  };
}

/** [rows, cols] row-major -> its [cols, rows] transpose (a copy of columns [c0, c0 + n) of src as rows). */
function transposeCols(src: Float32Array, rows: number, cols: number, c0: number, n: number): Float32Array {
  const out = new Float32Array(n * rows);
  for (let r = 0; r < rows; r++) {
    const s = r * cols + c0;
    for (let c = 0; c < n; c++) out[c * rows + r] = src[s + c]!;
  }
  return out;
}

/** The model's weights under transformers' names and layouts (see trainer/hf/hfModel.ts for the table). */
export function hfTensorsOf(cfg: ModelConfig, weights: Record<string, Float32Array>, dtype: StDtype = 'F32'): TensorToWrite[] {
  for (const s of paramSpecs(cfg)) if (!weights[s.name]) throw new Error(`hf export: no weight ${s.name}`);
  const { heads: H, kvHeads: K, dModel: d, mlp, vocab: V } = cfg;
  const hd = headDimOf(cfg);
  const W1 = (H + 2 * K) * hd;
  const out: TensorToWrite[] = [{ name: 'model.embed_tokens.weight', dtype, shape: [V, d], data: weights['tok_embeddings']! }];
  for (let i = 0; i < cfg.layers; i++) {
    const p = `model.layers.${i}.`;
    const l = `layers.${i}.`;
    out.push({ name: p + 'input_layernorm.weight', dtype, shape: [d], data: weights[l + 'attn_norm']! });
    let col = 0;
    for (const [proj, n] of qkvProjections(cfg)) {
      out.push({ name: `${p}self_attn.${proj}.weight`, dtype, shape: [n, d], data: transposeCols(weights[l + 'wqkv']!, d, W1, col, n) });
      if (cfg.qkvBias) out.push({ name: `${p}self_attn.${proj}.bias`, dtype, shape: [n], data: weights[l + 'bqkv']!.slice(col, col + n) });
      col += n;
    }
    out.push({ name: p + 'self_attn.o_proj.weight', dtype, shape: [d, H * hd], data: transposeCols(weights[l + 'wo']!, H * hd, d, 0, d) });
    out.push({ name: p + 'post_attention_layernorm.weight', dtype, shape: [d], data: weights[l + 'mlp_norm']! });
    out.push({ name: p + 'mlp.gate_proj.weight', dtype, shape: [mlp, d], data: transposeCols(weights[l + 'w_gate']!, d, mlp, 0, mlp) });
    out.push({ name: p + 'mlp.up_proj.weight', dtype, shape: [mlp, d], data: transposeCols(weights[l + 'w_up']!, d, mlp, 0, mlp) });
    out.push({ name: p + 'mlp.down_proj.weight', dtype, shape: [d, mlp], data: transposeCols(weights[l + 'w_down']!, mlp, d, 0, d) });
  }
  out.push({ name: 'model.norm.weight', dtype, shape: [d], data: weights['final_norm']! });
  if (cfg.tiedHead === false) out.push({ name: 'lm_head.weight', dtype, shape: [V, d], data: weights['lm_head']! });
  return out;
}

export interface HfExportResult {
  dir: string;
  architecture: HfArchitecture;
  files: string[];
  bytes: number;
}

/**
 * Write `weights` of `cfg` as a Hugging Face folder at `outDir` (which must not exist), with
 * `extraFiles` (name -> text: the tokenizer files) beside them. An InputError says why not.
 */
export function writeHfFolder(outDir: string, cfg: ModelConfig, weights: Record<string, Float32Array>, extraFiles: Record<string, string> = {}, metadata: Record<string, string> = {}): HfExportResult {
  const arch = hfArchitectureOf(cfg);
  if ('refused' in arch) throw new InputError(`cannot export as a Hugging Face model: ${arch.refused}`);
  // A run with a model's own tokenizer has the wire specials as added tokens after its vocabulary.
  const ids = wireTokenIdsOf(extraFiles[TOKENIZER_FILE]);
  return writeNewFolder(outDir, arch.architecture, (staging) => {
    const files: Record<string, string> = {
      [HF_CONFIG_FILE]: JSON.stringify(hfConfigOf(cfg, arch.architecture, 'float32', ids), null, 2) + '\n',
      [GENERATION_CONFIG_FILE]: JSON.stringify(ids, null, 2) + '\n',
      ...extraFiles,
    };
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(staging, name), text);
    writeSafetensorsFile(path.join(staging, HF_WEIGHTS_FILE), hfTensorsOf(cfg, weights), { format: 'pt', ...metadata });
  });
}

/** A folder that must not exist yet, filled under a hidden staging name and renamed into place (nothing half-written). */
function writeNewFolder(outDir: string, architecture: HfArchitecture, fill: (staging: string) => void): HfExportResult {
  const dir = path.resolve(outDir);
  if (fs.existsSync(dir)) throw new InputError(`${dir} exists: an export writes a new folder and never writes over one (choose another --out)`);
  checkDirCreatable(path.dirname(dir));
  ensureDir(path.dirname(dir));
  const staging = path.join(path.dirname(dir), `.${path.basename(dir)}.tmp-${process.pid}-${Date.now()}`);
  try {
    fs.mkdirSync(staging);
    fill(staging);
    fs.renameSync(staging, dir);
  } catch (err) {
    fs.rmSync(staging, { recursive: true, force: true });
    if (err instanceof InputError) throw err;
    throw new InputError(`cannot write ${dir}: ${errnoText(err)}`);
  }
  const names = fs.readdirSync(dir).sort();
  return { dir, architecture, files: names, bytes: names.reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0) };
}

/** PEFT's adapter_config.json of a LoRA spec (the fields PeftModel.from_pretrained reads; the rest at PEFT's defaults). */
export function peftConfigOf(spec: LoraSpec, baseModel: string): Record<string, unknown> {
  return {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: baseModel,
    r: spec.r,
    lora_alpha: spec.alpha,
    lora_dropout: 0.0,
    target_modules: spec.targets.map((t) => HF_MODULE[t].split('.')[1]!),
    bias: 'none',
    fan_in_fan_out: false,
    use_rslora: false,
    use_dora: false,
    // Trained rows: PEFT trains added tokens as whole modules, the embedding and the head.
    modules_to_save: spec.trainedRows?.length ? [...PEFT_ROW_MODULES] : null,
    init_lora_weights: true,
    inference_mode: true,
    revision: null,
  };
}

/**
 * The modules a LoRA run with trained rows saves whole, as PEFT's modules_to_save, and their
 * keys in adapter_model.safetensors: get_peft_model_state_dict saves a ModulesToSaveWrapper's
 * copy under the module's own path ("modules_to_save.<adapter>." removed). Both are saved
 * even when the head is tied: PEFT copies each module on its own, which unties them, so a
 * tied model's head is saved as the embedding (equal values) to keep the lab's logits.
 */
export const PEFT_ROW_MODULES = ['embed_tokens', 'lm_head'] as const;
export const PEFT_EMBED_KEY = 'base_model.model.model.embed_tokens.weight';
export const PEFT_HEAD_KEY = 'base_model.model.lm_head.weight';

/**
 * The adapters under PEFT's state-dict names: base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight
 * ([r, in], as the lab holds them) and ...lora_B.weight ([out, r]); with trained rows, the
 * whole resized embedding and head of `merged` (the checkpoint's merged weights, whose last
 * rows are the trained ones) under PEFT_EMBED_KEY and PEFT_HEAD_KEY.
 */
export function peftTensorsOf(cfg: ModelConfig, spec: LoraSpec, adapters: Record<string, Float32Array>, merged: Record<string, Float32Array> = {}): TensorToWrite[] {
  const out: TensorToWrite[] = [];
  for (const s of loraParamSpecs(cfg, spec)) {
    if (s.name === EMBED_ROWS || s.name === HEAD_ROWS) continue;
    const m = /^layers\.(\d+)\.(\w+)\.(lora_[AB])$/.exec(s.name)!;
    const data = adapters[s.name];
    if (!data) throw new Error(`peft export: no adapter ${s.name}`);
    out.push({ name: `base_model.model.model.layers.${m[1]}.${HF_MODULE[m[2] as LoraTarget]}.${m[3]}.weight`, dtype: 'F32', shape: s.shape, data });
  }
  if (spec.trainedRows?.length) {
    const embed = merged['tok_embeddings'];
    const head = cfg.tiedHead === false ? merged['lm_head'] : embed;
    if (!embed || !head) throw new Error('peft export: trained rows need the merged embedding and head');
    const shape = [cfg.vocab, cfg.dModel];
    out.push({ name: PEFT_EMBED_KEY, dtype: 'F32', shape, data: embed }, { name: PEFT_HEAD_KEY, dtype: 'F32', shape: [...shape], data: head });
  }
  return out;
}

/** The adapter folder's README of a LoRA run with trained rows: the base must be resized before the adapter loads. */
export function peftReadmeOf(cfg: ModelConfig, spec: LoraSpec, baseModel: string): string {
  const ids = spec.trainedRows ?? [];
  return [
    '# A PEFT LoRA adapter (Agent Lab)',
    '',
    `LoRA r=${spec.r}, lora_alpha=${spec.alpha} on ${spec.targets.map((t) => HF_MODULE[t].split('.')[1]!).join(', ')} of \`${baseModel}\`.`,
    '',
    `The base's tokenizer lacked ${ids.length} of the lab's wire-format special tokens; they are tokens`,
    `${ids[0]}..${ids[ids.length - 1]} of the tokenizer here, new embedding rows that trained beside the adapters`,
    "(every original row stayed the base's). The adapter saves them as PEFT's `modules_to_save`:",
    `the whole embedding (\`embed_tokens\`) and head (\`lm_head\`), ${cfg.vocab} rows each.`,
    '',
    `**Resize the base's embeddings to ${cfg.vocab} rows before loading the adapter** (PEFT refuses`,
    'weights of another shape):',
    '',
    '```python',
    'from transformers import AutoModelForCausalLM, AutoTokenizer',
    'from peft import PeftModel',
    '',
    `tokenizer = AutoTokenizer.from_pretrained("ADAPTER_DIR")  # this folder: the base's tokenizer with the specials`,
    `model = AutoModelForCausalLM.from_pretrained(${JSON.stringify(baseModel)})`,
    `model.resize_token_embeddings(${cfg.vocab})`,
    'model = PeftModel.from_pretrained(model, "ADAPTER_DIR")',
    '```',
    '',
    `(${cfg.vocab}, not len(tokenizer): the ids are the embedding's rows, and a base whose vocab_size`,
    "pads its tokenizer keeps the spare rows before the added ones.)",
    '',
  ].join('\n');
}

/**
 * A LoRA run's adapters as a PEFT adapter folder (adapter_config.json, adapter_model.safetensors)
 * at `outDir`, which must not exist. With trained rows, `rows` gives the merged weights (the
 * resized embedding and head) and the run's tokenizer files, written beside a README.md that
 * says to resize the base first.
 */
export function writePeftFolder(
  outDir: string,
  cfg: ModelConfig,
  spec: LoraSpec,
  adapters: Record<string, Float32Array>,
  baseModel: string,
  metadata: Record<string, string> = {},
  rows: { merged: Record<string, Float32Array>; files: Record<string, string> } | null = null,
): HfExportResult {
  const arch = hfArchitectureOf(cfg);
  if ('refused' in arch) throw new InputError(`cannot export as a PEFT adapter: ${arch.refused}`);
  if (spec.trainedRows?.length && !rows) throw new Error('peft export: a spec with trained rows needs the merged weights and the tokenizer');
  return writeNewFolder(outDir, arch.architecture, (staging) => {
    fs.writeFileSync(path.join(staging, PEFT_CONFIG_FILE), JSON.stringify(peftConfigOf(spec, baseModel), null, 2) + '\n');
    writeSafetensorsFile(path.join(staging, PEFT_WEIGHTS_FILE), peftTensorsOf(cfg, spec, adapters, rows?.merged), { format: 'pt', ...metadata });
    if (spec.trainedRows?.length && rows) {
      for (const [name, text] of Object.entries(rows.files)) fs.writeFileSync(path.join(staging, name), text);
      fs.writeFileSync(path.join(staging, 'README.md'), peftReadmeOf(cfg, spec, baseModel));
    }
  });
}
