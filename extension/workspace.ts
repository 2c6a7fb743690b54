// Where the extension's runs and worlds live (the workspace's runs folder). Goes through
// vscode.workspace.fs so remote workspaces work too.
import * as vscode from 'vscode';
import { setting } from './settings';
import { SETTING_DEFAULTS } from './settingsTable';

export const WORLD_PREFIX = 'world-';

/** The workspace folder to write into: the only one, or the one the user picks. */
export async function pickWorkspaceFolder(): Promise<vscode.WorkspaceFolder | undefined> {
  const folders = vscode.workspace.workspaceFolders ?? [];
  if (folders.length === 0) return undefined;
  if (folders.length === 1) return folders[0];
  return vscode.window.showWorkspaceFolderPick({ placeHolder: 'Workspace folder for Agent Lab runs' });
}

/** `<workspace>/<agentLab.runsFolder>`. */
export function runsFolderUri(folder: vscode.WorkspaceFolder): vscode.Uri {
  const configured = setting('runsFolder', folder.uri) || SETTING_DEFAULTS.runsFolder;
  const parts = configured.split(/[\\/]+/).filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new Error(`agentLab.runsFolder must stay inside the workspace (got "${configured}")`);
  return vscode.Uri.joinPath(folder.uri, ...parts);
}

/** Local time as YYYYMMDD-HHMMSS (sorts by time, safe in file names on every OS). */
export function timestamp(d = new Date()): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

export async function exists(uri: vscode.Uri): Promise<boolean> {
  try {
    await vscode.workspace.fs.stat(uri);
    return true;
  } catch {
    return false;
  }
}

/** One JSON object per line, "\n" after each (the same bytes as the CLI writes). */
/** The world folders under the runs folder, newest first (names sort by time). */
export async function listWorldFolders(runs: vscode.Uri): Promise<vscode.Uri[]> {
  let entries: [string, vscode.FileType][];
  try {
    entries = await vscode.workspace.fs.readDirectory(runs);
  } catch {
    return [];
  }
  return entries
    .filter(([name, type]) => type === vscode.FileType.Directory && name.startsWith(WORLD_PREFIX))
    .map(([name]) => name)
    .sort()
    .reverse()
    .map((name) => vscode.Uri.joinPath(runs, name));
}
