// `agent-lab bench train`: training throughput of the default preset (tiny), ours beside
// PyTorch's, on the same model, the same batches and the same CPU, in one run.
//
// Data: the default world's distilled train transcripts whose length is 380-450 tokens (the
// real length of a transcript, ~410), tokenized with the default tokenizer, in pairs
// (batch 2), padded to the longer of the pair. Tokens per step = per row, the positions up
// to its last supervised one (what both sides compute).
//
// Protocol: PyTorch runs in child processes (bench/torch_train.py) that take commands on
// stdin, so that the sides take turns on the CPU step by step and load from other processes
// hits them alike. Per turn: our data-parallel trainer (every core), PyTorch with as many
// threads ("matched": the same algorithmic choices as ours), ours on one thread, PyTorch
// on one thread; every other turn also PyTorch "natural" (the idiomatic implementation) at
// both thread counts. All sides warm up first. Each side's figure is the median over its
// measured steps of tokens/step-time; PyTorch's is the better of its two variants; ratio =
// ours / PyTorch's. With every core, PyTorch runs twice: with OpenBLAS single-threaded
// under torch's own threads (OPENBLAS_NUM_THREADS=1: nothing oversubscribed) and with
// OpenBLAS's pool beside them; the faster is the figure, and the result names the BLAS each
// loaded (torch_train.py blas_info: Debian's openblas-pthread/-openmp/-serial or the
// reference libblas). `--runs N` repeats the whole comparison and gives the medians. Because a shared machine's other load hits OpenMP's barriers harder
// than our lock-free threads, the result also gives each side's best decile (90th
// percentile), which is close to what it does on an idle machine. Both sides start from the
// same weights and the first batch's loss is compared (loss_check): one model, not two.
import { spawn, spawnSync, ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { buildExample } from '../core/sftFormat';
import { defaultWorldTexts, trainDefaultTokenizer } from '../core/tokenizer';
import { AdapterInfo, BackendAsk, initBackend } from '../trainer/model/backend';
import { encodeSafetensors, SafeTensor } from '../trainer/run/checkpoint';
import { Batch, IGNORE, type ModelConfig, PRESETS, StackModel, presetConfig, paramSpecs } from '../trainer/model/model';
import { Trainer, effectiveTokens } from '../trainer/model/optim';
import { autoThreads } from '../trainer/model/parallel';
import { HF_WEIGHTS_FILE } from '../core/protocol/folders';

/**
 * The models `bench train` times: the default preset (tiny: previous-token tables), or a
 * generated Llama-shaped model as a Hugging Face base model is (issue 29: no previous-token
 * tables, GQA 3:1, SwiGLU, tied head, eps 1e-6; bench/lora.ts's shape).
 */
export const BENCH_MODELS = ['tiny', 'llama'] as const;
export type BenchModel = (typeof BENCH_MODELS)[number];

export function benchModelConfig(model: BenchModel, vocab: number): ModelConfig {
  if (model === 'llama') return { vocab: Math.max(vocab, 2048), dModel: 192, layers: 6, heads: 6, kvHeads: 2, mlp: 512, maxSeq: 512, ropeBase: 10000, normEps: 1e-6 };
  return presetConfig('tiny', vocab);
}

export interface TrainBenchOptions {
  backend?: BackendAsk;
  /** Which model (default tiny). */
  model?: BenchModel;
  /** Our worker threads (besides the calling thread); default 'auto'. */
  threads?: number | 'auto';
  rounds?: number;
  /** Measured steps per side per round. */
  steps?: number;
  warmup?: number;
  /** Run PyTorch beside (default true; skipped with a note when no Python has torch). */
  torch?: boolean;
  /** Also measure ours on one thread (default true). */
  singleThread?: boolean;
  log?: (line: string) => void;
}

/** Figures of one comparison (ours beside PyTorch with the same number of threads). */
export interface Comparison {
  threads: number;
  /** Median over measured steps of tokens/step-time. */
  tokens_per_s: number;
  /** The better of PyTorch's two variants, median. */
  torch_tokens_per_s: number | null;
  ratio: number | null;
  /** The same from each side's best decile of steps (90th percentile of tokens/s): close to what it does when nothing else runs. */
  best: { tokens_per_s: number; torch_tokens_per_s: number | null; ratio: number | null };
  torch_variants: { matched: number; natural: number } | null;
  /**
   * One thread only: tokens per CPU-second of each side (median; the process's CPU time per
   * step, PyTorch's the better variant's). A step's CPU time does not count the waits for a
   * CPU that other processes cause, so on a loaded machine this ratio is the steadier one.
   */
  cpu?: { tokens_per_cpu_s: number; torch_tokens_per_cpu_s: number | null; ratio: number | null };
  /**
   * All threads only: PyTorch with OpenBLAS single-threaded under torch's threads
   * (OPENBLAS_NUM_THREADS=1) and with OpenBLAS's pool beside them, each the better of its two
   * variants; `torch_tokens_per_s` is the faster setting's (`torch_best`).
   */
  torch_blas?: { single: { matched: number; natural: number } | null; pool: { matched: number; natural: number } | null; torch_best: 'single' | 'pool' };
}

/** Which BLAS a PyTorch process loaded and how it was threaded (bench/torch_train.py blas_info). */
export interface TorchBlas {
  variant: string;
  libraries: string[];
  openblas_config: string | null;
  openblas_threads: number | null;
  torch_blas_info: string;
  env: Record<string, string>;
}

export interface TrainBenchResult {
  backend: string;
  /** With webgpu: the adapter that ran (a software one, SwiftShader, is slower than wasm). */
  adapter?: AdapterInfo;
  /** Why a better backend was not used, when one was not. */
  backend_note?: string;
  /** wasm: what ran the matrix products (a BLAS, or XNNPACK and why). */
  matmul?: string;
  /** Ours, data-parallel over every core (median after warm-up). */
  tokens_per_s: number;
  model: { name: BenchModel; vocab: number; d_model: number; layers: number; heads: number; kv_heads: number; mlp: number; seq: number; batch: number; params: number };
  /** PyTorch with as many threads (median after warm-up; the better of its two variants). */
  torch_tokens_per_s: number | null;
  ratio: number | null;
  threads: number;
  step_ms_median: number;
  /** All threads: the headline figures above plus the best-decile ones. */
  all_threads: Comparison;
  /** One thread each: per-core efficiency, less sensitive to other load. */
  one_thread: Comparison | null;
  torch: {
    version: string;
    python: string;
    /** The BLAS each PyTorch process ran: all threads with OpenBLAS single-threaded, with its pool, and one thread. */
    blas: { single: TorchBlas | null; pool: TorchBlas | null; one: TorchBlas | null };
  } | null;
  /** First-batch loss of both sides from the same weights: one model, not two. */
  loss_check: { ours: number; torch: number; abs_diff: number } | null;
  cpu: string;
  cores: number;
  /** 1-minute load average before and after: other processes on the machine skew every figure. */
  load_avg: [number, number];
  note: string;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The q-quantile (linear interpolation). */
function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.min(s.length - 1, lo + 1);
  return s[lo]! + (s[hi]! - s[lo]!) * (pos - lo);
}

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

/** The bench's batches: pairs of real transcripts of 380-450 tokens. */
export function benchBatches(maxBatches = 16): { batches: Batch[]; vocab: number } {
  const tok = trainDefaultTokenizer();
  const texts = defaultWorldTexts().train;
  const examples = texts
    .map((t) => buildExample(t, tok))
    .filter((e): e is NonNullable<typeof e> => e !== null && e.inputIds.length >= 380 && e.inputIds.length <= 450);
  const batches: Batch[] = [];
  for (let i = 0; i + 1 < examples.length && batches.length < maxBatches; i += 2) {
    const pair = [examples[i]!, examples[i + 1]!];
    const seq = Math.max(...pair.map((e) => e.inputIds.length));
    const inputIds = new Int32Array(2 * seq).fill(2); // <|pad|>
    const labels = new Int32Array(2 * seq).fill(IGNORE);
    pair.forEach((e, r) => {
      inputIds.set(e.inputIds, r * seq);
      labels.set(e.labels, r * seq);
    });
    batches.push({ inputIds, labels, batch: 2, seq });
  }
  return { batches, vocab: tok.vocabSize };
}

/** torch_train.py's inputs in `dir`: the model, optimiser and batches (data.json) and the weights (model.safetensors). */
export function writeTorchPeerFiles(
  dir: string,
  cfg: ModelConfig,
  optim: { lr: number; betas: readonly number[]; weightDecay: number; clip: number; eps: number },
  batches: readonly Batch[],
  weights: Record<string, Float32Array>,
): { dataFile: string; weightsFile: string } {
  const dataFile = path.join(dir, 'data.json');
  fs.writeFileSync(
    dataFile,
    JSON.stringify({
      model: cfg,
      optim,
      batches: batches.map((b) => ({ batch: b.batch, seq: b.seq, inputIds: Array.from(b.inputIds), labels: Array.from(b.labels) })),
    }),
  );
  const weightsFile = path.join(dir, HF_WEIGHTS_FILE);
  const st: Record<string, SafeTensor> = {};
  for (const s of paramSpecs(cfg)) st[s.name] = { dtype: 'F32', shape: s.shape, data: weights[s.name]! };
  fs.writeFileSync(weightsFile, encodeSafetensors(st));
  return { dataFile, weightsFile };
}

export function findTorchPython(): string | null {
  const candidates = [process.env['AGENT_LAB_PYTHON'], 'python3', '/usr/bin/python3', 'python'].filter((c): c is string => !!c);
  for (const c of candidates) {
    const r = spawnSync(c, ['-c', 'import torch'], { encoding: 'utf8', timeout: 60000 });
    if (r.status === 0) return c;
  }
  return null;
}

export class TorchServer {
  private lines: AsyncIterator<string>;
  constructor(private proc: ChildProcessWithoutNullStreams) {
    this.lines = readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  }
  /**
   * `blasThreads`: OpenBLAS's own pool (OPENBLAS_NUM_THREADS). 1: OpenBLAS runs on the thread
   * that calls it, under torch's own intra-op threads (nothing oversubscribed); `threads`:
   * OpenBLAS's pool beside torch's.
   */
  static start(python: string, dataFile: string, weightsFile: string, threads: number, blasThreads: number = threads): TorchServer {
    // bench/ under tsx; dist/ (a bundle) sits beside bench/ in a checkout
    const candidates = [path.join(__dirname, 'torch_train.py'), path.join(__dirname, '..', 'bench', 'torch_train.py'), path.resolve('bench', 'torch_train.py')];
    const found = candidates.find((c) => fs.existsSync(c)) ?? candidates[0]!;
    const proc = spawn(python, [found, '--data', dataFile, '--weights', weightsFile, '--threads', String(threads)], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, OMP_NUM_THREADS: String(threads), OPENBLAS_NUM_THREADS: String(blasThreads), MKL_NUM_THREADS: String(blasThreads) },
    });
    let err = '';
    proc.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
    proc.on('exit', (code) => {
      if (code) process.stderr.write(`torch_train.py exited with ${code}: ${err}\n`);
    });
    return new TorchServer(proc);
  }
  async next(): Promise<Record<string, unknown>> {
    const r = await this.lines.next();
    if (r.done) throw new Error('torch_train.py ended unexpectedly');
    return JSON.parse(r.value) as Record<string, unknown>;
  }
  async steps(n: number, variant: 'matched' | 'natural'): Promise<{ step_ms: number[]; cpu_ms?: number[]; tokens: number[]; losses: number[] }> {
    this.proc.stdin.write(`steps ${n} ${variant}\n`);
    return (await this.next()) as unknown as { step_ms: number[]; cpu_ms?: number[]; tokens: number[]; losses: number[] };
  }
  /** bench/decode.ts: B prompts of P tokens, G tokens each (torch_train.py `decode`). */
  async decode(B: number, P: number, G: number, mode: 'greedy' | 'sample', seed: number): Promise<{ prefill_ms: number; decode_ms: number; tokens: number[][] }> {
    this.proc.stdin.write(`decode ${B} ${P} ${G} ${mode} ${seed}\n`);
    return (await this.next()) as unknown as { prefill_ms: number; decode_ms: number; tokens: number[][] };
  }
  close(): void {
    try {
      this.proc.stdin.write('quit\n');
      this.proc.stdin.end();
    } catch {
      /* gone */
    }
  }
}

