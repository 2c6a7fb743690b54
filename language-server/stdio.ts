// `agent-lab lsp --stdio`: the server on this process's stdin/stdout. Anything written to
// stdout besides the protocol would corrupt it, so console output goes to stderr.
import { ProposedFeatures, StreamMessageReader, StreamMessageWriter, createConnection } from 'vscode-languageserver/node';
import { keepServing, startServer } from './lspServer';
import type { ServerTuning } from './tuning';

/** Runs until the client sends `exit` (the library then ends the process) or stdin closes. */
export function runStdioServer(tuning: Partial<ServerTuning> = {}): Promise<void> {
  console.log = console.error;
  console.info = console.error;
  keepServing();
  const connection = createConnection(ProposedFeatures.all, new StreamMessageReader(process.stdin), new StreamMessageWriter(process.stdout));
  startServer(connection, tuning);
  return new Promise((resolve) => {
    connection.onExit(() => resolve());
    process.stdin.on('close', () => resolve());
  });
}
