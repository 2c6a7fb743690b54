// "Agent Lab: Distill Trajectories": runs the teacher chosen in `agentLab.teacher.kind`
// (the stub, an OpenAI-compatible HTTP server, or a run's student) through the real ReAct
// loop (BM25 search + calculator) on one split of a world folder and writes the solved,
// de-duplicated trajectories to <folder>/<split>.traces.jsonl; the folder is the one built
// from `agentLab.world` (extension/worldPicker.ts), else picked. Every teacher runs in a
// worker process (a distill job, trainer/agent/distillJob.ts): the extension host distils
// nothing, and the HTTP teacher's key stays in the environment the worker inherits.
import * as vscode from 'vscode';
import { type DistillJobSpec, checkJobSpec } from '../core/protocol/worker';
import { log, reportError } from './log';
import { notifyRunsChanged } from './training';
import { SPLITS, Split } from './worldFiles';
import { builtFolderOf, configuredWorld, describeWorld } from './worldPicker';
import { exists, listWorldFolders, pickWorkspaceFolder, runsFolderUri } from './workspace';
import { CHECKPOINTS_DIR, CORPUS_FILE } from '../core/protocol/folders';
import type { CommandMap } from './commands';
import type { Lab } from './lab';

export const SAMPLES_PER_TASK = 4;

export interface DistillResult {
  file: vscode.Uri;
  split: Split;
  tasks: number;
  kept: number;
  /** Stopped by a cancel: the file holds the tasks finished before it. */
  cancelled?: boolean;
}

export function activateDistillCommands(lab: Lab) {
  return {
    // Arguments for scripted use (tests, the "Distill" button after a build): a world
    // folder (Uri or path), a split, and for the student teacher its run folder; without
    // them the user is asked.
    'agentLab.distill': async (folderArg?: vscode.Uri | string, splitArg?: Split, runArg?: string): Promise<DistillResult | undefined> => {
      try {
        return await distillCommand(lab, folderArg, splitArg, runArg);
      } catch (err) {
        reportError('distillation failed', err);
        return undefined;
      }
    },
  } satisfies CommandMap;
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
  lab: Lab,
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

  const teacher = teacherSettings(lab, folder);
  const runDir = teacher.kind === 'student' ? (runArg ?? (await pickStudentRun())) : undefined;
  if (teacher.kind === 'student' && !runDir) return undefined;
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Agent Lab: distilling ${chosen} (${teacher.kind} teacher)`, cancellable: true },
    async (progress, token): Promise<DistillResult> => {
      const started = Date.now();
      // A file distilled earlier (perhaps from a paid teacher) is never written over (the job refuses to, too).
      let file = vscode.Uri.joinPath(folder, `${chosen}.traces.jsonl`);
      for (let n = 2; await exists(file); n++) file = vscode.Uri.joinPath(folder, `${chosen}-${n}.traces.jsonl`);
      const spec = distillSpec(teacher, folder, chosen, file, runDir);
      let last = 0;
      const outcome = await lab.runToolJob(spec, {
        cwd: folder.fsPath,
        token,
        onProgress: (done, total) => {
          progress.report({ message: `${done}/${total} tasks`, increment: (100 * (done - last)) / Math.max(1, total) });
          last = done;
        },
      });
      if (!outcome.ok) throw new Error(outcome.error);
      const { summary, cancelled } = outcome.result;
      log.info(
        `distilled ${chosen} of ${folder.fsPath} with the ${teacher.kind} teacher x ${SAMPLES_PER_TASK} samples ` +
          `(${Date.now() - started} ms${cancelled ? ', stopped by a cancel' : ''}):\n${summary.lines.join('\n')}`,
      );
      // A cancelled job wrote the tasks it finished: that file is a result too.
      return { file, split: chosen, tasks: summary.tasks, kept: summary.kept, ...(cancelled ? { cancelled } : {}) };
    },
  );
  // The world's state and its new traces file show in the Runs view now (a cancelled
  // distillation wrote the tasks it finished).
  notifyRunsChanged();
  if (result.cancelled) log.info('distillation was cancelled: the finished tasks are written');
  void vscode.window
    .showInformationMessage(
      `Agent Lab: ${result.cancelled ? 'stopped: ' : ''}${result.kept} trajectories from ${result.tasks} ${result.split} tasks written to ${vscode.workspace.asRelativePath(result.file, false)}.`,
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

function teacherSettings(lab: Lab, folder: vscode.Uri): TeacherSettings {
  const kind = lab.config.get('teacher.kind', folder);
  if (kind !== 'stub' && kind !== 'http' && kind !== 'student') throw new Error(`agentLab.teacher.kind must be stub, http or student (got "${kind}")`);
  return {
    kind,
    baseUrl: lab.config.get('teacher.baseUrl', folder),
    model: lab.config.get('teacher.model', folder),
    temperature: lab.config.get('teacher.temperature', folder),
    maxTokens: lab.config.get('teacher.maxTokens', folder),
    timeoutMs: lab.config.get('teacher.timeoutMs', folder),
    retries: lab.config.get('teacher.retries', folder),
  };
}

/** The job for the chosen teacher: the world folder's split into `file`; the key is never in it (the worker reads its environment). */
function distillSpec(t: TeacherSettings, folder: vscode.Uri, split: Split, file: vscode.Uri, runDir: string | undefined): DistillJobSpec {
  const base: DistillJobSpec = { kind: 'distill', split, out: file.fsPath, world: folder.fsPath, teacher: t.kind, samples: SAMPLES_PER_TASK };
  let spec = base;
  if (t.kind === 'http') {
    if (!t.baseUrl || !t.model) throw new Error('set agentLab.teacher.baseUrl and agentLab.teacher.model for the HTTP teacher');
    spec = { ...base, teacherUrl: t.baseUrl, teacherModel: t.model, temperature: t.temperature, maxTokens: t.maxTokens, timeoutMs: t.timeoutMs, retries: t.retries };
  } else if (t.kind === 'student') {
    spec = { ...base, run: runDir!, temperature: t.temperature };
  }
  // A settings value the job would refuse is named as a setting, before any worker starts.
  const problem = checkJobSpec(spec);
  if (problem) throw new Error(`the distillation's settings: ${problem}`);
  return spec;
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
