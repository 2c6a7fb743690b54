// `train sft --base DIR --lora r,alpha[,targets]` end to end (bin/agent-lab, so dist/ is
// rebuilt first): the one-line refusals (exit 2, nothing written), a LoRA run that leaves
// the base folder untouched and records its spec, eval / run / continued SFT on it,
// `export --format hf` merged (logits equal to base + adapters) and `--peft` (PEFT's file
// names; the PyTorch reference applies the adapter from the files by PEFT's equations and
// meets the lab's logits), a changed base refused, and the training smoke: a LoRA and a full
// fine-tune of a generated Qwen2-shaped model on the distilled data both lower the loss.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { tokenizerFromJsonText } from '../../core/tokenizer';
import { initBackend } from '../../trainer/model/backend';
import { loadCheckpoint } from '../../trainer/run/checkpoint';
import { writeHfFolder } from '../../trainer/hf/hfExport';
import { hfModelFromFolder, loadHfFolder } from '../../trainer/hf/hfModel';
import { LoraModel, countLoraParams, parseLoraSpec } from '../../trainer/model/lora';
import { ModelConfig, StackModel, countParams, makeRng } from '../../trainer/model/model';
import { SafetensorsFile } from '../../trainer/hf/safetensorsFile';
import { repoRoot } from '../support/reference';
import { mean, sftLosses } from '../support/runFiles';

const bin = path.join(repoRoot, 'bin', 'agent-lab');
const run = (...args: string[]): { code: number; stdout: string; stderr: string } => {
  const r = spawnSync('nice', ['-n', '19', process.execPath, bin, ...args], { encoding: 'utf8', cwd: repoRoot });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
};
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const REFERENCE = path.join(repoRoot, 'test', 'support', 'hf_reference.py');
const torchReason = ((): string | null => {
  const r = spawnSync(PYTHON, ['-c', 'import torch'], { encoding: 'utf8' });
  return r.status === 0 ? null : `python3-torch is not installed for ${PYTHON} (bash scripts/setup-python-test.sh installs it)`;
})();

const sha = (file: string): string => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
const treeOf = (dir: string): Record<string, string> =>
  Object.fromEntries(
    (fs.readdirSync(dir, { recursive: true }) as string[])
      .filter((f) => fs.statSync(path.join(dir, f)).isFile())
      .sort()
      .map((f) => [f, sha(path.join(dir, f))]),
  );

