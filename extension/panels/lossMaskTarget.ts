// What the loss-mask panel shows for an editor: the transcript, or the dataset row under the cursor.
import * as vscode from 'vscode';
import { isTranscriptDoc, rowLineAt } from './sources';

export function maskTarget(editor: vscode.TextEditor): { uri: vscode.Uri; row: number | null } {
  const doc = editor.document;
  if (isTranscriptDoc(doc)) return { uri: doc.uri, row: null };
  return { uri: doc.uri, row: rowLineAt(doc, editor.selection.active.line) ?? 0 };
}
