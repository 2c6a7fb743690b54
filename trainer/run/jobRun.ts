// The run plumbing SFT (trainer/sft/sft.ts) and GRPO (trainer/grpo/grpo.ts) share around their
// loops: the hooks a job reports through, the run folder opened fresh or for --resume,
// the backend started and recorded, the metrics writer, the run's clock (optimiser time
// across resumes, which is what a budget counts), checkpoints on a cadence through the
// non-finite guard, and the yield that lets a cancel arrive between steps.
import * as path from 'node:path';
import type { MetricRecord } from '../../core/protocol/metrics';
import { AdapterInfo, BackendAsk, BackendInfo, initBackend } from '../model/backend';
import { DEFAULT_KEEP_CHECKPOINTS, readRunConfig, saveGuarded } from './runGuards';
import { MetricsWriter, lockRun, reopenMetricsForResume } from '../../store/runStore';
import { CONFIG_FILE, METRICS_FILE } from '../../core/protocol/folders';

/** How a job reports: the worker turns each call into a message, the CLI into stderr lines. */
export interface JobHooks {
  started(backend: string): void;
  progress(phase: string, done: number, total: number, message?: string): void;
  metrics(record: MetricRecord): void;
  log(level: 'info' | 'warn' | 'error', message: string): void;
  checkpoint(step: number, path: string): void;
  isCancelled(): boolean;
}

/** A mistake in what the user asked for (the CLI exits 2 with the message). */
export class UserError extends Error {}

export const CODE_VERSION = typeof __AGENT_LAB_VERSION__ === 'string' ? __AGENT_LAB_VERSION__ : 'dev';
declare const __AGENT_LAB_VERSION__: string | undefined;

/**
 * The config.json of the run of `kind` already in `runDir` (checked by `check`), or null.
 * A resume needs one; a fresh start refuses to write over one. A run of another kind is
 * refused when `otherKinds` says so (GRPO), else treated as no run (SFT).
 */
export function previousRunConfig(
  runDir: string,
  kind: 'sft' | 'grpo',
  resume: boolean | undefined,
  check: (config: Record<string, unknown>, file: string) => void,
  otherKinds: 'refuse' | 'ignore',
): Record<string, unknown> | null {
  const label = kind.toUpperCase();
  let previous: Record<string, unknown> | null = null;
  const existing = readRunConfig(runDir);
  if (existing) {
    const c = existing.config;
    if (c['kind'] === kind) {
      check(c, path.join(runDir, CONFIG_FILE));
      previous = c;
    } else if (otherKinds === 'refuse') {
      throw new UserError(`${runDir} already holds a run of kind ${String(c['kind'])}; choose another --run for ${label}`);
    }
  }
  if (resume && !previous) throw new UserError(`--resume: ${runDir} has no ${label} run to resume (no ${CONFIG_FILE} of kind ${kind})`);
  const aRun = kind === 'sft' ? 'an SFT run' : 'a GRPO run';
  if (!resume && previous) throw new UserError(`${runDir} already holds ${aRun}; pass --resume to continue it, or choose another --run`);
  return previous;
}

/** Picks the tfjs backend a job asked for, says which one runs (and why not a better one). */
export async function startBackend(ask: string, hooks: Pick<JobHooks, 'started' | 'log'>): Promise<BackendInfo> {
  let backend: BackendInfo;
  try {
    backend = await initBackend(ask as BackendAsk);
  } catch (err) {
    throw new UserError((err as Error).message);
  }
  hooks.started(backend.used);
  const a = backend.adapter;
  const adapter = a ? ` on ${a.vendor} ${a.architecture} (${a.description || a.device})${a.software ? ', a software adapter: slower than wasm' : ''}` : '';
  const matmul = backend.matmul ? `; matrix products on ${backend.matmul}` : '';
  hooks.log('info', `backend: ${backend.used}${adapter}${backend.note ? ` (${backend.note})` : ''}${matmul}`);
  return backend;
}

/** config.json's record of the backend: what was asked, what runs, and why (no empty keys). */
/** config.json's `backend`. */
export interface BackendRecord {
  asked: string;
  used: string;
  note?: string;
  adapter?: AdapterInfo;
  /** wasm: what ran the matrix products (BackendInfo.matmul). */
  matmul?: string;
}

export function backendRecord(backend: BackendInfo): BackendRecord {
  return {
    asked: backend.asked,
    used: backend.used,
    ...(backend.note ? { note: backend.note } : {}),
    ...(backend.adapter ? { adapter: backend.adapter } : {}),
    ...(backend.matmul ? { matmul: backend.matmul } : {}),
  };
}

/** The run's metrics.jsonl: a new file, or (resuming at `resumeStep`) the old one cut back to that step. */
export function openMetrics(runDir: string, resumeStep: number | null): MetricsWriter {
  const file = path.join(runDir, METRICS_FILE);
  const release = lockRun(runDir);
  try {
    return resumeStep === null ? new MetricsWriter(file, release) : reopenMetricsForResume(file, resumeStep, release);
  } catch (err) {
    release();
    throw err;
  }
}

/** A run's time: optimiser seconds across resumes (what budgets and metrics' `time` count) and wall time this session. */
export class RunClock {
  private readonly startedAt = Date.now();
  private ms = 0;

  constructor(private readonly before: number) {}

  /** Time spent in the loop this session (evaluations excluded). */
  add(ms: number): void {
    this.ms += ms;
  }

  /** Seconds since the run started, across resumes. */
  elapsed(): number {
    return this.before + this.ms / 1000;
  }

  wallMinutes(): number {
    return (Date.now() - this.startedAt) / 60000;
  }
}

/**
 * Checkpoints every `everySeconds` (and on demand) through the guard that refuses
 * non-finite weights and prunes to the newest `keep`; each one written is reported.
 */
export class RunCheckpoints {
  private last = Date.now();
  private readonly everyMs: number;
  private readonly keep: number;

  constructor(
    private readonly runDir: string,
    private readonly hooks: Pick<JobHooks, 'log' | 'checkpoint'>,
    options: { everySeconds?: number | undefined; keep?: number | undefined },
    /** Writes the checkpoint of the current step; returns its folder. */
    private readonly save: () => Promise<string>,
  ) {
    this.everyMs = (options.everySeconds ?? 120) * 1000;
    this.keep = options.keep ?? DEFAULT_KEEP_CHECKPOINTS;
  }

  /** Whether the cadence asks for one now. */
  due(): boolean {
    return Date.now() - this.last >= this.everyMs;
  }

  async write(step: number): Promise<void> {
    const p = await saveGuarded(this.runDir, this.save, this.hooks, this.keep);
    this.last = Date.now();
    if (p) this.hooks.checkpoint(step, p);
  }
}

/** Steps are synchronous: yields so that a cancel (an IPC message, Ctrl-C) can arrive, then says whether one did. */
export async function cancelRequested(hooks: Pick<JobHooks, 'isCancelled'>): Promise<boolean> {
  await new Promise<void>((resolve) => setImmediate(resolve));
  return hooks.isCancelled();
}
