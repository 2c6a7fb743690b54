// `agent-lab bench train --profile`: where the time of one training step goes, on the bench's
// model and batches (bench/train.ts), for an SFT step and a GRPO step, on one thread and
// data-parallel over every core.
//
// Phases come from the trainer's own marks (trainer/model/stepClock.ts: forward, loss head,
// backward, embedding gradient, flattening, the worker exchange, clip norm, AdamW), timed on
// plain steps (median per phase over the measured steps). Ops come from tf.profile() over
// further steps: each kernel's time and the phase it ran in. A phase's "other" time is its
// wall time less its kernels' time: tfjs dispatch, tensor allocation and disposal, and the
// work done in plain JS (the loss on wasm/cpu, flattening, AdamW over the flat buffer).
// tf.profile sees only this thread's kernels: the workers' shards show as "wait for
// workers", with each worker's own compute time beside it.
import * as os from 'node:os';
import * as tf from '@tensorflow/tfjs-core';
import { BackendAsk, canReadSync, initBackend } from '../trainer/model/backend';
import { Batch, PRESETS, StackModel, presetConfig, paramSpecs } from '../trainer/model/model';
import { Trainer, effectiveTokens } from '../trainer/model/optim';
import { autoThreads } from '../trainer/model/parallel';
import { setPhaseListener, mark } from '../trainer/model/stepClock';
import { GRPO_DEFAULTS } from '../trainer/grpo/grpo';
import { benchBatches, median } from './train';

export interface TrainProfileOptions {
  backend?: BackendAsk;
  threads?: number | 'auto';
  /** Timed steps per profile (phases); default 8. */
  steps?: number;
  /** Steps under tf.profile (ops); default 3. */
  profiledSteps?: number;
  warmup?: number;
  log?: (line: string) => void;
}

export interface PhaseRow {
  phase: string;
  /** Median wall milliseconds over the timed steps. */
  ms: number;
  /** Share of the sum of the phases' medians. */
  share: number;
  /** Kernels per step in this phase (this thread's). */
  kernels: number;
  /** Their time (mean over the profiled steps). */
  kernel_ms: number;
  /** ms - kernel_ms: dispatch, allocation, plain-JS work. */
  other_ms: number;
}

export interface OpRow {
  op: string;
  calls: number;
  ms: number;
  share: number;
}

export interface StepProfile {
  name: 'sft' | 'grpo';
  /** Threads computing the step (1: this one only). */
  threads: number;
  step_ms: number;
  /**
   * CPU milliseconds of this process per step (every thread's; median): on a loaded machine
   * the wall time includes waits for the CPU, this does not.
   */
  cpu_ms: number;
  tokens: number;
  tokens_per_s: number;
  phases: PhaseRow[];
  /** By kernel name, per step (this thread's), largest first. */
  ops: OpRow[];
  /** The matMuls by shape ([M,K]x[K,N]), per step, largest first (the top ones). */
  matmuls: { shape: string; calls: number; ms: number; gflops: number }[];
  kernel_calls: number;
  kernel_ms: number;
  /** Forward/backward/optimiser split (sums of phases). */
  split: { forward_ms: number; backward_ms: number; optimizer_ms: number; exchange_ms: number; other_ms: number };
  /** Per worker: its own compute milliseconds for its shard (median). */
  worker_ms?: number[];
}

export interface TrainProfileResult {
  backend: string;
  model: { vocab: number; d_model: number; layers: number; params: number; batch: number; seq: number };
  profiles: StepProfile[];
  load_avg: [number, number];
  note: string;
}

const r1 = (x: number): number => Math.round(x * 10) / 10;

/** The engine's in-progress profile (a tfjs internal, read only while tf.profile runs). */
function activeKernelCount(): number {
  const state = (tf.engine() as unknown as { state: { activeProfile?: { kernels?: unknown[] } } }).state;
  return state.activeProfile?.kernels?.length ?? 0;
}

const FORWARD = new Set(['forward', 'loss head', 'reference log-probs']);
const BACKWARD = new Set(['backward', 'embedding grad', 'free intermediates']);
const OPTIMIZER = new Set(['clip norm', 'AdamW update', 'flatten grads']);
const EXCHANGE = new Set(['send shards', 'wait for workers', 'combine shards']);

