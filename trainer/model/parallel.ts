// Data-parallel gradients over worker threads.
//
// Why: the wasm backend runs on one thread per JS thread (its multi-threaded build does not
// load in Node, and XNNPACK's matMul is called without a thread pool), so the only way to
// the second core is a second JS thread with its own tfjs backend. A batch's rows are split
// into shards (balanced by their computed length); the calling thread computes one shard,
// each worker another, on an identical replica of the weights; the shard gradients are
// combined with weights proportional to each shard's loss weight (so the result equals the
// single-thread gradient of sum(w*CE)/sum(w) over the whole batch).
//
// Synchronous on purpose: Trainer.step stays a plain function. The calling thread posts a
// command on a MessagePort, bumps a shared counter and blocks on Atomics.wait until the
// worker bumps its own; the worker does the same the other way round, reading its commands
// with receiveMessageOnPort. Weights and gradients do not travel in messages: the pool
// writes the weights, when they changed, into one SharedArrayBuffer all workers read, and
// each worker writes its gradient into a shared buffer of its own that the calling thread
// reads in place (issue 32: no per-step copies or allocations for the exchange). The
// protocol keeps them apart in time: the pool writes weights only between a finish() and
// the next start(), a worker writes its gradient only between a command and its reply.
//
// The same threads also sample GRPO rollouts (startRollouts/finishRollouts): the calling
// thread decodes its share of a round while each worker decodes another with the current
// weights; each rollout carries its own random seed, so the split does not change what is
// sampled.
//
// The worker script: `parallel-worker.js` next to this file — the build's entry for this
// file (scripts/build.mjs: `{ entryPoints: { 'parallel-worker': 'trainer/model/parallel.ts' } }`) —
// or, in a source checkout with tsx installed, trainer/model/parallel.ts compiled by tsx in the
// thread (~1 s more to start). Never another bundle: an entry with top-level effects (a
// CLI, the worker process) would run them again in the thread.
// Without a script the pool is not created and training runs on the calling thread
// (GradientPool.unavailable() says why).
import * as os from 'node:os';
import * as path from 'node:path';
import { MessageChannel, MessagePort, Worker, isMainThread, receiveMessageOnPort, workerData } from 'node:worker_threads';
import * as tf from '@tensorflow/tfjs-core';
import { initBackend } from './backend';
import { findWorkerScript } from './workerScript';
import { Batch, Grads, IGNORE, LossStats, ModelConfig, StackModel, makeRng, paramSpecs } from './model';
import { readNow } from './modelCore';
import { anyTokenizerFromJsonText, type Tokenizer } from '../../core/tokenizer';
import { type LoadedWorldId, type WorldId, loadedWorlds, parseWorldName, worldEnv, worldName, worldTemplates } from '../../core/worlds';
import { TEMPLATES, type Template } from '../../core/grammar';
import { AgentRuntime, type Episode, type EpisodeOptions, type EpisodeTask } from '../agent/agentRuntime';
import { modelPolicy, tokenizerCallMask } from '../agent/policy';

export interface ParallelOptions {
  /** Extra worker threads (the calling thread computes a shard too). */
  threads: number;
  /** The backend the workers run; default: the calling thread's (wasm or cpu). */
  backend?: 'wasm' | 'cpu';
  /** Worker script override (tests, unusual bundles). */
  script?: string;
  /** Give up waiting for a worker after this long; default max(120 s, 50x the local shard). */
  timeoutMs?: number;
}

/** Worker threads 'auto' picks: one per further core (at most 7), and only on wasm/cpu. */
export function autoThreads(): number {
  const b = tf.getBackend();
  if (b !== 'wasm' && b !== 'cpu') return 0;
  const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  return Math.max(0, Math.min(cores, 8) - 1);
}

// ---- batches and flat buffers -----------------------------------------------------------

function lastLabelled(b: Batch, r: number): number {
  for (let t = b.seq - 1; t >= 0; t--) if (b.labels[r * b.seq + t] !== IGNORE) return t + 1;
  return 0;
}

