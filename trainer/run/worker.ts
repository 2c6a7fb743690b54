// The training worker process: the extension forks it (never trains in the extension
// host) and speaks core/protocol/worker.ts over Node IPC. One job per process. A cancel
// is cooperative: the job stops after its current step, checkpoints and reports done.
import { FromWorker, parseToWorker } from '../../core/protocol/worker';
import { runJob } from './jobs';
import { isObj } from '../../core/protocol/isObj';

let cancelled = false;
let started = false;

function send(message: FromWorker): void {
  process.send?.(message);
}

process.on('message', (raw: unknown) => {
  const parsed = parseToWorker(raw);
  if (!parsed.ok) {
    send({ type: 'log', level: 'error', message: `worker: ignored a bad message: ${parsed.error}` });
    // A refused start is the end of this worker: its parent must not wait for a job that never runs.
    if (!started && isObj(raw) && raw['type'] === 'start') {
      started = true;
      send({ type: 'failed', error: `the job was refused: ${parsed.error}` });
      process.exitCode = 1;
      process.disconnect?.();
    }
    return;
  }
  const msg = parsed.message;
  if (msg.type === 'cancel') {
    cancelled = true;
    send({ type: 'log', level: 'info', message: 'cancel requested: stopping after the current step' });
    return;
  }
  if (started) {
    send({ type: 'log', level: 'warn', message: 'worker: a job is already running; start ignored' });
    return;
  }
  started = true;
  const job = msg.job;
  runJob(job, {
    started: (backend) => send({ type: 'started', job, backend, pid: process.pid }),
    progress: (phase, done, total, message) =>
      send({ type: 'progress', phase, done, total, ...(message !== undefined ? { message } : {}) }),
    metrics: (record) => send({ type: 'metrics', record }),
    log: (level, message) => send({ type: 'log', level, message }),
    checkpoint: (step, path) => send({ type: 'checkpoint', step, path }),
    isCancelled: () => cancelled,
  }).then(
    (result) => {
      send({ type: 'done', ...result });
      process.disconnect?.();
    },
    (err: unknown) => {
      send({ type: 'failed', error: err instanceof Error ? err.message : String(err) });
      process.exitCode = 1;
      process.disconnect?.();
    },
  );
});

// The extension going away must not leave an orphan burning CPU.
process.on('disconnect', () => {
  if (!started) process.exit(0);
  cancelled = true;
  setTimeout(() => process.exit(0), 30_000).unref();
});
