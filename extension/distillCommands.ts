// "Agent Lab: Distill Trajectories": runs the teacher chosen in `agentLab.teacher.kind`
// (the stub, an OpenAI-compatible HTTP server, or a run's student) through the real ReAct
// loop (BM25 search + calculator) on one split of a world folder and writes the solved,
// de-duplicated trajectories to <folder>/<split>.traces.jsonl; the folder is the one built
// from `agentLab.world` (extension/worldPicker.ts), else picked. The student needs tfjs, which
// never runs in the extension host: that case runs `agent-lab distill` in a child process.
import { fork } from 'node:child_process';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { ToolEnv, distill, makeStubTeacher } from '../core/distill';
import { distillAsync, newDistillStats } from '../core/distillAsync';
import { isHinted } from '../core/worldSource';
import { API_KEY_ENV, makeHttpTeacher } from '../core/teachers/http';
import type { McpTool } from '../core/tools/schemas';
import type { Task } from '../core/types';
import { parseToolList, systemPromptFor } from '../core/worldTools';
import { log, reportError } from './log';
import { notifyRunsChanged } from './training';
import { SPLITS, Split, readCorpus, readTasks } from './worldFiles';
import { builtFolderOf, configuredWorld, describeWorld } from './worldPicker';
import { exists, listWorldFolders, pickWorkspaceFolder, runsFolderUri, toJsonl, writeText, yieldToUi } from './workspace';
import { CHECKPOINTS_DIR, CORPUS_FILE, TOOLS_FILE } from '../core/protocol/folders';
import { setting } from './settings';
import { registerCommand } from './commands';

export const SAMPLES_PER_TASK = 4;
/** Tasks per synchronous chunk: the notification repaints and cancellation is checked between chunks. */
const CHUNK = 10;

export interface DistillResult {
  file: vscode.Uri;
  split: Split;
  tasks: number;
  kept: number;
}

export function activateDistillCommands(context: vscode.ExtensionContext): void {
  context.subscriptions.push(
    registerCommand(
      'agentLab.distill',
      // Arguments for scripted use (tests, the "Distill" button after a build): a world
      // folder (Uri or path), a split, and for the student teacher its run folder; without
      // them the user is asked.
      async (folderArg?: vscode.Uri | string, splitArg?: Split, runArg?: string): Promise<DistillResult | undefined> => {
        try {
          return await distillCommand(context, folderArg, splitArg, runArg);
        } catch (err) {
          reportError('distillation failed', err);
          return undefined;
        }
      },
    ),
  );
}

async function pickWorldFolder(): Promise<vscode.Uri | undefined> {
  const ws = await pickWorkspaceFolder();
  if (!ws) {
    void vscode.window.showWarningMessage('Agent Lab: open a folder first.');
    return undefined;
  }
  // agentLab.world: the newest folder built from it (Build World first when there is none).
  const configured = configuredWorld(ws);
  if (configured) {
    const built = builtFolderOf(ws, configured);
    if (built) return vscode.Uri.file(built);
    const choice = await vscode.window.showWarningMessage(`Agent Lab: ${describeWorld(configured)} (agentLab.world) is not built yet. Build it first?`, 'Build World');
    if (choice !== 'Build World') return undefined;
    const made = await vscode.commands.executeCommand<{ folder: vscode.Uri } | undefined>('agentLab.buildWorld');
    return made?.folder;
  }
  const worlds = await listWorldFolders(runsFolderUri(ws));
  if (worlds.length === 0) {
    const choice = await vscode.window.showWarningMessage('Agent Lab: no world folder yet. Build one first?', 'Build World');
    if (choice === 'Build World') {
      const built = await vscode.commands.executeCommand<{ folder: vscode.Uri } | undefined>('agentLab.buildWorld');
      return built?.folder;
    }
    return undefined;
  }
  if (worlds.length === 1) return worlds[0];
  const picked = await vscode.window.showQuickPick(
    worlds.map((uri, i) => ({ label: vscode.workspace.asRelativePath(uri, false), description: i === 0 ? 'newest' : '', uri })),
    { placeHolder: 'World folder to distill from' },
  );
  return picked?.uri;
}

