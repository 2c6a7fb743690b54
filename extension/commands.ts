// Registering the extension's commands: by their declared ids only (extension/commandIds.ts).
import * as vscode from 'vscode';
import type { CommandId } from './commandIds';

/** Registers a contributed command (each area's activate function calls it for its own). */
export function registerCommand(id: CommandId, handler: (...args: never[]) => unknown): vscode.Disposable {
  return vscode.commands.registerCommand(id, handler as (...args: unknown[]) => unknown);
}
