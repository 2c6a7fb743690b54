// Agent Lab's extension entry point. Each feature lives in its own module with an
// `activateXxx(context)` that registers its disposables on the context.
import * as vscode from 'vscode';
import { activateChatTemplatePicker } from './chatTemplatePicker';
import { activateDistillCommands } from './distillCommands';
import { activateLanguageClient } from './languageClient';
import { activateLog, log } from './log';
import { activatePanels } from './panels';
import { activateRunsView } from './runsView';
import { activateStudentCommands } from './studentCommands';
import { activateTraining } from './training';
import { activateWorldCommands } from './worldCommands';

export function activate(context: vscode.ExtensionContext): void {
  activateLog(context);
  activateWorldCommands(context);
  activateDistillCommands(context);
  activateLanguageClient(context);
  activateTraining(context);
  activatePanels(context);
  activateStudentCommands(context);
  activateRunsView(context);
  activateChatTemplatePicker(context);
  log.info(`Agent Lab ${String(context.extension.packageJSON.version)} activated (${context.extension.extensionPath})`);
}

export function deactivate(): void {
  // Everything is disposed through context.subscriptions.
}
