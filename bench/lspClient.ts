// A small LSP client over a child process's stdio, for the bench and the LSP tier's tests (it
// lives in bench/, never shipped, so the dev bench bundle holds no test code):
// spawns `agent-lab lsp --stdio`, speaks JSON-RPC through vscode-languageserver-protocol's
// connection, and records every publishDiagnostics.
import { ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  InitializeResult,
  ProtocolConnection,
  PublishDiagnosticsParams,
  StreamMessageReader,
  StreamMessageWriter,
  TextDocumentContentChangeEvent,
  createProtocolConnection,
} from 'vscode-languageserver-protocol/node';

/** The repository root (this file is bench/lspClient.ts, a bundle dist/<name>.js: one up; the climb tolerates more). */
export function repoRootFrom(dir: string): string {
  for (let d = dir, i = 0; i < 4; i++, d = path.dirname(d)) {
    try {
      fs.accessSync(path.join(d, 'bin', 'agent-lab'));
      return d;
    } catch {
      // keep climbing
    }
  }
  return path.resolve(dir, '..', '..');
}

/**
 * `node bin/agent-lab lsp --stdio` (the bundle), or with AGENT_LAB_LSP_FROM_SOURCE=1 the
 * sources through tsx (language-server/server.ts picks stdio from its argv).
 */
export function defaultCommand(root: string): string[] {
  if (process.env['AGENT_LAB_LSP_FROM_SOURCE'] === '1') {
    return [path.join(root, 'node_modules', '.bin', 'tsx'), path.join(root, 'language-server', 'server.ts'), '--stdio'];
  }
  return [process.execPath, path.join(root, 'bin', 'agent-lab'), 'lsp', '--stdio'];
}

export interface StartOptions {
  /** The server command; default `node bin/agent-lab lsp --stdio`. */
  command?: string[];
  initializationOptions?: unknown;
  rootUri?: string | null;
  /** Advertise workspace/configuration (the server then asks for `agentLab`). */
  configuration?: Record<string, unknown>;
  /** Advertise workspace edits with CreateFile (documentChanges + resourceOperations: create), as VS Code does. */
  createFiles?: boolean;
  env?: NodeJS.ProcessEnv;
}

type Waiter = { pred: (p: PublishDiagnosticsParams) => boolean; resolve: (p: PublishDiagnosticsParams) => void };

export class LspClient {
  readonly published = new Map<string, PublishDiagnosticsParams[]>();
  readonly notifications: { method: string; params: unknown }[] = [];
  stderr = '';
  exitCode: number | null = null;
  initializeResult!: InitializeResult;
  private waiters = new Map<string, Waiter[]>();
  private versions = new Map<string, number>();
  private configurationAnswered!: () => void;
  /** Resolves once the server has asked for the settings (workspace/configuration) and had them. */
  readonly configured = new Promise<void>((resolve) => (this.configurationAnswered = resolve));

  private constructor(
    readonly child: ChildProcessWithoutNullStreams,
    readonly conn: ProtocolConnection,
  ) {}

  static async start(opts: StartOptions = {}): Promise<LspClient> {
    const root = repoRootFrom(__dirname);
    const [cmd, ...args] = opts.command ?? defaultCommand(root);
    const child = spawn(cmd!, args, { cwd: root, stdio: ['pipe', 'pipe', 'pipe'], env: opts.env ?? process.env });
    const conn = createProtocolConnection(new StreamMessageReader(child.stdout), new StreamMessageWriter(child.stdin));
    const client = new LspClient(child, conn);
    child.stderr.on('data', (d: Buffer) => {
      client.stderr += d.toString('utf8');
    });
    child.on('exit', (code) => {
      client.exitCode = code ?? -1;
    });
    conn.onNotification('textDocument/publishDiagnostics', (p: PublishDiagnosticsParams) => {
      const list = client.published.get(p.uri) ?? [];
      list.push(p);
      client.published.set(p.uri, list);
      const ws = client.waiters.get(p.uri) ?? [];
      client.waiters.set(
        p.uri,
        ws.filter((w) => {
          if (!w.pred(p)) return true;
          w.resolve(p);
          return false;
        }),
      );
    });
    for (const method of ['agentLab/datasetRecognized', 'window/logMessage', 'window/showMessage']) {
      conn.onNotification(method, (params: unknown) => {
        client.notifications.push({ method, params });
      });
    }
    conn.onRequest('workspace/configuration', (p: { items: { section?: string }[] }) => {
      // Answered before the resolve runs: a document opened after `configured` reaches the
      // server after this answer on the same stream, so it is classified with the settings.
      setImmediate(() => client.configurationAnswered());
      return p.items.map((it) => (it.section === 'agentLab' ? (opts.configuration ?? null) : null));
    });
    conn.onRequest('client/registerCapability', () => null);
    conn.onRequest('window/workDoneProgress/create', () => null);
    conn.listen();
    client.initializeResult = await conn.sendRequest('initialize', {
      processId: process.pid,
      rootUri: opts.rootUri ?? null,
      capabilities: {
        workspace: { configuration: opts.configuration !== undefined, ...(opts.createFiles ? { workspaceEdit: { documentChanges: true, resourceOperations: ['create'] } } : {}) },
        textDocument: {
          hover: { contentFormat: ['markdown', 'plaintext'] },
          publishDiagnostics: { versionSupport: true },
          completion: { completionItem: { snippetSupport: true } },
          codeAction: { codeActionLiteralSupport: { codeActionKind: { valueSet: ['quickfix'] } } },
          documentSymbol: { hierarchicalDocumentSymbolSupport: true },
          semanticTokens: {
            requests: { full: true, range: true },
            tokenTypes: [],
            tokenModifiers: [],
            formats: ['relative'],
          },
        },
      },
      initializationOptions: opts.initializationOptions,
      workspaceFolders: null,
    });
    await conn.sendNotification('initialized', {});
    return client;
  }

