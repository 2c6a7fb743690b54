// dist/server.js: the language server as the extension starts it (transport from argv:
// --node-ipc, --stdio or --socket=N, as vscode-languageclient passes it).
import { ProposedFeatures, createConnection } from 'vscode-languageserver/node';
import { keepServing, startServer } from './lspServer';

keepServing();
startServer(createConnection(ProposedFeatures.all));