/**
 * Split a batch's rows into at most `k` shards with balanced work (longest rows first, each
 * to the lightest shard). Each shard keeps the batch's `seq`; rows keep their order inside
 * a shard. With one row or k = 1 the batch itself comes back.
 */
export function splitBatch(b: Batch, k: number): Batch[] {
  const n = Math.max(1, Math.min(k, b.batch));
  if (n === 1) return [b];
  const rows = Array.from({ length: b.batch }, (_, r) => ({ r, len: lastLabelled(b, r) }));
  rows.sort((x, y) => y.len - x.len || x.r - y.r);
  const load = new Array<number>(n).fill(0);
  const assign: number[][] = Array.from({ length: n }, () => []);
  for (const row of rows) {
    let best = 0;
    for (let i = 1; i < n; i++) if (load[i]! < load[best]!) best = i;
    // attention makes a row's cost grow faster than its length; length^1.5 is a fair proxy
    load[best]! += Math.pow(Math.max(row.len, 1), 1.5);
    assign[best]!.push(row.r);
  }
  return assign
    .filter((a) => a.length > 0)
    .map((a) => {
      a.sort((x, y) => x - y);
      const S = b.seq;
      const out: Batch = {
        batch: a.length,
        seq: S,
        inputIds: new Int32Array(a.length * S),
        labels: new Int32Array(a.length * S),
        weights: b.weights ? new Float32Array(a.length * S) : undefined,
      };
      const rowsOf = (src: Float32Array): Float32Array => {
        const dst = new Float32Array(a.length * S);
        a.forEach((r, i) => dst.set(src.subarray(r * S, (r + 1) * S), i * S));
        return dst;
      };
      a.forEach((r, i) => {
        out.inputIds.set(b.inputIds.subarray(r * S, (r + 1) * S), i * S);
        out.labels.set(b.labels.subarray(r * S, (r + 1) * S), i * S);
        if (b.weights) out.weights!.set(b.weights.subarray(r * S, (r + 1) * S), i * S);
      });
      if (b.pg) {
        out.pg = {
          advantages: rowsOf(b.pg.advantages),
          refLogp: rowsOf(b.pg.refLogp),
          oldLogp: b.pg.oldLogp ? rowsOf(b.pg.oldLogp) : undefined,
          clip: b.pg.clip,
          beta: b.pg.beta,
          temperature: b.pg.temperature,
        };
      }
      return out;
    });
}

function paramCount(cfg: ModelConfig): number {
  return paramSpecs(cfg).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}

/** Every weight of the model in one buffer, in paramSpecs order (into `out` when given). */
export function flattenWeights(model: StackModel, out?: Float32Array): Float32Array {
  const specs = model.paramSpecs();
  const total = specs.reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
  if (out && out.length !== total) throw new Error(`flattenWeights: a buffer of ${out.length} values for ${total} weights`);
  const dst = out ?? new Float32Array(total);
  let off = 0;
  for (const s of specs) {
    const d = readNow(model.weights().get(s.name)!);
    dst.set(d, off);
    off += d.length;
  }
  return dst;
}

/** Views of a flat buffer by parameter name. */
export function unflatten(cfg: ModelConfig, flat: Float32Array): Record<string, Float32Array> {
  const out: Record<string, Float32Array> = {};
  let off = 0;
  for (const s of paramSpecs(cfg)) {
    const n = s.shape.reduce((a, b) => a * b, 1);
    out[s.name] = flat.subarray(off, off + n);
    off += n;
  }
  if (off !== flat.length) throw new Error(`flat weights: ${flat.length} values, the model has ${off}`);
  return out;
}

type ShardStats = Pick<LossStats, 'lossSum' | 'weightSum' | 'ceSum' | 'correct' | 'supervised' | 'pg'>;

