// Hugging Face model folders (trainer/hf/hfModel.ts): parity of the loaded model's logits with an
// independent PyTorch reference written from transformers' Llama/Qwen2 equations
// (test/support/hf_reference.py, Debian's python3-torch; the fixtures are generated into a
// temporary folder at test time), and the one-line refusals of what the lab does not compute.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { initBackend } from '../../trainer/model/backend';
import { loadCheckpoint, restoreModel, saveCheckpoint } from '../../trainer/run/checkpoint';
import { InputError } from '../../store/files';
import { HfModelFolder, hfModelFromFolder, loadHfFolder, readHfConfig } from '../../trainer/hf/hfModel';
import { IGNORE, StackModel, makeRng, ropeInvFreq, setJsShortcuts } from '../../trainer/model/model';
import { Trainer } from '../../trainer/model/optim';
import { SafetensorsModel, StDtype, writeSafetensorsFile } from '../../trainer/hf/safetensorsFile';

/** Debian's python3 (where python3-torch lives), else whatever python3 is on PATH. */
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const REFERENCE = path.join(__dirname, '..', 'support', 'hf_reference.py');
/** Max absolute logit difference allowed, every dtype (the reference computes float32 on the stored values, as the lab does). */
const TOL = 1e-4;

function torchMissing(): string | null {
  const r = spawnSync(PYTHON, ['-c', 'import torch'], { encoding: 'utf8' });
  if (r.error) return `${PYTHON} could not run (${r.error.message})`;
  return r.status === 0 ? null : `python3-torch is not installed for ${PYTHON} (bash scripts/setup-python-test.sh installs it)`;
}

interface Reference {
  ids: number[];
  dtype: string;
  logits: number[][];
}

function maxAbsDiff(got: Float32Array, want: number[][], V: number): number {
  let m = 0;
  want.forEach((row, t) => row.forEach((w, j) => (m = Math.max(m, Math.abs(got[t * V + j]! - w)))));
  return m;
}

