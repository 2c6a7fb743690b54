// The Agent Lab language server: transcripts and datasets, over any LSP connection. The
// entry points are language-server/server.ts (dist/server.js, which the extension starts)
// and `agent-lab lsp --stdio` (cli/main.ts); both call startServer. Never imports vscode.
import {
  CodeAction,
  CodeActionKind,
  CompletionItem,
  Connection,
  Diagnostic,
  DiagnosticSeverity,
  DidChangeConfigurationNotification,
  DocumentSymbol,
  FoldingRange,
  Hover,
  InitializeParams,
  InitializeResult,
  Position,
  Range,
  ResponseError,
  ErrorCodes,
  SemanticTokens,
  SemanticTokensBuilder,
  TextDocumentSyncKind,
  TextDocuments,
} from 'vscode-languageserver';
import { TextDocument } from 'vscode-languageserver-textdocument';
import * as fs from 'node:fs';
import {
  DatasetRecognizedNotification,
  DatasetRecognizedParams,
  LossMaskRequest,
  LossMaskResult,
  isLossMaskParams,
} from '../core/protocol/lsp';
import { SYSTEM_PROMPT } from '../core/env';
import type { Severity } from './analysis/transcript';
import { analyseTranscript } from './analysis/transcript';
import {
  DocDiagnostic,
  DocKind,
  KindVerdict,
  RowResult,
  Settings,
  Unit,
  analyseRow,
  detectKind,
  firstNonBlankLine,
  fsPathOf,
  placeRowDiagnostics,
  rowUnit,
  toDocDiagnostic,
  transcriptText,
  transcriptUnit,
  unitDiagnostics,
} from './documents';
import { completionsAt } from './features/completion';
import { hoverAt } from './features/hover';
import { lossMaskOf } from './features/lossMask';
import { LEGEND, pushUnitTokens } from './features/semanticTokens';
import { rowSymbol, unitFolds, unitSymbols } from './features/structure';
import { ResolvedTokenizer, TokenizerStore } from './tokenizers';

export interface ServerTuning {
  /** Debounce after an edit before diagnostics are recomputed (ms). Opening is immediate. */
  diagnosticsDelayMs: number;
  /** Documents larger than this (UTF-16 units) stream their diagnostics and degrade features. */
  largeDocumentChars: number;
  /** At most this many diagnostics per document. */
  maxDiagnostics: number;
  /** Work this long (ms) before yielding to the message loop during a dataset pass. */
  sliceMs: number;
  /** Rows beyond this get no symbols / full-document semantic tokens in a large document. */
  maxRowsForStructure: number;
}

export const DEFAULT_TUNING: ServerTuning = {
  diagnosticsDelayMs: 150,
  largeDocumentChars: 8 * 1024 * 1024,
  maxDiagnostics: 2000,
  sliceMs: 20,
  maxRowsForStructure: 3000,
};

export const DEFAULT_DATASET_GLOBS = ['**/*.traces.jsonl'];

interface DocState {
  kind: DocKind;
  reason: KindVerdict['reason'];
  /** Bumped on every change: a running pass whose generation is stale stops. */
  gen: number;
  timer: NodeJS.Timeout | null;
  fresh: boolean;
  rows: Map<string, RowResult>;
  rowsKey: string;
  transcript: { version: number; tokKey: string; unit: Unit } | null;
  published: boolean;
  recognizedSent: boolean;
  /** Time the last complete diagnostics pass took (ms) and the version it saw. */
  lastPass: { ms: number; version: number; rows: number } | null;
}

const SEVERITY: Record<Severity, DiagnosticSeverity> = {
  error: DiagnosticSeverity.Error,
  warning: DiagnosticSeverity.Warning,
  information: DiagnosticSeverity.Information,
  hint: DiagnosticSeverity.Hint,
};

function toLsp(d: DocDiagnostic): Diagnostic {
  return { range: d.range, severity: SEVERITY[d.severity], code: d.code, source: 'agent-lab', message: d.message };
}

const immediate = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Lets pending messages through. A request takes several event-loop turns from the pipe
 * to its response (vscode-jsonrpc's reader, queue and writer each hop through
 * setImmediate), so one turn between slices would make it wait a slice per hop; a few
 * empty turns let it finish within one slice.
 */
async function yieldNow(): Promise<void> {
  for (let i = 0; i < 4; i++) await immediate();
}

