// Reading a world folder (corpus.jsonl, train.jsonl, heldout.jsonl, as `agentLab.buildWorld`
// and `agent-lab world` write them) back into the core's shapes.
import * as vscode from 'vscode';
import type { Passage, Task } from '../core/types';
import { rowToPassage, rowToTask } from '../core/worldRows';
import { readJsonl } from './workspace';
import { CORPUS_FILE } from '../core/protocol/folders';

export type Split = 'train' | 'heldout';
export const SPLITS: readonly Split[] = ['train', 'heldout'];

export { rowToPassage, rowToTask } from '../core/worldRows';

export async function readCorpus(folder: vscode.Uri): Promise<Passage[]> {
  const uri = vscode.Uri.joinPath(folder, CORPUS_FILE);
  return (await readJsonl(uri)).map((r, i) => rowToPassage(r, `${uri.fsPath} row ${i + 1}`));
}

export async function readTasks(folder: vscode.Uri, split: Split): Promise<Task[]> {
  const uri = vscode.Uri.joinPath(folder, `${split}.jsonl`);
  return (await readJsonl(uri)).map((r, i) => rowToTask(r, `${uri.fsPath} row ${i + 1}`));
}
