// Agent Lab's extension entry point. Each area lives in its own module with an
// `activateXxx(lab)` that registers its disposables on the lab (extension/lab.ts) and returns
// its commands; they are registered here, from one table.
import type * as vscode from 'vscode';
import { activateChatTemplatePicker } from './chatTemplatePicker';
import { activateDistillCommands } from './distillCommands';
import { activateLanguageClient } from './languageClient';
import { activateLog, log } from './log';
import { activatePanels } from './panels';
import { activateRunsView } from './runsView';
import { activateStudentCommands } from './studentCommands';
import { activateTraining } from './training';
import { activateWorldCommands } from './worldCommands';
import { Lab } from './lab';
import { type CommandTable, registerCommands } from './commands';

export function activate(context: vscode.ExtensionContext): void {
  activateLog(context);
  const lab = new Lab(context);
  activateLanguageClient(lab);
  const areas = {
    world: activateWorldCommands(lab),
    distill: activateDistillCommands(lab),
    training: activateTraining(lab),
    panels: activatePanels(lab),
    student: activateStudentCommands(lab),
    runs: activateRunsView(lab),
    chatTemplate: activateChatTemplatePicker(),
  };
  // The one command table: a contributed id without a handler does not compile.
  const table: CommandTable = { ...areas.world, ...areas.distill, ...areas.training, ...areas.panels, ...areas.student, ...areas.runs, ...areas.chatTemplate };
  registerCommands(lab, table, Object.values(areas));
  log.info(`Agent Lab ${String(context.extension.packageJSON.version)} activated (${context.extension.extensionPath})`);
}

export function deactivate(): void {
  // Everything is disposed through context.subscriptions (Lab.own).
}
