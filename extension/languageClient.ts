// The language client: starts dist/server.js (the same server as `agent-lab lsp --stdio`)
// for transcripts, datasets, any JSONL file and any CSV file (the server decides by glob, run
// folder or content whether a JSONL file is a dataset, and says so; the client then switches
// the document's language to agent-dataset; by name or first row whether a CSV or JSONL file
// is a world's fact table or tasks file, language-server/worldFiles.ts). Settings:
// agentLab.datasetGlobs, agentLab.tokenizerPath, agentLab.trace.server.
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions, TransportKind } from 'vscode-languageclient/node';
import {
  DatasetRecognizedNotification,
  LossMaskParams,
  LossMaskRequest,
  LossMaskResult,
  isDatasetRecognizedParams,
  isLossMaskResult,
} from '../core/protocol/lsp';
import { log } from './log';
import type { Lab } from './lab';

/** agentLab/lossMask through the lab's running client; the result is validated. */
export async function requestLossMask(lab: Pick<Lab, 'client'>, params: LossMaskParams): Promise<LossMaskResult> {
  const client = lab.client;
  if (!client) throw new Error('the Agent Lab language server is not running');
  const result: unknown = await client.sendRequest(LossMaskRequest.method, params);
  if (!isLossMaskResult(result)) throw new Error(`${LossMaskRequest.method}: the server answered with an unexpected shape`);
  return result;
}

export function activateLanguageClient(lab: Lab): void {
  const module = lab.extension.asAbsolutePath('dist/server.js');
  const serverOptions: ServerOptions = {
    run: { module, transport: TransportKind.ipc },
    debug: { module, transport: TransportKind.ipc, options: { execArgv: ['--nolazy', '--inspect=6009'] } },
  };
  const settings = (): Record<string, unknown> => {
    return { datasetGlobs: lab.config.get('datasetGlobs'), tokenizerPath: lab.config.get('tokenizerPath') };
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { language: 'agent-transcript' },
      { language: 'agent-dataset' },
      { scheme: 'file', pattern: '**/*.jsonl' },
      // Fact tables (the server keeps a CSV only when it is one: docs/worlds.md, "In the editor").
      { scheme: 'file', pattern: '**/*.csv' },
      { scheme: 'untitled', language: 'agent-transcript' },
    ],
    initializationOptions: { settings: settings() },
    synchronize: { configurationSection: 'agentLab' },
    outputChannelName: 'Agent Lab Language Server',
  };
  const c = new LanguageClient('agentLab', 'Agent Lab Language Server', serverOptions, clientOptions);
  lab.client = c;
  lab.own({
    dispose: () => {
      lab.client = undefined;
      void c.stop().catch(() => undefined);
    },
  });
  c.start().then(
    () => {
      log.info('language server started');
      lab.own(
        c.onNotification(DatasetRecognizedNotification.method, async (p: unknown) => {
          if (!isDatasetRecognizedParams(p)) return;
          const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === p.uri);
          if (doc && doc.languageId !== 'agent-dataset') {
            log.info(`${doc.uri.fsPath}: a dataset (${p.reason}); switching its language to agent-dataset`);
            await vscode.languages.setTextDocumentLanguage(doc, 'agent-dataset');
          }
        }),
      );
    },
    (err: unknown) => log.error('the language server failed to start', err),
  );
}
