// The WebGPU backend (Dawn through the `webgpu` package) against wasm, on whatever adapter
// this machine has: SwiftShader on CI machines without a GPU (scripts/setup-webgpu.sh
// installs what it needs). The comparison runs in a child process (bench/gpu.ts parity): it
// switches the process's tfjs backend, and Dawn reads the Vulkan driver's environment at
// start. Tolerance: PARITY_TOLERANCE, a relative max difference. Skipped, with the reason,
// only where WebGPU has no adapter or the optional package is absent. Also: the automatic
// order passes a software adapter by, and the async step equals the sync one on wasm.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PARITY_TOLERANCE, ParityResult, parityFailures } from '../../bench/gpu';
import { AUTO_ORDER, describeAdapter, initBackend } from '../../trainer/model/backend';
import { Batch, IGNORE, ModelConfig, StackModel, makeRng } from '../../trainer/model/model';
import { Trainer } from '../../trainer/model/optim';
import { ToolEnv } from '../../core/distill';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import { buildCorpus, makeTaskPool } from '../../core/world';
import { AgentRuntime } from '../../trainer/agent/agentRuntime';
import { modelPolicy, tokenizerCallMask } from '../../trainer/agent/policy';

const ROOT = path.resolve(__dirname, '../..');
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

function runChild(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 240_000): { stdout: string; stderr: string; status: number | null } {
  const r = spawnSync(process.execPath, ['--require', 'tsx/cjs', ...args], { encoding: 'utf8', cwd: ROOT, env: { ...process.env, ...env }, timeout: timeoutMs });
  return { stdout: r.stdout ?? '', stderr: r.stderr ?? '', status: r.status };
}

function lastJson(stdout: string): Record<string, unknown> {
  const line = stdout.trim().split('\n').filter((l) => l.startsWith('{')).pop();
  if (!line) throw new Error(`no JSON line in the child's output:\n${stdout}`);
  return JSON.parse(line) as Record<string, unknown>;
}

describe('webgpu backend: parity with wasm (bench/gpu.ts parity)', function () {
  this.timeout(300_000);
  let result: ParityResult | null = null;
  let unavailable: string | null = null;

  before(function () {
    const r = runChild([path.join('bench', 'gpu.ts'), 'parity', '--json']);
    if (r.status !== 0) throw new Error(`bench/gpu.ts parity exited ${r.status}:\n${r.stderr.slice(-4000)}`);
    const out = lastJson(r.stdout);
    if (typeof out['unavailable'] === 'string') unavailable = out['unavailable'];
    else result = out as unknown as ParityResult;
  });

  beforeEach(function () {
    if (unavailable) this.skip(); // reason printed by the first test below
  });

  it('ran on a WebGPU adapter (or says why not)', function () {
    if (unavailable) {
      console.log(`      SKIPPED: WebGPU unavailable here: ${unavailable}`);
      this.skip();
    }
    assert.ok(result!.adapter, 'the run records the adapter');
    assert.ok(result!.adapter.vendor || result!.adapter.description, 'the adapter names itself');
    console.log(`      adapter: ${JSON.stringify(result!.adapter)}; wasm ${result!.seconds.wasm} s, webgpu ${result!.seconds.webgpu} s`);
  });

  it(`forward logits equal wasm's within ${PARITY_TOLERANCE} (relative)`, function () {
    assert.ok(result!.diffs['logits']! <= PARITY_TOLERANCE, `logits: ${result!.diffs['logits']}`);
  });

  it('every gradient equals wasm, cross-entropy and GRPO loss alike', function () {
    const names = Object.keys(result!.diffs).filter((k) => k.startsWith('grads.') || k.startsWith('grpo.grads.'));
    // 9 parameters for a 1-layer model, twice
    assert.equal(names.length, 18);
    for (const n of names) assert.ok(result!.diffs[n]! <= PARITY_TOLERANCE, `${n}: ${result!.diffs[n]}`);
    for (const n of ['loss', 'grpo.loss', 'token_logprobs']) assert.ok(result!.diffs[n]! <= PARITY_TOLERANCE, `${n}: ${result!.diffs[n]}`);
  });

  it("one SFT step: its loss, the loss after it and the updated model's logits equal wasm's", function () {
    for (const n of ['sft_step.loss', 'sft_step.loss_after', 'sft_step.logits_after']) assert.ok(result!.diffs[n]! <= PARITY_TOLERANCE, `${n}: ${result!.diffs[n]}`);
  });

  it('a Hugging Face-shaped model (q/k/v biases, untied head, head_dim apart, eps 1e-6): every figure equals wasm\'s', function () {
    const r = runChild([path.join('bench', 'gpu.ts'), 'parity', '--hf-shaped', '--json']);
    if (r.status !== 0) throw new Error(`bench/gpu.ts parity --hf-shaped exited ${r.status}:\n${r.stderr.slice(-4000)}`);
    const hf = lastJson(r.stdout) as unknown as ParityResult;
    assert.deepEqual(parityFailures(hf), []);
    for (const n of ['grads.layers.0.bqkv', 'grads.lm_head', 'grpo.grads.lm_head']) assert.ok(hf.diffs[n] !== undefined, `${n} compared`);
  });

  it('greedy decoding (prefill + step, and stepBatch) gives the same tokens', function () {
    assert.deepEqual(result!.greedy.webgpu, result!.greedy.wasm);
    assert.deepEqual(result!.greedy.batchWebgpu, result!.greedy.batchWasm);
    // the sequence depends on the context (not one token repeated)
    assert.ok(new Set(result!.greedy.wasm).size > 1, `greedy: ${result!.greedy.wasm.join(' ')}`);
  });

  it('a checkpoint written on one backend loads on the other (weights and optimizer state)', function () {
    for (const n of ['checkpoint.wasm_loaded_on_webgpu', 'checkpoint.webgpu_loaded_on_wasm', 'checkpoint.optimizer_moments']) {
      assert.ok(result!.diffs[n]! <= PARITY_TOLERANCE, `${n}: ${result!.diffs[n]}`);
    }
    assert.deepEqual(parityFailures(result!), []);
  });
});