/** Adds one shard's statistics into `into` (policy-gradient sums too). */
function addStats(into: ShardStats, s: ShardStats): void {
  into.lossSum += s.lossSum;
  into.weightSum += s.weightSum;
  into.ceSum += s.ceSum;
  into.correct += s.correct;
  into.supervised += s.supervised;
  if (s.pg) {
    into.pg ??= { klSum: 0, clipped: 0, entropySum: 0 };
    into.pg.klSum += s.pg.klSum;
    into.pg.clipped += s.pg.clipped;
    into.pg.entropySum += s.pg.entropySum;
  }
}

export interface RemoteShard {
  stats: ShardStats;
  /** Gradients in paramSpecs order (normalised by the shard's own weightSum). */
  flat: Float32Array;
  /** The worker's own milliseconds for this shard (forward, backward, flattening). */
  ms?: number;
}

/**
 * Combine the local shard's gradients (tensors) and the remote shards' (flat buffers):
 * g = sum_i (W_i / W) g_i with W_i each shard's weight sum. Disposes the local gradients.
 */
export function combineShardGrads(model: StackModel, local: ShardStats & { grads: Grads }, remote: RemoteShard[]): { grads: Grads; stats: ShardStats } {
  const all = [local as ShardStats, ...remote.map((r) => r.stats)];
  const stats: ShardStats = { lossSum: 0, weightSum: 0, ceSum: 0, correct: 0, supervised: 0 };
  for (const s of all) addStats(stats, s);
  const W = stats.weightSum;
  const coef = all.map((s) => (W > 0 ? s.weightSum / W : 0));
  const views = remote.map((r) => unflatten(model.config, r.flat));
  const grads: Grads = new Map();
  for (const spec of model.paramSpecs()) {
    const g0 = local.grads.get(spec.name)!;
    const g = tf.tidy(() => {
      let acc = coef[0] === 1 ? tf.clone(g0) : tf.mul(g0, coef[0]!);
      views.forEach((v, i) => {
        // a copy: the values may be a worker's shared buffer, which the cpu backend would alias
        if (coef[i + 1]! !== 0) acc = tf.add(acc, tf.mul(tf.tensor(v[spec.name]!.slice(), spec.shape, 'float32'), coef[i + 1]!));
      });
      return acc;
    });
    g0.dispose();
    grads.set(spec.name, g);
  }
  return { grads, stats };
}

/** The same combination on flat buffers: g = sum_i (W_i / W) g_i (a new buffer, or with `inPlace` the local shard's). */
export function combineFlat(local: RemoteShard, remote: RemoteShard[], opts: { inPlace?: boolean } = {}): { flat: Float32Array; stats: ShardStats } {
  const all = [local, ...remote];
  const stats: ShardStats = { lossSum: 0, weightSum: 0, ceSum: 0, correct: 0, supervised: 0 };
  for (const { stats: s } of all) addStats(stats, s);
  const W = stats.weightSum;
  const n = local.flat.length;
  for (const { flat } of remote) if (flat.length !== n) throw new Error('parallel gradients: shards disagree on the parameter count');
  const weight = (s: ShardStats): number => (W > 0 ? s.weightSum / W : 0);
  // `inPlace`: the caller's own buffer (a scratch) becomes the sum, with no new 4-bytes-a-parameter array
  // a step. Either way each sum is rounded as 0 + c0*g0 + c1*g1 + ... in float32, in that order.
  const out = opts.inPlace ? local.flat : new Float32Array(n);
  const c0 = weight(local.stats);
  const first = remote.find((r) => weight(r.stats) !== 0);
  if (first && opts.inPlace) {
    const c1 = weight(first.stats);
    const g0 = local.flat;
    const g1 = first.flat;
    for (let i = 0; i < n; i++) out[i] = Math.fround(c0 * g0[i]!) + c1 * g1[i]!;
  } else if (c0 !== 0 || opts.inPlace) {
    for (let i = 0; i < n; i++) out[i] = c0 * local.flat[i]!;
  }
  for (const r of remote) {
    const c = weight(r.stats);
    if (c === 0 || (opts.inPlace && r === first)) continue;
    const g = r.flat;
    for (let i = 0; i < n; i++) out[i]! += c * g[i]!;
  }
  return { flat: out, stats };
}

