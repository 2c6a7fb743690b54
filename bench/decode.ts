// `agent-lab bench decode`: decoding throughput of the default preset (tiny) with a KV cache,
// ours beside PyTorch's own decoding of the same model, on the same prompts and CPU, in one run.
//
// Prompts: the first P tokens of the bench's transcripts (bench/train.ts benchBatches: the
// default world's, 380-450 tokens), B of them decoded together, G tokens each, greedy (argmax)
// and sampled (softmax at temperature 1): what a GRPO step's rollouts do (trainer/agent: every
// sequence of a group a row of one step, `StackModel.stepBatch`). Ours: `prefill` per prompt,
// then `stepBatch` over the B caches; PyTorch (bench/torch_train.py `decode`): one batched
// prefill, then one batched forward per token over caches grown by concatenation, a kv group's
// heads stacked in one product. Decoding tokens/s = B*G / the time of the G steps (sampling
// included); prefill is timed apart. The sides take turns, one thread each and, for PyTorch,
// also two (torch's threads, OpenBLAS single-threaded): the better of the two is compared.
// Greedy tokens are compared position by position: the same model, not two.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { initBackend, type BackendAsk } from '../trainer/model/backend';
import { StackModel, makeRng, paramSpecs, presetConfig } from '../trainer/model/model';
import { TorchServer, benchBatches, findTorchPython, median, writeTorchPeerFiles } from './train';

export interface DecodeBenchOptions {
  backend?: BackendAsk;
  /** Sequences decoded together (default 8 and 32: a GRPO group, and four). */
  batches?: number[];
  /** Prompt tokens (default 200). */
  prompt?: number;
  /** Tokens generated per sequence (default 48). */
  generate?: number;
  /** Measured repetitions per side and setting (default 3; each figure the median). */
  rounds?: number;
  torch?: boolean;
  log?: (line: string) => void;
}

interface Side {
  prefill_tokens_per_s: number;
  decode_tokens_per_s: number;
}

export interface DecodeBenchRow {
  batch: number;
  mode: 'greedy' | 'sample';
  ours: Side;
  torch: { one: Side; two: Side | null } | null;
  /** ours / PyTorch's better decoding figure. */
  ratio: number | null;
  /** Greedy only: generated tokens equal to PyTorch's, position by position (of B*G). */
  same_tokens?: { equal: number; of: number };
}

export interface DecodeBenchResult {
  backend: string;
  matmul?: string;
  model: { vocab: number; params: number };
  prompt: number;
  generate: number;
  rows: DecodeBenchRow[];
  torch: { version: string; python: string } | null;
  load_avg: [number, number];
  note: string;
}

