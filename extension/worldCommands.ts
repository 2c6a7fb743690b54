// "Agent Lab: Build World": the world of `agentLab.world` (extension/worldPicker.ts) built
// into a new folder <workspace>/<agentLab.runsFolder>/world-<name>-<timestamp>/ (docs/worlds.md:
// the checks and files of `agent-lab world --facts|--docs`); without one, the textbook world
// (seed 0: 268 passages, 200 train + 50 held-out tasks) written as JSONL into
// world-<timestamp>/. Both are world jobs run by the worker (extension/workerProcess.ts), as
// the CLI runs them in-process. "Agent Lab: New World…" scaffolds a world source from a
// template (never over an existing file); "Agent Lab: Pick World…" sets agentLab.world.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { WorldJobSpec, WorldJobSummary } from '../core/protocol/worker';
import { log, reportError } from './log';
import { notifyRunsChanged } from './training';
import { WorldChoice, configuredWorld, describeWorld, pickWorld, saveWorldSetting, worldToUse } from './worldPicker';
import { NewWorldKind, WorldRef, builtCounts, existingTemplateFiles, worldName, worldTemplate } from './worldSources';
import { WORLD_PREFIX, exists, pickWorkspaceFolder, runsFolderUri, timestamp } from './workspace';
import { CORPUS_FILE } from '../core/protocol/folders';
import type { CommandMap } from './commands';
import type { Lab } from './lab';

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

export function activateWorldCommands(lab: Lab) {
  return {
    // The world formats' guide ships in the .vsix (docs/worlds.md): what the template, the
    // New World picker and the fact table's diagnostics cite, openable from a packed extension.
    'agentLab.openWorldGuide': async (): Promise<vscode.Uri> => {
      const guide = vscode.Uri.joinPath(lab.extension.extensionUri, 'docs', 'worlds.md');
      await vscode.commands.executeCommand('markdown.showPreview', guide);
      return guide;
    },
    'agentLab.buildWorld': async (): Promise<BuildWorldResult | undefined> => {
      try {
        return await buildWorldCommand(lab);
      } catch (err) {
        reportError('building the world failed', err);
        return undefined;
      }
    },
    'agentLab.newWorld': async (args?: NewWorldArgs): Promise<NewWorldResult | undefined> => {
      try {
        return await newWorldCommand(args ?? {});
      } catch (err) {
        reportError('creating the world failed', err);
        return undefined;
      }
    },
    'agentLab.pickWorld': async (): Promise<WorldChoice | undefined> => {
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
    },
  } satisfies CommandMap;
}

async function buildWorldCommand(lab: Lab): Promise<BuildWorldResult | undefined> {
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
  if (world.kind !== 'textbook') return announce(await buildFromSource(lab, ws, world));
  const runs = runsFolderUri(ws);
  let folder = vscode.Uri.joinPath(runs, WORLD_PREFIX + timestamp());
  for (let n = 2; await exists(folder); n++) folder = vscode.Uri.joinPath(runs, `${WORLD_PREFIX}${timestamp()}-${n}`);
  // `agent-lab world --out DIR`'s textbook world, its defaults spelled out.
  const spec: WorldJobSpec = { kind: 'world', out: folder.fsPath, seed: 0, distractors: 120, train: 200, heldout: 50 };
  const started = Date.now();
  const built = await runWorldJob(lab, ws, spec, 'Agent Lab: building the world');
  if (!built) return announce(undefined);
  log.info(`built world in ${folder.fsPath}: ${built.passages} passages, ${built.train} train + ${built.heldout} held-out tasks (${Date.now() - started} ms)`);
  return announce({ folder, passages: built.passages, train: built.train, heldout: built.heldout });
}

/** A world source built into a new world-<name>-<timestamp> folder; a bad source fails naming file, line and field. */
async function buildFromSource(lab: Lab, ws: vscode.WorkspaceFolder, source: Exclude<WorldRef, { kind: 'folder' }>): Promise<BuildWorldResult | undefined> {
  const runs = runsFolderUri(ws);
  const base = `${WORLD_PREFIX}${worldName(source)}-${timestamp()}`;
  let folder = vscode.Uri.joinPath(runs, base);
  for (let n = 2; await exists(folder); n++) folder = vscode.Uri.joinPath(runs, `${base}-${n}`);
  const spec: WorldJobSpec =
    source.kind === 'facts'
      ? { kind: 'world', facts: source.file, out: folder.fsPath }
      : { kind: 'world', docs: source.docsDir, tasks: source.tasksFile, out: folder.fsPath };
  const built = await runWorldJob(lab, ws, spec, `Agent Lab: building the world from ${describeWorld(source)}`);
  if (!built) return undefined;
  log.info(built.lines.join('\n'));
  return { folder, passages: built.passages, train: built.train, heldout: built.heldout, source };
}

/**
 * Runs a world job in the worker under a cancellable progress notification. Undefined when
 * cancelled: the job looks for the cancel before it writes, so a cancelled build has written
 * nothing (a user's world is staged and renamed into place, so even a killed worker leaves
 * no half-written world folder). A failure is thrown with the job's own message.
 */
async function runWorldJob(lab: Lab, ws: vscode.WorkspaceFolder, spec: WorldJobSpec, title: string): Promise<WorldJobSummary | undefined> {
  const { outcome, cancelled } = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title, cancellable: true },
    async (progress, token) => {
      let shown = 0;
      const onProgress = (done: number, total: number, message?: string) => {
        const percent = total > 0 ? Math.min(100, Math.round((100 * done) / total)) : 0;
        progress.report({ ...(message !== undefined ? { message } : {}), increment: Math.max(0, percent - shown) });
        shown = Math.max(shown, percent);
      };
      const outcome = await lab.runToolJob(spec, { cwd: ws.uri.fsPath, token, onProgress });
      return { outcome, cancelled: token.isCancellationRequested };
    },
  );
  if (!outcome.ok) {
    // A worker that had to be killed after a cancel is a cancelled build, said in the log.
    if (cancelled) {
      log.warn(`the cancelled world build ended without its result: ${outcome.error}`);
      return undefined;
    }
    throw new Error(outcome.error);
  }
  return outcome.result.cancelled ? undefined : outcome.result.summary;
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