/** A rollout a worker samples: the task, its world, the episode options, and the seed of its random stream. */
export interface RolloutItem {
  task: EpisodeTask;
  world: WorldId;
  options: Omit<Partial<EpisodeOptions>, 'random'>;
  randomSeed: number;
}

/** A rollout item on its way to a worker: its world by name (a user's world is sent once per worker, beside it). */
type WireRolloutItem = Omit<RolloutItem, 'world'> & { world: string };

/** The episode options of an item, with its random stream (the same on every thread). */
export function rolloutOptions(item: RolloutItem): Partial<EpisodeOptions> {
  return { ...item.options, random: makeRng(item.randomSeed).uniform };
}

// ---- the pool (calling thread) -----------------------------------------------------------

const CMD = 0;
const DONE = 1;
const READY = 2; // 0 starting, 1 ready, 2 failed

interface WorkerHandle {
  worker: Worker;
  port: MessagePort;
  ctrl: Int32Array;
  /** The worker's gradient, written by it, read here after its reply (shared memory). */
  grads: Float32Array;
  /** The model and version whose weights this worker holds. */
  sentModel: StackModel | null;
  sentVersion: number;
  sentTokenizer: string | null;
  /** The user's worlds this worker holds (by name): each is sent once. */
  sentWorlds: Set<string>;
  ready: boolean;
  pending: boolean;
}

type Reply = { type: 'grads'; stats: ShardStats; ms?: number } | { type: 'episodes'; episodes: Episode[] } | { type: 'error'; message: string } | { type: 'ready' };

function workerScript(override?: string): { file: string; evalCode?: string } | null {
  const envScript = process.env['AGENT_LAB_PARALLEL_WORKER'];
  if (override) return { file: override };
  if (envScript) return { file: envScript };
  return findWorkerScript('parallel-worker', path.join('trainer', 'model', 'parallel.ts'), __filename, __dirname);
}

export class GradientPool {
  private handles: WorkerHandle[] = [];
  private lastLocalMs = 0;
  /** Each worker's own milliseconds for its last gradient shard (the profile reads them). */
  lastWorkerMs: number[] = [];
  private startedAt = 0;
  readonly backend: 'wasm' | 'cpu';
  private readonly timeoutMs: number | undefined;

  /** Every weight, in paramSpecs order, for the workers to read (shared memory). */
  private readonly sharedWeights: Float32Array;
  /** The model version sharedWeights holds (-1: none yet). */
  private sharedVersion = -1;
  private sharedModel: StackModel | null = null;

  private constructor(cfg: ModelConfig, opts: ParallelOptions) {
    const b = opts.backend ?? (tf.getBackend() === 'cpu' ? 'cpu' : 'wasm');
    this.backend = b;
    this.timeoutMs = opts.timeoutMs;
    const script = workerScript(opts.script)!;
    const total = paramCount(cfg);
    this.sharedWeights = new Float32Array(new SharedArrayBuffer(total * 4));
    for (let i = 0; i < opts.threads; i++) {
      const { port1, port2 } = new MessageChannel();
      const ctrl = new Int32Array(new SharedArrayBuffer(16));
      const grads = new Float32Array(new SharedArrayBuffer(total * 4));
      const data = { agentLabGradWorker: true, cfg, backend: b, ctrl, port: port2, grads, weights: this.sharedWeights };
      const worker = script.evalCode
        ? new Worker(script.evalCode, { eval: true, workerData: data, transferList: [port2] })
        : new Worker(script.file, { workerData: data, transferList: [port2] });
      worker.unref();
      worker.on('error', () => {
        /* reported through READY / the reply protocol; avoid an unhandled 'error' event */
      });
      this.handles.push({ worker, port: port1, ctrl, grads, sentModel: null, sentVersion: -1, sentTokenizer: null, sentWorlds: new Set(), ready: false, pending: false });
    }
  }