/** Profile one kind of step: `run` does one step, marking its phases (the trainer does). */
async function profileStep(
  name: 'sft' | 'grpo',
  threads: number,
  run: (i: number) => { tokens: number },
  workerMs: () => number[] | null,
  o: { steps: number; profiled: number; warmup: number },
): Promise<StepProfile> {
  for (let i = 0; i < o.warmup; i++) run(i);
  // Timed steps: wall time per phase.
  const perPhase = new Map<string, number[]>();
  const order: string[] = [];
  const stepMs: number[] = [];
  const cpuMs: number[] = [];
  const workers: number[][] = [];
  let tokens = 0;
  for (let i = 0; i < o.steps; i++) {
    const seen = new Map<string, number>();
    let cur: string | null = null;
    let t = performance.now();
    setPhaseListener((p) => {
      const now = performance.now();
      if (cur !== null) seen.set(cur, (seen.get(cur) ?? 0) + now - t);
      cur = p;
      t = now;
    });
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    tokens = run(o.warmup + i).tokens;
    stepMs.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpuMs.push((c.user + c.system) / 1000);
    setPhaseListener(null);
    for (const [p, ms] of seen) {
      if (!perPhase.has(p)) {
        perPhase.set(p, []);
        order.push(p);
      }
      perPhase.get(p)!.push(ms);
    }
    const w = workerMs();
    if (w) w.forEach((ms, k) => (workers[k] ??= []).push(ms));
  }
  // Profiled steps: kernels by phase and by op.
  const kernelsByPhase = new Map<string, { n: number; ms: number }>();
  const ops = new Map<string, { n: number; ms: number }>();
  const mm = new Map<string, { n: number; ms: number; flops: number }>();
  let calls = 0;
  let kms = 0;
  for (let i = 0; i < o.profiled; i++) {
    const bounds: { at: number; phase: string | null }[] = [];
    const info = await tf.profile(() => {
      setPhaseListener((p) => bounds.push({ at: activeKernelCount(), phase: p }));
      run(o.warmup + o.steps + i);
      setPhaseListener(null);
      return [] as tf.Tensor[];
    });
    let b = 0;
    let phase: string | null = null;
    info.kernels.forEach((k, idx) => {
      while (b < bounds.length && bounds[b]!.at <= idx) phase = bounds[b++]!.phase;
      const ms = Number(k.kernelTimeMs);
      const p = phase ?? '(outside the marks)';
      const e = kernelsByPhase.get(p) ?? { n: 0, ms: 0 };
      e.n++;
      e.ms += ms;
      kernelsByPhase.set(p, e);
      const oe = ops.get(k.name) ?? { n: 0, ms: 0 };
      oe.n++;
      oe.ms += ms;
      ops.set(k.name, oe);
      calls++;
      kms += ms;
      if (k.name === 'BatchMatMul' && k.inputShapes.length >= 2) {
        const a = k.inputShapes[0]!;
        const bb = k.inputShapes[1]!;
        // the inputs as stored; tfjs's matMul transposes flags are not in the record, so the
        // flops use the shared dimension as the one both shapes have
        const shape = `[${a.join(',')}]x[${bb.join(',')}]`;
        const M = a[a.length - 2]!;
        const K = a[a.length - 1]!;
        const N = bb[bb.length - 1]!;
        const batch = a.length > 2 ? a.slice(0, -2).reduce((x, y) => x * y, 1) : 1;
        const me = mm.get(shape) ?? { n: 0, ms: 0, flops: 0 };
        me.n++;
        me.ms += ms;
        me.flops += 2 * batch * M * K * N;
        mm.set(shape, me);
      }
    });
  }
  const P = Math.max(1, o.profiled);
  const phaseMs = order.map((p) => median(perPhase.get(p)!));
  const sum = phaseMs.reduce((a, b) => a + b, 0);
  const phases: PhaseRow[] = order.map((p, k) => {
    const ke = kernelsByPhase.get(p) ?? { n: 0, ms: 0 };
    const kernelMs = ke.ms / P;
    return { phase: p, ms: r1(phaseMs[k]!), share: Math.round((phaseMs[k]! / sum) * 1000) / 10, kernels: Math.round(ke.n / P), kernel_ms: r1(kernelMs), other_ms: r1(Math.max(0, phaseMs[k]! - kernelMs)) };
  });
  const opRows = [...ops.entries()]
    .sort((a, b) => b[1].ms - a[1].ms)
    .map(([op, e]) => ({ op, calls: Math.round(e.n / P), ms: r1(e.ms / P), share: Math.round((e.ms / kms) * 1000) / 10 }));
  const matmuls = [...mm.entries()]
    .sort((a, b) => b[1].ms - a[1].ms)
    .slice(0, 12)
    .map(([shape, e]) => ({ shape, calls: Math.round(e.n / P), ms: r1(e.ms / P), gflops: Math.round((e.flops / (e.ms * 1e6)) * 10) / 10 }));
  const sumOf = (set: Set<string>): number => r1(phases.filter((p) => set.has(p.phase)).reduce((a, p) => a + p.ms, 0));
  const known = new Set([...FORWARD, ...BACKWARD, ...OPTIMIZER, ...EXCHANGE]);
  const step = median(stepMs);
  return {
    name,
    threads,
    step_ms: r1(step),
    cpu_ms: r1(median(cpuMs)),
    tokens,
    tokens_per_s: Math.round((tokens / step) * 1000),
    phases,
    ops: opRows,
    matmuls,
    kernel_calls: Math.round(calls / P),
    kernel_ms: r1(kms / P),
    split: {
      forward_ms: sumOf(FORWARD),
      backward_ms: sumOf(BACKWARD),
      optimizer_ms: sumOf(OPTIMIZER),
      exchange_ms: sumOf(EXCHANGE),
      other_ms: r1(phases.filter((p) => !known.has(p.phase)).reduce((a, p) => a + p.ms, 0)),
    },
    ...(workers.length ? { worker_ms: workers.map((w) => r1(median(w))) } : {}),
  };
}

