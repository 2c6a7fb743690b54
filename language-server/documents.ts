// The server's view of a document: a `.transcript` (one transcript; one trailing newline
// ignored) or a dataset (JSONL, one transcript per row in `text`). Both come down to
// "units": a transcript with a map from its offsets to document positions. Analyses are
// cached per unit text (a dataset keeps the rows of its last pass), so an edit re-analyses
// only the row it touched.
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Position, Range } from 'vscode-languageserver';
import type { TextDocument } from 'vscode-languageserver-textdocument';
import type { DatasetRecognizedParams } from '../core/protocol/lsp';
import { RowScan, RowString, looksLikeTranscript, scanRow } from '../core/transcript/jsonRow';
import { TokenTable, countTokens, overLengthDiagnostic, tokenStartAt, tokenTable } from './analysis/tokens';
import { DiagnosticCode, Severity, TDiagnostic, TranscriptAnalysis, analyseTranscript } from './analysis/transcript';
import { looksConversational } from '../core/chatTemplate/row';
import { matchesAnyGlob } from './globs';
import { worldFileKind } from './worldFiles';
import type { ResolvedTokenizer } from './tokenizers';
import { CONFIG_FILE, DATA_DIR, EVAL_DIR } from '../core/protocol/folders';

/** `facts` and `tasks`: a user's world files (language-server/worldFiles.ts, docs/worlds.md). */
/** `chat`: a TRL conversational dataset, masked under a Hugging Face chat template (chatDataset.ts, issue 30). */
export type DocKind = 'transcript' | 'dataset' | 'chat' | 'facts' | 'tasks' | 'ignored';

/** A diagnostic in document terms; `fix` edits are document edits. */
export interface DocDiagnostic {
  range: Range;
  severity: Severity;
  code: DiagnosticCode;
  message: string;
  fix?: { title: string; edits: { range: Range; newText: string }[] };
}

/** One transcript inside a document. */
export interface Unit {
  /** Dataset row's line; null for a `.transcript`. */
  row: number | null;
  analysis: TranscriptAnalysis;
  /** Other string fields of a dataset row (task, kind, ...). */
  fields: Record<string, string>;
  tokenizer: ResolvedTokenizer;
  tokenCount(): number;
  tokens(): TokenTable;
  /** Where token `index` starts (from the table when it is built; else without building it). */
  tokenStart(index: number): number;
  /** The count and table caches (the server fills them in time slices for large transcripts). */
  readonly cache: UnitCache;
  toPosition(offset: number): Position;
  toRange(start: number, end: number): Range;
  /** The transcript offset at a document position, or null when the position is outside it. */
  toOffset(pos: Position): number | null;
  /** Text for a document edit that inserts transcript text (a dataset row escapes it). */
  escape(text: string): string;
}

export interface Settings {
  datasetGlobs: string[];
  tokenizerPath: string | null;
  workspaceRoots: string[];
  /** Globs of TRL conversational datasets (beside content sniffing of `.jsonl` files). */
  chatDatasetGlobs?: string[];
  /** The Hugging Face tokenizer folder whose chat template masks them; null: found beside the dataset. */
  chatTemplate?: string | null;
  /** TRL's max_length for the truncation finding; null: not checked. */
  chatMaxLength?: number | null;
}

export function fsPathOf(uri: string): string | null {
  if (!uri.startsWith('file:')) return null;
  try {
    return fileURLToPath(uri);
  } catch {
    return null;
  }
}

// ---- kind detection -------------------------------------------------------------------------

export interface KindVerdict {
  kind: DocKind;
  reason: DatasetRecognizedParams['reason'] | 'extension' | 'world' | 'none';
}