function lineText(doc: TextDocument, line: number): string {
  if (line < 0 || line >= doc.lineCount) return '';
  const t = doc.getText({ start: { line, character: 0 }, end: { line: line + 1, character: 0 } });
  return t.replace(/\r?\n$/, '');
}

const rangesTouch = (a: Range, b: Range): boolean =>
  !(cmp(a.end, b.start) < 0 || cmp(b.end, a.start) < 0);
const cmp = (p: Position, q: Position): number => p.line - q.line || p.character - q.character;

/**
 * For a process that is only the server: one failure in one document's handling is logged
 * (stderr) instead of ending the process and every open document's service with it.
 */
export function keepServing(): void {
  process.on('unhandledRejection', (e) => console.error(`[agent-lab] unhandled rejection: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`));
  process.on('uncaughtException', (e) => console.error(`[agent-lab] uncaught exception: ${e.stack ?? e.message}`));
}

/** A made-up trajectory in the wire format (the lab's system prompt, one step of each tool). */
function warmUp(tok: ResolvedTokenizer): void {
  const text =
    `<|system|>${SYSTEM_PROMPT}<|end|><|user|>What is the hidden size of Foo-7B, multiplied by 2? Use the corpus.<|end|>` +
    '<|assistant|>Thought: I need the hidden size of Foo-7B.\n<|tool_call|>{"tool": "search", "args": {"query": "Foo-7B hidden size", "k": 2}}<|end|>' +
    '<|tool_result|>[1] Design note 3: the hidden size of Foo-7B is 512.<|end|>' +
    '<|assistant|>Thought: Now I compute 512*2 with the calculator.\n<|tool_call|>{"tool": "calc", "args": {"expr": "512*2"}}<|end|>' +
    '<|tool_result|>1024<|end|><|assistant|>Thought: I have everything I need.\nAnswer: 1024<|end|>';
  for (let i = 0; i < 120; i++) {
    const r = analyseRow(JSON.stringify({ task: `warm-up ${i}`, text: text.replace('512*2', `512*${i}`) }), tok);
    const u = rowUnit(0, r, tok);
    if (u && i % 20 === 0) hoverAt(u, u.analysis.text.indexOf('Thought'));
  }
}

export interface ServerHandle {
  documents: TextDocuments<TextDocument>;
  /** For tests and the bench: the last complete pass of a document. */
  lastPass(uri: string): DocState['lastPass'];
}

