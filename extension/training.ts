// Training and evaluation from the command palette. The work runs in a separate worker
// process (dist/worker.js, forked by path; never in the extension host) that speaks
// core/protocol/worker.ts. Progress shows in a cancellable notification and a status-bar
// item; the worker's log goes to the "Agent Lab" output channel.
import { ChildProcess, fork } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { FromWorker, JobSpec, ToWorker, parseFromWorker } from '../core/protocol/worker';
import { log, reportError } from './log';
// ---- live metrics for the Training Curves panel (extension/panels/liveMetrics.ts) ----
import { publishJobEnded, publishLiveMetrics } from './panels/liveMetrics';
// ---- end live metrics ----
import { exists, pickWorkspaceFolder, runsFolderUri, timestamp } from './workspace';

interface ActiveJob {
  spec: JobSpec;
  child: ChildProcess;
  cancel(): void;
  done: Promise<JobResult>;
}
export interface JobResult {
  ok: boolean;
  cancelled: boolean;
  runDir: string;
  summary: Record<string, unknown>;
  checkpoints: number[];
  progressEvents: number;
  error?: string;
}

const jobs = new Set<ActiveJob>();
let statusItem: vscode.StatusBarItem | undefined;

export function activateTraining(context: vscode.ExtensionContext): void {
  statusItem = vscode.window.createStatusBarItem('agentLab.training', vscode.StatusBarAlignment.Left, 10);
  statusItem.name = 'Agent Lab training';
  statusItem.command = 'agentLab.cancelTraining';
  context.subscriptions.push(
    statusItem,
    vscode.commands.registerCommand('agentLab.trainSft', (args?: TrainArgs) =>
      trainSft(context, args ?? {}),
    ),
    vscode.commands.registerCommand('agentLab.trainGrpo', (args?: GrpoArgs) => trainGrpo(context, args ?? {})),
    vscode.commands.registerCommand('agentLab.evaluate', (args?: { runDir?: string; split?: 'heldout' | 'train'; limit?: number }) =>
      evaluate(context, args ?? {}),
    ),
    vscode.commands.registerCommand('agentLab.cancelTraining', () => cancelAll()),
    { dispose: () => cancelAll() },
  );
}

function cancelAll(): number {
  const n = jobs.size;
  for (const j of jobs) j.cancel();
  if (n === 0) void vscode.window.showInformationMessage('Agent Lab: no training or evaluation is running.');
  return n;
}

/** Optional arguments when the command is run from code (tests, other extensions). */
interface TrainArgs {
  steps?: number;
  minutes?: number;
  runName?: string;
  evalLimit?: number;
}

async function trainSft(context: vscode.ExtensionContext, args: TrainArgs): Promise<JobResult | undefined> {
  const folder = await pickWorkspaceFolder();
  if (!folder) {
    void vscode.window.showErrorMessage('Agent Lab: open a folder first; runs are written into the workspace.');
    return undefined;
  }
  const config = vscode.workspace.getConfiguration('agentLab', folder.uri);
  const runDir = vscode.Uri.joinPath(runsFolderUri(folder), args.runName ?? `sft-${timestamp()}`).fsPath;
  const spec: JobSpec = {
    kind: 'sft',
    runDir,
    preset: config.get<string>('preset') ?? 'tiny',
    backend: config.get<string>('backend') ?? 'auto',
    ...(args.steps !== undefined ? { steps: args.steps } : {}),
    ...(args.minutes !== undefined ? { minutes: args.minutes } : {}),
    ...(args.evalLimit !== undefined ? { evalLimit: args.evalLimit } : {}),
  };
  return runWithProgress(context, spec, 'Training (SFT)');
}

/** Optional arguments when GRPO is started from code (tests); the rest comes from settings. */
interface GrpoArgs {
  fromRunDir?: string;
  runName?: string;
  steps?: number;
  groupSize?: number;
  tasksPerStep?: number;
  evalLimit?: number;
  evalEvery?: number;
  systemPrompt?: string;
  reward?: string;
}

/** Run folders that hold a trained SFT student (config kind sft and a checkpoint). */
async function sftRuns(folder: vscode.WorkspaceFolder): Promise<string[]> {
  const runs = runsFolderUri(folder);
  const entries = (await exists(runs)) ? await vscode.workspace.fs.readDirectory(runs) : [];
  const out: string[] = [];
  for (const [name, type] of entries) {
    if (type !== vscode.FileType.Directory) continue;
    const dir = vscode.Uri.joinPath(runs, name);
    if (!(await exists(vscode.Uri.joinPath(dir, 'checkpoints', 'latest')))) continue;
    try {
      const config = JSON.parse(new TextDecoder().decode(await vscode.workspace.fs.readFile(vscode.Uri.joinPath(dir, 'config.json')))) as { kind?: string };
      if (config.kind === 'sft') out.push(dir.fsPath);
    } catch {
      // not a run folder we can read: not offered
    }
  }
  return out.sort().reverse();
}

