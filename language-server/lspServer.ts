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
  LSPErrorCodes,
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
import type { TDiagnostic } from './analysis/transcript';
import { analyseTranscriptSteps } from './analysis/transcript';
import { countTokensSteps, tokenTableSteps } from './analysis/tokens';
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
  UnitCache,
  unitDiagnostics,
} from './documents';
import { completionsAt } from './features/completion';
import { hoverAt } from './features/hover';
import { lossMaskOf } from './features/lossMask';
import { LEGEND, pushUnitTokens } from './features/semanticTokens';
import { rowSymbol, unitFolds, unitSymbols } from './features/structure';
import { ResolvedTokenizer, TokenizerStore } from './tokenizers';
import { ChunkedTextDocuments, documentLength, lineText } from './textDocument';
import { DatasetState, runDatasetPass, toLsp, yieldNow } from './datasetPass';
import { DEFAULT_TUNING, type ServerTuning } from './tuning';
import { ChatOptions, ChatState, ChatTemplateStore, chatFileCounts, chatHover, chatLossMask, maskOfLine, promptCompletionFix, runChatPass } from './chatDataset';
import type { RowMask } from '../core/chatTemplate';
import { PatchedFolderFix, patchedFolderFix } from './chatTemplateFolder';
import { pathToFileURL } from 'node:url';
import { WorldAnalysis, WorldFileKind, analyseWorldFileSteps, firstWorldLine, worldHover } from './worldFiles';

export const DEFAULT_DATASET_GLOBS = ['**/*.traces.jsonl'];

/** A document's state: the dataset pass's part (datasetPass.ts), the chat pass's (chatDataset.ts) and the rest. */
interface DocState extends DatasetState, ChatState {
  kind: DocKind;
  reason: KindVerdict['reason'];
  timer: NodeJS.Timeout | null;
  fresh: boolean;
  transcript: { version: number; tokKey: string; unit: Unit } | null;
  /** The transcript analysis under way (time-sliced); requests for the same version join it. */
  job: { version: number; tokKey: string; promise: Promise<Unit | null> } | null;
  published: boolean;
  recognizedSent: boolean;
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
  // Chunked text: an edit of a 20 MB transcript copies kilobytes, not 20 MB (textDocument.ts).
  const documents = new TextDocuments(ChunkedTextDocuments);
  const states = new Map<string, DocState>();
  const log = (line: string): void => connection.console.log(`[agent-lab] ${line}`);
  const store = new TokenizerStore(log);
  const settings: Settings = { datasetGlobs: [...DEFAULT_DATASET_GLOBS], tokenizerPath: null, workspaceRoots: [], chatDatasetGlobs: [], chatTemplate: null, chatMaxLength: null };
  const chatTemplates = new ChatTemplateStore();
  /** Masks of rows hovered lately (a hover recomputes its row: the pass keeps only diagnostics). */
  const hoverMasks = new Map<string, { row: unknown; mask: RowMask | null; error: Diagnostic | null }>();
  let hasConfiguration = false;
  /** Whether the client applies CreateFile in a workspace edit (the patched-template quick fix needs it). */
  let canCreateFiles = false;
  /** Whether the client shows a disabled code action with its reason (else a fix that cannot apply is left out). */
  let showsDisabled = false;
  /** The patched-template quick fix per template (key and folder stamp): patching renders probes, code actions come often. */
  const patchFixes = new Map<string, PatchedFolderFix>();

  const applySettings = (raw: unknown): void => {
    if (typeof raw !== 'object' || raw === null) return;
    const r = raw as Record<string, unknown>;
    const globs = r['datasetGlobs'];
    if (Array.isArray(globs) && globs.every((g) => typeof g === 'string')) settings.datasetGlobs = globs as string[];
    const tp = r['tokenizerPath'];
    if (typeof tp === 'string') settings.tokenizerPath = tp.trim() === '' ? null : tp;
    else if (tp === null) settings.tokenizerPath = null;
    const cg = r['chatDatasetGlobs'];
    if (Array.isArray(cg) && cg.every((g) => typeof g === 'string')) settings.chatDatasetGlobs = cg as string[];
    const ct = r['chatTemplate'];
    if (typeof ct === 'string') settings.chatTemplate = ct.trim() === '' ? null : ct;
    else if (ct === null) settings.chatTemplate = null;
    const ml = r['chatMaxLength'];
    if (typeof ml === 'number' && Number.isInteger(ml) && ml > 0) settings.chatMaxLength = ml;
    else if (ml === null || ml === 0) settings.chatMaxLength = null;
  };

