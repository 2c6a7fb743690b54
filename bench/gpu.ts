// The WebGPU backend beside wasm: a parity check (the CI test runs it on SwiftShader) and,
// on a machine with a real GPU, the device check (adapter, parity on a preset's dimensions,
// tokens/s per preset).
//
//   npx tsx bench/gpu.ts parity [--json]     tiny dimensions of its own (d 32, 1 layer, seq 16)
//   npx tsx bench/gpu.ts device [--json]     scripts/gpu-check.sh runs this
//   npx tsx bench/gpu.ts throughput tiny 2 128 webgpu    training tokens/s at one fixed shape
//
// Parity, in one process: the same weights and batches on wasm, then on webgpu, then wasm
// again: full-sequence logits, the loss and every gradient of a cross-entropy batch and of
// a GRPO batch, one optimiser step (its loss, the loss after it), greedy decoding (prefill,
// step, stepBatch), and checkpoints written on one backend loaded on the other. Each
// tensor's figure is max |webgpu - wasm| / max(1, max |wasm|) (see PARITY_TOLERANCE). The
// backends are switched with tf.setBackend, never with a tensor crossing over (moving one
// out of webgpu would need a synchronous read).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { AdapterInfo, BackendInfo, initBackend } from '../trainer/model/backend';
import { loadCheckpoint, saveCheckpoint } from '../trainer/run/checkpoint';
import { Batch, IGNORE, ModelConfig, PRESETS, PresetName, StackModel, paramSpecs, presetConfig } from '../trainer/model/model';
import { Trainer, effectiveTokens } from '../trainer/model/optim';
import { mulberry32 } from '../core/mulberry32';

/**
 * Largest allowed relative difference between webgpu and wasm (float32 on both; the
 * reductions run in different orders and WebGPU's exp/log are not correctly rounded).
 */
export const PARITY_TOLERANCE = 1e-4;

/** Weights scaled by this for the greedy-decoding check (so that tokens depend on the context). */
const DECODE_SCALE = 20;

/** The CI model: small enough that SwiftShader compiles and runs it in about a minute. */
export const PARITY_MODEL: ModelConfig = { vocab: 40, dModel: 32, layers: 1, heads: 2, kvHeads: 1, mlp: 64, maxSeq: 16, ropeBase: 10000 };
/** PARITY_MODEL with what Hugging Face checkpoints bring (trainer/hf/hfModel.ts): q/k/v biases, an untied head, head_dim apart, eps 1e-6 (`parity --hf-shaped`). */
export const PARITY_MODEL_HF: ModelConfig = { ...PARITY_MODEL, headDim: 12, qkvBias: true, tiedHead: false, normEps: 1e-6 };

export interface ParityResult {
  adapter: AdapterInfo | null;
  model: ModelConfig;
  tolerance: number;
  /** Relative max difference per compared quantity (logits, loss, grads.NAME, ...). */
  diffs: Record<string, number>;
  /** Greedy tokens on each backend (prefill + step; stepBatch of two sequences). */
  greedy: { wasm: number[]; webgpu: number[]; batchWasm: number[][]; batchWebgpu: number[][] };
  /** The worst figure and its name. */
  worst: { name: string; diff: number };
  seconds: { wasm: number; webgpu: number };
}

function relDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let d = 0;
  let scale = 1;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (!Number.isFinite(x) || !Number.isFinite(y)) return Infinity;
    d = Math.max(d, Math.abs(x - y));
    scale = Math.max(scale, Math.abs(y));
  }
  return d / scale;
}

function randomBatch(cfg: ModelConfig, rows: number, seq: number, seed: number): Batch {
  const rng = mulberry32(seed);
  const inputIds = new Int32Array(rows * seq);
  const labels = new Int32Array(rows * seq).fill(IGNORE);
  for (let i = 0; i < rows * seq; i++) {
    inputIds[i] = Math.floor(rng() * cfg.vocab);
    // a prompt of ~3 positions per row without labels, then labels; the last row shorter
    const t = i % seq;
    const r = Math.floor(i / seq);
    if (t >= 3 && !(r === rows - 1 && t >= seq - 4)) labels[i] = Math.floor(rng() * cfg.vocab);
  }
  const weights = new Float32Array(rows * seq).map((_, i) => (labels[i] === IGNORE ? 0 : 0.5 + (i % 3) * 0.25));
  return { inputIds, labels, weights, batch: rows, seq };
}