/** A GRPO micro-batch from a bench batch: one advantage per row (+1, -1, ...), the reference's log-probs. */
function grpoBatch(b: Batch, refLogp: Float32Array): Batch {
  const adv = new Float32Array(b.batch * b.seq);
  for (let r = 0; r < b.batch; r++) adv.fill(r % 2 === 0 ? 1 : -1, r * b.seq, (r + 1) * b.seq);
  return { ...b, pg: { advantages: adv, refLogp, clip: GRPO_DEFAULTS.clip, beta: GRPO_DEFAULTS.klBeta, temperature: GRPO_DEFAULTS.temperature } };
}

export async function runTrainProfile(opts: TrainProfileOptions = {}): Promise<TrainProfileResult> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const loadBefore = os.loadavg()[0]!;
  const info = await initBackend(opts.backend ?? 'auto');
  if (!canReadSync()) throw new Error(`the profile times synchronous steps: the ${info.used} backend has no synchronous reads (use --backend wasm or cpu)`);
  const { batches, vocab } = benchBatches();
  if (batches.length === 0) throw new Error('no transcripts of 380-450 tokens in the default world');
  const preset = PRESETS.tiny;
  const cfg = presetConfig('tiny', vocab);
  const threads = opts.threads === undefined || opts.threads === 'auto' ? autoThreads() : opts.threads;
  const o = { steps: opts.steps ?? 8, profiled: opts.profiledSteps ?? 3, warmup: opts.warmup ?? 3 };
  const base = StackModel.create(cfg, 0);
  const w0 = base.exportWeights();
  base.dispose();
  const sftOptim = { lr: preset.lr, betas: preset.betas, weightDecay: preset.weightDecay, clip: preset.clip, eps: 1e-8 };
  const grpoOptim = { lr: GRPO_DEFAULTS.lr, weightDecay: 0, clip: 1 };
  const reference = StackModel.fromWeights(cfg, w0);
  const profiles: StepProfile[] = [];
  log(`bench train --profile: ${info.used}${info.matmul ? ` (matrix products on ${info.matmul})` : ''}; tiny preset, vocab ${vocab}; ${o.warmup} warm-up, ${o.steps} timed and ${o.profiled} profiled steps per row`);
  for (const kind of ['sft', 'grpo'] as const) {
    for (const n of threads > 0 ? [0, threads] : [0]) {
      const model = StackModel.fromWeights(cfg, w0);
      const tr = new Trainer(model, { ...(kind === 'sft' ? sftOptim : grpoOptim), parallel: n });
      const run = (i: number): { tokens: number } => {
        const b = batches[i % batches.length]!;
        if (kind === 'sft') {
          tr.step(b);
          return { tokens: effectiveTokens(b) };
        }
        mark('reference log-probs');
        const ref = reference.tokenLogprobs(b, GRPO_DEFAULTS.temperature).logp;
        tr.step(grpoBatch(b, ref));
        return { tokens: effectiveTokens(b) };
      };
      const p = await profileStep(kind, 1 + (tr.pool?.size ?? 0), run, () => (tr.pool ? tr.pool.lastWorkerMs : null), o);
      tr.dispose();
      model.dispose();
      profiles.push(p);
      log(`  ${kind} step, ${p.threads} thread(s): ${p.step_ms} ms, ${p.tokens_per_s} tokens/s`);
    }
  }
  reference.dispose();
  return {
    backend: info.used,
    model: { vocab, d_model: cfg.dModel, layers: cfg.layers, params: paramSpecs(cfg).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0), batch: 2, seq: median(batches.map((b) => b.seq)) },
    profiles,
    load_avg: [Math.round(loadBefore * 100) / 100, Math.round(os.loadavg()[0]! * 100) / 100],
    note:
      'phases: median wall ms over the timed steps (trainer/model/stepClock.ts marks); kernels: tf.profile over the profiled steps, this thread only; other = phase ms - kernel ms (dispatch, allocation, plain-JS work); ' +
      'GRPO step = the reference model\'s log-probs of the batch + one clipped-surrogate update (no rollouts)',
  };
}