export async function runTrainBench(opts: TrainBenchOptions = {}): Promise<TrainBenchResult> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const rounds = opts.rounds ?? 3;
  const steps = opts.steps ?? 8;
  const warmup = opts.warmup ?? 3;
  const loadBefore = os.loadavg()[0]!;
  const info = await initBackend(opts.backend ?? 'auto');
  const { batches, vocab } = benchBatches();
  if (batches.length === 0) throw new Error('no transcripts of 380-450 tokens in the default world');
  const preset = PRESETS.tiny;
  const benchModel = opts.model ?? 'tiny';
  const cfg = benchModelConfig(benchModel, vocab);
  const threads = opts.threads === undefined || opts.threads === 'auto' ? autoThreads() : opts.threads;
  const seqs = batches.map((b) => b.seq);
  const adapter = info.adapter ? ` on ${info.adapter.vendor} ${info.adapter.architecture} (${info.adapter.description}${info.adapter.software ? ', a software adapter' : ''})` : '';
  log(`bench train: ${info.used}${adapter}${info.note ? ` (${info.note})` : ''}; ${benchModel === 'tiny' ? 'tiny preset' : 'a generated Llama-shaped model'}, ${countParamsOf(cfg)} parameters, vocab ${cfg.vocab}`);
  if (info.matmul) log(`  matrix products on ${info.matmul}`);
  log(`  ${batches.length} batches of 2 transcripts, seq ${Math.min(...seqs)}-${Math.max(...seqs)} (median ${median(seqs)}); ${threads} worker thread(s) + this one`);

  const model = StackModel.create(cfg, 0);
  const optim = { lr: preset.lr, betas: preset.betas, weightDecay: preset.weightDecay, clip: preset.clip, eps: 1e-8 };
  const initLoss = (await model.evaluateAsync(batches[0]!)).loss;

  // PyTorch (one process with as many threads as ours, one with one thread), started
  // first so that their start-up overlaps nothing we measure.
  const servers: { n: TorchServer | null; nb1: TorchServer | null; one: TorchServer | null } = { n: null, nb1: null, one: null };
  let torchReady: Record<string, unknown> | null = null;
  let readyNb1: Record<string, unknown> | null = null;
  let readyOne: Record<string, unknown> | null = null;
  let python: string | null = null;
  let note = '';
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-bench-'));
  try {
    if (opts.torch !== false) {
      python = findTorchPython();
      if (!python) note = 'PyTorch not found (apt-get install python3-torch libopenblas0-pthread, or set AGENT_LAB_PYTHON): no side-by-side figure. ';
      else {
        const { dataFile, weightsFile } = writeTorchPeerFiles(tmp, cfg, optim, batches, await model.exportWeightsAsync());
            servers.n = TorchServer.start(python, dataFile, weightsFile, threads + 1);
        // The same thread count with OpenBLAS single-threaded: torch's threads call it, so
        // nothing is oversubscribed (with one thread the two settings are the same).
        if (threads > 0) servers.nb1 = TorchServer.start(python, dataFile, weightsFile, threads + 1, 1);
        if (opts.singleThread !== false && threads > 0) servers.one = TorchServer.start(python, dataFile, weightsFile, 1);
        torchReady = await servers.n.next();
        if (servers.nb1) readyNb1 = await servers.nb1.next();
        if (servers.one) readyOne = await servers.one.next();
        const blasLine = (r: Record<string, unknown> | null): string => {
          const b = r?.['blas'] as TorchBlas | undefined;
          return b ? `${b.variant}${b.openblas_threads !== null ? `, ${b.openblas_threads} BLAS thread(s)` : ''}` : 'unknown';
        };
        log(
          `  PyTorch ${String(torchReady['torch'])} (${python}), ${String(torchReady['threads'])} threads: BLAS ${blasLine(torchReady)}` +
            (servers.nb1 ? `; and ${String(readyNb1!['threads'])} threads with BLAS ${blasLine(readyNb1)}` : '') +
            (servers.one ? ' (and a 1-thread process)' : ''),
        );
      }
    }

    const par = new Trainer(model, { ...optim, parallel: threads });
    if (threads > 0 && par.workers.threads === 0) note += `${par.workers.note ?? 'no worker threads'}. `;
    const single = opts.singleThread === false || threads === 0 ? null : new Trainer(StackModel.fromWeights(cfg, await model.exportWeightsAsync()), optim);
    let cursor = 0;
    const rates = {
      ours: [] as number[],
      ours1: [] as number[],
      torchMatched: [] as number[],
      torchNatural: [] as number[],
      torchB1Matched: [] as number[],
      torchB1Natural: [] as number[],
      torch1Matched: [] as number[],
      torch1Natural: [] as number[],
      // tokens per CPU-second, one thread each
      ours1Cpu: [] as number[],
      torch1MatchedCpu: [] as number[],
      torch1NaturalCpu: [] as number[],
    };
    const oursMs: number[] = [];
    // stepAsync is step() itself where tensors read back synchronously (wasm, cpu).
    const runOurs = async (tr: Trainer, into: number[] | null, cpuInto?: number[] | null): Promise<void> => {
      const b = batches[cursor++ % batches.length]!;
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await tr.stepAsync(b);
      const dt = performance.now() - t0;
      const c = process.cpuUsage(c0);
      if (into) {
        into.push((effectiveTokens(b) / dt) * 1000);
        if (tr === par) oursMs.push(dt);
        cpuInto?.push((effectiveTokens(b) / ((c.user + c.system) / 1000)) * 1000);
      }
    };
    const runTorch = async (srv: TorchServer | null, variant: 'matched' | 'natural', into: number[] | null, cpuInto?: number[] | null): Promise<void> => {
      if (!srv) return;
      const res = await srv.steps(1, variant);
      into?.push((res.tokens[0]! / res.step_ms[0]!) * 1000);
      if (into && res.cpu_ms?.[0]) cpuInto?.push((res.tokens[0]! / res.cpu_ms[0]) * 1000);
    };
    // Sides take turns step by step, so that load from other processes hits them alike.
    const turn = async (i: number, record: boolean): Promise<void> => {
      await runOurs(par, record ? rates.ours : null);
      await runTorch(servers.n, 'matched', record ? rates.torchMatched : null);
      await runTorch(servers.nb1, 'matched', record ? rates.torchB1Matched : null);
      if (single) await runOurs(single, record ? rates.ours1 : null, rates.ours1Cpu);
      await runTorch(servers.one, 'matched', record ? rates.torch1Matched : null, rates.torch1MatchedCpu);
      if (i % 2 === 0) {
        await runTorch(servers.n, 'natural', record ? rates.torchNatural : null);
        await runTorch(servers.nb1, 'natural', record ? rates.torchB1Natural : null);
        await runTorch(servers.one, 'natural', record ? rates.torch1Natural : null, rates.torch1NaturalCpu);
      }
    };
    for (let i = 0; i < warmup; i++) await turn(i, false);
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < steps; i++) await turn(i, true);
      log(
        `  round ${r + 1}/${rounds}: ours ${median(rates.ours).toFixed(0)} tok/s` +
          (servers.n ? `, PyTorch ${median(rates.torchMatched).toFixed(0)} (matched) / ${median(rates.torchNatural).toFixed(0)} (natural)` : '') +
          (servers.nb1 ? `, with OpenBLAS single-threaded ${median(rates.torchB1Matched).toFixed(0)} / ${median(rates.torchB1Natural).toFixed(0)}` : '') +
          (single ? `; one thread: ours ${median(rates.ours1).toFixed(0)}` : '') +
          (servers.one ? `, PyTorch ${median(rates.torch1Matched).toFixed(0)} / ${median(rates.torch1Natural).toFixed(0)}` : '') +
          `; load average ${os.loadavg()[0]!.toFixed(1)}`,
      );
    }
    par.dispose();
    if (single) {
      single.model.dispose();
      single.dispose();
    }
    model.dispose();

    const compare = (n: number, ours: number[], matched: number[], natural: number[], withTorch: boolean): Comparison => {
      const t = withTorch ? Math.max(median(matched), median(natural)) : null;
      const tb = withTorch ? Math.max(quantile(matched, 0.9), quantile(natural, 0.9)) : null;
      const o = median(ours);
      const ob = quantile(ours, 0.9);
      return {
        threads: n,
        tokens_per_s: Math.round(o),
        torch_tokens_per_s: t !== null ? Math.round(t) : null,
        ratio: t ? round3(o / t) : null,
        best: { tokens_per_s: Math.round(ob), torch_tokens_per_s: tb !== null ? Math.round(tb) : null, ratio: tb ? round3(ob / tb) : null },
        torch_variants: withTorch ? { matched: Math.round(median(matched)), natural: Math.round(median(natural)) } : null,
      };
    };
    // PyTorch at its best: whichever BLAS threading ran faster (by the median of its better variant).
    const poolBest = servers.n ? Math.max(median(rates.torchMatched), median(rates.torchNatural)) : NaN;
    const b1Best = servers.nb1 ? Math.max(median(rates.torchB1Matched), median(rates.torchB1Natural)) : NaN;
    const useB1 = servers.nb1 !== null && !(b1Best < poolBest);
    const all: Comparison = compare(
      threads + 1,
      rates.ours,
      useB1 ? rates.torchB1Matched : rates.torchMatched,
      useB1 ? rates.torchB1Natural : rates.torchNatural,
      servers.n !== null,
    );
    if (servers.n) {
      const v = (m: number[], n: number[]): { matched: number; natural: number } => ({ matched: Math.round(median(m)), natural: Math.round(median(n)) });
      all.torch_blas = {
        single: servers.nb1 ? v(rates.torchB1Matched, rates.torchB1Natural) : null,
        pool: v(rates.torchMatched, rates.torchNatural),
        torch_best: useB1 ? 'single' : 'pool',
      };
    }
    const one = single ? compare(1, rates.ours1, rates.torch1Matched, rates.torch1Natural, servers.one !== null) : null;
    if (one && rates.ours1Cpu.length) {
      const o = median(rates.ours1Cpu);
      const t = rates.torch1MatchedCpu.length ? Math.max(median(rates.torch1MatchedCpu), rates.torch1NaturalCpu.length ? median(rates.torch1NaturalCpu) : 0) : null;
      one.cpu = { tokens_per_cpu_s: Math.round(o), torch_tokens_per_cpu_s: t !== null ? Math.round(t) : null, ratio: t ? round3(o / t) : null };
    }
    const torchInit = torchReady ? Number(torchReady['init_loss']) : null;
    const result: TrainBenchResult = {
      backend: info.used,
      ...(info.adapter ? { adapter: info.adapter } : {}),
      ...(info.note ? { backend_note: info.note } : {}),
      ...(info.matmul ? { matmul: info.matmul } : {}),
      tokens_per_s: all.tokens_per_s,
      model: { name: benchModel, vocab: cfg.vocab, d_model: cfg.dModel, layers: cfg.layers, heads: cfg.heads, kv_heads: cfg.kvHeads, mlp: cfg.mlp, seq: median(seqs), batch: 2, params: countParamsOf(cfg) },
      torch_tokens_per_s: all.torch_tokens_per_s,
      ratio: all.ratio,
      threads: threads + 1,
      step_ms_median: Math.round(median(oursMs) * 10) / 10,
      all_threads: all,
      one_thread: one,
      torch: torchReady
        ? {
            version: String(torchReady['torch']),
            python: python!,
            blas: {
              single: (readyNb1?.['blas'] as TorchBlas | undefined) ?? null,
              pool: (torchReady['blas'] as TorchBlas | undefined) ?? null,
              one: (readyOne?.['blas'] as TorchBlas | undefined) ?? null,
            },
          }
        : null,
      loss_check: torchInit !== null ? { ours: initLoss, torch: torchInit, abs_diff: Math.abs(initLoss - torchInit) } : null,
      cpu: os.cpus()[0]?.model ?? 'unknown',
      cores: os.cpus().length,
      load_avg: [Math.round(loadBefore * 100) / 100, Math.round(os.loadavg()[0]! * 100) / 100],
      note:
        note +
        `medians over ${rounds * steps} measured steps per side after ${warmup} warm-up turns, the sides taking turns step by step; PyTorch's figure is the better of its 'matched' and 'natural' variants` +
        (servers.nb1 ? ` and, with ${threads + 1} threads, of OpenBLAS single-threaded (OPENBLAS_NUM_THREADS=1) and OpenBLAS's own pool` : '') +
        `; 'best' uses each side's 90th percentile`,
    };
    return result;
  } finally {
    servers.n?.close();
    servers.nb1?.close();
    servers.one?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** `bench train --runs N`: the whole comparison N times; the medians of the per-run figures. */
export interface TrainBenchRuns {
  runs: number;
  median: {
    tokens_per_s: number;
    torch_tokens_per_s: number | null;
    /** The median of the per-run ratios (each measured side by side). */
    ratio: number | null;
    one_thread: { tokens_per_s: number; torch_tokens_per_s: number | null; ratio: number | null; cpu_ratio: number | null } | null;
  };
  /** Runs in which PyTorch was faster with OpenBLAS single-threaded, and with its pool. */
  torch_best: { single: number; pool: number };
  results: TrainBenchResult[];
}

export async function runTrainBenchRuns(runs: number, opts: TrainBenchOptions = {}): Promise<TrainBenchRuns> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const results: TrainBenchResult[] = [];
  for (let i = 0; i < runs; i++) {
    log(`run ${i + 1}/${runs}`);
    const r = await runTrainBench(opts);
    results.push(r);
    log(`  run ${i + 1}: ours ${r.tokens_per_s} tokens/s, PyTorch ${r.torch_tokens_per_s ?? '-'}, ratio ${r.ratio ?? '-'}`);
  }
  const med = (xs: (number | null)[]): number | null => {
    const v = xs.filter((x): x is number => x !== null && Number.isFinite(x));
    return v.length ? median(v) : null;
  };
  const one = results.every((r) => r.one_thread)
    ? {
        tokens_per_s: Math.round(med(results.map((r) => r.one_thread!.tokens_per_s))!),
        torch_tokens_per_s: med(results.map((r) => r.one_thread!.torch_tokens_per_s)),
        ratio: med(results.map((r) => r.one_thread!.ratio)),
        cpu_ratio: med(results.map((r) => r.one_thread!.cpu?.ratio ?? null)),
      }
    : null;
  const torchAll = med(results.map((r) => r.torch_tokens_per_s));
  const ratio = med(results.map((r) => r.ratio));
  return {
    runs,
    median: {
      tokens_per_s: Math.round(med(results.map((r) => r.tokens_per_s))!),
      torch_tokens_per_s: torchAll !== null ? Math.round(torchAll) : null,
      ratio: ratio !== null ? round3(ratio) : null,
      one_thread: one
        ? {
            ...one,
            torch_tokens_per_s: one.torch_tokens_per_s !== null ? Math.round(one.torch_tokens_per_s) : null,
            ratio: one.ratio !== null ? round3(one.ratio) : null,
            cpu_ratio: one.cpu_ratio !== null ? round3(one.cpu_ratio) : null,
          }
        : null,
    },
    torch_best: {
      single: results.filter((r) => r.all_threads.torch_blas?.torch_best === 'single').length,
      pool: results.filter((r) => r.all_threads.torch_blas?.torch_best === 'pool').length,
    },
    results,
  };
}