describe('agent-lab train sft --base HF_DIR --lora r,alpha[,targets], and its export', function () {
  this.timeout(600000);
  let tmp: string;
  let data: string;
  let hf: string;
  let cfg: ModelConfig;
  let lora: string;
  const oneLine = (r: { code: number; stderr: string }, pattern: RegExp): void => {
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, pattern);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  };
  const copyOfData = (name: string): string => {
    const dir = path.join(tmp, name);
    fs.cpSync(data, dir, { recursive: true });
    return dir;
  };
  before(async function () {
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-lora-run-'));
    // A run folder with the distilled data and its tokenizer (the demo's data step, stub teacher).
    data = path.join(tmp, 'data');
    const d = run('demo', '--minutes', '0', '--run', data);
    assert.equal(d.code, 0, d.stderr);
    const tokJson = fs.readFileSync(path.join(data, 'tokenizer.json'), 'utf8');
    const vocab = tokenizerFromJsonText(tokJson).vocabSize;
    // The base: a generated Qwen2-shaped model (q/k/v biases, untied head, GQA 4:2, eps 1e-6, theta 1e6) with that tokenizer.
    cfg = { vocab, dModel: 32, layers: 2, heads: 4, kvHeads: 2, mlp: 48, maxSeq: 512, ropeBase: 1e6, normEps: 1e-6, qkvBias: true, tiedHead: false };
    await initBackend('wasm');
    const m = StackModel.create(cfg, 9);
    const w = m.exportWeights();
    const rng = makeRng(4);
    for (const [k, a] of Object.entries(w)) if (k.endsWith('bqkv')) for (let i = 0; i < a.length; i++) a[i] = 0.05 * rng.normal();
    hf = path.join(tmp, 'hf');
    writeHfFolder(hf, cfg, w, { 'tokenizer.json': tokJson });
    m.dispose();
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('refuses a --lora that does not parse, r <= 0, an unknown target, or no --base: one line, exit 2, nothing written', () => {
    const before = treeOf(data);
    oneLine(run('train', 'sft', '--base', hf, '--lora', '8', '--steps', '1', '--run', data), /--lora "8" does not parse: --lora r,alpha\[,targets\]/);
    oneLine(run('train', 'sft', '--base', hf, '--lora', '0,16', '--steps', '1', '--run', data), /--lora "0,16": r must be >= 1 \(got 0\)/);
    oneLine(run('train', 'sft', '--base', hf, '--lora', '8,16,q,embed', '--steps', '1', '--run', data), /unknown target "embed" \(targets: q, k, v, o, gate, up, down\)/);
    oneLine(run('train', 'sft', '--lora', '8,16', '--steps', '1', '--run', data), /--lora trains adapters on a frozen base model: give --base HF_DIR too/);
    assert.deepEqual(treeOf(data), before);
    const fresh = path.join(tmp, 'never');
    oneLine(run('train', 'sft', '--lora', '8,16', '--steps', '1', '--run', fresh), /give --base/);
    assert.ok(!fs.existsSync(fresh));
  });

  it('trains the adapters only: the base folder is untouched, config.json records the spec, eval, run and continued SFT read base + adapters', () => {
    const baseBefore = treeOf(hf);
    lora = copyOfData('r-lora');
    const r = run('train', 'sft', '--base', hf, '--lora', '4,8,q,v,o,down', '--steps', '4', '--eval-limit', '0', '--backend', 'wasm', '--threads', '2', '--run', lora);
    assert.equal(r.code, 0, r.stderr);
    const spec = parseLoraSpec('4,8,q,v,o,down');
    assert.match(r.stderr, new RegExp(`LoRA r=4 alpha=8 on q,v,o,down: ${countLoraParams(cfg, spec)} trainable parameters, the base frozen`));
    assert.deepEqual(treeOf(hf), baseBefore);
    const config = JSON.parse(fs.readFileSync(path.join(lora, 'config.json'), 'utf8')) as Record<string, unknown>;
    assert.deepEqual(config['lora'], { ...spec, trainableParams: countLoraParams(cfg, spec) });
    assert.equal(config['params'], countParams(cfg));
    const ck = loadCheckpoint(lora, 'latest');
    assert.equal(ck.step, 4);
    assert.ok(ck.lora && ck.lora.base.dir === hf);
    assert.ok(ck.lora.adapters['layers.1.down.lora_B']!.some((x) => x !== 0), 'B moved off zero');
    const ev = run('eval', '--run', lora, '--limit', '2', '--backend', 'wasm', '--json');
    assert.equal(ev.code, 0, ev.stderr);
    assert.equal((JSON.parse(ev.stdout.trim().split('\n').pop()!) as { n: number }).n, 2);
    const ask = run('run', '--run', lora, '--backend', 'wasm', '--json', 'What is the atomic number of neon?');
    assert.equal(ask.code, 0, ask.stderr);
    const cont = path.join(tmp, 'r-cont');
    const c = run('train', 'sft', '--from', lora, '--steps', '2', '--eval-limit', '0', '--backend', 'wasm', '--threads', '1', '--run', cont);
    assert.equal(c.code, 0, c.stderr);
    assert.deepEqual((JSON.parse(fs.readFileSync(path.join(cont, 'config.json'), 'utf8')) as Record<string, unknown>)['lora'], config['lora']);
    assert.ok(loadCheckpoint(cont, 'latest').lora);
    const resumed = run('train', 'sft', '--resume', '--run', lora, '--backend', 'wasm');
    assert.equal(resumed.code, 0, resumed.stderr);
    // Stopped before its first checkpoint: a resume starts the adapters again on the recorded base.
    const early = path.join(tmp, 'r-early');
    fs.cpSync(lora, early, { recursive: true });
    fs.rmSync(path.join(early, 'checkpoints'), { recursive: true });
    const again0 = run('train', 'sft', '--resume', '--run', early, '--backend', 'wasm', '--threads', '1');
    assert.equal(again0.code, 0, again0.stderr);
    assert.match(again0.stderr, /has no checkpoint yet .*starting again from step 0/);
    assert.deepEqual(loadCheckpoint(early, 'latest').lora?.spec, spec);
    const again = run('train', 'sft', '--resume', '--lora', '2,2', '--run', lora);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /--resume continues the run with the settings in its config\.json; --lora cannot change them/);
  });

  it('export --format hf writes the merged model (its logits are base + adapters within 1e-5) and --peft a PEFT adapter folder', async function () {
    await initBackend('wasm');
    const ck = loadCheckpoint(lora, 'latest');
    const base = loadHfFolder(hf);
    const adapted = LoraModel.fromAdapters(StackModel.fromWeights(base.model, base.weights), ck.lora!.spec, ck.lora!.base, ck.lora!.adapters);
    const ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3];
    const want = adapted.net.logits(Int32Array.from(ids), 1, ids.length);
    const merged = path.join(tmp, 'merged');
    const e = run('export', '--format', 'hf', '--run', lora, '--out', merged);
    assert.equal(e.code, 0, e.stderr);
    assert.match(e.stdout + e.stderr, /Qwen2ForCausalLM from .* step-4, LoRA merged into its base/);
    const { model } = hfModelFromFolder(merged);
    const got = model.logits(Int32Array.from(ids), 1, ids.length);
    let max = 0;
    for (let i = 0; i < want.length; i++) max = Math.max(max, Math.abs(got[i]! - want[i]!));
    console.log(`      merged export vs base + adapters: max |logit diff| ${max.toExponential(2)}`);
    assert.ok(max <= 1e-5, `${max}`);
    model.dispose();

    const peft = path.join(tmp, 'peft');
    const p = run('export', '--format', 'hf', '--run', lora, '--peft', '--out', peft);
    assert.equal(p.code, 0, p.stderr);
    assert.deepEqual(fs.readdirSync(peft).sort(), ['adapter_config.json', 'adapter_model.safetensors']);
    const ac = JSON.parse(fs.readFileSync(path.join(peft, 'adapter_config.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(ac['peft_type'], 'LORA');
    assert.equal(ac['task_type'], 'CAUSAL_LM');
    assert.equal(ac['r'], 4);
    assert.equal(ac['lora_alpha'], 8);
    assert.equal(ac['bias'], 'none');
    assert.equal(ac['base_model_name_or_path'], hf);
    assert.deepEqual(ac['target_modules'], ['q_proj', 'v_proj', 'o_proj', 'down_proj']);
    const st = SafetensorsFile.open(path.join(peft, 'adapter_model.safetensors'));
    try {
      const names = [...st.entries.keys()].sort();
      assert.equal(names.length, cfg.layers * 4 * 2);
      assert.ok(names.includes('base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight'));
      assert.ok(names.includes('base_model.model.model.layers.1.mlp.down_proj.lora_B.weight'));
      assert.deepEqual(st.entries.get('base_model.model.model.layers.0.self_attn.o_proj.lora_A.weight')!.shape, [4, cfg.heads * 8]);
      assert.deepEqual(st.entries.get('base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight')!.shape, [cfg.kvHeads * 8, 4]);
      assert.deepEqual(st.entries.get('base_model.model.model.layers.1.mlp.down_proj.lora_A.weight')!.shape, [4, cfg.mlp]);
    } finally {
      st.close();
    }
    // Never over a folder that is there; --peft of a run that is not LoRA is refused.
    oneLine(run('export', '--format', 'hf', '--run', lora, '--peft', '--out', peft), /peft exists: an export writes a new folder and never writes over one/);
    const full = copyOfData('r-full');
    assert.equal(run('train', 'sft', '--base', hf, '--steps', '1', '--eval-limit', '0', '--backend', 'wasm', '--threads', '1', '--run', full).code, 0);
    oneLine(run('export', '--format', 'hf', '--run', full, '--peft', '--out', path.join(tmp, 'p2')), /--peft writes a LoRA run's adapters: .* is not a LoRA run/);
    assert.ok(!fs.existsSync(path.join(tmp, 'p2')));

    if (torchReason) {
      console.log(`      (PyTorch check of the PEFT folder pending, NOT a pass: ${torchReason})`);
    } else {
      // PyTorch applies the adapter from its files by PEFT's equations to the base folder.
      const r = spawnSync(PYTHON, [REFERENCE, '--peft', hf, peft, ids.join(',')], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      const ref = (JSON.parse(r.stdout) as { logits: number[][] }).logits;
      let worst = 0;
      ref.forEach((row, t) => row.forEach((v, j) => (worst = Math.max(worst, Math.abs(want[t * cfg.vocab + j]! - v)))));
      console.log(`      PyTorch (base + PEFT adapter from the files) vs the lab: max |logit diff| ${worst.toExponential(2)}`);
      assert.ok(worst <= 1e-4, `${worst}`);
    }
    adapted.dispose();
  });

  it('a LoRA run whose base folder changed is refused in one line (eval, export), naming the file', () => {
    const moved = path.join(tmp, 'r-moved');
    fs.cpSync(lora, moved, { recursive: true });
    const later = new Date(Date.now() + 10_000);
    fs.utimesSync(path.join(hf, 'model.safetensors'), later, later);
    try {
      // (eval reports a checkpoint it cannot use as it reports a damaged one: one line, exit 1)
      const ev = run('eval', '--run', moved, '--limit', '1', '--backend', 'wasm');
      assert.equal(ev.code, 1, ev.stderr);
      assert.match(ev.stderr, /its LoRA base changed since the run trained on it \(.*hf\/model\.safetensors is \d+ bytes modified .*, the run recorded \d+ bytes/);
      assert.equal(ev.stderr.trim().split('\n').length, 1, ev.stderr);
      oneLine(run('export', '--format', 'hf', '--run', moved, '--out', path.join(tmp, 'never')), /its LoRA base changed/);
      assert.ok(!fs.existsSync(path.join(tmp, 'never')));
    } finally {
      fs.rmSync(moved, { recursive: true, force: true });
    }
  });

  it('training smoke: a LoRA and a full fine-tune of the generated model on the distilled data both lower the loss', function () {
    // (after the test above the base's time changed: a fresh copy of it)
    const base = path.join(tmp, 'hf-smoke');
    fs.cpSync(hf, base, { recursive: true });
    const t0 = Date.now();
    const results: string[] = [];
    for (const [name, extra] of [
      ['LoRA r=8 alpha=64', ['--lora', '8,64']],
      ['full', []],
    ] as const) {
      const dir = copyOfData(`smoke-${extra.length ? 'lora' : 'full'}`);
      const r = run('train', 'sft', '--base', base, ...extra, '--steps', '40', '--eval-limit', '0', '--backend', 'wasm', '--threads', '1', '--seed', '1', '--run', dir);
      assert.equal(r.code, 0, r.stderr);
      const losses = sftLosses(dir);
      assert.equal(losses.length, 40);
      const first = mean(losses.slice(0, 5));
      const last = mean(losses.slice(-5));
      results.push(`${name} ${first.toFixed(3)} -> ${last.toFixed(3)}`);
      assert.ok(last < first - 0.05, `${name}: loss ${first} -> ${last}`);
    }
    console.log(`      40 steps each (mean of the first and last 5): ${results.join('; ')} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  });
});