describe('trainer/hf/hfModel: Hugging Face Llama/Qwen2 folders, parity with PyTorch', function () {
  this.timeout(300000);
  let fixtures: string;
  let names: string[] = [];
  before(function () {
    const why = torchMissing();
    if (why) {
      console.log(`      (pending, NOT a pass: ${why})`);
      this.skip();
    }
    fixtures = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-hf-'));
    const r = spawnSync(PYTHON, [REFERENCE, fixtures], { encoding: 'utf8' });
    assert.equal(r.status, 0, `hf_reference.py failed: ${r.stderr}`);
    names = JSON.parse(r.stdout.trim().split('\n').pop()!) as string[];
    assert.ok(names.length >= 10, r.stdout);
  });
  after(() => {
    setJsShortcuts(null);
    if (fixtures) fs.rmSync(fixtures, { recursive: true, force: true });
  });
  const ref = (name: string): Reference => JSON.parse(fs.readFileSync(path.join(fixtures, name, 'reference.json'), 'utf8')) as Reference;

  it(`logits equal the PyTorch reference within ${TOL} on every configuration (F32/F16/BF16, tied/untied, Qwen2 biases, GQA 4:2, head_dim apart, two shards)`, async () => {
    await initBackend('wasm');
    const seen = new Set<string>();
    for (const name of names) {
      const r = ref(name);
      const { model, folder } = hfModelFromFolder(path.join(fixtures, name));
      try {
        const T = r.ids.length;
        const diff = maxAbsDiff(model.logits(Int32Array.from(r.ids), 1, T), r.logits, folder.model.vocab);
        console.log(`      ${name}: ${folder.architecture}, ${folder.dtypes.join('+')}, ${folder.files} file(s), ${folder.params} params: max |logit diff| ${diff.toExponential(2)}`);
        assert.ok(diff <= TOL, `${name}: max abs difference ${diff} > ${TOL}`);
        assert.deepEqual(folder.dtypes, [r.dtype]);
        seen.add(`${folder.architecture}/${r.dtype}/${folder.model.tiedHead === false ? 'untied' : 'tied'}`);
        if (folder.files > 1) seen.add('sharded');
        if (folder.model.headDim) seen.add('headDim');
        if (folder.model.ropeScaling) seen.add(`rope:${folder.model.ropeScaling.type}`);
      } finally {
        model.dispose();
      }
    }
    for (const k of ['LlamaForCausalLM/F32/tied', 'LlamaForCausalLM/F32/untied', 'Qwen2ForCausalLM/F32/untied', 'LlamaForCausalLM/BF16/untied', 'Qwen2ForCausalLM/BF16/tied', 'LlamaForCausalLM/F16/tied', 'sharded', 'headDim', 'rope:llama3', 'rope:linear']) {
      assert.ok(seen.has(k), `no configuration covered ${k}`);
    }
  });

  it('the config fields reach the model: eps 1e-6, theta 1e6, GQA 4:2, Qwen2 biases, untied head', () => {
    const q = readHfConfig(path.join(fixtures, 'qwen2-f32-untied')).model;
    assert.deepEqual(q, { vocab: 97, dModel: 32, layers: 2, heads: 4, kvHeads: 2, mlp: 56, maxSeq: 128, ropeBase: 1e6, normEps: 1e-6, qkvBias: true, tiedHead: false });
    const l = readHfConfig(path.join(fixtures, 'llama-f32-headdim')).model;
    assert.equal(l.headDim, 12);
    assert.equal(l.qkvBias, undefined);
  });

  it('RoPE scaling (llama3: kept, smoothed and divided frequencies; linear) is what the logits need: without it they miss', async () => {
    await initBackend('wasm');
    for (const name of ['llama-f32-rope-llama3', 'qwen2-f32-rope-linear']) {
      const r = ref(name);
      const folder = loadHfFolder(path.join(fixtures, name));
      assert.ok(folder.model.ropeScaling, name);
      const { ropeScaling, ...plain } = folder.model;
      void ropeScaling;
      const m = StackModel.fromWeights(plain, folder.weights);
      const diff = maxAbsDiff(m.logits(Int32Array.from(r.ids), 1, r.ids.length), r.logits, plain.vocab);
      m.dispose();
      assert.ok(diff > 100 * TOL, `${name}: unscaled RoPE is only ${diff} away: the fixture does not test the scaling`);
    }
    const inv = ropeInvFreq(readHfConfig(path.join(fixtures, 'llama-f32-rope-llama3')).model);
    const plainInv = [1, 0.1, 0.01, 0.001];
    assert.equal(inv[0], plainInv[0]); // wavelength 6.3 < 256/8: kept
    assert.ok(inv[1]! < plainInv[1]! && inv[1]! > plainInv[1]! / 8, 'wavelength 63: smoothed'); // between 32 and 256
    assert.ok(Math.abs(inv[2]! - plainInv[2]! / 8) < 1e-12 && Math.abs(inv[3]! - plainInv[3]! / 8) < 1e-12, 'long wavelengths divided by the factor');
  });

  it('the tensor-op path (cpu, no JS shortcuts) and KV-cache decoding give the same logits', async () => {
    await initBackend('cpu');
    setJsShortcuts(false);
    for (const name of ['qwen2-bf16-tied-2shards', 'llama-f32-headdim', 'llama-f32-rope-llama3']) {
      const r = ref(name);
      const { model, folder } = hfModelFromFolder(path.join(fixtures, name));
      const V = folder.model.vocab;
      assert.ok(maxAbsDiff(model.logits(Int32Array.from(r.ids), 1, r.ids.length), r.logits, V) <= TOL, `${name} tensor-op path`);
      const cache = model.newCache();
      const last = model.prefill(r.ids.slice(0, 6), cache);
      assert.ok(maxAbsDiff(last, [r.logits[5]!], V) <= TOL, `${name} prefill`);
      for (let t = 6; t < r.ids.length; t++) assert.ok(maxAbsDiff(model.step(r.ids[t]!, cache), [r.logits[t]!], V) <= TOL, `${name} step ${t}`);
      cache.dispose();
      model.dispose();
    }
    setJsShortcuts(null);
  });

  it('a loaded model trains (the loss falls) and its checkpoint round-trips bit-exactly with the new config fields', async () => {
    await initBackend('wasm');
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-hf-ck-'));
    try {
      const { model } = hfModelFromFolder(path.join(fixtures, 'qwen2-f32-untied'));
      const rng = makeRng(4);
      const seq = 16;
      const inputIds = Int32Array.from({ length: 2 * seq }, () => Math.floor(rng.uniform() * 97));
      const labels = Int32Array.from(inputIds, (_, i) => (i % seq === seq - 1 ? IGNORE : inputIds[i + 1]!));
      const b = { batch: 2, seq, inputIds, labels };
      const tr = new Trainer(model, { lr: 3e-3, warmupSteps: 2, weightDecay: 0 });
      const first = tr.step(b).loss;
      let last = first;
      for (let s = 0; s < 15; s++) last = tr.step(b).loss;
      assert.ok(last < first * 0.8, `loss ${first} -> ${last}`);
      await saveCheckpoint(tmp, 16, model, tr);
      const ck = loadCheckpoint(tmp);
      assert.equal(ck.config.qkvBias, true);
      assert.equal(ck.config.tiedHead, false);
      const back = restoreModel(ck);
      assert.deepEqual(back.logits(inputIds, 2, seq), model.logits(inputIds, 2, seq));
      tr.dispose();
      back.dispose();
      model.dispose();
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});

// ---- refusals (no PyTorch needed: folders written by the lab's own safetensors writer) ----

const BASE_CONFIG = {
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  vocab_size: 11,
  hidden_size: 8,
  intermediate_size: 12,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  hidden_act: 'silu',
  max_position_embeddings: 64,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  rope_scaling: null,
  tie_word_embeddings: true,
};

/** HF tensors of a config (random values), by HF name. */
function hfTensors(cfg: Record<string, unknown>): Record<string, { shape: number[] }> {
  const d = cfg['hidden_size'] as number;
  const V = cfg['vocab_size'] as number;
  const H = cfg['num_attention_heads'] as number;
  const K = cfg['num_key_value_heads'] as number;
  const M = cfg['intermediate_size'] as number;
  const hd = (cfg['head_dim'] as number | undefined) ?? d / H;
  const t: Record<string, { shape: number[] }> = { 'model.embed_tokens.weight': { shape: [V, d] } };
  for (let i = 0; i < (cfg['num_hidden_layers'] as number); i++) {
    const p = `model.layers.${i}.`;
    Object.assign(t, {
      [p + 'input_layernorm.weight']: { shape: [d] },
      [p + 'self_attn.q_proj.weight']: { shape: [H * hd, d] },
      [p + 'self_attn.k_proj.weight']: { shape: [K * hd, d] },
      [p + 'self_attn.v_proj.weight']: { shape: [K * hd, d] },
      [p + 'self_attn.o_proj.weight']: { shape: [d, H * hd] },
      [p + 'post_attention_layernorm.weight']: { shape: [d] },
      [p + 'mlp.gate_proj.weight']: { shape: [M, d] },
      [p + 'mlp.up_proj.weight']: { shape: [M, d] },
      [p + 'mlp.down_proj.weight']: { shape: [d, M] },
    });
    if (cfg['architectures'] && (cfg['architectures'] as string[])[0] === 'Qwen2ForCausalLM') {
      for (const [k, n] of [
        ['q', H * hd],
        ['k', K * hd],
        ['v', K * hd],
      ] as const)
        t[`${p}self_attn.${k}_proj.bias`] = { shape: [n] };
    }
  }
  t['model.norm.weight'] = { shape: [d] };
  if (cfg['tie_word_embeddings'] === false) t['lm_head.weight'] = { shape: [V, d] };
  return t;
}

function writeFolder(dir: string, cfg: Record<string, unknown>, edit: (t: Record<string, { shape: number[] }>) => void = () => {}, dtype: StDtype = 'F32'): void {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
  const t = hfTensors(cfg);
  edit(t);
  const rng = makeRng(1);
  writeSafetensorsFile(
    path.join(dir, 'model.safetensors'),
    Object.entries(t).map(([name, { shape }]) => ({ name, dtype, shape, data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.normal()) })),
  );
}

function refused(dir: string, pattern: RegExp): void {
  assert.throws(
    () => loadHfFolder(dir),
    (err: unknown) => {
      assert.ok(err instanceof InputError, `an InputError, got ${String(err)}`);
      assert.match(err.message, pattern);
      assert.ok(!err.message.includes('\n'));
      return true;
    },
  );
}

describe('trainer/hf/hfModel: what is refused, in one line naming the file and the field', function () {
  this.timeout(60000);
  let tmp: string;
  beforeEach(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-hf-bad-'))));
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('a well-formed folder loads (the baseline the refusals change one field of); HF names map with their transposes', () => {
    writeFolder(tmp, BASE_CONFIG);
    const f: HfModelFolder = loadHfFolder(tmp);
    assert.equal(f.architecture, 'LlamaForCausalLM');
    assert.equal(f.params, 11 * 8 + 8 + 8 * 16 + 8 * 8 + 8 + 3 * 8 * 12 + 8);
    // q_proj row r (output r) is column r of wqkv; o_proj [d, H*hd] row r is column r of wo.
    const st = f.weights;
    const m = SafetensorsModel.open(tmp);
    const q = m.read('model.layers.0.self_attn.q_proj.weight'); // [8, 8]
    const v = m.read('model.layers.0.self_attn.v_proj.weight'); // [4, 8]
    const o = m.read('model.layers.0.self_attn.o_proj.weight'); // [8, 8]
    const down = m.read('model.layers.0.mlp.down_proj.weight'); // [8, 12]
    m.close();
    const W1 = 16;
    assert.equal(st['layers.0.wqkv']![3 * W1 + 5], q[5 * 8 + 3]); // wqkv[in 3][out 5] = q[out 5][in 3]
    assert.equal(st['layers.0.wqkv']![2 * W1 + 12 + 1], v[1 * 8 + 2]); // v columns after q (8) and k (4)
    assert.equal(st['layers.0.wo']![6 * 8 + 1], o[1 * 8 + 6]);
    assert.equal(st['layers.0.w_down']![10 * 8 + 7], down[7 * 12 + 10]);
  });

  const fieldCases: [string, Record<string, unknown>, RegExp][] = [
    ['an unknown architecture', { architectures: ['MistralForCausalLM'] }, /config\.json: "architectures" "MistralForCausalLM" is not supported \(supported: LlamaForCausalLM, Qwen2ForCausalLM\)/],
    ['a model_type that disagrees', { model_type: 'mistral' }, /"model_type" "mistral" does not match LlamaForCausalLM/],
    ['another activation', { hidden_act: 'gelu' }, /"hidden_act" "gelu" is not supported/],
    ['a rope_scaling type', { rope_scaling: { rope_type: 'yarn', factor: 4 } }, /"rope_scaling" \{"rope_type":"yarn","factor":4\} is not implemented \(implemented: null, "default", "linear", "llama3"\)/],
    ['a rope_scaling field', { rope_scaling: { rope_type: 'linear', factor: 2, attention_factor: 1.5 } }, /"rope_scaling" .*: attention_factor is not implemented for type "linear"/],
    ['an incomplete llama3 rope_scaling', { rope_scaling: { rope_type: 'llama3', factor: 32 } }, /"rope_scaling" \.low_freq_factor must be a positive number/],
    ['a sliding window (Llama)', { sliding_window: 4096 }, /"sliding_window" 4096: sliding-window attention is not implemented/],
    ['a sliding window in use (Qwen2)', { architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', use_sliding_window: true }, /"use_sliding_window" is true/],
    ['sliding layers (Qwen2)', { architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', layer_types: ['sliding_attention'] }, /"layer_types" asks for attention other than "full_attention"/],
    ['Llama attention biases', { attention_bias: true }, /"attention_bias" is true: Llama attention biases/],
    ['MLP biases', { mlp_bias: true }, /"mlp_bias" is true/],
    ['MoE', { num_local_experts: 8 }, /"num_local_experts" 8: mixture-of-experts layers are not implemented/],
    ['quantisation', { quantization_config: { quant_method: 'gptq' } }, /"quantization_config" is set/],
    ['attention dropout', { attention_dropout: 0.1 }, /"attention_dropout" 0\.1: attention dropout is not implemented/],
    ['kv heads that do not divide', { num_key_value_heads: 3 }, /"num_key_value_heads" 3 does not divide num_attention_heads 2/],
    ['a missing size', { vocab_size: undefined }, /"vocab_size" is missing/],
    ['an odd head_dim', { head_dim: 3 }, /"head_dim" 3 is odd/],
  ];
  for (const [what, change, pattern] of fieldCases) {
    it(`refuses ${what}`, () => {
      const cfg: Record<string, unknown> = { ...BASE_CONFIG, ...change };
      for (const [k, v] of Object.entries(change)) if (v === undefined) delete cfg[k];
      // the weights are written for a config that loads, so only the field can be the reason
      writeFolder(tmp, { ...BASE_CONFIG, ...(change['architectures'] ? { architectures: change['architectures'] } : {}) });
      fs.writeFileSync(path.join(tmp, 'config.json'), JSON.stringify(cfg));
      refused(tmp, pattern);
    });
  }

  it('accepts rope_scaling of type "default" (plain RoPE) and pretraining_tp', () => {
    writeFolder(tmp, { ...BASE_CONFIG, rope_scaling: { rope_type: 'default' }, pretraining_tp: 1 });
    assert.equal(loadHfFolder(tmp).model.ropeBase, 10000);
  });

  it('missing files and weights, shapes, and weights the lab would drop', () => {
    refused(path.join(tmp, 'absent'), /absent: no such folder/);
    refused(tmp, /: no config\.json \(not a Hugging Face model folder\)/);
    fs.writeFileSync(path.join(tmp, 'config.json'), JSON.stringify(BASE_CONFIG));
    refused(tmp, /: no model\.safetensors or model\.safetensors\.index\.json/);
    fs.writeFileSync(path.join(tmp, 'config.json'), '{"architectures": [');
    refused(tmp, /config\.json is not JSON/);
    writeFolder(tmp, { ...BASE_CONFIG, tie_word_embeddings: false }, (t) => delete t['lm_head.weight']);
    refused(tmp, /model\.safetensors: weight lm_head\.weight is missing \(tie_word_embeddings is false: an untied head needs it\)/);
    writeFolder(tmp, { ...BASE_CONFIG, architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2' }, (t) => delete t['model.layers.0.self_attn.k_proj.bias']);
    refused(tmp, /weight model\.layers\.0\.self_attn\.k_proj\.bias is missing \(Qwen2ForCausalLM has q\/k\/v biases\)/);
    writeFolder(tmp, BASE_CONFIG, (t) => (t['model.layers.0.mlp.up_proj.weight'] = { shape: [12, 9] }));
    refused(tmp, /weight model\.layers\.0\.mlp\.up_proj\.weight has shape \[12,9\], config\.json wants \[12,8\]/);
    writeFolder(tmp, BASE_CONFIG, (t) => (t['model.layers.0.self_attn.o_proj.bias'] = { shape: [8] }));
    refused(tmp, /weight model\.layers\.0\.self_attn\.o_proj\.bias is not part of a LlamaForCausalLM the lab computes: refusing to drop it/);
  });

  it('a tied folder that also stores lm_head.weight loads (transformers ties it); the loaded model runs', async () => {
    await initBackend('wasm');
    writeFolder(tmp, BASE_CONFIG, (t) => (t['lm_head.weight'] = { shape: [11, 8] }), 'BF16');
    const { model, folder } = hfModelFromFolder(tmp);
    assert.deepEqual(folder.dtypes, ['BF16']);
    assert.equal(model.logits(Int32Array.from([1, 2, 3]), 1, 3).length, 33);
    model.dispose();
  });
});