function argmax(x: Float32Array, V: number): number {
  let best = 0;
  for (let i = 1; i < V; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

let sampleBuf = new Float64Array(0);
function sample(x: Float32Array, V: number, u: number): number {
  let max = -Infinity;
  for (let i = 0; i < V; i++) if (x[i]! > max) max = x[i]!;
  let sum = 0;
  if (sampleBuf.length < V) sampleBuf = new Float64Array(V);
  const p = sampleBuf;
  for (let i = 0; i < V; i++) sum += p[i] = Math.exp(x[i]! - max);
  let r = u * sum;
  for (let i = 0; i < V; i++) if ((r -= p[i]!) <= 0) return i;
  return V - 1;
}

/** Our decoding of B prompts for G tokens: prefill each, then stepBatch over the caches. */
function oursDecode(m: StackModel, prompts: number[][], G: number, mode: 'greedy' | 'sample', seed: number): { prefillMs: number; decodeMs: number; tokens: number[][] } {
  const V = m.config.vocab;
  const rng = makeRng(seed);
  const caches = prompts.map(() => m.newCache());
  const t0 = performance.now();
  let logits = prompts.map((p, i) => m.prefill(p, caches[i]!));
  const t1 = performance.now();
  const tokens: number[][] = prompts.map(() => []);
  for (let g = 0; g < G; g++) {
    const next = logits.map((l) => (mode === 'greedy' ? argmax(l, V) : sample(l, V, rng.uniform())));
    next.forEach((id, b) => tokens[b]!.push(id));
    logits = m.stepBatch(next, caches);
  }
  const t2 = performance.now();
  return { prefillMs: t1 - t0, decodeMs: t2 - t1, tokens };
}

export async function runDecodeBench(opts: DecodeBenchOptions = {}): Promise<DecodeBenchResult> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const sizes = opts.batches ?? [8, 32];
  const P = opts.prompt ?? 200;
  const G = opts.generate ?? 48;
  const rounds = opts.rounds ?? 3;
  const loadBefore = os.loadavg()[0]!;
  const info = await initBackend(opts.backend ?? 'auto');
  const { batches, vocab } = benchBatches();
  const rows: number[][] = [];
  for (const b of batches) for (let r = 0; r < b.batch; r++) rows.push(Array.from(b.inputIds.subarray(r * b.seq, r * b.seq + P)));
  const maxB = Math.max(...sizes);
  if (rows.length < maxB) throw new Error(`bench decode: ${rows.length} prompts, ${maxB} asked`);
  const cfg = presetConfig('tiny', vocab);
  const model = StackModel.create(cfg, 0);
  log(`bench decode: ${info.used}${info.matmul ? ` (matrix products on ${info.matmul})` : ''}; tiny preset, vocab ${vocab}; prompts of ${P} tokens, ${G} generated each`);

  let torchOne: TorchServer | null = null;
  let torchTwo: TorchServer | null = null;
  let torchInfo: { version: string; python: string } | null = null;
  let note = '';
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-bench-decode-'));
  try {
    if (opts.torch !== false) {
      const python = findTorchPython();
      if (!python) note = 'PyTorch not found (apt-get install python3-torch libopenblas0-pthread, or set AGENT_LAB_PYTHON): no side-by-side figure. ';
      else {
        // the prompts as torch_train.py's batches: one row each, as many as asked
        const prompts = rows.slice(0, maxB).map((ids) => ({ batch: 1, seq: P, inputIds: Int32Array.from(ids), labels: Int32Array.from(ids, (id, i) => (i ? id : -100)) }));
        const optim = { lr: 1e-3, betas: [0.9, 0.95], weightDecay: 0, clip: 1, eps: 1e-8 };
        const { dataFile, weightsFile } = writeTorchPeerFiles(tmp, cfg, optim, prompts, model.exportWeights());
        torchOne = TorchServer.start(python, dataFile, weightsFile, 1);
        torchTwo = TorchServer.start(python, dataFile, weightsFile, 2, 1);
        const ready = await torchOne.next();
        await torchTwo.next();
        torchInfo = { version: String(ready['torch']), python };
        log(`  PyTorch ${torchInfo.version} (${python}): 1 thread, and 2 threads with OpenBLAS single-threaded`);
      }
    }
    const out: DecodeBenchRow[] = [];
    for (const B of sizes) {
      for (const mode of ['greedy', 'sample'] as const) {
        const prompts = rows.slice(0, B);
        const ours: { p: number[]; d: number[]; tokens: number[][] } = { p: [], d: [], tokens: [] };
        const one: { p: number[]; d: number[]; tokens: number[][] } = { p: [], d: [], tokens: [] };
        const two: { p: number[]; d: number[] } = { p: [], d: [] };
        // a warm-up turn each, then rounds taking turns
        for (let r = -1; r < rounds; r++) {
          const o = oursDecode(model, prompts, G, mode, r + 1);
          const a = torchOne ? (await torchOne.decode(B, P, G, mode, r + 1)) : null;
          const b = torchTwo ? (await torchTwo.decode(B, P, G, mode, r + 1)) : null;
          if (r < 0) continue;
          ours.p.push((B * P * 1000) / o.prefillMs);
          ours.d.push((B * G * 1000) / o.decodeMs);
          ours.tokens = o.tokens;
          if (a) {
            one.p.push((B * P * 1000) / a.prefill_ms);
            one.d.push((B * G * 1000) / a.decode_ms);
            one.tokens = a.tokens;
          }
          if (b) {
            two.p.push((B * P * 1000) / b.prefill_ms);
            two.d.push((B * G * 1000) / b.decode_ms);
          }
        }
        const side = (x: { p: number[]; d: number[] }): Side => ({ prefill_tokens_per_s: Math.round(median(x.p)), decode_tokens_per_s: Math.round(median(x.d)) });
        const torch = torchOne ? { one: side(one), two: torchTwo ? side(two) : null } : null;
        const best = torch ? Math.max(torch.one.decode_tokens_per_s, torch.two?.decode_tokens_per_s ?? 0) : 0;
        const row: DecodeBenchRow = { batch: B, mode, ours: side(ours), torch, ratio: torch ? Math.round((side(ours).decode_tokens_per_s / best) * 1000) / 1000 : null };
        if (mode === 'greedy' && torch) {
          let equal = 0;
          ours.tokens.forEach((t, i) => t.forEach((id, j) => (equal += id === one.tokens[i]?.[j] ? 1 : 0)));
          row.same_tokens = { equal, of: B * G };
        }
        log(
          `  batch ${B}, ${mode}: ours ${row.ours.decode_tokens_per_s} tok/s decoding (prefill ${row.ours.prefill_tokens_per_s})` +
            (torch ? `, PyTorch 1 thread ${torch.one.decode_tokens_per_s} (prefill ${torch.one.prefill_tokens_per_s}), 2 threads ${torch.two?.decode_tokens_per_s ?? '-'}: ratio ${row.ratio}` : '') +
            (row.same_tokens ? `; greedy tokens equal ${row.same_tokens.equal}/${row.same_tokens.of}` : ''),
        );
        out.push(row);
      }
    }
    return {
      backend: info.used,
      ...(info.matmul ? { matmul: info.matmul } : {}),
      model: { vocab, params: paramSpecs(cfg).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0) },
      prompt: P,
      generate: G,
      rows: out,
      torch: torchInfo,
      load_avg: [Math.round(loadBefore * 100) / 100, Math.round(os.loadavg()[0]! * 100) / 100],
      note:
        note +
        `medians of ${rounds} rounds after a warm-up, the sides taking turns; ours on one thread (a GRPO step's rollouts split across the worker threads run this per thread); ratio = ours / PyTorch's better decoding figure; sampling included in the decoding time`,
    };
  } finally {
    torchOne?.close();
    torchTwo?.close();
    model.dispose();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}


export function formatDecodeBench(r: DecodeBenchResult): string[] {
  const lines = [`decode (${r.backend}${r.matmul ? `, products on ${r.matmul}` : ''}): prompts of ${r.prompt} tokens, ${r.generate} generated each; load ${r.load_avg[0]} -> ${r.load_avg[1]}`];
  for (const row of r.rows) {
    lines.push(
      `  batch ${row.batch} ${row.mode}: ours ${row.ours.decode_tokens_per_s} tok/s` +
        (row.torch ? `, PyTorch ${Math.max(row.torch.one.decode_tokens_per_s, row.torch.two?.decode_tokens_per_s ?? 0)}: ratio ${row.ratio}` : '') +
        (row.same_tokens ? ` (greedy tokens equal ${row.same_tokens.equal}/${row.same_tokens.of})` : ''),
    );
  }
  lines.push(r.note);
  return lines;
}
