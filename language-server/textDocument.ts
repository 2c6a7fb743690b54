// The server's text documents: the same positions, offsets and line counts as
// vscode-languageserver-textdocument's TextDocument (a test compares them edit by edit),
// but the text is kept in chunks of about 64 K characters. The library keeps one string
// and rebuilds it on every incremental edit: on a 20 MB transcript that is 20 MB of copying
// (and garbage) per keystroke, 80-430 ms in which the whole server answers nobody. Here an
// edit touches the chunks it changes and the line-start table; the whole text is joined
// only when someone asks for it (the diagnostics pass, after the edits pause), and kept
// until the next edit.
import type { Position, Range, TextDocumentContentChangeEvent, TextDocumentsConfiguration } from 'vscode-languageserver';
import type { TextDocument } from 'vscode-languageserver-textdocument';

const CHUNK = 64 * 1024;

const isEOL = (c: number): boolean => c === 13 || c === 10;

/** Line starts of `text` (offsets shifted by `base`); the first line's start is included when `atLineStart`. */
function lineStarts(text: string, atLineStart: boolean, base = 0): number[] {
  const out = atLineStart ? [base] : [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (isEOL(c)) {
      if (c === 13 && i + 1 < text.length && text.charCodeAt(i + 1) === 10) i++;
      out.push(base + i + 1);
    }
  }
  return out;
}

function split(text: string): string[] {
  if (text.length <= CHUNK) return [text];
  const out: string[] = [];
  for (let i = 0; i < text.length; i += CHUNK) out.push(text.slice(i, i + CHUNK));
  return out;
}

export class ChunkedTextDocument implements TextDocument {
  private chunks: string[];
  /** starts[i]: the offset of chunks[i]; starts[chunks.length]: the length. */
  private starts: number[] = [];
  private lineOffsets: number[] | undefined;
  private flat: string | null;

  constructor(
    readonly uri: string,
    readonly languageId: string,
    private _version: number,
    content: string,
  ) {
    this.chunks = split(content);
    this.flat = content;
    this.reindex();
  }

  get version(): number {
    return this._version;
  }

  /** The text's length (UTF-16 units) without joining it. */
  get length(): number {
    return this.starts[this.chunks.length]!;
  }

  get lineCount(): number {
    return this.getLineOffsets().length;
  }

  private reindex(): void {
    const starts = new Array<number>(this.chunks.length + 1);
    let at = 0;
    for (let i = 0; i < this.chunks.length; i++) {
      starts[i] = at;
      at += this.chunks[i]!.length;
    }
    starts[this.chunks.length] = at;
    this.starts = starts;
  }

