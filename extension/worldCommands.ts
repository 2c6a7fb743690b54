// "Agent Lab: Build World": the world of `agentLab.world` (extension/worldPicker.ts) built
// into a new folder <workspace>/<agentLab.runsFolder>/world-<name>-<timestamp>/ by the
// bundled CLI (`agent-lab world --facts|--docs`, docs/worlds.md: the same checks, the same
// files); without one, the textbook world (seed 0: 268 passages, 200 train + 50 held-out
// tasks) written as JSONL into world-<timestamp>/. "Agent Lab: New World…" scaffolds a
// world source from a template (never over an existing file); "Agent Lab: Pick World…"
// sets agentLab.world.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../core/world';
import { cliError, runCli } from './cliProcess';
import { log, reportError } from './log';
import { notifyRunsChanged } from './training';
import { WorldChoice, configuredWorld, describeWorld, pickWorld, saveWorldSetting, worldToUse } from './worldPicker';
import { NewWorldKind, WorldRef, builtCounts, existingTemplateFiles, worldName, worldTemplate } from './worldSources';
import { WORLD_PREFIX, exists, pickWorkspaceFolder, runsFolderUri, timestamp, toJsonl, writeText, yieldToUi } from './workspace';
import { CORPUS_FILE, HELDOUT_FILE, TRAIN_FILE } from '../core/protocol/folders';
import { registerCommand } from './commands';

export interface BuildWorldResult {
  folder: vscode.Uri;
  passages: number;
  train: number;
  heldout: number;
  /** The world source it was built from (absent: the textbook world). */
  source?: WorldRef;
}

export interface NewWorldArgs {
  kind?: NewWorldKind;
  /** The folder to scaffold, workspace-relative. */
  folder?: string;
}
export interface NewWorldResult {
  folder: vscode.Uri;
  main: vscode.Uri;
  files: vscode.Uri[];
  /** True when agentLab.world was unset and now names the new world. */
  selected: boolean;
}

export function activateWorldCommands(context: vscode.ExtensionContext): void {
  context.subscriptions.push(
    // The world formats' guide ships in the .vsix (docs/worlds.md): what the template, the
    // New World picker and the fact table's diagnostics cite, openable from a packed extension.
    registerCommand('agentLab.openWorldGuide', async (): Promise<vscode.Uri> => {
      const guide = vscode.Uri.joinPath(context.extensionUri, 'docs', 'worlds.md');
      await vscode.commands.executeCommand('markdown.showPreview', guide);
      return guide;
    }),
    registerCommand('agentLab.buildWorld', async (): Promise<BuildWorldResult | undefined> => {
      try {
        return await buildWorldCommand(context);
      } catch (err) {
        reportError('building the world failed', err);
        return undefined;
      }
    }),
    registerCommand('agentLab.newWorld', async (args?: NewWorldArgs): Promise<NewWorldResult | undefined> => {
      try {
        return await newWorldCommand(args ?? {});
      } catch (err) {
        reportError('creating the world failed', err);
        return undefined;
      }
    }),
    registerCommand('agentLab.pickWorld', async (): Promise<WorldChoice | undefined> => {
      try {
        const ws = await pickWorkspaceFolder();
        if (!ws) {
          void vscode.window.showWarningMessage('Agent Lab: open a folder first.');
          return undefined;
        }
        const picked = await pickWorld(ws, { folders: true });
        if (picked) void vscode.window.showInformationMessage(`Agent Lab: the commands now use ${describeWorld(picked)}.`);
        return picked;
      } catch (err) {
        reportError('picking the world failed', err);
        return undefined;
      }
    }),
  );
}