async function trainGrpo(context: vscode.ExtensionContext, args: GrpoArgs): Promise<JobResult | undefined> {
  const folder = await pickWorkspaceFolder();
  if (!folder) {
    void vscode.window.showErrorMessage('Agent Lab: open a folder first; runs are written into the workspace.');
    return undefined;
  }
  let from = args.fromRunDir;
  if (!from) {
    const candidates = await sftRuns(folder);
    if (candidates.length === 0) {
      void vscode.window.showErrorMessage('Agent Lab: GRPO starts from a trained SFT student; run "Agent Lab: Train (SFT)" first.');
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      candidates.map((c) => ({ label: path.basename(c), description: c })),
      { placeHolder: 'SFT run to start GRPO from' },
    );
    if (!pick) return undefined;
    from = pick.description;
  }
  const config = vscode.workspace.getConfiguration('agentLab', folder.uri);
  const runDir = vscode.Uri.joinPath(runsFolderUri(folder), args.runName ?? `grpo-${timestamp()}`).fsPath;
  const num = (key: string, v: number | undefined) => {
    const value = v ?? config.get<number>(key);
    return typeof value === 'number' ? value : undefined;
  };
  const steps = num('grpo.steps', args.steps);
  const groupSize = num('grpo.groupSize', args.groupSize);
  const tasksPerStep = num('grpo.tasksPerStep', args.tasksPerStep);
  const temperature = num('grpo.temperature', undefined);
  const reward = args.reward ?? config.get<string>('grpo.reward');
  const spec: JobSpec = {
    kind: 'grpo',
    runDir,
    from,
    backend: config.get<string>('backend') ?? 'auto',
    ...(steps !== undefined ? { steps } : {}),
    ...(groupSize !== undefined ? { groupSize } : {}),
    ...(tasksPerStep !== undefined ? { tasksPerStep } : {}),
    ...(temperature !== undefined ? { temperature } : {}),
    ...(reward ? { reward } : {}),
    ...(args.evalLimit !== undefined ? { evalLimit: args.evalLimit } : {}),
    ...(args.evalEvery !== undefined ? { evalEvery: args.evalEvery } : {}),
    ...(args.systemPrompt !== undefined ? { systemPrompt: args.systemPrompt } : {}),
  };
  const result = await runWithProgress(context, spec, 'Training (GRPO)');
  if (result.ok && !result.cancelled) {
    const pct = (x: unknown) => `${(100 * Number(x)).toFixed(1)}%`;
    const before = result.summary['heldout_accuracy_before'];
    const after = result.summary['heldout_accuracy'];
    void vscode.window.showInformationMessage(
      `Agent Lab: GRPO finished (${path.basename(runDir)})` +
        (before !== undefined && after !== undefined ? `: held-out exact match ${pct(before)} → ${pct(after)}.` : '.'),
    );
  }
  return result;
}