  /** Never let one bad request take the server down: log it and answer `fallback`. */
  function safe<A extends unknown[], R>(what: string, fallback: R, fn: (...args: A) => R | Promise<R>): (...args: A) => Promise<R> {
    return async (...args: A): Promise<R> => {
      try {
        return await fn(...args);
      } catch (e) {
        if (e instanceof ResponseError) throw e;
        log(`${what} failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
        return fallback;
      }
    };
  }

  /**
   * For request loops: `await slicer()` each turn; after `sliceMs` of work it gives the
   * message loop a turn, and says true when the request should stop (cancelled, superseded).
   */
  function slices(stop: () => boolean): () => Promise<boolean> {
    let sliceStart = performance.now();
    return async () => {
      if (performance.now() - sliceStart <= tuning.sliceMs) return false;
      await yieldNow();
      sliceStart = performance.now();
      return stop();
    };
  }

  /**
   * Runs a step generator in time slices of `sliceMs`, giving the message loop a turn
   * between them; returns null as soon as `stale()` says the work is no longer wanted.
   */
  async function sliced<T>(steps: Generator<void, T>, stale: () => boolean, sliceMs = tuning.sliceMs): Promise<T | null> {
    let sliceStart = performance.now();
    for (;;) {
      const r = steps.next();
      if (r.done) return r.value;
      if (performance.now() - sliceStart > sliceMs) {
        await yieldNow();
        if (stale()) return null;
        sliceStart = performance.now();
      }
    }
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
    const ws = params.capabilities.workspace?.workspaceEdit;
    canCreateFiles = ws?.documentChanges === true && (ws.resourceOperations ?? []).includes('create');
    showsDisabled = params.capabilities.textDocument?.codeAction?.disabledSupport === true;
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
    const head = () => doc.getText({ start: { line: 0, character: 0 }, end: doc.positionAt(1 << 20) });
    return detectKind(doc.uri, doc.languageId, () => firstNonBlankLine(head()), settings, (p) => fs.existsSync(p), () => firstWorldLine(head(), true));
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
        chatRows: new Map(),
        chatKey: '',
        transcript: null,
        job: null,
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
      s.chatRows = new Map();
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
    // A large document waits longer for the edits to pause (1 ms per 5,000 characters, at
    // most 2 s): re-analysing 20 MB per keystroke is work the next keystroke throws away.
    const delay = s.fresh ? 0 : Math.max(tuning.diagnosticsDelayMs, Math.min(2000, Math.round(documentLength(e.document) / 5000)));
    s.fresh = false;
    // The last analysis stays until the new one is done: if the text comes back to it
    // (an undo), it is reused; nothing else uses it for another version.
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

  /**
   * The transcript's unit for the document's current version. Analysis and token count run
   * in time slices (a 20 MB transcript takes seconds; other documents' requests get through
   * between slices); requests for the same version join the work under way; work for a
   * version that an edit (or a close) has superseded stops, and the promise gives null.
   */
  function transcriptUnitFor(doc: TextDocument, s: DocState, mayStart = true): Promise<Unit | null> {
    const tok = tokenizerFor(doc.uri);
    const t = s.transcript;
    if (t && t.version === doc.version && t.tokKey === tok.key) return Promise.resolve(t.unit);
    if (s.job && s.job.version === doc.version && s.job.tokKey === tok.key) return s.job.promise;
    if (!mayStart) return Promise.resolve(null);
    const version = doc.version;
    const uri = doc.uri;
    const stale = (): boolean => states.get(uri) !== s || documents.get(uri)?.version !== version;
    const promise = (async (): Promise<Unit | null> => {
      const text = transcriptText(doc.getText());
      // The same text under the same grammar (a run's world can change it): the analysis is reused.
      const same = t !== null && t.unit.analysis.text === text && t.unit.tokenizer.grammar === tok.grammar;
      // The old analysis is dropped before the new one is built (a 20 MB one is hundreds of MB).
      if (!same && s.transcript === t) s.transcript = null;
      const analysis = same ? t.unit.analysis : await sliced(analyseTranscriptSteps(text, tok.grammar), stale);
      if (analysis === null || stale()) return null;
      const cache: UnitCache = {};
      const count = await sliced(countTokensSteps(analysis, tok.tok), stale);
      if (count === null || stale()) return null;
      cache.count = count;
      const unit = transcriptUnit(doc, analysis, tok, cache);
      s.transcript = { version, tokKey: tok.key, unit };
      return unit;
    })();
    s.job = { version, tokKey: tok.key, promise };
    void promise.finally(() => {
      if (s.job?.promise === promise) s.job = null;
    });
    return promise;
  }

  /** The unit of the current version, waiting through superseded versions; null when the request is cancelled or the document closed. */
  async function currentTranscriptUnit(uri: string, cancelled: () => boolean = () => false): Promise<Unit | null> {
    for (let tries = 0; tries < 1000; tries++) {
      const doc = documents.get(uri);
      if (!doc || cancelled()) return null;
      const s = stateOf(doc);
      if (s.kind !== 'transcript') return null;
      const mayStart = documentLength(doc) <= tuning.largeTranscriptChars;
      const unit = await transcriptUnitFor(doc, s, mayStart);
      if (unit) return unit;
      if (!mayStart && !s.job) return null; // a large transcript being edited: its pass comes when the edits pause
    }
    return null;
  }

  /** The token table of a unit, built in time slices when it is large (hover needs it). */
  async function tableOf(unit: Unit, stale: () => boolean): Promise<boolean> {
    if (unit.cache.table) return true;
    const table = await sliced(tokenTableSteps(unit.analysis, unit.tokenizer.tok, unit.cache.count ?? 0), stale);
    if (!table) return false;
    unit.cache.table = table;
    return true;
  }

  /** At most maxDiagnostics, with a note saying how many were left out. */
  function capped(unit: Unit, all: TDiagnostic[]): Diagnostic[] {
    const max = Math.max(1, tuning.maxDiagnostics);
    if (all.length <= max) return all.map((d) => toLsp(toDocDiagnostic(unit, d)));
    const shown = all.slice(0, max - 1).map((d) => toLsp(toDocDiagnostic(unit, d)));
    return [
      {
        range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
        severity: DiagnosticSeverity.Information,
        code: 'large-document',
        source: 'agent-lab',
        message: `showing the first ${shown.length.toLocaleString('en-US')} of ${all.length.toLocaleString('en-US')} problems`,
      },
      ...shown,
    ];
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
    // A JSONL file may become a dataset (or a CSV a fact table) as its first row is typed (content sniffing).
    if (s.kind === 'ignored' && /\.(jsonl|csv)$/.test(doc.uri.toLowerCase())) {
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
    if (s.kind === 'facts' || s.kind === 'tasks') {
      const version = doc.version;
      const analysis = await worldAnalysisFor(doc, s.kind);
      // Capped by the analysis itself (a note counts the rows left out).
      if (analysis && s.gen === gen && documents.get(doc.uri)?.version === version) publish(doc.uri, s, analysis.diagnostics, version);
      return;
    }
    const t0 = performance.now();
    if (s.kind === 'chat') {
      await runChatPass(doc, s, gen, t0, {
        template: templateFor(doc.uri),
        opts: chatOptions(),
        maxDiagnostics: tuning.maxDiagnostics,
        // Quarter slices: a hover that comes mid-slice waits less, for a pass of seconds.
        sliceMs: tuning.sliceMs / 4,
        isOpen: () => documents.get(doc.uri) !== undefined,
        publish: (diagnostics, version) => publish(doc.uri, s, diagnostics, version),
      });
      return;
    }
    if (s.kind === 'transcript') {
      const version = doc.version;
      const unit = await transcriptUnitFor(doc, s);
      if (!unit || s.gen !== gen || documents.get(doc.uri)?.version !== version) return; // superseded or closed
      const diags = capped(unit, unitDiagnostics(unit));
      s.lastPass = { ms: performance.now() - t0, version, rows: 1 };
      publish(doc.uri, s, [...tokenizerNote(unit.tokenizer), ...diags], version);
      return;
    }
    await diagnoseDataset(doc, s, gen, t0);
  }

  function templateFor(uri: string): ReturnType<ChatTemplateStore['resolve']> {
    return chatTemplates.resolve(fsPathOf(uri), settings.chatTemplate ?? null, settings.workspaceRoots);
  }

  function chatOptions(): ChatOptions {
    return settings.chatMaxLength ? { maxLength: settings.chatMaxLength } : {};
  }

  /** A chat row's mask for a hover (the last 64 hovered rows are kept). */
  function chatRowMask(uri: string, line: string): { row: unknown; mask: RowMask | null; error: Diagnostic | null } | null {
    const t = templateFor(uri);
    if (!t.model) return { row: undefined, mask: null, error: { range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, message: t.problem ?? 'no chat template' } };
    const key = `${t.key}|${settings.chatMaxLength ?? ''}|${line}`;
    let hit = hoverMasks.get(key);
    if (hit) {
      hoverMasks.delete(key);
    } else {
      hit = maskOfLine(line, t.model, chatOptions());
      if (hoverMasks.size >= 64) hoverMasks.delete(hoverMasks.keys().next().value!);
    }
    hoverMasks.set(key, hit);
    return hit;
  }

  /** The mask panel's answer for a chat dataset's row: the row under its template, and the file's totals so far. */
  function chatLossMaskOf(doc: TextDocument, s: DocState, line: number | undefined): LossMaskResult {
    const method = LossMaskRequest.method;
    if (line === undefined) throw new ResponseError(ErrorCodes.InvalidParams, `${method}: a chat dataset needs "row" or "position"`);
    if (line >= doc.lineCount) throw new ResponseError(ErrorCodes.InvalidParams, `${method}: line ${line + 1} is past the end of the file`);
    const text = lineText(doc, line);
    if (text.trim() === '') throw new ResponseError(ErrorCodes.InvalidParams, `${method}: line ${line + 1} is blank`);
    const t = templateFor(doc.uri);
    if (!t.model || !t.dir) throw new ResponseError(ErrorCodes.InvalidParams, t.problem ?? 'no chat template');
    const m = chatRowMask(doc.uri, text);
    if (!m || m.error || !m.mask) throw new ResponseError(ErrorCodes.InvalidParams, `line ${line + 1}: ${m?.error?.message ?? 'no mask'}`);
    // The pass's results count only when they were made under this template and these options.
    const current = s.chatKey === `${t.key}|${JSON.stringify(chatOptions())}`;
    const lines = (function* () {
      for (let l = 0; l < doc.lineCount; l++) yield lineText(doc, l);
    })();
    const file = chatFileCounts(lines, current ? s.chatRows : new Map());
    return chatLossMask({ uri: doc.uri, line, lineText: text, row: m.row, mask: m.mask, model: t.model, templateDir: t.dir, maxLength: settings.chatMaxLength ?? null, file });
  }

  /** The patched-template fix of the row's template folder, computed once per template (and whenever its files change: the key holds their stamp). */
  function patchFixFor(uri: string): PatchedFolderFix | null {
    const t = templateFor(uri);
    if (!t.dir) return null;
    const key = `${t.key}|${t.dir}`;
    let fix = patchFixes.get(key);
    // Once applied, its folder exists: the next offer takes the next free name.
    if (!fix || (fix.folder !== undefined && fs.existsSync(fix.folder))) {
      fix = patchedFolderFix(t.dir, (p) => pathToFileURL(p).href, fs.existsSync, t.model ?? undefined);
      if (patchFixes.size >= 8) patchFixes.delete(patchFixes.keys().next().value!);
      patchFixes.set(key, fix);
    }
    return fix;
  }

  /** Quick fixes on a chat dataset's rows: an all-zero assistant mask offers the prompt-completion form and a patched template folder. */
  async function chatCodeActions(doc: TextDocument, range: Range, cancelled: () => boolean): Promise<CodeAction[]> {
    const actions: CodeAction[] = [];
    let patchOffered = false;
    const last = Math.min(range.end.line, doc.lineCount - 1, range.start.line + 200);
    const slicer = slices(cancelled);
    for (let line = range.start.line; line <= last; line++) {
      if (await slicer()) return [];
      const text = lineText(doc, line);
      if (text.trim() === '') continue;
      const m = chatRowMask(doc.uri, text);
      const zero = m?.mask?.findings.find((f) => f.code === 'all-zero-generation-mask');
      if (!zero) continue;
      const fix = promptCompletionFix(text);
      const whole: Range = { start: { line, character: 0 }, end: { line, character: text.length } };
      const diagnostics = [{ range: whole, severity: DiagnosticSeverity.Error, code: zero.code, source: 'agent-lab', message: zero.message }];
      if (fix) actions.push({ title: fix.title, kind: CodeActionKind.QuickFix, diagnostics, edit: { changes: { [doc.uri]: [{ range: whole, newText: fix.text }] } } });
      // One template for the whole file: one patched-folder action, whatever the rows selected.
      if (patchOffered) continue;
      patchOffered = true;
      const p = patchFixFor(doc.uri);
      if (!p) continue;
      const why = p.refused ?? (canCreateFiles ? undefined : 'this editor does not apply workspace edits that create files');
      if (why !== undefined) {
        if (showsDisabled) actions.push({ title: p.title, kind: CodeActionKind.QuickFix, diagnostics, disabled: { reason: why } });
      } else actions.push({ title: p.title, kind: CodeActionKind.QuickFix, diagnostics, edit: { documentChanges: p.documentChanges! } });
    }
    return actions;
  }

  async function diagnoseDataset(doc: TextDocument, s: DocState, gen: number, t0: number): Promise<void> {
    const tokenizer = tokenizerFor(doc.uri);
    await runDatasetPass(doc, s, gen, t0, {
      tuning,
      tokenizer,
      tokenizerNote: tokenizerNote(tokenizer),
      isOpen: () => documents.get(doc.uri) !== undefined,
      publish: (diagnostics, version) => publish(doc.uri, s, diagnostics, version),
    });
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
      if (documentLength(doc) <= tuning.largeDocumentChars) s.rows.set(lt, r);
    }
    return { unit: rowUnit(line, r, tok), r, text: lt };
  }

  /** The unit and transcript offset at a position, or null (outside any transcript). */
  async function locate(uri: string, pos: Position, cancelled: () => boolean, needTable: boolean): Promise<{ unit: Unit; offset: number } | null> {
    const doc = documents.get(uri);
    if (!doc) return null;
    const s = stateOf(doc);
    if (s.kind === 'transcript') {
      const unit = await currentTranscriptUnit(uri, cancelled);
      if (!unit) return null;
      const version = documents.get(uri)?.version;
      if (needTable && !(await tableOf(unit, () => cancelled() || documents.get(uri)?.version !== version))) return null;
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

  /** A world file's analysis for the document's current version (cached: hovers reuse it). */
  const worldAnalyses = new Map<string, { version: number; analysis: WorldAnalysis }>();
  /** The world analysis under way per document (time-sliced); requests for the same version join it. */
  const worldJobs = new Map<string, { version: number; kind: WorldFileKind; promise: Promise<WorldAnalysis | null> }>();
  /**
   * The analysis runs in time slices (core's checks on 30 MB take seconds: other
   * documents' requests get through between slices); a newer version, a close or another
   * kind stops it, and the promise gives null.
   */
  function worldAnalysisFor(doc: TextDocument, kind: WorldFileKind): Promise<WorldAnalysis | null> {
    const uri = doc.uri;
    const version = doc.version;
    const hit = worldAnalyses.get(uri);
    if (hit && hit.version === version && hit.analysis.kind === kind) return Promise.resolve(hit.analysis);
    const job = worldJobs.get(uri);
    if (job && job.version === version && job.kind === kind) return job.promise;
    // The old analysis goes before the new one is built (no use for two of a 30 MB table at once).
    worldAnalyses.delete(uri);
    const stale = (): boolean => documents.get(uri) !== doc || doc.version !== version || states.get(uri)?.kind !== kind;
    const file = fsPathOf(uri) ?? uri;
    const steps = analyseWorldFileSteps(doc.getText(), file, kind, { maxDiagnostics: tuning.maxDiagnostics, maxFactsForTasks: tuning.maxFactsForTasks });
    // Its steps are a few ms (a 16 K piece of core's checks): half slices halve the wait of a
    // request that comes mid-slice, for the seconds a large table takes, at no cost to speak of.
    const promise = sliced(steps, stale, tuning.sliceMs / 2).then((analysis) => {
      if (analysis === null || stale()) return null;
      worldAnalyses.set(uri, { version, analysis });
      return analysis;
    });
    worldJobs.set(uri, { version, kind, promise });
    void promise.finally(() => {
      if (worldJobs.get(uri)?.promise === promise) worldJobs.delete(uri);
    });
    return promise;
  }
  documents.onDidClose((e) => {
    worldAnalyses.delete(e.document.uri);
    worldJobs.delete(e.document.uri);
  });

  connection.onHover(
    safe('hover', null as Hover | null, async (p, token) => {
      const doc = documents.get(p.textDocument.uri);
      const s = doc ? stateOf(doc) : undefined;
      if (doc && s && (s.kind === 'facts' || s.kind === 'tasks')) {
        const analysis = await worldAnalysisFor(doc, s.kind);
        return analysis ? worldHover(analysis, p.position) : null;
      }
      if (doc && s && s.kind === 'chat') {
        if (p.position.line >= doc.lineCount) return null;
        const line = lineText(doc, p.position.line);
        if (line.trim() === '') return null;
        const m = chatRowMask(doc.uri, line);
        return m ? chatHover(line, p.position.character, m.mask, m.error, m.row) : null;
      }
      const at = await locate(p.textDocument.uri, p.position, () => token.isCancellationRequested, true);
      return at ? hoverAt(at.unit, at.offset) : null;
    }),
  );

  connection.onCompletion(
    safe('completion', [] as CompletionItem[], async (p, token) => {
      const at = await locate(p.textDocument.uri, p.position, () => token.isCancellationRequested, false);
      return at ? completionsAt(at.unit, at.offset) : [];
    }),
  );

  connection.onCodeAction(
    safe('codeAction', [] as CodeAction[], async (p, token) => {
      const doc = documents.get(p.textDocument.uri);
      if (!doc) return [];
      const s = stateOf(doc);
      const diags: DocDiagnostic[] = [];
      if (s.kind === 'chat') return chatCodeActions(doc, p.range, () => token.isCancellationRequested);
      if (s.kind === 'transcript') {
        const unit = await currentTranscriptUnit(doc.uri, () => token.isCancellationRequested);
        if (!unit) return [];
        // Only the diagnostics that touch the range (a large transcript has tens of thousands).
        const from = unit.toOffset(p.range.start) ?? 0;
        const to = unit.toOffset(p.range.end) ?? unit.analysis.text.length;
        for (const d of unitDiagnostics(unit)) if (d.end >= from && d.start <= to) diags.push(toDocDiagnostic(unit, d));
      } else if (s.kind === 'dataset') {
        const last = Math.min(p.range.end.line, doc.lineCount - 1, p.range.start.line + 200);
        const slicer = slices(() => token.isCancellationRequested);
        for (let line = p.range.start.line; line <= last; line++) {
          if (await slicer()) return [];
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
    safe('documentSymbol', [] as DocumentSymbol[], async (p, token) => {
      const doc = documents.get(p.textDocument.uri);
      if (!doc) return [];
      const s = stateOf(doc);
      if (s.kind === 'transcript') {
        const unit = await currentTranscriptUnit(doc.uri, () => token.isCancellationRequested);
        // A large transcript: the first maxRowsForStructure steps (as a large dataset's rows).
        return unit ? unitSymbols(unit).slice(0, tuning.maxRowsForStructure + 2) : [];
      }
      if (s.kind !== 'dataset') return [];
      const out: DocumentSymbol[] = [];
      const n = Math.min(doc.lineCount, tuning.maxRowsForStructure);
      const version = doc.version;
      // Rows not analysed yet (a pass under way) are analysed here: in slices, between which other requests get through.
      const slicer = slices(() => token.isCancellationRequested || documents.get(doc.uri)?.version !== version);
      for (let line = 0; line < n; line++) {
        if (await slicer()) return [];
        const { unit, text } = rowFor(doc, s, line);
        if (unit) out.push(rowSymbol(unit, text.length));
      }
      return out;
    }),
  );

  connection.onFoldingRanges(
    safe('foldingRanges', [] as FoldingRange[], async (p, token) => {
      const doc = documents.get(p.textDocument.uri);
      if (!doc) return [];
      const s = stateOf(doc);
      if (s.kind !== 'transcript') return [];
      const unit = await currentTranscriptUnit(doc.uri, () => token.isCancellationRequested);
      return unit ? unitFolds(unit).slice(0, 5 * tuning.maxRowsForStructure) : [];
    }),
  );

  const semantic = async (uri: string, range: Range | null, cancelled: () => boolean): Promise<SemanticTokens> => {
    const b = new SemanticTokensBuilder();
    const doc = documents.get(uri);
    if (!doc) return b.build();
    const s = stateOf(doc);
    if (s.kind === 'transcript') {
      const unit = await currentTranscriptUnit(uri, cancelled);
      if (!unit) return b.build();
      // A large transcript's full-document tokens cover its first largeDocumentChars / 8
      // characters (as a large dataset's first rows); range requests cover any visible range.
      const fullEnd = unit.analysis.text.length > tuning.largeDocumentChars / 8 ? Math.floor(tuning.largeDocumentChars / 8) : Infinity;
      if (range) pushUnitTokens(b, unit, unit.toOffset(range.start) ?? 0, (unit.toOffset(range.end) ?? unit.analysis.text.length) + 1);
      else pushUnitTokens(b, unit, 0, fullEnd);
    } else if (s.kind === 'dataset') {
      const from = range ? range.start.line : 0;
      const to = range ? Math.min(range.end.line, doc.lineCount - 1) : Math.min(doc.lineCount, tuning.maxRowsForStructure) - 1;
      const version = doc.version;
      const slicer = slices(() => cancelled() || documents.get(uri)?.version !== version);
      for (let line = from; line <= to; line++) {
        if (await slicer()) break;
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

  connection.onRequest(LossMaskRequest.method, async (params: unknown, token): Promise<LossMaskResult> => {
    if (!isLossMaskParams(params)) throw new ResponseError(ErrorCodes.InvalidParams, `${LossMaskRequest.method}: invalid params`);
    const doc = documents.get(params.textDocument.uri);
    if (!doc) throw new ResponseError(ErrorCodes.InvalidParams, `${LossMaskRequest.method}: ${params.textDocument.uri} is not open`);
    const s = stateOf(doc);
    if (s.kind === 'transcript') {
      const unit = await currentTranscriptUnit(doc.uri, () => token.isCancellationRequested);
      if (!unit || !(await tableOf(unit, () => token.isCancellationRequested))) throw new ResponseError(LSPErrorCodes.RequestCancelled, `${LossMaskRequest.method}: cancelled`);
      return lossMaskOf(doc.uri, unit);
    }
    if (s.kind === 'dataset') {
      const line = params.row ?? params.position?.line;
      if (line === undefined) throw new ResponseError(ErrorCodes.InvalidParams, `${LossMaskRequest.method}: a dataset needs "row" or "position"`);
      const { unit } = rowFor(doc, s, line);
      if (!unit) throw new ResponseError(ErrorCodes.InvalidParams, `${LossMaskRequest.method}: line ${line} holds no transcript`);
      return lossMaskOf(doc.uri, unit);
    }
    if (s.kind === 'chat') return chatLossMaskOf(doc, s, params.row ?? params.position?.line);
    throw new ResponseError(ErrorCodes.InvalidParams, `${LossMaskRequest.method}: ${doc.uri} is neither a transcript nor a dataset`);
  });

  documents.listen(connection);
  connection.listen();
  return { documents, lastPass: (uri) => states.get(uri)?.lastPass ?? null };
}
