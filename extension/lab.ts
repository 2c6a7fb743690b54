// The extension's one context object (as rust-analyzer's Ctx): what the features share, made
// once in activate() and handed to each. It owns VS Code's extension context, the typed
// settings (the one place they are read: extension/settings.ts), the language client once it
// runs, and the road every long job takes (the worker process, extension/workerProcess.ts).
import type * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import type { ToolJobSpec } from '../core/protocol/worker';
import { setting, settingsReader, updateSetting } from './settings';
import { type ToolJobOptions, type ToolJobOutcome, runToolJob } from './workerProcess';

/** The agentLab.* settings by typed key (extension/settingsTable.ts). */
export interface Config {
  /** A setting in a scope (a folder, a document; none: the window's), else its declared default. */
  get: typeof setting;
  /** A reader of the settings the option tables name by string, in one scope. */
  reader: typeof settingsReader;
  update: typeof updateSetting;
}

export class Lab {
  readonly config: Config = { get: setting, reader: settingsReader, update: updateSetting };
  /** The language client, once extension/languageClient.ts has started it; undefined after it stops. */
  client: LanguageClient | undefined;

  constructor(readonly extension: vscode.ExtensionContext) {}

  /** Disposed when the extension deactivates. */
  own(...disposables: vscode.Disposable[]): void {
    this.extension.subscriptions.push(...disposables);
  }

  /** A world, distill or ask job in the worker; the extension host runs none itself. */
  runToolJob<S extends ToolJobSpec>(spec: S, opts: ToolJobOptions): Promise<ToolJobOutcome<S['kind']>> {
    return runToolJob(this.extension, spec, opts);
  }
}
