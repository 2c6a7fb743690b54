// Talking to the worker process as the editor does: dist/worker.js forked, typed messages
// over Node IPC (core/protocol/worker.ts). For the job tests (world, distill, ask).
import * as assert from 'node:assert/strict';
import { fork, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type FromWorker, type ToWorker, parseFromWorker } from '../../core/protocol/worker';
import { repoRoot } from './reference';

export const WORKER_SCRIPT = path.join(repoRoot, 'dist', 'worker.js');

/** Builds dist/ when the worker's bundle is missing (`npm test` builds it before the unit tier). */
export function ensureWorkerBuilt(): void {
  if (fs.existsSync(WORKER_SCRIPT)) return;
  const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
  assert.equal(b.status, 0, b.stderr);
}

export interface WorkerTalk {
  /** Every valid message, in order. */
  messages: FromWorker[];
  /** Why each invalid message was refused (a test expects none). */
  bad: string[];
  code: number | null;
}

/**
 * Forks the worker, sends `messages` in order, and collects what it says until it exits
 * (or, after a message `disconnectAfter` picks, this side disconnects).
 */
export async function talkToWorker(messages: readonly ToWorker[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; disconnectAfter?: (m: FromWorker) => boolean } = {}): Promise<WorkerTalk> {
  const child = fork(WORKER_SCRIPT, [], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'], ...(opts.cwd ? { cwd: opts.cwd } : {}), ...(opts.env ? { env: opts.env } : {}) });
  const talk: WorkerTalk = { messages: [], bad: [], code: null };
  child.on('message', (m: unknown) => {
    const p = parseFromWorker(m);
    if (!p.ok) {
      talk.bad.push(`${p.error}: ${JSON.stringify(m)}`);
      return;
    }
    talk.messages.push(p.message);
    if (opts.disconnectAfter?.(p.message)) child.disconnect();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  for (const m of messages) child.send(m);
  talk.code = await exited;
  return talk;
}
