// Which world Build World, Distill, Train (SFT) and Evaluate use: the `agentLab.world`
// setting (a world folder or a world source, workspace-relative), or, when it is unset
// and the workspace holds world sources or built worlds, a quick pick ("Agent Lab: Pick
// World…", also offered by those commands) whose choice is saved to the setting. A world
// source is built into a folder under the runs folder by Build World; the other commands
// use the newest folder built from it. What the files are is decided in worldSources.ts.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { log } from './log';
import { listWorlds } from './runFolders';
import { TASKS_SOURCE_FILE, WORLD_MANIFEST } from '../core/protocol/folders';
import { WorldRef, classifyWorldPath, foldersBuiltFrom, looksLikeFactTable, worldName } from './worldSources';
import { runsFolderUri } from './workspace';
import { setting, updateSetting } from './settings';
import type { SettingKey } from './settingsTable';

export const WORLD_SETTING = 'world' satisfies SettingKey;

/** The world a command works on: a user's world, or the textbook's (the default). */
export type WorldChoice = WorldRef | { kind: 'textbook' };

/** `agentLab.world` resolved against the workspace folder; undefined when unset. Throws naming the setting when it names no world. */
export function configuredWorld(ws: vscode.WorkspaceFolder): WorldRef | undefined {
  const value = setting(WORLD_SETTING, ws.uri).trim();
  if (value === '') return undefined;
  const abs = path.isAbsolute(value) ? value : path.join(ws.uri.fsPath, ...value.split(/[\\/]+/));
  try {
    return classifyWorldPath(abs);
  } catch (err) {
    throw new Error(`the setting agentLab.world ("${value}"): ${(err as Error).message}`);
  }
}

/** A world as a person reads it: its kind and its workspace-relative path. */
export function describeWorld(ref: WorldChoice): string {
  if (ref.kind === 'textbook') return 'the textbook world';
  const rel = (p: string) => vscode.workspace.asRelativePath(p, false);
  if (ref.kind === 'folder') return `world folder ${rel(ref.dir)}`;
  if (ref.kind === 'facts') return `fact table ${rel(ref.file)}`;
  return `documents ${rel(ref.docsDir)} with ${rel(ref.tasksFile)}`;
}

/** World sources in the workspace (fact tables; tasks files beside a docs/ folder), outside the runs folder. */
export async function findWorldSources(ws: vscode.WorkspaceFolder): Promise<WorldRef[]> {
  const runs = runsFolderUri(ws).fsPath + path.sep;
  const exclude = '{**/node_modules/**,**/.git/**}';
  const found: WorldRef[] = [];
  const seen = new Set<string>();
  const uris = await vscode.workspace.findFiles(new vscode.RelativePattern(ws, `**/*.{csv,jsonl}`), exclude, 2000);
  for (const uri of uris.sort((a, b) => a.fsPath.localeCompare(b.fsPath))) {
    const file = uri.fsPath;
    if (file.startsWith(runs)) continue;
    let ref: WorldRef | undefined;
    if (looksLikeFactTable(file)) ref = { kind: 'facts', file };
    else if (path.basename(file) === TASKS_SOURCE_FILE) {
      try {
        const r = classifyWorldPath(file);
        if (r.kind === 'docs') ref = r;
      } catch {
        // a tasks.jsonl without a docs/ folder beside it is not a world source
      }
    }
    if (ref && !seen.has(file)) {
      seen.add(file);
      found.push(ref);
    }
  }
  return found;
}

/** Built world folders under the runs folder, newest first. */
export function builtWorlds(ws: vscode.WorkspaceFolder): WorldRef[] {
  return listWorlds(runsFolderUri(ws).fsPath).map((w) => ({ kind: 'folder', dir: w.dir }));
}

/** The newest world folder built from a world source (or the folder itself). */
export function builtFolderOf(ws: vscode.WorkspaceFolder, ref: WorldRef): string | undefined {
  if (ref.kind === 'folder') return ref.dir;
  return foldersBuiltFrom(
    builtWorlds(ws).map((w) => (w.kind === 'folder' ? w.dir : '')),
    ref,
  )[0];
}

type Item = vscode.QuickPickItem & { choice: WorldChoice };

/**
 * Asks which world to use, among the workspace's world sources (and, with `folders`, the
 * built world folders), with the textbook world last; the choice is saved to agentLab.world
 * (the textbook world clears it). Undefined when the person dismisses the pick.
 */