  /** A pool for `parallel` (a thread count, 'auto' or options); null when that means no threads. */
  static create(cfg: ModelConfig, parallel: number | 'auto' | ParallelOptions): GradientPool | null {
    const opts: ParallelOptions = typeof parallel === 'object' ? parallel : { threads: parallel === 'auto' ? autoThreads() : parallel };
    if (!(opts.threads > 0)) return null;
    if (GradientPool.unavailable(opts.script)) return null;
    return new GradientPool(cfg, opts);
  }

  /** Why worker threads cannot be used here (no worker script), or null when they can. */
  static unavailable(script?: string): string | null {
    return workerScript(script)
      ? null
      : `no worker script: ${path.join(__dirname, 'parallel-worker.js')} is missing (an esbuild entry for trainer/model/parallel.ts); training runs on one thread`;
  }

  get size(): number {
    return this.handles.length;
  }

  private waitFor(h: WorkerHandle, index: number, expected: number, what: string, timeoutMs: number): void {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const cur = Atomics.load(h.ctrl, index);
      if (index === READY ? cur !== 0 : cur >= expected) return;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`parallel gradients: worker ${h.worker.threadId} did not ${what} within ${Math.round(timeoutMs / 1000)} s`);
      Atomics.wait(h.ctrl, index, cur, Math.min(left, 1000));
    }
  }

  private receive(h: WorkerHandle): Reply {
    for (let tries = 0; tries < 1000; tries++) {
      const m = receiveMessageOnPort(h.port);
      if (m) return m.message as Reply;
      Atomics.wait(h.ctrl, 3, 0, 1); // a 1 ms pause; index 3 is never written
    }
    throw new Error('parallel gradients: a worker signalled but sent nothing');
  }

  private ensureReady(h: WorkerHandle): void {
    if (h.ready) return;
    this.waitFor(h, READY, 1, 'start', 120000);
    if (Atomics.load(h.ctrl, READY) === 2) {
      const m = this.receive(h);
      throw new Error(`parallel gradients: a worker failed to start: ${m.type === 'error' ? m.message : 'unknown error'}`);
    }
    h.ready = true;
  }

  /** Send shards (one per worker, fewer is fine) with the model's current weights. */
  start(model: StackModel, shards: Batch[]): void {
    if (shards.length > this.handles.length) throw new Error('parallel gradients: more shards than workers');
    this.startedAt = Date.now();
    const sendWeights = this.weightsSender(model);
    shards.forEach((shard, i) => {
      const h = this.handles[i]!;
      this.ensureReady(h);
      sendWeights(h);
      const msg = {
        type: 'grads',
        batch: { inputIds: shard.inputIds, labels: shard.labels, weights: shard.weights, batch: shard.batch, seq: shard.seq, pg: shard.pg },
      };
      h.port.postMessage(msg);
      h.pending = true;
      Atomics.add(h.ctrl, CMD, 1);
      Atomics.notify(h.ctrl, CMD);
    });
  }

  /**
   * Tells a worker that does not have the model's current weights to read them from the
   * shared buffer (written once per version; no worker is running while it is written).
   */
  private weightsSender(model: StackModel): (h: WorkerHandle) => void {
    return (h) => {
      if (h.sentModel === model && h.sentVersion === model.version) return;
      if (this.sharedVersion !== model.version || this.sharedModel !== model) {
        flattenWeights(model, this.sharedWeights);
        this.sharedVersion = model.version;
        this.sharedModel = model;
      }
      h.port.postMessage({ type: 'params' });
      h.sentVersion = model.version;
      h.sentModel = model;
    };
  }

  /**
   * Send rollout shards (one per worker, fewer is fine): each worker samples its items with
   * the model's current weights and `tokenizer`; collect them with finishRollouts().
   */
  startRollouts(model: StackModel, tokenizerJson: string, shards: readonly (readonly RolloutItem[])[]): void {
    if (shards.length > this.handles.length) throw new Error('parallel rollouts: more shards than workers');
    this.startedAt = Date.now();
    const sendWeights = this.weightsSender(model);
    shards.forEach((items, i) => {
      const h = this.handles[i]!;
      this.ensureReady(h);
      sendWeights(h);
      if (h.sentTokenizer !== tokenizerJson) {
        h.port.postMessage({ type: 'tokenizer', json: tokenizerJson });
        h.sentTokenizer = tokenizerJson;
      }
      // A user's world cannot be rebuilt from its name (core/worlds.ts): the worker is sent it once.
      const worlds = [...loadedWorlds(items.map((it) => it.world)).values()].filter((w) => !h.sentWorlds.has(worldName(w)));
      for (const w of worlds) h.sentWorlds.add(worldName(w));
      const wire: WireRolloutItem[] = items.map((it) => ({ ...it, world: worldName(it.world) }));
      h.port.postMessage({ type: 'rollouts', items: wire, worlds });
      h.pending = true;
      Atomics.add(h.ctrl, CMD, 1);
      Atomics.notify(h.ctrl, CMD);
    });
  }

  /** Wait for every started rollout shard; their episodes, shard by shard. */
  finishRollouts(): Episode[][] {
    const out: Episode[][] = [];
    // Decoding has no batch-size proxy for a deadline: allow generously more than the local share took.
    const timeout = this.timeoutMs ?? Math.max(300000, 50 * (Date.now() - this.startedAt));
    let failure: Error | null = null;
    for (const h of this.handles) {
      if (!h.pending) continue;
      h.pending = false;
      const expected = Atomics.load(h.ctrl, CMD);
      try {
        this.waitFor(h, DONE, expected, 'answer', timeout);
        const m = this.receive(h);
        if (m.type === 'error') throw new Error(`parallel rollouts: worker failed: ${m.message}`);
        if (m.type !== 'episodes') throw new Error(`parallel rollouts: unexpected reply '${m.type}'`);
        out.push(m.episodes);
      } catch (err) {
        failure ??= err as Error;
      }
    }
    if (failure) throw failure;
    return out;
  }

  /** Wait for every started shard; their gradients and statistics. */
  finish(): RemoteShard[] {
    this.lastLocalMs = Date.now() - this.startedAt;
    const out: RemoteShard[] = [];
    const timeout = this.timeoutMs ?? Math.max(120000, 50 * this.lastLocalMs);
    let failure: Error | null = null;
    for (const h of this.handles) {
      if (!h.pending) continue;
      h.pending = false;
      const expected = Atomics.load(h.ctrl, CMD);
      try {
        this.waitFor(h, DONE, expected, 'answer', timeout);
        const m = this.receive(h);
        if (m.type === 'error') throw new Error(`parallel gradients: worker failed: ${m.message}`);
        if (m.type !== 'grads') throw new Error(`parallel gradients: unexpected reply '${m.type}'`);
        // read in place: valid until this worker's next command
        out.push({ stats: m.stats, flat: h.grads, ...(m.ms !== undefined ? { ms: m.ms } : {}) });
      } catch (err) {
        failure ??= err as Error;
      }
    }
    if (failure) throw failure;
    this.lastWorkerMs = out.map((r) => r.ms ?? NaN);
    return out;
  }

  dispose(): void {
    for (const h of this.handles) {
      try {
        h.port.postMessage({ type: 'stop' });
        Atomics.add(h.ctrl, CMD, 1);
        Atomics.notify(h.ctrl, CMD);
      } catch {
        /* already gone */
      }
      void h.worker.terminate();
      h.port.close();
    }
    this.handles = [];
  }
}