/** Human-readable lines for --runs: every run's headline, then the medians. */
export function formatTrainBenchRuns(r: TrainBenchRuns): string[] {
  const lines = r.results.map(
    (x, i) =>
      `run ${i + 1}: ${x.threads} threads ours ${x.tokens_per_s}, PyTorch ${x.torch_tokens_per_s ?? '-'} (${x.all_threads.torch_blas?.torch_best === 'single' ? 'OpenBLAS single-threaded' : "OpenBLAS's pool"}), ratio ${x.ratio ?? '-'}` +
      (x.one_thread ? `; one thread ours ${x.one_thread.tokens_per_s}, PyTorch ${x.one_thread.torch_tokens_per_s ?? '-'}, ratio ${x.one_thread.ratio ?? '-'}` : '') +
      `; load ${x.load_avg[0]} -> ${x.load_avg[1]}`,
  );
  const m = r.median;
  lines.push(
    `median of ${r.runs} runs: ours ${m.tokens_per_s} tokens/s, PyTorch at its best ${m.torch_tokens_per_s ?? '-'}: ratio ${m.ratio ?? '-'} (PyTorch faster with OpenBLAS single-threaded in ${r.torch_best.single} run(s), with its pool in ${r.torch_best.pool})` +
      (m.one_thread ? `; one thread: ours ${m.one_thread.tokens_per_s}, PyTorch ${m.one_thread.torch_tokens_per_s ?? '-'}, ratio ${m.one_thread.ratio ?? '-'} (per CPU-second ${m.one_thread.cpu_ratio ?? '-'})` : ''),
  );
  const last = r.results[r.results.length - 1];
  // the last run's model, BLAS and machine lines (its per-thread figures are above)
  if (last) lines.push(...formatTrainBench(last).filter((l) => !/^\d+ threads?:/.test(l)));
  return lines;
}