async function buildWorldCommand(context: vscode.ExtensionContext): Promise<BuildWorldResult | undefined> {
  const ws = await pickWorkspaceFolder();
  if (!ws) {
    void vscode.window.showWarningMessage('Agent Lab: open a folder first; the world is written into the workspace.');
    return undefined;
  }
  const world = await worldToUse(ws, { interactive: true, folders: false, placeHolder: 'World to build (saved to agentLab.world)' });
  if (!world) return undefined;
  if (world.kind === 'folder') {
    const counts = builtCounts(world.dir);
    void vscode.window.showInformationMessage(`Agent Lab: agentLab.world names ${describeWorld(world)}, which is built already; Distill and Train use it.`);
    return { folder: vscode.Uri.file(world.dir), passages: counts?.passages ?? 0, train: counts?.train ?? 0, heldout: counts?.heldout ?? 0 };
  }
  if (world.kind !== 'textbook') return announce(await buildFromSource(context, ws, world));
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
      await writeText(vscode.Uri.joinPath(folder, CORPUS_FILE), toJsonl(corpus.map(passageToRow)));
      await writeText(vscode.Uri.joinPath(folder, TRAIN_FILE), toJsonl(pool.train.map(taskToRow)));
      await writeText(vscode.Uri.joinPath(folder, HELDOUT_FILE), toJsonl(pool.heldout.map(taskToRow)));
      progress.report({ increment: 20 });
      log.info(
        `built world in ${folder.fsPath}: ${corpus.length} passages, ${pool.train.length} train + ` +
          `${pool.heldout.length} held-out tasks (${Date.now() - started} ms)`,
      );
      return { folder, passages: corpus.length, train: pool.train.length, heldout: pool.heldout.length };
    },
  );
  return announce(result);
}

