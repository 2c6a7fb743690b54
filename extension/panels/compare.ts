// Compare Runs ("Agent Lab: Compare Runs", issue 35): the workspace's runs as one results
// table (kind, recipe, steps, minutes, held-out and the fresh splits, held-out per shape),
// rebuilt when a job starts or ends; two runs' evaluations of one split side by side on
// request (the tasks one solves and the other does not). The table and the diff come from
// compareRuns.ts over the Runs view's reader (runFolders.ts readRun).
import * as path from 'node:path';
import * as vscode from 'vscode';
import { EVAL_DIR, evalRowsFile } from '../../core/protocol/folders';
import type { FromWebview } from '../../core/protocol/panels';
import { compareTable, readEvalRows, taskDiff } from '../compareRuns';
import { listRunFolders, readRun } from '../runFolders';
import { liveRunDirs, onRunsChanged, runOutcome } from '../training';
import { runsFolderUri } from '../workspace';
import { PanelController, PanelHost, createPanel } from './host';

/** The run folders of every workspace folder's runs folder, newest first. */
function workspaceRuns(): string[] {
  const out: string[] = [];
  for (const folder of vscode.workspace.workspaceFolders ?? []) {
    try {
      out.push(...listRunFolders(runsFolderUri(folder).fsPath));
    } catch {
      /* a runs folder setting that does not resolve: no runs there */
    }
  }
  return out;
}

export class ComparePanel implements PanelController {
  static current: ComparePanel | undefined;

  private readonly disposables: vscode.Disposable[] = [];
  /** The run folders in the table (a diff may only name these). */
  private dirs: string[] = [];

  private constructor(readonly host: PanelHost) {
    host.attach(this);
    this.disposables.push(onRunsChanged(() => this.postTable()));
  }

  static open(extensionUri: vscode.Uri): ComparePanel {
    const current = ComparePanel.current;
    if (current && !current.host.isDisposed) {
      current.host.panel.reveal(undefined, false);
      current.postTable();
      return current;
    }
    const panel = createPanel('compare', 'Compare Runs', extensionUri, false);
    return (ComparePanel.current = new ComparePanel(new PanelHost('compare', panel, extensionUri, 'Compare Runs')));
  }

  static revive(extensionUri: vscode.Uri, panel: vscode.WebviewPanel): ComparePanel {
    const live = ComparePanel.current;
    if (live && !live.host.isDisposed) {
      panel.dispose();
      return live;
    }
    return (ComparePanel.current = new ComparePanel(new PanelHost('compare', panel, extensionUri, panel.title)));
  }

  private postTable(): void {
    const live = liveRunDirs();
    this.dirs = workspaceRuns();
    const runs = this.dirs.map((d) => readRun(d, runOutcome(d), live.has(d)));
    // The table first: the webview clears its banner when a table arrives.
    this.host.post({ type: 'compare/table', table: compareTable(runs) });
    if (runs.length === 0) {
      this.host.post({ type: 'compare/status', message: 'No run in the runs folder yet. Train one (Agent Lab: Train (SFT)); evaluate it to fill the table.' });
    }
  }

  onReady(): void {
    this.postTable();
  }

  onMessage(msg: FromWebview): void {
    switch (msg.type) {
      case 'compare/refresh':
        this.postTable();
        return;
      case 'compare/askDiff': {
        // Only runs the table listed: a webview names nothing else on disk.
        if (!this.dirs.includes(msg.a) || !this.dirs.includes(msg.b)) return;
        const rowsOf = (dir: string) => readEvalRows(path.join(dir, EVAL_DIR, evalRowsFile(msg.split)));
        const a = rowsOf(msg.a);
        const b = rowsOf(msg.b);
        if (a.length === 0 || b.length === 0) {
          const missing = [a.length === 0 ? msg.a : null, b.length === 0 ? msg.b : null].filter((d): d is string => d !== null).map((d) => path.basename(d));
          this.host.post({ type: 'compare/status', message: `No per-task rows of ${msg.split} in ${missing.join(' and ')}: Evaluate it on ${msg.split} first.` });
          return;
        }
        this.host.post({ type: 'compare/diff', diff: taskDiff(msg.split, { name: path.basename(msg.a), rows: a }, { name: path.basename(msg.b), rows: b }) });
        return;
      }
      case 'compare/inspect':
        if (!this.dirs.includes(msg.run)) return;
        void vscode.commands.executeCommand('agentLab.inspectTrajectories', vscode.Uri.file(path.join(msg.run, EVAL_DIR, evalRowsFile(msg.split))));
        return;
      default:
        return;
    }
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
    if (ComparePanel.current === this) ComparePanel.current = undefined;
  }
}