function countParamsOf(cfg: ReturnType<typeof presetConfig>): number {
  return paramSpecs(cfg).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}

/** Human-readable lines for a result. */
export function formatTrainBench(r: TrainBenchResult): string[] {
  const lines = [
    `model: ${r.model.name}, ${r.model.params} parameters (d ${r.model.d_model}, ${r.model.layers} layers, ${r.model.heads}/${r.model.kv_heads} heads, mlp ${r.model.mlp}, vocab ${r.model.vocab}); batch ${r.model.batch} x seq ~${r.model.seq}`,
  ];
  for (const c of [r.all_threads, r.one_thread]) {
    if (!c) continue;
    lines.push(
      `${c.threads} thread${c.threads > 1 ? 's' : ''}: ours (${r.backend}${r.adapter ? ` on ${r.adapter.description || r.adapter.device}` : ''}) ${c.tokens_per_s} tokens/s` +
        (c.torch_tokens_per_s !== null ? `, PyTorch ${c.torch_tokens_per_s} (matched ${c.torch_variants!.matched}, natural ${c.torch_variants!.natural}): ratio ${c.ratio}` : '') +
        `; best decile: ours ${c.best.tokens_per_s}` +
        (c.best.torch_tokens_per_s !== null ? `, PyTorch ${c.best.torch_tokens_per_s}: ratio ${c.best.ratio}` : '') +
        (c.cpu ? `; per CPU-second: ours ${c.cpu.tokens_per_cpu_s}` + (c.cpu.torch_tokens_per_cpu_s !== null ? `, PyTorch ${c.cpu.torch_tokens_per_cpu_s}: ratio ${c.cpu.ratio}` : '') : ''),
    );
  }
  const tb = r.all_threads.torch_blas;
  if (tb) {
    const f = (x: { matched: number; natural: number } | null): string => (x ? `${Math.max(x.matched, x.natural)}` : 'not run');
    lines.push(
      `PyTorch with ${r.all_threads.threads} threads: OpenBLAS single-threaded (OPENBLAS_NUM_THREADS=1) ${f(tb.single)}, OpenBLAS's pool beside torch's ${f(tb.pool)}: compared with the ${tb.torch_best === 'single' ? 'single-threaded BLAS' : 'pool'}`,
    );
  }
  if (r.torch) {
    const b = (x: TorchBlas | null): string => (x ? `${x.variant}${x.openblas_threads !== null ? ` (${x.openblas_threads} BLAS thread${x.openblas_threads === 1 ? '' : 's'})` : ''}` : 'unknown');
    lines.push(
      `PyTorch ${r.torch.version} (${r.torch.python}), torch BLAS_INFO ${r.torch.blas.pool?.torch_blas_info || 'unknown'}; BLAS: ${b(r.torch.blas.single)} / ${b(r.torch.blas.pool)}` +
        (r.torch.blas.pool?.openblas_config ? `; ${r.torch.blas.pool.openblas_config}` : ''),
    );
  }
  if (r.loss_check) lines.push(`same model: first-batch loss ours ${r.loss_check.ours.toFixed(6)}, PyTorch ${r.loss_check.torch.toFixed(6)}`);
  lines.push(`cpu: ${r.cpu} x ${r.cores}; load average ${r.load_avg[0]} -> ${r.load_avg[1]}; ${r.note}`);
  return lines;
}
