// The extension's commands, registered in one place (extension/extension.ts): each area's
// activate function returns its handlers by declared id (extension/commandIds.ts), and the
// table of all of them must name every contributed id, once.
import * as vscode from 'vscode';
import type { CommandId } from './commandIds';
import type { Lab } from './lab';

export type CommandHandler = (...args: never[]) => unknown;
/** One area's commands: a misspelt id does not compile. */
export type CommandMap = { readonly [K in CommandId]?: CommandHandler };
/** Every contributed command with its handler: a missing id does not compile. */
export type CommandTable = { readonly [K in CommandId]: CommandHandler };

/**
 * Registers every command of the table; the areas it was made from are passed too, so an id
 * two areas both claim (the later one would silently win in the table) is refused at activation.
 */
export function registerCommands(lab: Lab, table: CommandTable, areas: readonly CommandMap[]): void {
  const claimed = areas.flatMap((area) => Object.keys(area));
  const twice = claimed.filter((id, i) => claimed.indexOf(id) !== i);
  if (twice.length) throw new Error(`commands claimed by two areas: ${twice.join(', ')}`);
  for (const [id, handler] of Object.entries(table) as [CommandId, CommandHandler][]) {
    lab.own(vscode.commands.registerCommand(id, handler as (...args: unknown[]) => unknown));
  }
}