// ---- the worker thread -------------------------------------------------------------------

interface WorkerInit {
  agentLabGradWorker: true;
  cfg: ModelConfig;
  backend: 'wasm' | 'cpu';
  ctrl: Int32Array;
  port: MessagePort;
  /** Shared: this worker's gradient (written here), and the weights (read here on 'params'). */
  grads: Float32Array;
  weights: Float32Array;
}

async function workerMain(init: WorkerInit): Promise<void> {
  const { ctrl, port, cfg } = init;
  try {
    await initBackend(init.backend);
  } catch (err) {
    port.postMessage({ type: 'error', message: (err as Error).message ?? String(err) });
    Atomics.store(ctrl, READY, 2);
    Atomics.notify(ctrl, READY);
    return;
  }
  Atomics.store(ctrl, READY, 1);
  Atomics.notify(ctrl, READY);
  let model: StackModel | null = null;
  let tokenizer: Tokenizer | null = null;
  let runtime: AgentRuntime | null = null;
  let runtimeTemplates: readonly Template[] = TEMPLATES;
  // The user's worlds this thread was sent (by name): the rollout items name them.
  const loaded = new Map<string, LoadedWorldId>();
  let seen = 0;
  for (;;) {
    Atomics.wait(ctrl, CMD, seen);
    seen = Atomics.load(ctrl, CMD);
    for (;;) {
      const m = receiveMessageOnPort(port);
      if (!m) break;
      const msg = m.message as { type: string; batch?: Batch; json?: string; items?: WireRolloutItem[]; worlds?: LoadedWorldId[] };
      if (msg.type === 'stop') {
        model?.dispose();
        port.close();
        return;
      }
      try {
        if (msg.type === 'params') {
          // The shared weights: setWeights copies them (wasm: into its heap; cpu: a slice).
          const w = unflatten(cfg, init.weights);
          if (model) model.setWeights(w);
          else model = StackModel.fromWeights(cfg, w);
          runtime = null;
          continue;
        }
        if (msg.type === 'tokenizer') {
          tokenizer = anyTokenizerFromJsonText(msg.json!);
          runtime = null;
          continue;
        }
        if (msg.type === 'rollouts') {
          if (!model || !tokenizer) throw new Error('no weights or tokenizer received');
          for (const w of msg.worlds ?? []) loaded.set(worldName(w), w);
          const items = msg.items!.map((it) => ({ ...it, world: parseWorldName(it.world, loaded) }));
          // The grammar of the items' world (a user's tool list may narrow it); one world per GRPO run.
          const templates = items.length ? worldTemplates(items[0]!.world) : TEMPLATES;
          if (runtime && runtimeTemplates !== templates) runtime = null;
          runtimeTemplates = templates;
          const rt = (runtime ??= new AgentRuntime(modelPolicy(model, tokenizer.vocabSize), tokenizer, worldEnv({ kind: 'seed', seed: 0 }), tokenizerCallMask(tokenizer, templates)));
          const episodes = await rt.runBatchAsync(items.map((it) => ({ task: it.task, env: worldEnv(it.world), options: rolloutOptions(it) })));
          port.postMessage({ type: 'episodes', episodes });
        }
        if (msg.type === 'grads') {
          if (!model) throw new Error('no weights received');
          const t0 = performance.now();
          const r = model.lossAndGrads(msg.batch!);
          const flat = init.grads;
          let off = 0;
          for (const s of model.paramSpecs()) {
            const g = r.grads.get(s.name)!;
            flat.set(readNow(g), off);
            off += g.size;
            g.dispose();
          }
          const stats: ShardStats = {
            lossSum: r.lossSum,
            weightSum: r.weightSum,
            ceSum: r.ceSum,
            correct: r.correct,
            supervised: r.supervised,
            ...(r.pg ? { pg: r.pg } : {}),
          };
          port.postMessage({ type: 'grads', stats, ms: performance.now() - t0 });
        }
      } catch (err) {
        port.postMessage({ type: 'error', message: (err as Error).message ?? String(err) });
      }
      if (msg.type === 'grads' || msg.type === 'rollouts') {
        Atomics.add(ctrl, DONE, 1);
        Atomics.notify(ctrl, DONE);
      }
    }
  }
}

if (!isMainThread && (workerData as Partial<WorkerInit> | null)?.agentLabGradWorker === true) {
  void workerMain(workerData as WorkerInit);
}