  /** The chunk holding offset `o` (0 <= o < length). */
  private chunkAt(o: number): number {
    let lo = 0;
    let hi = this.chunks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid]! <= o) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  private charCodeAt(o: number): number {
    if (o < 0 || o >= this.length) return NaN;
    if (this.flat !== null) return this.flat.charCodeAt(o);
    const c = this.chunkAt(o);
    return this.chunks[c]!.charCodeAt(o - this.starts[c]!);
  }

  private substring(start: number, end: number): string {
    const s = Math.max(0, Math.min(start, end));
    const e = Math.min(this.length, Math.max(start, end));
    if (e <= s) return '';
    if (this.flat !== null) return this.flat.substring(s, e);
    const a = this.chunkAt(s);
    const b = this.chunkAt(e - 1);
    if (a === b) return this.chunks[a]!.substring(s - this.starts[a]!, e - this.starts[a]!);
    const parts = [this.chunks[a]!.substring(s - this.starts[a]!)];
    for (let i = a + 1; i < b; i++) parts.push(this.chunks[i]!);
    parts.push(this.chunks[b]!.substring(0, e - this.starts[b]!));
    return parts.join('');
  }

  getText(range?: Range): string {
    if (range) return this.substring(this.offsetAt(range.start), this.offsetAt(range.end));
    if (this.flat === null) this.flat = this.chunks.join('');
    return this.flat;
  }

  private getLineOffsets(): number[] {
    if (this.lineOffsets === undefined) {
      const out: number[] = [0];
      // A CR that ends a chunk and an LF that starts the next are one line break.
      let crAtChunkEnd = false;
      for (let c = 0; c < this.chunks.length; c++) {
        const text = this.chunks[c]!;
        const base = this.starts[c]!;
        for (let i = 0; i < text.length; i++) {
          const ch = text.charCodeAt(i);
          if (crAtChunkEnd) {
            crAtChunkEnd = false;
            if (ch === 10) {
              out[out.length - 1] = base + i + 1;
              continue;
            }
          }
          if (ch === 13) {
            if (i + 1 < text.length) {
              if (text.charCodeAt(i + 1) === 10) i++;
            } else crAtChunkEnd = true;
            out.push(base + i + 1);
          } else if (ch === 10) out.push(base + i + 1);
        }
      }
      this.lineOffsets = out;
    }
    return this.lineOffsets;
  }

  private ensureBeforeEOL(offset: number, lineOffset: number): number {
    while (offset > lineOffset && isEOL(this.charCodeAt(offset - 1))) offset--;
    return offset;
  }

  positionAt(offsetIn: number): Position {
    const offset = Math.max(Math.min(offsetIn, this.length), 0);
    const lineOffsets = this.getLineOffsets();
    let low = 0;
    let high = lineOffsets.length;
    if (high === 0) return { line: 0, character: offset };
    while (low < high) {
      const mid = Math.floor((low + high) / 2);
      if (lineOffsets[mid]! > offset) high = mid;
      else low = mid + 1;
    }
    const line = low - 1;
    const o = this.ensureBeforeEOL(offset, lineOffsets[line]!);
    return { line, character: o - lineOffsets[line]! };
  }

  offsetAt(position: Position): number {
    const lineOffsets = this.getLineOffsets();
    if (position.line >= lineOffsets.length) return this.length;
    if (position.line < 0) return 0;
    const lineOffset = lineOffsets[position.line]!;
    if (position.character <= 0) return lineOffset;
    const nextLineOffset = position.line + 1 < lineOffsets.length ? lineOffsets[position.line + 1]! : this.length;
    const offset = Math.min(lineOffset + position.character, nextLineOffset);
    return this.ensureBeforeEOL(offset, lineOffset);
  }

  getLineRange(line: number): Range {
    const lineOffsets = this.getLineOffsets();
    if (line >= lineOffsets.length) {
      const last = lineOffsets.length - 1;
      return { start: { line: last, character: 0 }, end: { line: last, character: this.length - lineOffsets[last]! } };
    }
    if (line < 0) return { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } };
    const start = lineOffsets[line]!;
    const next = line + 1 < lineOffsets.length ? lineOffsets[line + 1]! : this.length;
    return { start: { line, character: 0 }, end: { line, character: this.ensureBeforeEOL(next, start) - start } };
  }

  getEOLCharacters(line: number): string {
    const lineOffsets = this.getLineOffsets();
    if (line >= lineOffsets.length || line < 0) return '';
    const next = line + 1 < lineOffsets.length ? lineOffsets[line + 1]! : this.length;
    return this.substring(this.ensureBeforeEOL(next, lineOffsets[line]!), next);
  }

  /** Applies changes as the library's TextDocument.update does (same resulting text and line table). */
  update(changes: readonly TextDocumentContentChangeEvent[], version: number): void {
    for (const change of changes) {
      if ('range' in change && change.range !== undefined) {
        const r = change.range;
        const range = r.start.line > r.end.line || (r.start.line === r.end.line && r.start.character > r.end.character) ? { start: r.end, end: r.start } : r;
        const startOffset = this.offsetAt(range.start);
        const endOffset = this.offsetAt(range.end);
        // Lines from the clamped offsets: a range past the end (a confused client) cannot
        // corrupt the line table (the library's would get holes and NaN).
        const startLine = this.positionAt(startOffset).line;
        const endLine = this.positionAt(endOffset).line;
        this.replace(startOffset, endOffset, change.text);
        const insertedEnd = startOffset + change.text.length;
        const crlfAtStart = this.charCodeAt(startOffset - 1) === 13 && this.charCodeAt(startOffset) === 10;
        const crlfAtEnd = this.charCodeAt(insertedEnd - 1) === 13 && this.charCodeAt(insertedEnd) === 10;
        if (crlfAtStart || crlfAtEnd || this.lineOffsets === undefined) {
          this.lineOffsets = undefined;
          continue;
        }
        let lineOffsets = this.lineOffsets;
        const added = lineStarts(change.text, false, startOffset);
        if (endLine - startLine === added.length) {
          for (let i = 0; i < added.length; i++) lineOffsets[i + startLine + 1] = added[i]!;
        } else if (added.length < 10000) {
          lineOffsets.splice(startLine + 1, endLine - startLine, ...added);
        } else {
          this.lineOffsets = lineOffsets = lineOffsets.slice(0, startLine + 1).concat(added, lineOffsets.slice(endLine + 1));
        }
        const diff = change.text.length - (endOffset - startOffset);
        if (diff !== 0) for (let i = startLine + 1 + added.length; i < lineOffsets.length; i++) lineOffsets[i] = lineOffsets[i]! + diff;
      } else {
        this.chunks = split(change.text);
        this.flat = change.text;
        this.reindex();
        this.lineOffsets = undefined;
      }
    }
    this._version = version;
  }

  /** Replaces [start, end) with `text`, touching only the chunks involved. */
  private replace(start: number, end: number, text: string): void {
    this.flat = null;
    if (this.chunks.length === 0 || this.length === 0) {
      this.chunks = split(text);
      this.reindex();
      return;
    }
    const a = this.chunkAt(Math.min(start, this.length - 1));
    const b = end > start ? this.chunkAt(Math.min(end - 1, this.length - 1)) : a;
    const first = this.chunks[a]!;
    const last = this.chunks[b]!;
    const merged = first.substring(0, start - this.starts[a]!) + text + last.substring(end - this.starts[b]!);
    const pieces = merged.length > 2 * CHUNK ? split(merged) : merged.length === 0 && this.chunks.length > 1 ? [] : [merged];
    this.chunks.splice(a, b - a + 1, ...pieces);
    if (this.chunks.length === 0) this.chunks = [''];
    this.reindex();
  }
}

/** For `new TextDocuments(...)`: the chunked document in place of the library's. */
export const ChunkedTextDocuments: TextDocumentsConfiguration<ChunkedTextDocument> = {
  create: (uri, languageId, version, content) => new ChunkedTextDocument(uri, languageId, version, content),
  update: (document, changes, version) => {
    document.update(changes, version);
    return document;
  },
};

/** A document's length without joining its text. */
export function documentLength(doc: TextDocument): number {
  return doc instanceof ChunkedTextDocument ? doc.length : doc.getText().length;
}

/** The text of one line without its line break ('' past the end). */
export function lineText(doc: TextDocument, line: number): string {
  if (line < 0 || line >= doc.lineCount) return '';
  const t = doc.getText({ start: { line, character: 0 }, end: { line: line + 1, character: 0 } });
  const n = t.length;
  if (n > 0 && t.charCodeAt(n - 1) === 10) return t.slice(0, n > 1 && t.charCodeAt(n - 2) === 13 ? n - 2 : n - 1);
  if (n > 0 && t.charCodeAt(n - 1) === 13) return t.slice(0, n - 1);
  return t;
}