export async function pickWorld(ws: vscode.WorkspaceFolder, opts: { folders: boolean; placeHolder?: string }): Promise<WorldChoice | undefined> {
  const sources = await findWorldSources(ws);
  const folders = opts.folders ? builtWorlds(ws) : [];
  let current: WorldRef | undefined;
  try {
    current = configuredWorld(ws);
  } catch {
    current = undefined; // a broken setting is replaced by the pick
  }
  const key = (r: WorldChoice) => (r.kind === 'textbook' ? '' : r.kind === 'folder' ? r.dir : r.kind === 'facts' ? r.file : r.tasksFile);
  const items: Item[] = [...sources, ...folders].map((ref) => ({
    label: worldName(ref),
    description: describeWorld(ref) + (current && key(current) === key(ref) ? ' · current' : ''),
    detail:
      ref.kind === 'folder'
        ? 'built: Distill and Train use it as it is'
        : builtFolderOf(ws, ref)
          ? `built into ${vscode.workspace.asRelativePath(builtFolderOf(ws, ref)!, false)}`
          : 'not built yet: Build World makes its world folder',
    choice: ref,
  }));
  items.push({ label: 'The textbook world', description: '28 facts, the default', choice: { kind: 'textbook' } });
  const pick = await vscode.window.showQuickPick(items, { placeHolder: opts.placeHolder ?? 'World for Agent Lab (saved to agentLab.world)', ignoreFocusOut: true });
  if (!pick) return undefined;
  await saveWorldSetting(ws, pick.choice);
  return pick.choice;
}

/** Writes agentLab.world (workspace-relative) for this workspace folder; the textbook world clears it. */
export async function saveWorldSetting(ws: vscode.WorkspaceFolder, choice: WorldChoice): Promise<void> {
  const abs = choice.kind === 'textbook' ? '' : choice.kind === 'folder' ? choice.dir : choice.kind === 'facts' ? choice.file : path.dirname(choice.tasksFile);
  const rel = abs === '' ? undefined : path.relative(ws.uri.fsPath, abs).split(path.sep).join('/');
  const value = rel === undefined || rel.startsWith('..') ? abs || undefined : rel;
  const target = (vscode.workspace.workspaceFolders?.length ?? 0) > 1 ? vscode.ConfigurationTarget.WorkspaceFolder : vscode.ConfigurationTarget.Workspace;
  await updateSetting(WORLD_SETTING, value, target, ws.uri);
  log.info(`agentLab.world = ${value === undefined ? '(unset: the textbook world)' : JSON.stringify(value)}`);
}

/**
 * The world a command should use: the setting; else, when the workspace holds world
 * sources (or, with `folders`, built worlds) and the command is interactive, the pick;
 * else the textbook world. Undefined when the person dismissed the pick.
 */
export async function worldToUse(ws: vscode.WorkspaceFolder, opts: { interactive: boolean; folders: boolean; placeHolder?: string }): Promise<WorldChoice | undefined> {
  const configured = configuredWorld(ws);
  if (configured) return configured;
  if (!opts.interactive) return { kind: 'textbook' };
  const any = (await findWorldSources(ws)).length > 0 || (opts.folders && builtWorlds(ws).some((w) => w.kind === 'folder' && isUserWorld(w.dir)));
  if (!any) return { kind: 'textbook' };
  return pickWorld(ws, opts);
}

/** A folder `agent-lab world --facts|--docs` wrote (it has a world.json), not a textbook world Build World wrote. */
function isUserWorld(dir: string): boolean {
  return fs.existsSync(path.join(dir, WORLD_MANIFEST));
}

/**
 * The built world folder agentLab.world names, for Train and Evaluate; undefined when the
 * setting is unset. Throws when it names a source that was never built.
 */
export function configuredWorldFolder(ws: vscode.WorkspaceFolder): string | undefined {
  const ref = configuredWorld(ws);
  if (!ref) return undefined;
  const dir = builtFolderOf(ws, ref);
  if (!dir) throw new Error(`${describeWorld(ref)} (agentLab.world) is not built yet: run "Agent Lab: Build World" first`);
  return dir;
}

/** Built worlds a user made (a world.json), newest first: what Train offers besides traces files. */
export function userWorldFolders(ws: vscode.WorkspaceFolder): string[] {
  return builtWorlds(ws)
    .map((w) => (w.kind === 'folder' ? w.dir : ''))
    .filter((d) => d !== '' && isUserWorld(d));
}
