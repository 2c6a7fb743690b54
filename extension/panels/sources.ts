// Which documents the panels act on, and how a position in one maps to a transcript
// offset (a `.transcript` is its own transcript, minus one trailing newline; a dataset
// row's transcript is the decoded `text` string of its line).
import * as path from 'node:path';
import * as vscode from 'vscode';
import { decodedOffsetAt, rawColumnOf, stringValueRange } from '../../core/transcript/jsonText';

export function isTranscriptDoc(doc: vscode.TextDocument): boolean {
  return doc.languageId === 'agent-transcript' || doc.fileName.endsWith('.transcript');
}

export function isJsonlDoc(doc: vscode.TextDocument): boolean {
  return doc.languageId === 'agent-dataset' || doc.fileName.endsWith('.jsonl');
}

export function isAgentDoc(doc: vscode.TextDocument): boolean {
  return (doc.uri.scheme === 'file' || doc.uri.scheme === 'untitled') && (isTranscriptDoc(doc) || isJsonlDoc(doc));
}

export function label(uri: vscode.Uri, row?: number | null): string {
  const rel = vscode.workspace.asRelativePath(uri, true);
  return row === null || row === undefined ? rel : `${rel}, row on line ${row + 1}`;
}

/** The line of the dataset row at `line` (itself, or the nearest non-blank line above). */
export function rowLineAt(doc: vscode.TextDocument, line: number): number | null {
  for (let l = Math.min(line, doc.lineCount - 1); l >= 0; l--) if (doc.lineAt(l).text.trim() !== '') return l;
  return null;
}

/** A document's transcript at a position: the text and the offset of the position in it. */
export interface TranscriptAt {
  text: string;
  offset: number;
  /** Dataset row line, or null for a `.transcript`. */
  row: number | null;
}

export function transcriptAt(doc: vscode.TextDocument, pos: vscode.Position): TranscriptAt | null {
  if (isTranscriptDoc(doc)) {
    let text = doc.getText();
    if (text.endsWith('\r\n')) text = text.slice(0, -2);
    else if (text.endsWith('\n')) text = text.slice(0, -1);
    return { text, offset: Math.min(doc.offsetAt(pos), text.length), row: null };
  }
  const row = rowLineAt(doc, pos.line);
  if (row === null) return null;
  const line = doc.lineAt(row).text;
  const range = stringValueRange(line);
  if (!range) return null;
  let text: string;
  try {
    text = JSON.parse(`"${line.slice(range.start, range.end)}"`) as string;
  } catch {
    return null;
  }
  const column = row === pos.line ? pos.character : range.start;
  const offset = column <= range.start ? 0 : decodedOffsetAt(line, range, column);
  return { text, offset, row };
}

/** The document range of transcript offsets [start, end): direct for a transcript, through the JSON string for a row. */
export function rangeOf(doc: vscode.TextDocument, row: number | null, start: number, end: number): vscode.Range {
  if (row === null) return new vscode.Range(doc.positionAt(start), doc.positionAt(end));
  const line = doc.lineAt(Math.min(row, doc.lineCount - 1));
  const range = stringValueRange(line.text);
  if (!range) return line.range;
  return new vscode.Range(row, rawColumnOf(line.text, range, start), row, rawColumnOf(line.text, range, end));
}

/** The text of a file: the open document's (unsaved edits included) or the file's bytes. */
export async function readSourceText(uri: vscode.Uri): Promise<string> {
  const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
  if (open) return open.getText();
  return new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
}

export function isTranscriptPath(uri: vscode.Uri): boolean {
  return path.extname(uri.path) === '.transcript';
}