/** `firstLine`: the first non-blank line; `csvHead`: the first line that is neither blank nor a `#` comment (a fact table's header). */
export function detectKind(
  uri: string,
  languageId: string,
  firstLine: () => string,
  settings: Settings,
  exists: (p: string) => boolean,
  csvHead: () => string = firstLine,
): KindVerdict {
  const lower = uri.toLowerCase();
  if (languageId === 'agent-transcript' || lower.endsWith('.transcript')) return { kind: 'transcript', reason: 'extension' };
  if (languageId === 'agent-dataset') return { kind: 'dataset', reason: 'language' };
  const fsPath = fsPathOf(uri);
  const filePath = fsPath ?? safeDecode(uri.replace(/^[a-z-]+:\/*/i, '/'));
  if (settings.chatDatasetGlobs?.length && matchesAnyGlob(filePath, settings.chatDatasetGlobs, settings.workspaceRoots)) return { kind: 'chat', reason: 'glob' };
  if (matchesAnyGlob(filePath, settings.datasetGlobs, settings.workspaceRoots)) return { kind: 'dataset', reason: 'glob' };
  const isJsonl = lower.endsWith('.jsonl') || languageId === 'jsonl';
  if (lower.endsWith('.csv')) {
    const world = worldFileKind(filePath, csvHead());
    return world ? { kind: world, reason: 'world' } : { kind: 'ignored', reason: 'none' };
  }
  if (!isJsonl) return { kind: 'ignored', reason: 'none' };
  if (fsPath) {
    const dir = path.dirname(fsPath);
    const folder = path.basename(dir);
    if ((folder === DATA_DIR || folder === EVAL_DIR) && exists(path.join(path.dirname(dir), CONFIG_FILE))) {
      return { kind: 'dataset', reason: 'run-folder' };
    }
  }
  const world = worldFileKind(filePath, firstLine());
  if (world) return { kind: world, reason: 'world' };
  const scan = scanRow(firstLine());
  if (scan.text && looksLikeTranscript(scan.text.value)) return { kind: 'dataset', reason: 'content' };
  if (looksLikeChatRow(firstLine())) return { kind: 'chat', reason: 'content' };
  return { kind: 'ignored', reason: 'none' };
}

/** Whether a JSONL line is a TRL conversational row (content sniffing). */
export function looksLikeChatRow(line: string): boolean {
  try {
    return looksConversational(JSON.parse(line));
  } catch {
    return false;
  }
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** The first non-blank line of a text, without reading the rest. */
export function firstNonBlankLine(text: string): string {
  let at = 0;
  while (at < text.length) {
    let nl = text.indexOf('\n', at);
    if (nl === -1) nl = text.length;
    const line = text.slice(at, nl).replace(/\r$/, '');
    if (line.trim().length > 0) return line;
    at = nl + 1;
  }
  return '';
}

// ---- transcript documents ---------------------------------------------------------------------

/** The transcript of a `.transcript` file: one trailing newline (editors add it) is ignored. */
export function transcriptText(docText: string): string {
  if (docText.endsWith('\r\n')) return docText.slice(0, -2);
  if (docText.endsWith('\n')) return docText.slice(0, -1);
  return docText;
}

export function transcriptUnit(doc: TextDocument, analysis: TranscriptAnalysis, tokenizer: ResolvedTokenizer, cache: UnitCache = {}): Unit {
  const len = analysis.text.length;
  return makeUnit(
    null,
    analysis,
    {},
    tokenizer,
    {
      toPosition: (o) => doc.positionAt(o),
      toOffset: (p) => Math.min(doc.offsetAt(p), len),
      escape: (t) => t,
    },
    cache,
  );
}

export interface UnitCache {
  count?: number;
  table?: TokenTable;
}

interface Mapping {
  toPosition(offset: number): Position;
  toOffset(pos: Position): number | null;
  escape(text: string): string;
}

function makeUnit(
  row: number | null,
  analysis: TranscriptAnalysis,
  fields: Record<string, string>,
  tokenizer: ResolvedTokenizer,
  m: Mapping,
  cache: UnitCache = {},
): Unit {
  return {
    row,
    analysis,
    fields,
    tokenizer,
    cache,
    tokenCount: () => (cache.count ??= cache.table ? cache.table.ids.length : countTokens(analysis, tokenizer.tok)),
    tokens: () => (cache.table ??= tokenTable(analysis, tokenizer.tok)),
    tokenStart: (i) => (cache.table ? (cache.table.starts[i] ?? -1) : tokenStartAt(analysis, tokenizer.tok, i)),
    toPosition: m.toPosition,
    toRange: (s, e) => ({ start: m.toPosition(s), end: m.toPosition(e) }),
    toOffset: m.toOffset,
    escape: m.escape,
  };
}

/** Diagnostics of one transcript, with the tokenizer's (over-length). */
export function unitDiagnostics(unit: Unit): TDiagnostic[] {
  const a = unit.analysis;
  const over = overLengthDiagnostic(a, unit.tokenCount(), unit.tokenizer.maxLen, (i) => unit.tokenStart(i));
  if (!over) return a.diagnostics;
  // Into the sorted list (no re-sort of tens of thousands of diagnostics): after every x with (x.start, x.end) <= (over.start, over.end).
  const ds = a.diagnostics;
  let lo = 0;
  let hi = ds.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const x = ds[mid]!;
    if (x.start < over.start || (x.start === over.start && x.end <= over.end)) lo = mid + 1;
    else hi = mid;
  }
  return [...ds.slice(0, lo), over, ...ds.slice(lo)];
}

export function toDocDiagnostic(unit: Unit, d: TDiagnostic): DocDiagnostic {
  const out: DocDiagnostic = { range: unit.toRange(d.start, d.end), severity: d.severity, code: d.code, message: d.message };
  if (d.fix) {
    out.fix = {
      title: d.fix.title,
      edits: d.fix.edits.map((e) => ({ range: unit.toRange(e.start, e.end), newText: unit.escape(e.newText) })),
    };
  }
  return out;
}

// ---- dataset rows -----------------------------------------------------------------------------

/** A row's analysis, independent of its line number (rows move when lines are inserted). */
export interface RowResult {
  scan: RowScan;
  analysis: TranscriptAnalysis | null;
  /** Column-based diagnostics; `line` is filled in when the row is placed. */
  diagnostics: { startCol: number; endCol: number; d: TDiagnostic; fixCols?: { startCol: number; endCol: number; newText: string }[] }[];
  cache: UnitCache;
  /** Only the diagnostics were kept (a large dataset): re-analyse for anything else. */
  slim?: boolean;
}

const rowEscape = (t: string): string => JSON.stringify(t).slice(1, -1);

function rowMapping(line: number, s: RowString): Mapping {
  const map = s.map;
  const n = map.length - 1;
  return {
    toPosition: (o) => ({ line, character: map[Math.max(0, Math.min(o, n))]! }),
    toOffset: (p) => {
      if (p.line !== line || p.character < s.literalStart + 1 || p.character > map[n]!) return null;
      // The last unit whose source starts at or before the column.
      let lo = 0;
      let hi = n;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (map[mid]! <= p.character) lo = mid;
        else hi = mid - 1;
      }
      return lo;
    },
    escape: rowEscape,
  };
}

export function rowUnit(line: number, r: RowResult, tokenizer: ResolvedTokenizer): Unit | null {
  if (!r.analysis || !r.scan.text) return null;
  return makeUnit(line, r.analysis, r.scan.fields, tokenizer, rowMapping(line, r.scan.text), r.cache);
}

export function analyseRow(lineText: string, tokenizer: ResolvedTokenizer): RowResult {
  const scan = scanRow(lineText);
  const out: RowResult = { scan, analysis: null, diagnostics: [], cache: {} };
  const rowDiag = (start: number, end: number, code: DiagnosticCode, message: string): void => {
    out.diagnostics.push({ startCol: start, endCol: end, d: { start: 0, end: 0, severity: 'error', code, message } });
  };
  if (scan.error) rowDiag(scan.error.start, scan.error.end, 'row-not-json', scan.error.message);
  if (!scan.isObject && !scan.error) rowDiag(0, lineText.length, 'row-not-json', 'the row is JSON but not an object: expected {"text": "<transcript>", ...}');
  if (scan.textProblem && scan.isObject) rowDiag(scan.textProblem.start, scan.textProblem.end, 'row-no-text', scan.textProblem.message);
  if (!scan.text || scan.text.approximate) return out;
  const analysis = analyseTranscript(scan.text.value, tokenizer.grammar);
  out.analysis = analysis;
  // Column-based: map through the row's string with a placeholder line.
  const unit = makeUnit(0, analysis, scan.fields, tokenizer, rowMapping(0, scan.text), out.cache);
  for (const d of unitDiagnostics(unit)) {
    const r = unit.toRange(d.start, d.end);
    out.diagnostics.push({
      startCol: r.start.character,
      endCol: r.end.character,
      d,
      ...(d.fix
        ? {
            fixCols: d.fix.edits.map((e) => {
              const er = unit.toRange(e.start, e.end);
              return { startCol: er.start.character, endCol: er.end.character, newText: rowEscape(e.newText) };
            }),
          }
        : {}),
    });
  }
  return out;
}

export function placeRowDiagnostics(line: number, r: RowResult, out: DocDiagnostic[], limit: number): void {
  for (const { startCol, endCol, d, fixCols } of r.diagnostics) {
    if (out.length >= limit) return;
    const dd: DocDiagnostic = {
      range: { start: { line, character: startCol }, end: { line, character: endCol } },
      severity: d.severity,
      code: d.code,
      message: d.message,
    };
    if (d.fix && fixCols) {
      dd.fix = {
        title: d.fix.title,
        edits: fixCols.map((f) => ({ range: { start: { line, character: f.startCol }, end: { line, character: f.endCol } }, newText: f.newText })),
      };
    }
    out.push(dd);
  }
}

/** Calls `fn(lineNumber, lineText)` for each line (without '\r'), from line `from`. */
export function forEachLine(text: string, fn: (line: number, lineText: string, startOffset: number) => boolean | void, from = 0): void {
  let at = 0;
  let line = 0;
  // Skip to `from` without slicing.
  while (line < from && at <= text.length) {
    const nl = text.indexOf('\n', at);
    if (nl === -1) return;
    at = nl + 1;
    line++;
  }
  while (at <= text.length) {
    let nl = text.indexOf('\n', at);
    const last = nl === -1;
    if (last) nl = text.length;
    let end = nl;
    if (end > at && text.charCodeAt(end - 1) === 13) end--;
    if (fn(line, text.slice(at, end), at) === false) return;
    if (last) return;
    at = nl + 1;
    line++;
  }
}
