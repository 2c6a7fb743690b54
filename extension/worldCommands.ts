// "Agent Lab: Build World": the default world (seed 0: 268 passages, 200 train + 50
// held-out tasks) written as JSONL into <workspace>/<agentLab.runsFolder>/world-<timestamp>/.
import * as vscode from 'vscode';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../core/world';
import { log, reportError } from './log';
import { WORLD_PREFIX, exists, pickWorkspaceFolder, runsFolderUri, timestamp, toJsonl, writeText, yieldToUi } from './workspace';

export interface BuildWorldResult {
  folder: vscode.Uri;
  passages: number;
  train: number;
  heldout: number;
}

export function activateWorldCommands(context: vscode.ExtensionContext): void {
  context.subscriptions.push(
    vscode.commands.registerCommand('agentLab.buildWorld', async (): Promise<BuildWorldResult | undefined> => {
      try {
        return await buildWorldCommand();
      } catch (err) {
        reportError('building the world failed', err);
        return undefined;
      }
    }),
  );
}

async function buildWorldCommand(): Promise<BuildWorldResult | undefined> {
  const ws = await pickWorkspaceFolder();
  if (!ws) {
    void vscode.window.showWarningMessage('Agent Lab: open a folder first; the world is written into the workspace.');
    return undefined;
  }
  const runs = runsFolderUri(ws);
  let folder = vscode.Uri.joinPath(runs, WORLD_PREFIX + timestamp());
  for (let n = 2; await exists(folder); n++) folder = vscode.Uri.joinPath(runs, `${WORLD_PREFIX}${timestamp()}-${n}`);

  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: 'Agent Lab: building the world', cancellable: true },
    async (progress, token): Promise<BuildWorldResult | undefined> => {
      const started = Date.now();
      progress.report({ message: 'corpus', increment: 0 });
      await yieldToUi();
      const corpus = buildCorpus(0, 120);
      if (token.isCancellationRequested) return undefined;
      progress.report({ message: 'task pool', increment: 40 });
      await yieldToUi();
      const pool = makeTaskPool(0, 200, 50);
      if (token.isCancellationRequested) return undefined;
      progress.report({ message: 'writing files', increment: 40 });
      await vscode.workspace.fs.createDirectory(folder);
      await writeText(vscode.Uri.joinPath(folder, 'corpus.jsonl'), toJsonl(corpus.map(passageToRow)));
      await writeText(vscode.Uri.joinPath(folder, 'train.jsonl'), toJsonl(pool.train.map(taskToRow)));
      await writeText(vscode.Uri.joinPath(folder, 'heldout.jsonl'), toJsonl(pool.heldout.map(taskToRow)));
      progress.report({ increment: 20 });
      log.info(
        `built world in ${folder.fsPath}: ${corpus.length} passages, ${pool.train.length} train + ` +
          `${pool.heldout.length} held-out tasks (${Date.now() - started} ms)`,
      );
      return { folder, passages: corpus.length, train: pool.train.length, heldout: pool.heldout.length };
    },
  );
  if (!result) {
    log.info('building the world was cancelled');
    return undefined;
  }
  const rel = vscode.workspace.asRelativePath(result.folder, false);
  void vscode.window
    .showInformationMessage(
      `Agent Lab: world built in ${rel}: ${result.passages} passages, ${result.train} train + ${result.heldout} held-out tasks.`,
      'Distill',
      'Reveal',
    )
    .then((choice) => {
      if (choice === 'Distill') void vscode.commands.executeCommand('agentLab.distill', result.folder);
      if (choice === 'Reveal') void vscode.commands.executeCommand('revealInExplorer', vscode.Uri.joinPath(result.folder, 'corpus.jsonl'));
    });
  return result;
}