describe('webgpu backend: choosing it', function () {
  this.timeout(120_000);

  it('describeAdapter tells software adapters from hardware ones', function () {
    assert.equal(describeAdapter({ info: { vendor: 'google', architecture: 'swiftshader', description: 'SwiftShader driver 5.0.0' } }).software, true);
    assert.equal(describeAdapter({ info: { vendor: 'mesa', description: 'llvmpipe (LLVM 15.0.6, 256 bits)' } }).software, true);
    assert.equal(describeAdapter({ info: { vendor: 'x', isFallbackAdapter: true } }).software, true);
    const nv = describeAdapter({ info: { vendor: 'nvidia', architecture: 'hopper', device: '0x2335', description: 'NVIDIA H200' } });
    assert.deepEqual(nv, { vendor: 'nvidia', architecture: 'hopper', device: '0x2335', description: 'NVIDIA H200', software: false });
  });

  it("the automatic order tries webgpu after tfjs-node-gpu and before tfjs-node", function () {
    assert.deepEqual([...AUTO_ORDER], ['tfjs-node-gpu', 'webgpu', 'tfjs-node', 'wasm', 'cpu']);
  });

  it("'auto' never picks a software adapter, and says why it passed webgpu by", function () {
    // With only SwiftShader visible to Dawn (where it is installed), auto must fall through.
    const script = "require('./trainer/model/backend').initBackend('auto').then((i) => { console.log(JSON.stringify(i)); process.exit(0); })";
    const r = runChild(['-e', script], { VK_ICD_FILENAMES: SWIFTSHADER_ICD, XDG_RUNTIME_DIR: '/tmp' });
    assert.equal(r.status, 0, r.stderr);
    const info = lastJson(r.stdout);
    assert.notEqual(info['used'], 'webgpu');
    assert.equal(info['adapter'], undefined);
    if (fs.existsSync(SWIFTSHADER_ICD) && fs.existsSync(path.join(ROOT, 'node_modules', 'webgpu'))) assert.match(String(info['note']), /webgpu: only a software adapter \(google swiftshader/);
    else assert.match(String(info['note']), /webgpu: (no WebGPU adapter|the optional package)/);
  });
});

describe('async training step on wasm', function () {
  const CFG: ModelConfig = { vocab: 19, dModel: 16, layers: 1, heads: 2, kvHeads: 1, mlp: 20, maxSeq: 16, ropeBase: 10000 };
  function batch(seed: number): Batch {
    const rng = makeRng(seed);
    const inputIds = new Int32Array(2 * 12).map(() => Math.floor(rng.uniform() * CFG.vocab));
    const labels = new Int32Array(2 * 12).map((_, i) => (i % 12 < 3 ? IGNORE : Math.floor(rng.uniform() * CFG.vocab)));
    return { inputIds, labels, batch: 2, seq: 12 };
  }

  before(async function () {
    await initBackend('wasm');
  });

  it('stepAsync, evaluateAsync and exportWeightsAsync give what their sync forms give', async function () {
    const a = StackModel.create(CFG, 3);
    const b = StackModel.fromWeights(CFG, a.exportWeights());
    const ta = new Trainer(a, { lr: 1e-2 });
    const tb = new Trainer(b, { lr: 1e-2 });
    for (let i = 0; i < 3; i++) {
      const ra = ta.step(batch(i));
      const rb = await tb.stepAsync(batch(i));
      assert.equal(rb.loss, ra.loss);
      assert.equal(rb.gradNorm, ra.gradNorm);
    }
    assert.deepEqual(await b.exportWeightsAsync(), a.exportWeights());
    assert.deepEqual(await b.evaluateAsync(batch(9), { argmax: true }), a.evaluate(batch(9), { argmax: true }));
    assert.deepEqual(await tb.exportStateAsync(), ta.exportState());
    ta.dispose();
    tb.dispose();
    a.dispose();
    b.dispose();
  });

  it('runAsync and runBatchAsync decode what run and runBatch decode', async function () {
    this.timeout(120_000);
    const tok = trainDefaultTokenizer();
    const corpus = buildCorpus();
    const env = new ToolEnv(corpus);
    const model = StackModel.create({ vocab: tok.vocabSize, dModel: 32, layers: 1, heads: 2, kvHeads: 1, mlp: 48, maxSeq: 400, ropeBase: 10000 }, 5);
    const runtime = new AgentRuntime(modelPolicy(model, tok.vocabSize), tok, env, tokenizerCallMask(tok));
    const tasks = makeTaskPool().heldout.slice(0, 3);
    const options = { maxSteps: 2, maxTurnTokens: 24, temperature: 0 };
    const one = tasks.map((task) => runtime.run(task, options));
    const batch = runtime.runBatch(tasks.map((task) => ({ task, options })));
    const oneAsync = await Promise.all(tasks.map((task) => runtime.runAsync(task, options)));
    const batchAsync = await runtime.runBatchAsync(tasks.map((task) => ({ task, options })));
    tasks.forEach((_, i) => {
      assert.deepEqual(oneAsync[i]!.ids, one[i]!.ids);
      assert.deepEqual(batchAsync[i]!.ids, batch[i]!.ids);
      assert.equal(batchAsync[i]!.text, batch[i]!.text);
    });
    model.dispose();
  });
});