async function evaluate(
  context: vscode.ExtensionContext,
  args: { runDir?: string; split?: 'heldout' | 'train'; limit?: number },
): Promise<JobResult | undefined> {
  let runDir = args.runDir;
  if (!runDir) {
    const folder = await pickWorkspaceFolder();
    if (!folder) return undefined;
    const runs = runsFolderUri(folder);
    const entries = (await exists(runs)) ? await vscode.workspace.fs.readDirectory(runs) : [];
    const candidates: string[] = [];
    for (const [name, type] of entries) {
      if (type === vscode.FileType.Directory && (await exists(vscode.Uri.joinPath(runs, name, 'checkpoints', 'latest')))) {
        candidates.push(name);
      }
    }
    if (candidates.length === 0) {
      void vscode.window.showErrorMessage('Agent Lab: no trained run with a checkpoint in the runs folder; train one first.');
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(candidates.sort().reverse(), { placeHolder: 'Run to evaluate' });
    if (!pick) return undefined;
    runDir = vscode.Uri.joinPath(runs, pick).fsPath;
  }
  const config = vscode.workspace.getConfiguration('agentLab');
  const spec: JobSpec = {
    kind: 'eval',
    runDir,
    split: args.split ?? 'heldout',
    backend: config.get<string>('backend') ?? 'auto',
    ...(args.limit !== undefined ? { limit: args.limit } : {}),
  };
  const result = await runWithProgress(context, spec, 'Evaluating');
  if (result?.ok && !result.cancelled) {
    const acc = Number(result.summary['accuracy'] ?? 0);
    const n = Number(result.summary['n'] ?? 0);
    void vscode.window.showInformationMessage(
      `Agent Lab: ${spec.split} exact match ${(100 * acc).toFixed(1)}% on ${n} tasks (${path.basename(runDir)}).`,
    );
  }
  return result;
}

function runWithProgress(context: vscode.ExtensionContext, spec: JobSpec, title: string): Thenable<JobResult> {
  return vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Agent Lab: ${title}`, cancellable: true },
    (progress, token) => {
      const job = startWorker(context, spec, (msg) => {
        if (msg.type === 'progress') {
          const pct = msg.total > 0 ? Math.round((100 * msg.done) / msg.total) : 0;
          progress.report({ message: `${msg.phase} ${msg.done}/${msg.total}${msg.message ? ` — ${msg.message}` : ''} (${pct}%)` });
          setStatus(`${title}: ${msg.phase} ${msg.done}/${msg.total}`);
        }
      });
      token.onCancellationRequested(() => job.cancel());
      return job.done;
    },
  );
}

function setStatus(text: string | null): void {
  if (!statusItem) return;
  if (text === null || jobs.size === 0) {
    statusItem.hide();
    return;
  }
  statusItem.text = `$(sync~spin) ${text}`;
  statusItem.tooltip = 'Agent Lab is training. Click to cancel (the run keeps its checkpoints).';
  statusItem.show();
}

/** Forks the worker and supervises it: a crash or a hang is reported, never silent. */
export function startWorker(context: vscode.ExtensionContext, spec: JobSpec, onMessage: (m: FromWorker) => void): ActiveJob {
  const workerPath = path.join(context.extensionPath, 'dist', 'worker.js');
  mkdirSync(path.dirname(spec.runDir), { recursive: true });
  const child = fork(workerPath, [], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], cwd: path.dirname(spec.runDir) });
  const result: JobResult = { ok: false, cancelled: false, runDir: spec.runDir, summary: {}, checkpoints: [], progressEvents: 0 };
  let killTimer: NodeJS.Timeout | undefined;
  const job: ActiveJob = {
    spec,
    child,
    cancel() {
      if (child.connected) child.send({ type: 'cancel' } satisfies ToWorker);
      // A worker that does not stop within a minute is killed; checkpoints are complete files.
      killTimer ??= setTimeout(() => child.kill('SIGKILL'), 60_000);
    },
    done: new Promise<JobResult>((resolve) => {
      child.stdout?.on('data', (d: Buffer) => log.info(`[worker] ${d.toString().trimEnd()}`));
      child.stderr?.on('data', (d: Buffer) => log.warn(`[worker] ${d.toString().trimEnd()}`));
      child.on('message', (raw: unknown) => {
        const parsed = parseFromWorker(raw);
        if (!parsed.ok) {
          log.warn(`worker sent a bad message: ${parsed.error}`);
          return;
        }
        const msg = parsed.message;
        switch (msg.type) {
          case 'started':
            log.info(`${spec.kind} started in ${spec.runDir} (backend ${msg.backend}, pid ${msg.pid})`);
            break;
          case 'log':
            log[msg.level === 'error' ? 'error' : msg.level === 'warn' ? 'warn' : 'info'](msg.message);
            // A GRPO run that has stopped learning says so where the user looks.
            if (msg.level === 'warn' && spec.kind === 'grpo') void vscode.window.showWarningMessage(`Agent Lab (GRPO): ${msg.message}`);
            break;
          case 'checkpoint':
            result.checkpoints.push(msg.step);
            log.info(`checkpoint step ${msg.step}: ${msg.path}`);
            break;
          case 'progress':
            result.progressEvents++;
            break;
          case 'done':
            result.ok = true;
            result.cancelled = msg.cancelled;
            result.summary = msg.summary;
            break;
          case 'failed':
            result.error = msg.error;
            break;
          case 'metrics':
            publishLiveMetrics(spec.runDir, msg.record); // live curves
            break;
        }
        onMessage(msg);
      });
      child.on('exit', (code, signal) => {
        if (killTimer) clearTimeout(killTimer);
        jobs.delete(job);
        setStatus(null);
        publishJobEnded(spec.runDir); // live curves
        if (!result.ok && !result.error) result.error = `the worker exited (code ${code}, signal ${signal}) without finishing`;
        if (result.error) reportError(`${spec.kind} in ${path.basename(spec.runDir)} failed`, new Error(result.error));
        else log.info(`${spec.kind} ${result.cancelled ? 'cancelled' : 'finished'}: ${JSON.stringify(result.summary)}`);
        resolve(result);
      });
      child.on('error', (err) => {
        result.error = err.message;
      });
    }),
  };
  jobs.add(job);
  child.send({ type: 'start', job: spec } satisfies ToWorker);
  setStatus(`${spec.kind} starting`);
  return job;
}
