// `agent-lab bench train`: training throughput of the default preset (tiny), ours beside
// PyTorch's, on the same model, the same batches and the same CPU, in one run.
//
// Data: the default world's distilled train transcripts whose length is 380-450 tokens (the
// real length of a transcript, ~410), tokenized with the default tokenizer, in pairs
// (batch 2), padded to the longer of the pair. Tokens per step = per row, the positions up
// to its last supervised one (what both sides compute).
//
// Protocol: PyTorch runs as a child process (bench/torch_train.py) that takes commands on
// stdin, so that the two sides take turns on the CPU: per round, our data-parallel trainer,
// our single-threaded trainer, PyTorch "matched" (the same algorithmic choices as ours),
// PyTorch "natural" (the idiomatic implementation); every side warmed up first. The figure
// of each side is the median over its measured steps of tokens/step-time. PyTorch's figure
// is the better of its two variants; ratio = ours / that. Both sides start from the same
// weights: the loss of the first batch is compared (loss_check) to show it is one model.
import { spawn, spawnSync, ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { buildExample } from '../core/sftFormat';
import { defaultWorldTexts, trainDefaultTokenizer } from '../core/tokenizer';
import { BackendAsk, initBackend } from '../trainer/backend';
import { encodeSafetensors, SafeTensor } from '../trainer/checkpoint';
import { Batch, IGNORE, PRESETS, StackModel, presetConfig, paramSpecs } from '../trainer/model';
import { Trainer, effectiveTokens } from '../trainer/optim';
import { autoThreads } from '../trainer/parallel';

export interface TrainBenchOptions {
  backend?: BackendAsk;
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

export interface TrainBenchResult {
  backend: string;
  tokens_per_s: number;
  model: { vocab: number; d_model: number; layers: number; heads: number; kv_heads: number; mlp: number; seq: number; batch: number; params: number };
  torch_tokens_per_s: number | null;
  ratio: number | null;
  threads: number;
  tokens_per_s_single_thread: number | null;
  step_ms_median: number;
  torch: { version: string; threads: number; python: string; matched_tokens_per_s: number; natural_tokens_per_s: number; step_ms_median: number } | null;
  loss_check: { ours: number; torch: number; abs_diff: number } | null;
  cpu: string;
  cores: number;
  /** 1-minute load average before and after: other processes on the machine skew every figure. */
  load_avg: [number, number];
  note: string;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

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

function findTorchPython(): string | null {
  const candidates = [process.env['AGENT_LAB_PYTHON'], 'python3', '/usr/bin/python3', 'python'].filter((c): c is string => !!c);
  for (const c of candidates) {
    const r = spawnSync(c, ['-c', 'import torch'], { encoding: 'utf8', timeout: 60000 });
    if (r.status === 0) return c;
  }
  return null;
}

class TorchServer {
  private lines: AsyncIterator<string>;
  constructor(private proc: ChildProcessWithoutNullStreams) {
    this.lines = readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  }
  static start(python: string, dataFile: string, weightsFile: string, threads: number): TorchServer {
    const script = path.join(__dirname, 'torch_train.py');
    const found = fs.existsSync(script) ? script : path.resolve('bench', 'torch_train.py');
    const proc = spawn(python, [found, '--data', dataFile, '--weights', weightsFile, '--threads', String(threads)], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, OMP_NUM_THREADS: String(threads), OPENBLAS_NUM_THREADS: String(threads), MKL_NUM_THREADS: String(threads) },
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
  async steps(n: number, variant: 'matched' | 'natural'): Promise<{ step_ms: number[]; tokens: number[]; losses: number[] }> {
    this.proc.stdin.write(`steps ${n} ${variant}\n`);
    return (await this.next()) as unknown as { step_ms: number[]; tokens: number[]; losses: number[] };
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
  const cfg = presetConfig('tiny', vocab);
  const threads = opts.threads === undefined || opts.threads === 'auto' ? autoThreads() : opts.threads;
  const seqs = batches.map((b) => b.seq);
  log(`bench train: ${info.used}${info.note ? ` (${info.note})` : ''}; tiny preset, ${countParamsOf(cfg)} parameters, vocab ${vocab}`);
  log(`  ${batches.length} batches of 2 transcripts, seq ${Math.min(...seqs)}-${Math.max(...seqs)} (median ${median(seqs)}); ${threads} worker thread(s) + this one`);

  const model = StackModel.create(cfg, 0);
  const optim = { lr: preset.lr, betas: preset.betas, weightDecay: preset.weightDecay, clip: preset.clip, eps: 1e-8 };
  const initLoss = model.evaluate(batches[0]!).loss;

  // PyTorch, started first so that its start-up overlaps nothing we measure.
  let torch: TorchServer | null = null;
  let torchReady: Record<string, unknown> | null = null;
  let python: string | null = null;
  let note = '';
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-bench-'));
  try {
    if (opts.torch !== false) {
      python = findTorchPython();
      if (!python) note = 'PyTorch not found (apt-get install python3-torch libopenblas0-pthread, or set AGENT_LAB_PYTHON): no side-by-side figure';
      else {
        const dataFile = path.join(tmp, 'data.json');
        fs.writeFileSync(
          dataFile,
          JSON.stringify({
            model: cfg,
            optim,
            batches: batches.map((b) => ({ batch: b.batch, seq: b.seq, inputIds: Array.from(b.inputIds), labels: Array.from(b.labels) })),
          }),
        );
        const weightsFile = path.join(tmp, 'model.safetensors');
        const w = model.exportWeights();
        const st: Record<string, SafeTensor> = {};
        for (const s of paramSpecs(cfg)) st[s.name] = { dtype: 'F32', shape: s.shape, data: w[s.name]! };
        fs.writeFileSync(weightsFile, encodeSafetensors(st));
        torch = TorchServer.start(python, dataFile, weightsFile, threads + 1); // as many threads as ours
        torchReady = await torch.next();
        log(`  PyTorch ${String(torchReady['torch'])} (${python}), ${String(torchReady['threads'])} threads`);
      }
    }

    const par = new Trainer(model, { ...optim, parallel: threads });
    const single = opts.singleThread === false ? null : new Trainer(StackModel.fromWeights(cfg, model.exportWeights()), optim);
    let cursor = 0;
    const ours: number[] = [];
    const oursMs: number[] = [];
    const oursSingle: number[] = [];
    const torchRates = { matched: [] as number[], natural: [] as number[] };
    const torchMs: number[] = [];
    const runOurs = (tr: Trainer, n: number, into: number[] | null, ms: number[] | null): void => {
      for (let i = 0; i < n; i++) {
        const b = batches[cursor++ % batches.length]!;
        const t0 = performance.now();
        tr.step(b);
        const dt = performance.now() - t0;
        into?.push((effectiveTokens(b) / dt) * 1000);
        ms?.push(dt);
      }
    };
    // warm-up
    runOurs(par, warmup, null, null);
    if (single) runOurs(single, Math.min(2, warmup), null, null);
    if (torch) {
      await torch.steps(warmup, 'matched');
      await torch.steps(Math.min(2, warmup), 'natural');
    }
    // Sides take turns step by step, so that load from other processes hits them alike.
    const singleEvery = 2; // ours on one thread and PyTorch 'natural': every other turn
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < steps; i++) {
        runOurs(par, 1, ours, oursMs);
        if (torch) {
          const res = await torch.steps(1, 'matched');
          torchRates.matched.push((res.tokens[0]! / res.step_ms[0]!) * 1000);
          torchMs.push(res.step_ms[0]!);
        }
        if (i % singleEvery === 0) {
          if (single) runOurs(single, 1, oursSingle, null);
          if (torch) {
            const res = await torch.steps(1, 'natural');
            torchRates.natural.push((res.tokens[0]! / res.step_ms[0]!) * 1000);
          }
        }
      }
      log(
        `  round ${r + 1}/${rounds}: ours ${median(ours).toFixed(0)} tok/s` +
          (single ? `, ours 1 thread ${median(oursSingle).toFixed(0)}` : '') +
          (torch ? `, torch matched ${median(torchRates.matched).toFixed(0)}, torch natural ${median(torchRates.natural).toFixed(0)}` : '') +
          `; load average ${os.loadavg()[0]!.toFixed(1)}`,
      );
    }
    par.dispose();
    if (single) {
      single.model.dispose();
      single.dispose();
    }
    model.dispose();

    const tokensPerS = median(ours);
    const torchBest = torch ? Math.max(median(torchRates.matched), median(torchRates.natural)) : null;
    const torchInit = torchReady ? Number(torchReady['init_loss']) : null;
    const result: TrainBenchResult = {
      backend: info.used,
      tokens_per_s: Math.round(tokensPerS),
      model: { vocab: cfg.vocab, d_model: cfg.dModel, layers: cfg.layers, heads: cfg.heads, kv_heads: cfg.kvHeads, mlp: cfg.mlp, seq: median(seqs), batch: 2, params: countParamsOf(cfg) },
      torch_tokens_per_s: torchBest !== null ? Math.round(torchBest) : null,
      ratio: torchBest ? Math.round((tokensPerS / torchBest) * 1000) / 1000 : null,
      threads: threads + 1,
      tokens_per_s_single_thread: single ? Math.round(median(oursSingle)) : null,
      step_ms_median: Math.round(median(oursMs) * 10) / 10,
      torch:
        torch && torchReady
          ? {
              version: String(torchReady['torch']),
              threads: Number(torchReady['threads']),
              python: python!,
              matched_tokens_per_s: Math.round(median(torchRates.matched)),
              natural_tokens_per_s: Math.round(median(torchRates.natural)),
              step_ms_median: Math.round(median(torchMs) * 10) / 10,
            }
          : null,
      loss_check: torchInit !== null ? { ours: initLoss, torch: torchInit, abs_diff: Math.abs(initLoss - torchInit) } : null,
      cpu: os.cpus()[0]?.model ?? 'unknown',
      cores: os.cpus().length,
      load_avg: [Math.round(loadBefore * 100) / 100, Math.round(os.loadavg()[0]! * 100) / 100],
      note:
        note ||
        `medians over ${rounds * steps} measured steps per side after warm-up, sides taking turns step by step; torch_tokens_per_s is the better of PyTorch's 'matched' and 'natural' variants`,
    };
    return result;
  } finally {
    torch?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

function countParamsOf(cfg: ReturnType<typeof presetConfig>): number {
  return paramSpecs(cfg).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}

/** Human-readable lines for a result. */
export function formatTrainBench(r: TrainBenchResult): string[] {
  const lines = [
    `model: tiny, ${r.model.params} parameters (d ${r.model.d_model}, ${r.model.layers} layers, ${r.model.heads}/${r.model.kv_heads} heads, mlp ${r.model.mlp}, vocab ${r.model.vocab}); batch ${r.model.batch} x seq ~${r.model.seq}`,
    `ours (${r.backend}, ${r.threads} thread${r.threads > 1 ? 's' : ''}): ${r.tokens_per_s} tokens/s (${r.step_ms_median} ms/step)` +
      (r.tokens_per_s_single_thread !== null ? `; one thread: ${r.tokens_per_s_single_thread} tokens/s` : ''),
  ];
  if (r.torch) {
    lines.push(
      `PyTorch ${r.torch.version} (${r.torch.threads} threads): ${r.torch_tokens_per_s} tokens/s (matched ${r.torch.matched_tokens_per_s}, natural ${r.torch.natural_tokens_per_s})`,
      `ratio ours/PyTorch: ${r.ratio}`,
    );
  }
  if (r.loss_check) lines.push(`same model: first-batch loss ours ${r.loss_check.ours.toFixed(6)}, PyTorch ${r.loss_check.torch.toFixed(6)}`);
  lines.push(`cpu: ${r.cpu} x ${r.cores}; load average ${r.load_avg[0]} -> ${r.load_avg[1]}; ${r.note}`);
  return lines;
}
