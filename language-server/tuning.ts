// The language server's tuning (limits and time slices), apart from lspServer.ts so the passes it
// runs (datasetPass.ts) read it without importing the server that imports them.

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
  /**
   * Transcripts longer than this (UTF-16 units) are analysed only by the (debounced)
   * diagnostics pass: a request joins that work or uses its result, and gets nothing while
   * edits keep superseding it, rather than starting seconds of work the next edit discards.
   */
  largeTranscriptChars: number;
  /** A fact table with more facts lists no tasks in its hovers (building its world is one long block: 1.8 s at 10,000 facts). */
  maxFactsForTasks: number;
}

export const DEFAULT_TUNING: ServerTuning = {
  diagnosticsDelayMs: 150,
  largeDocumentChars: 8 * 1024 * 1024,
  maxDiagnostics: 2000,
  sliceMs: 20,
  maxRowsForStructure: 3000,
  largeTranscriptChars: 1024 * 1024,
  maxFactsForTasks: 5000,
};
