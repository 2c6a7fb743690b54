// The one road from the editor to the trainer: every long job (world build, distillation,
// training, evaluation, a question to the student) runs in a worker process (dist/worker.js,
// trainer/run/worker.ts) that speaks core/protocol/worker.ts. The extension host builds,
// distils and trains nothing itself. Training and evaluation are supervised by
// extension/training.ts (status bar, live curves, the Runs view); the other jobs by
// runToolJob here.
import { type ChildProcess, fork } from 'node:child_process';
import * as path from 'node:path';
import type * as vscode from 'vscode';
import { type FromWorker, type JobResult, type ToWorker, type ToolJobSpec, type WorkerJobSpec, parseFromWorker } from '../core/protocol/worker';
import { log } from './log';

/** Starts a worker process for `job` in `cwd` and hands it the job; its console output goes to the log. */
export function forkWorker(context: vscode.ExtensionContext, job: WorkerJobSpec, cwd: string): ChildProcess {
  const child = fork(path.join(context.extensionPath, 'dist', 'worker.js'), [], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], cwd });
  child.stdout?.on('data', (d: Buffer) => log.info(`[worker] ${d.toString().trimEnd()}`));
  child.stderr?.on('data', (d: Buffer) => log.warn(`[worker] ${d.toString().trimEnd()}`));
  child.send({ type: 'start', job } satisfies ToWorker);
  return child;
}

/** Calls `onMessage` with each valid message of the worker; a bad one is logged and dropped. */
export function onWorkerMessage(child: ChildProcess, onMessage: (m: FromWorker) => void): void {
  child.on('message', (raw: unknown) => {
    const parsed = parseFromWorker(raw);
    if (parsed.ok) onMessage(parsed.message);
    else log.warn(`worker sent a bad message: ${parsed.error}`);
  });
}

/** How a tool job ended: its result, or the error it failed with. */
export type ToolJobOutcome<K extends ToolJobSpec['kind']> = { ok: true; result: JobResult<K> } | { ok: false; error: string };

export interface ToolJobOptions {
  cwd: string;
  /** Cancelling asks the job to stop (it keeps what it finished); a job that does not stop in `killAfterMs` is killed. */
  token?: vscode.CancellationToken;
  killAfterMs?: number;
  onProgress?(done: number, total: number, message?: string): void;
}

/** Runs a world, distill or ask job in a worker and resolves when the process ends; a crash is an error, never silence. */
export function runToolJob<S extends ToolJobSpec>(context: vscode.ExtensionContext, spec: S, opts: ToolJobOptions): Promise<ToolJobOutcome<S['kind']>> {
  const child = forkWorker(context, spec, opts.cwd);
  let result: JobResult | undefined;
  let error: string | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  const sub = opts.token?.onCancellationRequested(() => {
    if (child.connected) child.send({ type: 'cancel' } satisfies ToWorker);
    killTimer ??= setTimeout(() => child.kill('SIGKILL'), opts.killAfterMs ?? 60_000);
  });
  onWorkerMessage(child, (msg) => {
    if (msg.type === 'log') log[msg.level](msg.message);
    else if (msg.type === 'progress') opts.onProgress?.(msg.done, msg.total, msg.message);
    else if (msg.type === 'failed') error = msg.error;
    else if (msg.type === 'done') {
      const { type: _type, ...done } = msg;
      result = done;
    }
  });
  return new Promise((resolve) => {
    child.on('error', (err) => (error ??= err.message));
    child.on('exit', (code, signal) => {
      sub?.dispose();
      if (killTimer) clearTimeout(killTimer);
      if (result && result.kind === spec.kind) resolve({ ok: true, result: result as JobResult<S['kind']> });
      else resolve({ ok: false, error: error ?? `the ${spec.kind} worker exited (code ${code}, signal ${signal}) without finishing` });
    });
  });
}