/** A GRPO batch over the same positions: advantages per row, reference and old log-probs near the labels'. */
function pgBatch(b: Batch, seed: number): Batch {
  const rng = mulberry32(seed);
  const n = b.batch * b.seq;
  const advantages = new Float32Array(n);
  const refLogp = new Float32Array(n);
  const oldLogp = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    advantages[i] = Math.floor(i / b.seq) % 2 === 0 ? 1 : -0.5;
    refLogp[i] = -Math.log(40) + (rng() - 0.5) * 0.4;
    oldLogp[i] = -Math.log(40) + (rng() - 0.5) * 0.6;
  }
  return { inputIds: b.inputIds, labels: b.labels, batch: b.batch, seq: b.seq, pg: { advantages, refLogp, oldLogp, clip: 0.2, beta: 0.04 } };
}

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

/** What one backend computes from the shared weights. */
interface Side {
  logits: Float32Array;
  loss: number;
  grads: Record<string, Float32Array>;
  pgLoss: number;
  pgGrads: Record<string, Float32Array>;
  tokenLogp: Float32Array;
  stepLoss: number;
  lossAfter: number;
  logitsAfter: Float32Array;
  greedy: number[];
  batchGreedy: number[][];
}

async function gradArrays(g: Map<string, tf.Tensor>): Promise<Record<string, Float32Array>> {
  const out: Record<string, Float32Array> = {};
  for (const [k, t] of g) {
    out[k] = new Float32Array((await t.data()) as Float32Array);
    t.dispose();
  }
  return out;
}

async function greedyDecode(m: StackModel, prompt: number[], n: number): Promise<number[]> {
  const cache = m.newCache();
  const out: number[] = [];
  let logits = await m.prefillAsync(prompt, cache);
  for (let i = 0; i < n; i++) {
    const id = argmax(logits);
    out.push(id);
    logits = await m.prefillAsync([id], cache); // step()
  }
  cache.dispose();
  return out;
}

async function greedyBatch(m: StackModel, prompts: number[][], n: number): Promise<number[][]> {
  const caches = prompts.map(() => m.newCache());
  const out: number[][] = prompts.map(() => []);
  let logits: Float32Array[] = [];
  for (let i = 0; i < prompts.length; i++) logits.push(await m.prefillAsync(prompts[i]!, caches[i]!));
  for (let s = 0; s < n; s++) {
    const ids = logits.map(argmax);
    ids.forEach((id, i) => out[i]!.push(id));
    logits = await m.stepBatchAsync(ids, caches);
  }
  for (const c of caches) c.dispose();
  return out;
}

async function computeSide(cfg: ModelConfig, weights: Record<string, Float32Array>, runDir: string): Promise<Side> {
  const seq = cfg.maxSeq;
  const b = randomBatch(cfg, 2, seq, 5);
  const m = StackModel.fromWeights(cfg, weights);
  const logits = await m.logitsAsync(b.inputIds, b.batch, b.seq);
  const lg = await m.lossAndGradsAsync(b);
  const grads = await gradArrays(lg.grads);
  const pb = pgBatch(b, 9);
  const pg = await m.lossAndGradsAsync(pb);
  const pgGrads = await gradArrays(pg.grads);
  const tokenLogp = (await m.tokenLogprobsAsync(b)).logp;
  // Decoding with sharpened weights: at init every context gives nearly the same argmax.
  const sharp = StackModel.fromWeights(cfg, Object.fromEntries(Object.entries(weights).map(([k, w]) => [k, w.map((x) => x * DECODE_SCALE)])));
  const greedy = await greedyDecode(sharp, [1, 2, 3, 4], Math.min(10, seq - 5));
  const batchGreedy = await greedyBatch(sharp, [[5, 6, 7], [8, 9]], Math.min(8, seq - 4));
  sharp.dispose();
  const tr = new Trainer(m, { lr: 1e-2, warmupSteps: 0, weightDecay: 0.1, clip: 1 });
  const st = await tr.stepAsync(b);
  const lossAfter = (await m.evaluateAsync(b)).loss;
  const logitsAfter = await m.logitsAsync(b.inputIds, b.batch, b.seq);
  await saveCheckpoint(runDir, 1, m, tr);
  tr.dispose();
  m.dispose();
  return { logits, loss: lg.loss, grads, pgLoss: pg.loss, pgGrads, tokenLogp, stepLoss: st.loss, lossAfter, logitsAfter, greedy, batchGreedy };
}

/** Logits of a checkpoint loaded on the running backend, and its optimizer moments. */
async function loadSide(cfg: ModelConfig, runDir: string): Promise<{ logits: Float32Array; m: Float32Array }> {
  const ck = loadCheckpoint(runDir);
  const b = randomBatch(cfg, 2, cfg.maxSeq, 5);
  const m = StackModel.fromWeights(ck.info.model, ck.weights);
  const logits = await m.logitsAsync(b.inputIds, b.batch, b.seq);
  m.dispose();
  const first = paramSpecs(cfg)[0]!.name;
  return { logits, m: ck.optimizer?.m[first] ?? new Float32Array(0) };
}