/** Human-readable lines. */
export function formatTrainProfile(r: TrainProfileResult): string[] {
  const lines: string[] = [`model: tiny, ${r.model.params} parameters, vocab ${r.model.vocab}; batch ${r.model.batch} x seq ~${r.model.seq}; backend ${r.backend}`];
  const pct = (x: number, of: number): string => `${of > 0 ? Math.round((x / of) * 100) : 0}%`;
  for (const p of r.profiles) {
    const s = p.split;
    const total = s.forward_ms + s.backward_ms + s.optimizer_ms + s.exchange_ms + s.other_ms;
    lines.push('');
    lines.push(`${p.name.toUpperCase()} step, ${p.threads} thread${p.threads > 1 ? 's' : ''}: ${p.step_ms} ms (${p.tokens_per_s} tokens/s over ${p.tokens} tokens), ${p.cpu_ms} CPU ms`);
    lines.push(
      `  forward ${s.forward_ms} ms (${pct(s.forward_ms, total)}), backward ${s.backward_ms} ms (${pct(s.backward_ms, total)}), optimiser ${s.optimizer_ms} ms (${pct(s.optimizer_ms, total)})` +
        (p.threads > 1 ? `, exchange ${s.exchange_ms} ms (${pct(s.exchange_ms, total)})` : '') +
        `; kernels ${p.kernel_calls} calls, ${p.kernel_ms} ms on this thread` +
        (p.worker_ms ? `; each worker's own shard: ${p.worker_ms.join(', ')} ms` : ''),
    );
    lines.push(`  ${'phase'.padEnd(20)} ${'ms'.padStart(7)} ${'share'.padStart(6)} ${'kernels'.padStart(8)} ${'kernel ms'.padStart(10)} ${'other ms'.padStart(9)}`);
    for (const ph of p.phases) {
      lines.push(`  ${ph.phase.padEnd(20)} ${ph.ms.toFixed(1).padStart(7)} ${`${ph.share}%`.padStart(6)} ${String(ph.kernels).padStart(8)} ${ph.kernel_ms.toFixed(1).padStart(10)} ${ph.other_ms.toFixed(1).padStart(9)}`);
    }
    lines.push(`  ops: ${p.ops.slice(0, 8).map((o) => `${o.op} ${o.calls}x ${o.ms} ms (${o.share}%)`).join(', ')}`);
    if (p.threads === 1) lines.push(`  matMuls: ${p.matmuls.slice(0, 6).map((m) => `${m.shape} ${m.calls}x ${m.ms} ms ${m.gflops} GFLOP/s`).join('; ')}`);
  }
  lines.push('');
  lines.push(`load average ${r.load_avg[0]} -> ${r.load_avg[1]}; ${r.note}`);
  return lines;
}