async function distillCommand(
  context: vscode.ExtensionContext,
  folderArg?: vscode.Uri | string,
  splitArg?: Split,
  runArg?: string,
): Promise<DistillResult | undefined> {
  const folder = typeof folderArg === 'string' ? vscode.Uri.file(folderArg) : folderArg ?? (await pickWorldFolder());
  if (!folder) return undefined;
  if (!(await exists(vscode.Uri.joinPath(folder, CORPUS_FILE)))) {
    throw new Error(`${folder.fsPath} has no corpus.jsonl; run "Agent Lab: Build World" first`);
  }
  let split: Split | undefined = splitArg;
  if (split !== undefined && !SPLITS.includes(split)) throw new Error(`unknown split "${String(split)}" (train or heldout)`);
  split ??= (
    await vscode.window.showQuickPick(
      [
        { label: 'train' as const, description: 'the training split' },
        { label: 'heldout' as const, description: 'the held-out split (for evaluation)' },
      ],
      { placeHolder: 'Split to distill' },
    )
  )?.label;
  if (!split) return undefined;
  const chosen: Split = split;

  const teacher = teacherSettings(folder);
  const runDir = teacher.kind === 'student' ? (runArg ?? (await pickStudentRun())) : undefined;
  if (teacher.kind === 'student' && !runDir) return undefined;
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Agent Lab: distilling ${chosen} (${teacher.kind} teacher)`, cancellable: true },
    async (progress, token): Promise<DistillResult | undefined> => {
      const started = Date.now();
      // A file distilled earlier (perhaps from a paid teacher) is never written over.
      let file = vscode.Uri.joinPath(folder, `${chosen}.traces.jsonl`);
      for (let n = 2; await exists(file); n++) file = vscode.Uri.joinPath(folder, `${chosen}-${n}.traces.jsonl`);
      if (teacher.kind === 'student') return distillWithStudent(context, folder, chosen, runDir!, teacher.temperature, file, progress, token);
      progress.report({ message: 'reading the world' });
      const corpus = await readCorpus(folder);
      let tasks = await readTasks(folder, chosen);
      await yieldToUi();
      // A world's own tool list: its system prompt (tool line) and, for the HTTP teacher, its schemas.
      const tools = await readToolList(folder);
      const env = new ToolEnv(corpus, tools ? systemPromptFor(tools) : undefined);
      if (teacher.kind === 'http') return distillWithHttp(teacher, env, tasks, chosen, file, progress, token, tools);
      // Questions without hints (a user's documents world, docs/worlds.md) have no answer key
      // for the stub teacher: they are counted and left to the HTTP teacher or a student.
      const allTasks = tasks.length;
      tasks = tasks.filter(isHinted);
      const skipped = allTasks - tasks.length;
      const stub = makeStubTeacher(tasks);
      const rows: ReturnType<typeof distill> = [];
      for (let i = 0; i < tasks.length; i += CHUNK) {
        if (token.isCancellationRequested) return undefined;
        // distill() treats tasks independently, so chunking gives the same rows in order.
        rows.push(...distill(tasks.slice(i, i + CHUNK), stub, env, SAMPLES_PER_TASK));
        const done = Math.min(i + CHUNK, tasks.length);
        progress.report({ message: `${done}/${tasks.length} tasks`, increment: (100 * (done - i)) / Math.max(1, tasks.length) });
        await yieldToUi();
      }
      await writeText(file, toJsonl(rows));
      log.info(
        `distilled ${chosen} of ${folder.fsPath}: ${rows.length} trajectories kept from ${tasks.length} tasks ` +
          `x ${SAMPLES_PER_TASK} samples (${Date.now() - started} ms) -> ${file.fsPath}` +
          (skipped ? `; ${skipped} questions without hints left out (unsolved: no_hints; use the HTTP teacher)` : ''),
      );
      return { file, split: chosen, tasks: tasks.length, kept: rows.length };
    },
  );
  // The world's state and its new traces file show in the Runs view now (a student's
  // distillation may have written part of a file even when cancelled).
  notifyRunsChanged();
  if (!result) {
    log.info('distillation was cancelled');
    return undefined;
  }
  void vscode.window
    .showInformationMessage(
      `Agent Lab: ${result.kept} trajectories from ${result.tasks} ${result.split} tasks written to ${vscode.workspace.asRelativePath(result.file, false)}.`,
      ...(result.split === 'train' && result.kept > 0 ? ['Train on These Trajectories'] : []),
      'Open',
    )
    .then((choice) => {
      if (choice === 'Open') void vscode.window.showTextDocument(result.file);
      if (choice === 'Train on These Trajectories') void vscode.commands.executeCommand('agentLab.trainSft', result.file);
    });
  return result;
}

// ---- real teachers (agentLab.teacher.*) ----------------------------------------------------

interface TeacherSettings {
  kind: 'stub' | 'http' | 'student';
  baseUrl: string;
  model: string;
  temperature: number;
  maxTokens: number;
  timeoutMs: number;
  retries: number;
}

function teacherSettings(folder: vscode.Uri): TeacherSettings {
  const kind = setting('teacher.kind', folder);
  if (kind !== 'stub' && kind !== 'http' && kind !== 'student') throw new Error(`agentLab.teacher.kind must be stub, http or student (got "${kind}")`);
  return {
    kind,
    baseUrl: setting('teacher.baseUrl', folder),
    model: setting('teacher.model', folder),
    temperature: setting('teacher.temperature', folder),
    maxTokens: setting('teacher.maxTokens', folder),
    timeoutMs: setting('teacher.timeoutMs', folder),
    retries: setting('teacher.retries', folder),
  };
}

type Progress = vscode.Progress<{ message?: string; increment?: number }>;

/** The world folder's tool list (tools.json, docs/worlds.md "Tools"), or undefined for the textbook's tools. */
async function readToolList(folder: vscode.Uri): Promise<McpTool[] | undefined> {
  const uri = vscode.Uri.joinPath(folder, TOOLS_FILE);
  if (!(await exists(uri))) return undefined;
  return parseToolList(new TextDecoder().decode(await vscode.workspace.fs.readFile(uri)), uri.fsPath);
}

async function distillWithHttp(
  t: TeacherSettings,
  env: ToolEnv,
  tasks: Task[],
  split: Split,
  file: vscode.Uri,
  progress: Progress,
  token: vscode.CancellationToken,
  tools: McpTool[] | undefined,
): Promise<DistillResult | undefined> {
  if (!t.baseUrl || !t.model) throw new Error('set agentLab.teacher.baseUrl and agentLab.teacher.model for the HTTP teacher');
  // The key is read from the environment VS Code was started with, never from settings.
  // A world's own tool list is what the teacher is shown.
  const teacher = makeHttpTeacher({
    baseUrl: t.baseUrl,
    model: t.model,
    apiKey: process.env[API_KEY_ENV],
    temperature: t.temperature,
    maxTokens: t.maxTokens,
    timeoutMs: t.timeoutMs,
    retries: t.retries,
    ...(tools ? { tools } : {}),
  });
  log.info(`HTTP teacher ${t.model} at ${t.baseUrl} (${process.env[API_KEY_ENV] ? `key from ${API_KEY_ENV}` : `no ${API_KEY_ENV} set`})`);
  const controller = new AbortController();
  const sub = token.onCancellationRequested(() => controller.abort());
  const stats = newDistillStats();
  let last = 0;
  try {
    const rows = await distillAsync(tasks, teacher, env, {
      samplesPerTask: SAMPLES_PER_TASK,
      stats,
      signal: controller.signal,
      // Every call is held to the world's tool list before it runs (off-tools: not run, not kept).
      ...(tools ? { tools } : {}),
      onProgress: (done, total) => {
        progress.report({ message: `${done}/${total} tasks`, increment: (100 * (done - last)) / Math.max(1, total) });
        last = done;
      },
      onFailure: (task, err) => log.warn(`failed rollout (${task.question}): ${err.message}`),
    });
    await writeText(file, toJsonl(rows));
    const failed = Object.entries(stats.failed).map(([r, n]) => `${r} ${n}`).join(', ') || 'none';
    log.info(
      `distilled ${split} with ${t.model}: ${stats.rollouts} rollouts, ${stats.solved} solved, ${stats.kept} kept, failed: ${failed}` +
        `${stats.cancelled ? ` (stopped after ${stats.tasks} of ${tasks.length} tasks)` : ''} -> ${file.fsPath}`,
    );
    return { file, split, tasks: stats.tasks, kept: rows.length };
  } finally {
    sub.dispose();
  }
}

/** A run folder under the runs folder that holds a checkpoint. */
async function pickStudentRun(): Promise<string | undefined> {
  const ws = await pickWorkspaceFolder();
  if (!ws) return undefined;
  const runs = runsFolderUri(ws);
  let entries: [string, vscode.FileType][] = [];
  try {
    entries = await vscode.workspace.fs.readDirectory(runs);
  } catch {
    /* no runs yet */
  }
  const candidates: vscode.Uri[] = [];
  for (const [name, type] of entries) {
    const uri = vscode.Uri.joinPath(runs, name);
    if (type === vscode.FileType.Directory && (await exists(vscode.Uri.joinPath(uri, CHECKPOINTS_DIR)))) candidates.push(uri);
  }
  if (candidates.length === 0) {
    void vscode.window.showWarningMessage('Agent Lab: the student teacher needs a trained run (Agent Lab: Train (SFT)); none has a checkpoint yet.');
    return undefined;
  }
  const picked = await vscode.window.showQuickPick(
    candidates.sort((a, b) => b.fsPath.localeCompare(a.fsPath)).map((uri) => ({ label: vscode.workspace.asRelativePath(uri, false), uri })),
    { placeHolder: 'Run whose student is the teacher' },
  );
  return picked?.uri.fsPath;
}

/** `agent-lab distill --teacher student` in a child process (tfjs stays out of the extension host). */
function distillWithStudent(
  context: vscode.ExtensionContext,
  folder: vscode.Uri,
  split: Split,
  runDir: string,
  temperature: number,
  file: vscode.Uri,
  progress: Progress,
  token: vscode.CancellationToken,
): Promise<DistillResult | undefined> {
  const args = ['distill', '--split', split, '--world', folder.fsPath, '--teacher', 'student', '--run', runDir, '--temperature', String(temperature), '--out', file.fsPath];
  const child = fork(path.join(context.extensionPath, 'bin', 'agent-lab'), args, { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], cwd: path.dirname(runDir) });
  const sub = token.onCancellationRequested(() => child.kill('SIGINT')); // the CLI writes the finished tasks
  let stdout = '';
  let stderr = '';
  let last = 0;
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
    for (const m of d.toString().matchAll(/distill (\d+)\/(\d+) tasks/g)) {
      const done = Number(m[1]);
      progress.report({ message: `${done}/${m[2]} tasks`, increment: (100 * (done - last)) / Math.max(1, Number(m[2])) });
      last = done;
    }
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      sub.dispose();
      log.info(`agent-lab ${args.join(' ')}\n${stderr}${stdout}`);
      if (code !== 0) {
        reject(new Error(`the student teacher failed (exit ${code}): ${stderr.trim().split('\n').slice(-3).join(' ')}`));
        return;
      }
      const m = /(\d+) trajectories kept from (\d+) tasks/.exec(stdout);
      resolve({ file, split, tasks: Number(m?.[2] ?? 0), kept: Number(m?.[1] ?? 0) });
    });
  });
}
