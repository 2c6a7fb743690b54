// "Agent Lab: Distill Trajectories (Stub Teacher)": runs the stub teacher through the real
// ReAct loop (BM25 search + calculator) on one split of a world folder and writes the
// solved, de-duplicated trajectories to <folder>/<split>.traces.jsonl.
import * as vscode from 'vscode';
import { ToolEnv, distill, makeStubTeacher } from '../core/distill';
import { log, reportError } from './log';
import { SPLITS, Split, readCorpus, readTasks } from './worldFiles';
import { exists, listWorldFolders, pickWorkspaceFolder, runsFolderUri, toJsonl, writeText, yieldToUi } from './workspace';

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
    vscode.commands.registerCommand(
      'agentLab.distill',
      // Arguments for scripted use (tests, the "Distill" button after a build): a world
      // folder (Uri or path) and a split; without them the user is asked.
      async (folderArg?: vscode.Uri | string, splitArg?: Split): Promise<DistillResult | undefined> => {
        try {
          return await distillCommand(folderArg, splitArg);
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

async function distillCommand(folderArg?: vscode.Uri | string, splitArg?: Split): Promise<DistillResult | undefined> {
  const folder = typeof folderArg === 'string' ? vscode.Uri.file(folderArg) : folderArg ?? (await pickWorldFolder());
  if (!folder) return undefined;
  if (!(await exists(vscode.Uri.joinPath(folder, 'corpus.jsonl')))) {
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

  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Agent Lab: distilling ${chosen}`, cancellable: true },
    async (progress, token): Promise<DistillResult | undefined> => {
      const started = Date.now();
      progress.report({ message: 'reading the world' });
      const corpus = await readCorpus(folder);
      const tasks = await readTasks(folder, chosen);
      await yieldToUi();
      const env = new ToolEnv(corpus);
      const teacher = makeStubTeacher(tasks);
      const rows: ReturnType<typeof distill> = [];
      for (let i = 0; i < tasks.length; i += CHUNK) {
        if (token.isCancellationRequested) return undefined;
        // distill() treats tasks independently, so chunking gives the same rows in order.
        rows.push(...distill(tasks.slice(i, i + CHUNK), teacher, env, SAMPLES_PER_TASK));
        const done = Math.min(i + CHUNK, tasks.length);
        progress.report({ message: `${done}/${tasks.length} tasks`, increment: (100 * (done - i)) / Math.max(1, tasks.length) });
        await yieldToUi();
      }
      const file = vscode.Uri.joinPath(folder, `${chosen}.traces.jsonl`);
      await writeText(file, toJsonl(rows));
      log.info(
        `distilled ${chosen} of ${folder.fsPath}: ${rows.length} trajectories kept from ${tasks.length} tasks ` +
          `x ${SAMPLES_PER_TASK} samples (${Date.now() - started} ms) -> ${file.fsPath}`,
      );
      return { file, split: chosen, tasks: tasks.length, kept: rows.length };
    },
  );
  if (!result) {
    log.info('distillation was cancelled');
    return undefined;
  }
  void vscode.window
    .showInformationMessage(
      `Agent Lab: ${result.kept} trajectories from ${result.tasks} ${result.split} tasks written to ${vscode.workspace.asRelativePath(result.file, false)}.`,
      'Open',
    )
    .then((choice) => {
      if (choice === 'Open') void vscode.window.showTextDocument(result.file);
    });
  return result;
}