/** `agent-lab world` on a world source, into a new world-<name>-<timestamp> folder; a bad source fails naming file, line and field. */
async function buildFromSource(context: vscode.ExtensionContext, ws: vscode.WorkspaceFolder, source: Exclude<WorldRef, { kind: 'folder' }>): Promise<BuildWorldResult | undefined> {
  const runs = runsFolderUri(ws);
  const base = `${WORLD_PREFIX}${worldName(source)}-${timestamp()}`;
  let folder = vscode.Uri.joinPath(runs, base);
  for (let n = 2; await exists(folder); n++) folder = vscode.Uri.joinPath(runs, `${base}-${n}`);
  const args =
    source.kind === 'facts'
      ? ['world', '--facts', source.file, '--out', folder.fsPath]
      : ['world', '--docs', source.docsDir, '--tasks', source.tasksFile, '--out', folder.fsPath];
  const r = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Agent Lab: building the world from ${describeWorld(source)}`, cancellable: true },
    (_progress, token) => runCli(context, args, { cwd: ws.uri.fsPath, token }),
  );
  if (r.cancelled) return undefined;
  if (r.code !== 0) throw new Error(cliError(r).replace(/^agent-lab world: /, ''));
  log.info(r.stdout.trim());
  const counts = builtCounts(folder.fsPath);
  if (!counts) throw new Error(`agent-lab world exited 0 but ${folder.fsPath} has no readable world.json`);
  return { folder, passages: counts.passages, train: counts.train, heldout: counts.heldout, source };
}

function announce(result: BuildWorldResult | undefined): BuildWorldResult | undefined {
  notifyRunsChanged();
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
      if (choice === 'Reveal') void vscode.commands.executeCommand('revealInExplorer', vscode.Uri.joinPath(result.folder, CORPUS_FILE));
    });
  return result;
}

/** A workspace-relative folder name, or why it is not one. */
function checkFolderName(v: string): string | null {
  const t = v.trim();
  if (t === '') return 'a folder name, e.g. worlds/my-world';
  if (path.isAbsolute(t) || /^[A-Za-z]:/.test(t)) return 'a path inside the workspace (relative)';
  if (t.split(/[\\/]+/).includes('..')) return 'a path inside the workspace (no "..")';
  if (!/^[A-Za-z0-9._ /-]+$/.test(t)) return 'letters, digits, spaces and . _ - / only';
  return null;
}

async function newWorldCommand(args: NewWorldArgs): Promise<NewWorldResult | undefined> {
  const ws = await pickWorkspaceFolder();
  if (!ws) {
    void vscode.window.showWarningMessage('Agent Lab: open a folder first; the new world is written into the workspace.');
    return undefined;
  }
  const kind =
    args.kind ??
    (
      await vscode.window.showQuickPick(
        [
          { label: 'A fact table', description: 'facts.csv: entity,attribute,value rows', worldKind: 'facts' as const },
          { label: 'Documents and questions', description: 'docs/ of .md or .txt files and tasks.jsonl', worldKind: 'docs' as const },
        ],
        { placeHolder: 'What kind of world (the formats: "Agent Lab: Open the World Format Guide")', ignoreFocusOut: true },
      )
    )?.worldKind;
  if (!kind) return undefined;
  const name =
    args.folder ??
    (await vscode.window.showInputBox({
      prompt: 'Folder for the new world, inside the workspace',
      value: kind === 'facts' ? 'worlds/my-facts' : 'worlds/my-notes',
      ignoreFocusOut: true,
      validateInput: checkFolderName,
    }));
  if (name === undefined) return undefined;
  const problem = checkFolderName(name);
  if (problem) throw new Error(`"${name}" is not a folder name: ${problem}`);
  const dir = path.join(ws.uri.fsPath, ...name.trim().split(/[\\/]+/));
  if (fs.existsSync(dir) && !fs.statSync(dir).isDirectory()) throw new Error(`${dir} exists and is not a folder`);
  // Nothing of the user's is written over: any template file already there stops the command.
  const taken = existingTemplateFiles(dir, kind);
  if (taken.length > 0) {
    const rel = taken.map((p) => vscode.workspace.asRelativePath(p, false)).join(', ');
    void vscode.window.showErrorMessage(`Agent Lab: ${rel} already exists; New World writes no file over another. Choose another folder.`);
    log.warn(`New World refused: ${taken.join(', ')} already exist(s)`);
    return undefined;
  }
  const template = worldTemplate(kind);
  const files: vscode.Uri[] = [];
  for (const f of template.files) {
    const file = path.join(dir, ...f.rel.split('/'));
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, f.text, { flag: 'wx' }); // wx: fails rather than replace a file made meanwhile
    files.push(vscode.Uri.file(file));
  }
  const main = vscode.Uri.file(path.join(dir, ...template.main.split('/')));
  await vscode.window.showTextDocument(main, { preview: false });
  let selected = false;
  let current: WorldRef | undefined;
  try {
    current = configuredWorld(ws);
  } catch {
    current = undefined;
  }
  const ref: WorldRef = kind === 'facts' ? { kind, file: main.fsPath } : { kind, docsDir: path.join(dir, 'docs'), tasksFile: main.fsPath };
  if (!current) {
    await saveWorldSetting(ws, ref);
    selected = true;
  }
  const rel = vscode.workspace.asRelativePath(dir, false);
  log.info(`New World: ${kind} template in ${dir} (${files.map((f) => path.relative(dir, f.fsPath)).join(', ')})`);
  void vscode.window
    .showInformationMessage(
      `Agent Lab: a new ${kind === 'facts' ? 'fact table' : 'documents and questions'} world in ${rel}` +
        (selected ? '; agentLab.world names it.' : `; agentLab.world still names ${describeWorld(current!)}.`),
      'Build World',
      ...(selected ? [] : ['Use This World']),
    )
    .then(async (choice) => {
      if (choice === 'Use This World') await saveWorldSetting(ws, ref);
      if (choice === 'Build World' || choice === 'Use This World') {
        if (choice === 'Build World' && !selected) await saveWorldSetting(ws, ref);
        void vscode.commands.executeCommand('agentLab.buildWorld');
      }
    });
  return { folder: vscode.Uri.file(dir), main, files, selected };
}
