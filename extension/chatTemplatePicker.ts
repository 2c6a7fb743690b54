// "Agent Lab: Choose Chat Template…" (issue 30): a quick pick of the workspace's Hugging Face
// tokenizer folders that hold a chat template, plus Browse…; the choice is written to the
// workspace setting agentLab.chatTemplate, which the language server reads for TRL
// conversational datasets (language-server/chatDataset.ts). What counts as a folder and the
// rows' words are extension/chatTemplateFolders.ts's.
import * as vscode from 'vscode';
import { log, reportError } from './log';
import { CHAT_TEMPLATE_SETTING, TEMPLATE_FOLDER_GLOB, browseProblem, pickRows, settingFolder, settingValueFor, templateFoldersOf } from './chatTemplateFolders';
import { setting, updateSetting } from './settings';
import type { CommandMap } from './commands';

const MAX_FILES = 2000;

type Item = vscode.QuickPickItem & { dir?: string; browse?: true };

function firstRoot(): string | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

/** Asks for the template folder and saves it; the folder chosen, or undefined when dismissed. */
export async function chooseChatTemplate(): Promise<string | undefined> {
  const root = firstRoot();
  const files = await vscode.workspace.findFiles(TEMPLATE_FOLDER_GLOB, '{**/node_modules/**,**/.git/**}', MAX_FILES);
  const folders = templateFoldersOf(files.filter((u) => u.scheme === 'file').map((u) => u.fsPath));
  const current = settingFolder(root, setting(CHAT_TEMPLATE_SETTING));
  const items: Item[] = pickRows(folders, root, current).map((r) => ({ label: r.label, description: r.description, detail: r.detail, dir: r.dir }));
  items.push({ label: 'Browse…', description: 'a tokenizer folder elsewhere', browse: true });
  const pick = await vscode.window.showQuickPick(items, {
    placeHolder: folders.length
      ? 'Chat template for TRL datasets (saved to agentLab.chatTemplate)'
      : 'No tokenizer folder with a chat template in the workspace: Browse…',
    matchOnDescription: true,
    ignoreFocusOut: true,
  });
  if (!pick) return undefined;
  let dir = pick.dir;
  if (pick.browse) {
    const chosen = await vscode.window.showOpenDialog({
      canSelectFolders: true,
      canSelectFiles: false,
      canSelectMany: false,
      openLabel: 'Use This Chat Template',
    });
    if (!chosen?.[0]) return undefined;
    dir = chosen[0].fsPath;
    const problem = browseProblem(dir);
    if (problem) {
      void vscode.window.showErrorMessage(`Agent Lab: ${problem}.`);
      return undefined;
    }
  }
  if (!dir) return undefined;
  const value = settingValueFor(root, dir);
  await updateSetting(CHAT_TEMPLATE_SETTING, value, vscode.ConfigurationTarget.Workspace);
  log.info(`agentLab.chatTemplate = ${JSON.stringify(value)}`);
  void vscode.window.showInformationMessage(`Agent Lab: TRL datasets now render with the chat template in ${value}.`);
  return dir;
}

export function activateChatTemplatePicker() {
  return {
    'agentLab.chooseChatTemplate': async (): Promise<string | undefined> => {
      if (!vscode.workspace.workspaceFolders?.length) {
        void vscode.window.showWarningMessage('Agent Lab: open a folder first; the chat template is a workspace setting.');
        return undefined;
      }
      try {
        return await chooseChatTemplate();
      } catch (err) {
        reportError('choosing the chat template failed', err);
        return undefined;
      }
    },
  } satisfies CommandMap;
}
