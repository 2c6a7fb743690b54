// The diagnostics pass over a dataset (JSONL, one transcript per row), out of
// startServer's closure: line by line from the (chunked) document, rows analysed once per
// distinct text and tokenizer, time-sliced so requests get through, stopping as soon as an
// edit (a new generation) or a close supersedes it; a large document streams its progress.
import { Diagnostic, DiagnosticSeverity } from 'vscode-languageserver';
import { TextDocument } from 'vscode-languageserver-textdocument';
import type { Severity } from './analysis/transcript';
import { DocDiagnostic, RowResult, analyseRow, placeRowDiagnostics } from './documents';
import type { ServerTuning } from './tuning';
import { documentLength, lineText } from './textDocument';
import type { ResolvedTokenizer } from './tokenizers';

/** What the pass reads and leaves of a document's state (lspServer.ts's DocState has more). */
export interface DatasetState {
  /** Bumped on every change: a running pass whose generation is stale stops. */
  gen: number;
  rows: Map<string, RowResult>;
  rowsKey: string;
  /** Time the last complete diagnostics pass took (ms) and the version it saw. */
  lastPass: { ms: number; version: number; rows: number } | null;
}

export interface DatasetPassContext {
  tuning: Pick<ServerTuning, 'largeDocumentChars' | 'maxDiagnostics' | 'sliceMs' | 'maxRowsForStructure'>;
  tokenizer: ResolvedTokenizer;
  /** The tokenizer's own warning (a bad override), first in every publish; [] when none. */
  tokenizerNote: Diagnostic[];
  /** False once the document is closed. */
  isOpen: () => boolean;
  publish: (diagnostics: Diagnostic[], version: number) => void;
}

const SEVERITY: Record<Severity, DiagnosticSeverity> = {
  error: DiagnosticSeverity.Error,
  warning: DiagnosticSeverity.Warning,
  information: DiagnosticSeverity.Information,
  hint: DiagnosticSeverity.Hint,
};

export function toLsp(d: DocDiagnostic): Diagnostic {
  return { range: d.range, severity: SEVERITY[d.severity], code: d.code, source: 'agent-lab', message: d.message };
}

const immediate = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Lets pending messages through. A request takes several event-loop turns from the pipe
 * to its response (vscode-jsonrpc's reader, queue and writer each hop through
 * setImmediate), so one turn between slices would make it wait a slice per hop; a few
 * empty turns let it finish within one slice.
 */
export async function yieldNow(): Promise<void> {
  for (let i = 0; i < 4; i++) await immediate();
}

/** A large dataset keeps only each row's diagnostics; hovers re-analyse the row. */
export function slimRow(r: RowResult): RowResult {
  return { scan: { ...r.scan, text: null }, analysis: null, diagnostics: r.diagnostics, cache: {}, slim: true };
}

export async function runDatasetPass(doc: TextDocument, s: DatasetState, gen: number, t0: number, ctx: DatasetPassContext): Promise<void> {
  const { tuning, tokenizer: tok } = ctx;
  if (s.rowsKey !== tok.key) {
    s.rows = new Map();
    s.rowsKey = tok.key;
  }
  // Line by line from the (chunked) document: a 20 MB dataset is never joined into one
  // string for this pass. An edit bumps `gen`, checked after every pause, so the lines
  // read within one pass all belong to one version.
  const length = documentLength(doc);
  const lineCount = doc.lineCount;
  const version = doc.version;
  const large = length > tuning.largeDocumentChars;
  const out: DocDiagnostic[] = [];
  const next = new Map<string, RowResult>();
  let total = 0;
  let rows = 0;
  let sliceStart = performance.now();
  // Large documents: the first progress note after ~200 ms, then one a second.
  let lastPublish = sliceStart - 800;
  const approxRows = lineCount;
  const mb = (length / (1024 * 1024)).toFixed(1);
  const note = (done: boolean): Diagnostic => ({
    range: { start: { line: 0, character: 0 }, end: { line: 0, character: Math.min(1, lineText(doc, 0).length) } },
    severity: DiagnosticSeverity.Information,
    code: 'large-document',
    source: 'agent-lab',
    message: done
      ? `large dataset (${mb} MB, ${rows.toLocaleString('en-US')} rows): checked in the background; ${total > out.length ? `showing the first ${out.length.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} problems` : `${total.toLocaleString('en-US')} problems`}; symbols and full-document highlighting cover the first ${tuning.maxRowsForStructure.toLocaleString('en-US')} rows (visible ranges are always highlighted)`
      : `large dataset (${mb} MB): checking rows in the background, ${rows.toLocaleString('en-US')} of about ${approxRows.toLocaleString('en-US')} so far`,
  });
  for (let line = 0; line < lineCount; line++) {
    const lt = lineText(doc, line);
    if (lt.trim().length > 0) {
      let r = s.rows.get(lt) ?? next.get(lt);
      if (!r) {
        r = analyseRow(lt, tok);
        if (large) r = slimRow(r);
      }
      next.set(lt, r);
      total += r.diagnostics.length;
      placeRowDiagnostics(line, r, out, tuning.maxDiagnostics);
      rows++;
      if ((rows & 7) === 0 && performance.now() - sliceStart > tuning.sliceMs) {
        await yieldNow();
        if (s.gen !== gen || !ctx.isOpen()) return; // superseded or closed
        sliceStart = performance.now();
        if (large && sliceStart - lastPublish > 1000) {
          lastPublish = sliceStart;
          ctx.publish([note(false), ...out.map(toLsp)], version);
        }
      }
    }
  }
  s.rows = next;
  s.lastPass = { ms: performance.now() - t0, version, rows };
  const extra: Diagnostic[] = [...ctx.tokenizerNote];
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
  ctx.publish([...extra, ...out.map(toLsp)], version);
}