/** The parity check: wasm, webgpu, wasm again, in this process. Throws when webgpu is not available. */
export async function runParity(cfg: ModelConfig = PARITY_MODEL, log: (l: string) => void = () => {}): Promise<ParityResult> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-gpu-parity-'));
  try {
    await initBackend('wasm');
    const weights = StackModel.create(cfg, 11).exportWeights();
    // create() makes q/k/v biases zero; non-zero ones so that the forward's use of them is compared too
    for (const [k, w] of Object.entries(weights)) if (k.endsWith('.bqkv')) w.forEach((_, i) => (w[i] = Math.sin(i + 1) * 0.5));
    let t0 = performance.now();
    const wasm = await computeSide(cfg, weights, path.join(tmp, 'wasm'));
    const wasmS = (performance.now() - t0) / 1000;
    log(`wasm: ${wasmS.toFixed(1)} s`);
    const info: BackendInfo = await initBackend('webgpu');
    log(`webgpu: ${info.adapter ? `${info.adapter.vendor} ${info.adapter.architecture} (${info.adapter.description})` : 'no adapter info'}`);
    t0 = performance.now();
    const gpu = await computeSide(cfg, weights, path.join(tmp, 'webgpu'));
    const fromWasm = await loadSide(cfg, path.join(tmp, 'wasm'));
    const gpuS = (performance.now() - t0) / 1000;
    log(`webgpu: ${gpuS.toFixed(1)} s`);
    await initBackend('wasm');
    const fromGpu = await loadSide(cfg, path.join(tmp, 'webgpu'));
    const wasmCk = await loadSide(cfg, path.join(tmp, 'wasm'));
    const diffs: Record<string, number> = {
      logits: relDiff(gpu.logits, wasm.logits),
      loss: relDiff([gpu.loss], [wasm.loss]),
      'grpo.loss': relDiff([gpu.pgLoss], [wasm.pgLoss]),
      token_logprobs: relDiff(gpu.tokenLogp.filter(Number.isFinite), wasm.tokenLogp.filter(Number.isFinite)),
      'sft_step.loss': relDiff([gpu.stepLoss], [wasm.stepLoss]),
      'sft_step.loss_after': relDiff([gpu.lossAfter], [wasm.lossAfter]),
      'sft_step.logits_after': relDiff(gpu.logitsAfter, wasm.logitsAfter),
      'checkpoint.wasm_loaded_on_webgpu': relDiff(fromWasm.logits, wasm.logitsAfter),
      'checkpoint.webgpu_loaded_on_wasm': relDiff(fromGpu.logits, gpu.logitsAfter),
      'checkpoint.optimizer_moments': relDiff(fromGpu.m, wasmCk.m),
    };
    for (const s of paramSpecs(cfg)) {
      diffs[`grads.${s.name}`] = relDiff(gpu.grads[s.name]!, wasm.grads[s.name]!);
      diffs[`grpo.grads.${s.name}`] = relDiff(gpu.pgGrads[s.name]!, wasm.pgGrads[s.name]!);
    }
    let worst = { name: '', diff: -1 };
    for (const [name, diff] of Object.entries(diffs)) if (!(diff <= worst.diff)) worst = { name, diff };
    return {
      adapter: info.adapter ?? null,
      model: cfg,
      tolerance: PARITY_TOLERANCE,
      diffs,
      greedy: { wasm: wasm.greedy, webgpu: gpu.greedy, batchWasm: wasm.batchGreedy, batchWebgpu: gpu.batchGreedy },
      worst,
      seconds: { wasm: Math.round(wasmS * 10) / 10, webgpu: Math.round(gpuS * 10) / 10 },
    };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** Tokens/s of training steps of a preset on the running backend (batch rows of `seq`, random tokens). */
export async function presetThroughput(
  name: PresetName,
  opts: { batch: number; seq: number; steps: number; warmup: number },
): Promise<{ preset: PresetName; params: number; batch: number; seq: number; tokens_per_s: number; step_ms_median: number; loss_first: number; loss_last: number }> {
  const cfg = presetConfig(name, 1024);
  const m = StackModel.create(cfg, 1);
  const tr = new Trainer(m, { lr: PRESETS[name].lr, warmupSteps: 0, clip: 1 });
  const batches = [0, 1, 2].map((k) => randomBatch(cfg, opts.batch, opts.seq, 100 + k));
  const ms: number[] = [];
  const losses: number[] = [];
  try {
    for (let i = 0; i < opts.warmup + opts.steps; i++) {
      const b = batches[i % batches.length]!;
      const t0 = performance.now();
      const r = await tr.stepAsync(b);
      if (i >= opts.warmup) ms.push(performance.now() - t0);
      losses.push(r.loss);
    }
  } finally {
    tr.dispose();
    m.dispose();
  }
  const sorted = [...ms].sort((a, b) => a - b);
  const med = sorted[Math.floor(sorted.length / 2)]!;
  const tokens = effectiveTokens(batches[0]!);
  return {
    preset: name,
    params: m.paramCount(),
    batch: opts.batch,
    seq: opts.seq,
    tokens_per_s: Math.round((tokens / med) * 1000),
    step_ms_median: Math.round(med * 10) / 10,
    loss_first: losses[0]!,
    loss_last: losses[losses.length - 1]!,
  };
}

/** Parity failures in words (empty: every figure within tolerance and greedy decoding identical). */
export function parityFailures(r: ParityResult): string[] {
  const bad = Object.entries(r.diffs)
    .filter(([, d]) => !(d <= r.tolerance))
    .map(([k, d]) => `${k}: ${d}`);
  if (r.greedy.wasm.join() !== r.greedy.webgpu.join()) bad.push(`greedy: wasm ${r.greedy.wasm.join(' ')} vs webgpu ${r.greedy.webgpu.join(' ')}`);
  if (JSON.stringify(r.greedy.batchWasm) !== JSON.stringify(r.greedy.batchWebgpu)) bad.push('greedy stepBatch differs');
  return bad;
}

async function main(argv: string[]): Promise<number> {
  const mode = argv[0];
  const json = argv.includes('--json');
  const say = (l: string): void => (json ? console.error(l) : console.log(l));
  if (mode === 'parity') {
    let r: ParityResult;
    try {
      r = await runParity(argv.includes('--hf-shaped') ? PARITY_MODEL_HF : PARITY_MODEL, say);
    } catch (err) {
      const msg = (err as Error).message;
      // The one reason to skip: WebGPU is not here (no package or no adapter).
      if (/backend 'webgpu' is not available/.test(msg)) {
        console.log(JSON.stringify({ unavailable: msg }));
        return 0;
      }
      throw err;
    }
    if (!json) for (const [k, d] of Object.entries(r.diffs)) say(`${k}: ${d.toExponential(2)}`);
    console.log(JSON.stringify(r));
    return 0;
  }
  if (mode === 'device') {
    const info = await initBackend('webgpu');
    say(`adapter: ${JSON.stringify(info.adapter)}${info.adapter?.software ? ' (a software adapter: figures are not a GPU\'s)' : ''}`);
    // Parity on the tiny preset's width (seq 64: a few steps fit in the budget).
    const tinyDims: ModelConfig = { ...presetConfig('tiny', 256), maxSeq: 64 };
    const parity = await runParity(tinyDims, say);
    const failures = parityFailures(parity);
    say(`parity on tiny's dimensions (seq 64): worst ${parity.worst.name} ${parity.worst.diff.toExponential(2)}; ${failures.length ? 'FAILED: ' + failures.join('; ') : 'ok'}`);
    await initBackend('webgpu');
    const runs: Awaited<ReturnType<typeof presetThroughput>>[] = [];
    const plan: [PresetName, number][] = [
      ['tiny', 16],
      ['small', 16],
      ['stack-100m', 4],
    ];
    for (const [name, batch] of plan) {
      try {
        const r = await presetThroughput(name, { batch, seq: 512, steps: 5, warmup: 2 });
        say(`${name}: ${r.params} parameters, batch ${batch} x 512: ${r.tokens_per_s} tokens/s (step ${r.step_ms_median} ms; loss ${r.loss_first.toFixed(3)} -> ${r.loss_last.toFixed(3)})`);
        runs.push(r);
      } catch (err) {
        say(`${name}: batch ${batch} failed: ${(err as Error).message.split('\n')[0]}`);
      }
    }
    console.log(JSON.stringify({ adapter: info.adapter, parity: { worst: parity.worst, failures, seconds: parity.seconds }, presets: runs }));
    return failures.length ? 1 : 0;
  }
  if (mode === 'throughput') {
    // e.g. `throughput tiny 2 128 webgpu`: one fixed shape, so shaders compile once (warm-up)
    const [preset, batch, seq, backend] = argv.slice(1);
    const info = await initBackend((backend ?? 'webgpu') as BackendInfo['asked']);
    const r = await presetThroughput((preset ?? 'tiny') as PresetName, { batch: Number(batch ?? 2), seq: Number(seq ?? 128), steps: 3, warmup: 2 });
    console.log(JSON.stringify({ backend: info.used, adapter: info.adapter ?? null, ...r }));
    return 0;
  }
  console.error('usage: tsx bench/gpu.ts parity|device|throughput [PRESET BATCH SEQ BACKEND] [--json]');
  return 2;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exit(1);
    },
  );
}