  /** The next publishDiagnostics for `uri` that satisfies `pred` (already received ones count when `past`). */
  waitForDiagnostics(uri: string, pred: (p: PublishDiagnosticsParams) => boolean = () => true, timeoutMs = 20_000, past = false): Promise<PublishDiagnosticsParams> {
    if (past) {
      const hit = [...(this.published.get(uri) ?? [])].reverse().find(pred);
      if (hit) return Promise.resolve(hit);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`no diagnostics for ${uri} within ${timeoutMs} ms; server stderr:\n${this.stderr.slice(-2000)}`));
      }, timeoutMs);
      const list = this.waiters.get(uri) ?? [];
      list.push({
        pred,
        resolve: (p) => {
          clearTimeout(timer);
          resolve(p);
        },
      });
      this.waiters.set(uri, list);
    });
  }

  /** Opens a document and waits for its first diagnostics. */
  async open(uri: string, text: string, languageId = 'plaintext', wait = true): Promise<PublishDiagnosticsParams | null> {
    this.versions.set(uri, 1);
    const p = wait ? this.waitForDiagnostics(uri, (d) => d.version === undefined || d.version === 1) : null;
    await this.conn.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId, version: 1, text } });
    return p;
  }

  /** Sends one change; resolves with the diagnostics of the new version when `wait`. */
  async change(uri: string, changes: TextDocumentContentChangeEvent[], wait = true, timeoutMs = 20_000): Promise<PublishDiagnosticsParams | null> {
    const version = (this.versions.get(uri) ?? 1) + 1;
    this.versions.set(uri, version);
    const p = wait ? this.waitForDiagnostics(uri, (d) => d.version === version, timeoutMs) : null;
    await this.conn.sendNotification('textDocument/didChange', { textDocument: { uri, version }, contentChanges: changes });
    return p;
  }

  async close(uri: string): Promise<void> {
    await this.conn.sendNotification('textDocument/didClose', { textDocument: { uri } });
  }

  request<R>(method: string, params: unknown): Promise<R> {
    return this.conn.sendRequest(method, params) as Promise<R>;
  }

  /** shutdown + exit; resolves with the process's exit code. */
  async stop(): Promise<number> {
    try {
      await withTimeout(this.conn.sendRequest('shutdown'), 5000);
      await this.conn.sendNotification('exit');
    } catch {
      // a dead server: kill below
    }
    const code = await new Promise<number>((resolve) => {
      if (this.exitCode !== null) return resolve(this.exitCode);
      const t = setTimeout(() => {
        this.child.kill('SIGKILL');
        resolve(-9);
      }, 5000);
      this.child.on('exit', (c) => {
        clearTimeout(t);
        resolve(c ?? -1);
      });
    });
    this.conn.dispose();
    return code;
  }
}

export function withTimeout<T>(p: Promise<T>, ms: number, what = 'operation'): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

/** Latencies summarised as the LSP benches print them (ms, rounded to `decimals`). */
export interface LatencyStats {
  n: number;
  median: number;
  p95: number;
  max: number;
}
export function latencyStats(xs: readonly number[], decimals = 3): LatencyStats {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number): number => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))] ?? NaN;
  const scale = 10 ** decimals;
  const r = (x: number): number => Math.round(x * scale) / scale;
  return { n: s.length, median: r(q(0.5)), p95: r(q(0.95)), max: r(s[s.length - 1] ?? NaN) };
}