export function startServer(connection: Connection, overrides: Partial<ServerTuning> = {}): ServerHandle {
  const tuning: ServerTuning = { ...DEFAULT_TUNING, ...overrides };
  const documents = new TextDocuments(TextDocument);
  const states = new Map<string, DocState>();
  const log = (line: string): void => connection.console.log(`[agent-lab] ${line}`);
  const store = new TokenizerStore(log);
  let settings: Settings = { datasetGlobs: [...DEFAULT_DATASET_GLOBS], tokenizerPath: null, workspaceRoots: [] };
  let hasConfiguration = false;

  const applySettings = (raw: unknown): void => {
    if (typeof raw !== 'object' || raw === null) return;
    const r = raw as Record<string, unknown>;
    const globs = r['datasetGlobs'];
    if (Array.isArray(globs) && globs.every((g) => typeof g === 'string')) settings.datasetGlobs = globs as string[];
    const tp = r['tokenizerPath'];
    if (typeof tp === 'string') settings.tokenizerPath = tp.trim() === '' ? null : tp;
    else if (tp === null) settings.tokenizerPath = null;
  };

  /** Never let one bad request take the server down: log it and answer `fallback`. */
  function safe<A extends unknown[], R>(what: string, fallback: R, fn: (...args: A) => R): (...args: A) => R {
    return (...args: A): R => {
      try {
        return fn(...args);
      } catch (e) {
        if (e instanceof ResponseError) throw e;
        log(`${what} failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
        return fallback;
      }
    };
  }

  connection.onInitialize((params: InitializeParams): InitializeResult => {
    const opts = (params.initializationOptions ?? {}) as Record<string, unknown>;
    applySettings(opts['settings']);
    for (const key of Object.keys(DEFAULT_TUNING) as (keyof ServerTuning)[]) {
      const v = opts[key];
      if (typeof v === 'number' && Number.isFinite(v) && v >= 0) tuning[key] = v;
    }
    const roots: string[] = [];
    for (const f of params.workspaceFolders ?? []) {
      const p = fsPathOf(f.uri);
      if (p) roots.push(p);
    }
    if (roots.length === 0 && params.rootUri) {
      const p = fsPathOf(params.rootUri);
      if (p) roots.push(p);
    }
    settings.workspaceRoots = roots;
    hasConfiguration = params.capabilities.workspace?.configuration === true;
    return {
      capabilities: {
        textDocumentSync: { openClose: true, change: TextDocumentSyncKind.Incremental },
        hoverProvider: true,
        completionProvider: { triggerCharacters: ['<', '|'], resolveProvider: false },
        codeActionProvider: { codeActionKinds: [CodeActionKind.QuickFix] },
        documentSymbolProvider: true,
        foldingRangeProvider: true,
        semanticTokensProvider: { legend: LEGEND, full: true, range: true },
      },
      serverInfo: { name: 'agent-lab-language-server' },
    };
  });

  connection.onInitialized(() => {
    if (hasConfiguration) {
      void connection.client.register(DidChangeConfigurationNotification.type, { section: 'agentLab' }).catch(() => undefined);
      void refreshConfiguration();
    }
    // Train the default tokenizer now rather than on the first keystroke, then run the
    // analysis a few times on a made-up transcript so the first real document meets
    // compiled code rather than the interpreter.
    setTimeout(() => {
      try {
        store.defaultTokenizer();
        warmUp(store.resolve(null, null));
      } catch (e) {
        log(`default tokenizer: ${(e as Error).message}`);
      }
    }, 0);
  });

  async function refreshConfiguration(): Promise<void> {
    if (!hasConfiguration) return;
    try {
      applySettings(await connection.workspace.getConfiguration('agentLab'));
    } catch {
      return;
    }
    for (const doc of documents.all()) reclassify(doc);
  }

  connection.onDidChangeConfiguration((change) => {
    const s = change.settings as Record<string, unknown> | undefined;
    if (s && typeof s['agentLab'] === 'object') applySettings(s['agentLab']);
    if (hasConfiguration) void refreshConfiguration();
    else for (const doc of documents.all()) reclassify(doc);
  });

  // ---- documents --------------------------------------------------------------------------

  function classify(doc: TextDocument): KindVerdict {
    return detectKind(doc.uri, doc.languageId, () => firstNonBlankLine(doc.getText().slice(0, 1 << 20)), settings, (p) => fs.existsSync(p));
  }

  function stateOf(doc: TextDocument): DocState {
    let s = states.get(doc.uri);
    if (!s) {
      const v = classify(doc);
      s = {
        kind: v.kind,
        reason: v.reason,
        gen: 0,
        timer: null,
        fresh: true,
        rows: new Map(),
        rowsKey: '',
        transcript: null,
        published: false,
        recognizedSent: false,
        lastPass: null,
      };
      states.set(doc.uri, s);
    }
    return s;
  }

  function reclassify(doc: TextDocument): void {
    const s = stateOf(doc);
    const v = classify(doc);
    if (v.kind !== s.kind) {
      s.kind = v.kind;
      s.reason = v.reason;
      s.rows = new Map();
      s.transcript = null;
    }
    schedule(doc, 0);
  }

  function tokenizerFor(uri: string): ResolvedTokenizer {
    return store.resolve(fsPathOf(uri), settings.tokenizerPath);
  }

  function schedule(doc: TextDocument, delay: number): void {
    const s = stateOf(doc);
    s.gen++;
    if (s.timer) clearTimeout(s.timer);
    const uri = doc.uri;
    s.timer = setTimeout(() => {
      s.timer = null;
      const current = documents.get(uri);
      if (current) void diagnose(current, s).catch((e: unknown) => log(`diagnostics failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`));
    }, delay);
  }

  documents.onDidOpen((e) => {
    stateOf(e.document);
  });

  documents.onDidChangeContent((e) => {
    const s = stateOf(e.document);
    // Opening is immediate; edits are debounced.
    const delay = s.fresh ? 0 : tuning.diagnosticsDelayMs;
    s.fresh = false;
    s.transcript = s.transcript && s.transcript.version === e.document.version ? s.transcript : null;
    schedule(e.document, delay);
  });

  documents.onDidClose((e) => {
    const s = states.get(e.document.uri);
    if (s) {
      s.gen++;
      if (s.timer) clearTimeout(s.timer);
    }
    states.delete(e.document.uri);
    connection.sendDiagnostics({ uri: e.document.uri, diagnostics: [] }).catch(() => undefined);
  });

  function publish(uri: string, s: DocState, diags: Diagnostic[], version: number): void {
    s.published = true;
    connection.sendDiagnostics({ uri, version, diagnostics: diags }).catch(() => undefined);
  }

  function transcriptUnitFor(doc: TextDocument, s: DocState): Unit {
    const tok = tokenizerFor(doc.uri);
    const t = s.transcript;
    if (t && t.version === doc.version && t.tokKey === tok.key) return t.unit;
    const text = transcriptText(doc.getText());
    const analysis = t && t.unit.analysis.text === text ? t.unit.analysis : analyseTranscript(text);
    const unit = transcriptUnit(doc, analysis, tok);
    s.transcript = { version: doc.version, tokKey: tok.key, unit };
    return unit;
  }

  function tokenizerNote(tok: ResolvedTokenizer): Diagnostic[] {
    if (!tok.problem) return [];
    return [
      {
        range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
        severity: DiagnosticSeverity.Warning,
        code: 'tokenizer',
        source: 'agent-lab',
        message: tok.problem,
      },
    ];
  }

  async function diagnose(doc: TextDocument, s: DocState): Promise<void> {
    const gen = s.gen;
    // A JSONL file may become a dataset as its first row is typed (content sniffing).
    if (s.kind === 'ignored' && doc.uri.toLowerCase().endsWith('.jsonl')) {
      const v = classify(doc);
      s.kind = v.kind;
      s.reason = v.reason;
    }
    if (s.kind === 'ignored') {
      if (s.published) publish(doc.uri, s, [], doc.version);
      return;
    }
    if (s.kind === 'dataset' && !s.recognizedSent && doc.languageId !== 'agent-dataset') {
      s.recognizedSent = true;
      const p: DatasetRecognizedParams = { uri: doc.uri, reason: s.reason as DatasetRecognizedParams['reason'] };
      connection.sendNotification(DatasetRecognizedNotification.method, p).catch(() => undefined);
    }
    const t0 = performance.now();
    if (s.kind === 'transcript') {
      const unit = transcriptUnitFor(doc, s);
      const diags = unitDiagnostics(unit).map((d) => toLsp(toDocDiagnostic(unit, d)));
      s.lastPass = { ms: performance.now() - t0, version: doc.version, rows: 1 };
      publish(doc.uri, s, [...tokenizerNote(unit.tokenizer), ...diags], doc.version);
      return;
    }
    await diagnoseDataset(doc, s, gen, t0);
  }

  async function diagnoseDataset(doc: TextDocument, s: DocState, gen: number, t0: number): Promise<void> {
    const tok = tokenizerFor(doc.uri);
    if (s.rowsKey !== tok.key) {
      s.rows = new Map();
      s.rowsKey = tok.key;
    }
    const text = doc.getText();
    const version = doc.version;
    const large = text.length > tuning.largeDocumentChars;
    const out: DocDiagnostic[] = [];
    const next = new Map<string, RowResult>();
    let total = 0;
    let rows = 0;
    let sliceStart = performance.now();
    // Large documents: the first progress note after ~200 ms, then one a second.
    let lastPublish = sliceStart - 800;
    const approxRows = large ? Math.max(1, Math.round(text.length / Math.max(1, text.indexOf('\n') + 1))) : 0;
    const mb = (text.length / (1024 * 1024)).toFixed(1);
    const note = (done: boolean): Diagnostic => ({
      range: { start: { line: 0, character: 0 }, end: { line: 0, character: Math.min(1, lineText(doc, 0).length) } },
      severity: DiagnosticSeverity.Information,
      code: 'large-document',
      source: 'agent-lab',
      message: done
        ? `large dataset (${mb} MB, ${rows.toLocaleString('en-US')} rows): checked in the background; ${total > out.length ? `showing the first ${out.length.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} problems` : `${total.toLocaleString('en-US')} problems`}; symbols and full-document highlighting cover the first ${tuning.maxRowsForStructure.toLocaleString('en-US')} rows (visible ranges are always highlighted)`
        : `large dataset (${mb} MB): checking rows in the background, ${rows.toLocaleString('en-US')} of about ${approxRows.toLocaleString('en-US')} so far`,
    });
    let at = 0;
    let line = 0;
    while (at <= text.length) {
      let nl = text.indexOf('\n', at);
      const last = nl === -1;
      if (last) nl = text.length;
      let end = nl;
      if (end > at && text.charCodeAt(end - 1) === 13) end--;
      const lt = text.slice(at, end);
      if (lt.trim().length > 0) {
        let r = s.rows.get(lt) ?? next.get(lt);
        if (!r) {
          r = analyseRow(lt, tok);
          if (large) r = slim(r);
        }
        next.set(lt, r);
        total += r.diagnostics.length;
        placeRowDiagnostics(line, r, out, tuning.maxDiagnostics);
        rows++;
        if ((rows & 7) === 0 && performance.now() - sliceStart > tuning.sliceMs) {
          await yieldNow();
          if (s.gen !== gen || documents.get(doc.uri) === undefined) return; // superseded or closed
          sliceStart = performance.now();
          if (large && sliceStart - lastPublish > 1000) {
            lastPublish = sliceStart;
            publish(doc.uri, s, [note(false), ...out.map(toLsp)], version);
          }
        }
      }
      if (last) break;
      at = nl + 1;
      line++;
    }
    s.rows = next;
    s.lastPass = { ms: performance.now() - t0, version, rows };
    const extra: Diagnostic[] = [...tokenizerNote(tok)];
    if (large) extra.push(note(true));
    else if (total > out.length) {
      extra.push({
        range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
        severity: DiagnosticSeverity.Information,
        code: 'large-document',
        source: 'agent-lab',
        message: `showing the first ${out.length} of ${total} problems`,
      });
    }
    publish(doc.uri, s, [...extra, ...out.map(toLsp)], version);
  }

  /** A large dataset keeps only each row's diagnostics; hovers re-analyse the row. */
  function slim(r: RowResult): RowResult {
    return { scan: { ...r.scan, text: null }, analysis: null, diagnostics: r.diagnostics, cache: {}, slim: true };
  }

  function rowFor(doc: TextDocument, s: DocState, line: number): { unit: Unit | null; r: RowResult; text: string } {
    const tok = tokenizerFor(doc.uri);
    if (s.rowsKey !== tok.key) {
      s.rows = new Map();
      s.rowsKey = tok.key;
    }
    const lt = lineText(doc, line);
    let r = s.rows.get(lt);
    if (!r || r.slim) {
      r = analyseRow(lt, tok);
      if (doc.getText().length <= tuning.largeDocumentChars) s.rows.set(lt, r);
    }
    return { unit: rowUnit(line, r, tok), r, text: lt };
  }

  /** The unit and transcript offset at a position, or null (outside any transcript). */
  function locate(uri: string, pos: Position): { unit: Unit; offset: number } | null {
    const doc = documents.get(uri);
    if (!doc) return null;
    const s = stateOf(doc);
    if (s.kind === 'transcript') {
      const unit = transcriptUnitFor(doc, s);
      return { unit, offset: unit.toOffset(pos) ?? 0 };
    }
    if (s.kind === 'dataset') {
      const { unit } = rowFor(doc, s, pos.line);
      if (!unit) return null;
      const offset = unit.toOffset(pos);
      return offset === null ? null : { unit, offset };
    }
    return null;
  }

  // ---- features -----------------------------------------------------------------------------

  connection.onHover(
    safe('hover', null as Hover | null, (p) => {
      const at = locate(p.textDocument.uri, p.position);
      return at ? hoverAt(at.unit, at.offset) : null;
    }),
  );

  connection.onCompletion(
    safe('completion', [] as CompletionItem[], (p) => {
      const at = locate(p.textDocument.uri, p.position);
      return at ? completionsAt(at.unit, at.offset) : [];
    }),
  );

  connection.onCodeAction(
    safe('codeAction', [] as CodeAction[], (p) => {
      const doc = documents.get(p.textDocument.uri);
      if (!doc) return [];
      const s = stateOf(doc);
      const diags: DocDiagnostic[] = [];
      if (s.kind === 'transcript') {
        const unit = transcriptUnitFor(doc, s);
        for (const d of unitDiagnostics(unit)) diags.push(toDocDiagnostic(unit, d));
      } else if (s.kind === 'dataset') {
        const last = Math.min(p.range.end.line, doc.lineCount - 1, p.range.start.line + 200);
        for (let line = p.range.start.line; line <= last; line++) {
          placeRowDiagnostics(line, rowFor(doc, s, line).r, diags, Infinity);
        }
      }
      const actions: CodeAction[] = [];
      for (const d of diags) {
        if (!d.fix || !rangesTouch(d.range, p.range)) continue;
        actions.push({
          title: d.fix.title,
          kind: CodeActionKind.QuickFix,
          diagnostics: [toLsp(d)],
          isPreferred: true,
          edit: { changes: { [doc.uri]: d.fix.edits } },
        });
      }
      return actions;
    }),
  );

  connection.onDocumentSymbol(
    safe('documentSymbol', [] as DocumentSymbol[], (p) => {
      const doc = documents.get(p.textDocument.uri);
      if (!doc) return [];
      const s = stateOf(doc);
      if (s.kind === 'transcript') return unitSymbols(transcriptUnitFor(doc, s));
      if (s.kind !== 'dataset') return [];
      const out: DocumentSymbol[] = [];
      const n = Math.min(doc.lineCount, tuning.maxRowsForStructure);
      for (let line = 0; line < n; line++) {
        const { unit, text } = rowFor(doc, s, line);
        if (unit) out.push(rowSymbol(unit, text.length));
      }
      return out;
    }),
  );

  connection.onFoldingRanges(
    safe('foldingRanges', [] as FoldingRange[], (p) => {
      const doc = documents.get(p.textDocument.uri);
      if (!doc) return [];
      const s = stateOf(doc);
      return s.kind === 'transcript' ? unitFolds(transcriptUnitFor(doc, s)) : [];
    }),
  );

  const semantic = (uri: string, range: Range | null, cancelled: () => boolean): SemanticTokens => {
    const b = new SemanticTokensBuilder();
    const doc = documents.get(uri);
    if (!doc) return b.build();
    const s = stateOf(doc);
    if (s.kind === 'transcript') {
      const unit = transcriptUnitFor(doc, s);
      if (range) pushUnitTokens(b, unit, unit.toOffset(range.start) ?? 0, (unit.toOffset(range.end) ?? unit.analysis.text.length) + 1);
      else pushUnitTokens(b, unit);
    } else if (s.kind === 'dataset') {
      const from = range ? range.start.line : 0;
      const to = range ? Math.min(range.end.line, doc.lineCount - 1) : Math.min(doc.lineCount, tuning.maxRowsForStructure) - 1;
      for (let line = from; line <= to; line++) {
        if ((line & 63) === 0 && cancelled()) break;
        const { unit } = rowFor(doc, s, line);
        if (unit) pushUnitTokens(b, unit);
      }
    }
    return b.build();
  };

  connection.languages.semanticTokens.on(
    safe('semanticTokens', { data: [] } as SemanticTokens, (p, token) => semantic(p.textDocument.uri, null, () => token.isCancellationRequested)),
  );
  connection.languages.semanticTokens.onRange(
    safe('semanticTokens/range', { data: [] } as SemanticTokens, (p, token) =>
      semantic(p.textDocument.uri, p.range, () => token.isCancellationRequested),
    ),
  );

  connection.onRequest(LossMaskRequest.method, (params: unknown): LossMaskResult => {
    if (!isLossMaskParams(params)) throw new ResponseError(ErrorCodes.InvalidParams, `${LossMaskRequest.method}: invalid params`);
    const doc = documents.get(params.textDocument.uri);
    if (!doc) throw new ResponseError(ErrorCodes.InvalidParams, `${LossMaskRequest.method}: ${params.textDocument.uri} is not open`);
    const s = stateOf(doc);
    if (s.kind === 'transcript') return lossMaskOf(doc.uri, transcriptUnitFor(doc, s));
    if (s.kind === 'dataset') {
      const line = params.row ?? params.position?.line;
      if (line === undefined) throw new ResponseError(ErrorCodes.InvalidParams, `${LossMaskRequest.method}: a dataset needs "row" or "position"`);
      const { unit } = rowFor(doc, s, line);
      if (!unit) throw new ResponseError(ErrorCodes.InvalidParams, `${LossMaskRequest.method}: line ${line} holds no transcript`);
      return lossMaskOf(doc.uri, unit);
    }
    throw new ResponseError(ErrorCodes.InvalidParams, `${LossMaskRequest.method}: ${doc.uri} is neither a transcript nor a dataset`);
  });

  documents.listen(connection);
  connection.listen();
  return { documents, lastPass: (uri) => states.get(uri)?.lastPass ?? null };
}
