// Trajectory Inspector ("Agent Lab: Inspect Trajectories"): a `.transcript`, a dataset or
// a run's eval rows as a filterable list (10,000 rows stay smooth: summaries only; the
// webview virtualises) with step cards per trajectory; a card reveals its source in the
// editor. The file is re-read when it changes (an eval job appending rows, an edit).
import * as path from 'node:path';
import * as vscode from 'vscode';
import { FromWebview, InspectorFilter, InspectorState, SourceKind } from '../../core/protocol/panels';
import { log } from '../log';
import { PanelController, PanelHost, createPanel, revealRange } from './host';
import { isAgentDoc, isTranscriptPath, label, rangeOf, readSourceText } from './sources';
import { ParsedSource, detailOf, parseSource } from '../../core/transcript/trajectories';

export class InspectorPanel implements PanelController {
  static current: InspectorPanel | undefined;

  private parsed: ParsedSource | null = null;
  private error: string | null = null;
  private loading: Promise<void> | null = null;
  private readonly disposables: vscode.Disposable[] = [];
  private reloadTimer: NodeJS.Timeout | undefined;
  private watcher: vscode.FileSystemWatcher | undefined;
  /** Load time of the last parse (ms), for the log and the benchmark. */
  lastParseMs = 0;

  private constructor(
    readonly host: PanelHost,
    private uri: vscode.Uri,
  ) {
    host.attach(this);
    this.disposables.push(
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (e.document.uri.toString() === this.uri.toString() && e.contentChanges.length > 0) this.scheduleReload();
      }),
    );
    this.watch();
    this.reload();
  }

  /** Opens (or reveals and re-targets) the inspector on `uri`. */
  static open(extensionUri: vscode.Uri, uri: vscode.Uri, outcome?: InspectorFilter['outcome']): InspectorPanel {
    const title = `Trajectories: ${path.basename(uri.path)}`;
    const current = InspectorPanel.current;
    if (current && !current.host.isDisposed) {
      current.host.panel.title = title;
      current.host.panel.reveal(undefined, false);
      current.openOutcome = outcome;
      if (current.uri.toString() !== uri.toString()) current.retarget(uri);
      else if (outcome) current.postLoad(); // the same rows again, only to apply the asked filter
      return current;
    }
    const panel = createPanel('inspector', title, extensionUri);
    const made = new InspectorPanel(new PanelHost('inspector', panel, extensionUri, title), uri);
    made.openOutcome = outcome;
    return (InspectorPanel.current = made);
  }

  /** The outcome filter the next load opens with (once), as the caller asked. */
  private openOutcome: InspectorFilter['outcome'] | undefined;

  /** The serializer's revival after a reload: the webview keeps its filter, selection and scroll. */
  static revive(extensionUri: vscode.Uri, panel: vscode.WebviewPanel, state: InspectorState): InspectorPanel {
    // A live panel of this kind already exists (background tabs are revived lazily, when shown): keep it, close the stale tab.
    const live = InspectorPanel.current;
    if (live && !live.host.isDisposed) {
      panel.dispose();
      live.host.panel.reveal(undefined, true);
      return live;
    }
    const host = new PanelHost('inspector', panel, extensionUri, panel.title);
    return (InspectorPanel.current = new InspectorPanel(host, vscode.Uri.parse(state.source.uri)));
  }

  private retarget(uri: vscode.Uri): void {
    this.uri = uri;
    this.parsed = null;
    this.watch();
    this.reload();
  }

  private watch(): void {
    this.watcher?.dispose();
    if (this.uri.scheme !== 'file') return;
    const dir = vscode.Uri.file(path.dirname(this.uri.fsPath));
    this.watcher = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(dir, path.basename(this.uri.fsPath)));
    this.watcher.onDidChange(() => this.scheduleReload());
    this.watcher.onDidCreate(() => this.scheduleReload());
  }

  private scheduleReload(): void {
    if (this.reloadTimer) clearTimeout(this.reloadTimer);
    this.reloadTimer = setTimeout(() => this.reload(), 300);
  }

  private reload(): void {
    const uri = this.uri;
    this.loading = (async () => {
      try {
        const text = await readSourceText(uri);
        const t0 = Date.now();
        const parsed = parseSource(text, isTranscriptPath(uri));
        this.lastParseMs = Date.now() - t0;
        if (uri.toString() !== this.uri.toString()) return;
        this.parsed = parsed;
        this.error = null;
        log.info(`inspector: ${parsed.rows.length} trajectories from ${label(uri)} (${parsed.kind}) parsed in ${this.lastParseMs} ms`);
      } catch (err) {
        this.parsed = null;
        this.error = `cannot read ${label(uri)}: ${err instanceof Error ? err.message : String(err)}`;
      }
      this.postLoad();
    })();
  }

  private postLoad(): void {
    if (this.error) {
      this.host.post({ type: 'inspector/error', message: this.error });
      return;
    }
    if (!this.parsed) return;
    const kind: SourceKind = this.parsed.kind;
    const posted = this.host.post({
      type: 'inspector/load',
      source: { uri: this.uri.toString(), label: label(this.uri), kind },
      rows: this.parsed.rows.map((r) => r.summary),
      problems: this.parsed.problems.slice(0, 50),
      ...(this.openOutcome ? { outcome: this.openOutcome } : {}),
    });
    // Asked once: kept until a load reaches the webview (a new panel says `ready` after the parse).
    if (posted) this.openOutcome = undefined;
  }

  onReady(): void {
    // The parse may still be running: it posts when done (the webview is ready by then).
    if (this.parsed || this.error) this.postLoad();
  }

  async onMessage(msg: FromWebview): Promise<void> {
    await this.loading;
    const rows = this.parsed?.rows ?? [];
    switch (msg.type) {
      case 'inspector/select': {
        const row = rows[msg.index];
        if (!row) return; // a stale index (the file changed): the next load fixes the view
        this.host.post({ type: 'inspector/detail', detail: detailOf(row) });
        return;
      }
      case 'inspector/reveal': {
        const row = rows[msg.index];
        if (!row) return;
        const detail = detailOf(row);
        const step = msg.step === 0 ? null : detail.steps[msg.step - 1];
        if (msg.step !== 0 && !step) return;
        const doc = await vscode.workspace.openTextDocument(this.uri);
        const isRow = this.parsed?.kind !== 'transcript';
        const rowLine = isRow ? row.summary.line : null;
        const range = step ? rangeOf(doc, rowLine, step.start, step.end) : rangeOf(doc, rowLine, 0, 0);
        // The cursor goes to the start of the step (the status bar shows its line); the step is selected.
        const editor = await revealRange(this.uri, range, this.host.panel.viewColumn);
        editor.selection = new vscode.Selection(range.end, range.start);
        return;
      }
      default:
        return;
    }
  }

  dispose(): void {
    if (this.reloadTimer) clearTimeout(this.reloadTimer);
    this.watcher?.dispose();
    for (const d of this.disposables) d.dispose();
    if (InspectorPanel.current === this) InspectorPanel.current = undefined;
  }
}

/** The outcome filter a caller asks the inspector to open with: `{uri, outcome: 'failed'}`. */
export function requestedOutcome(arg: unknown): InspectorFilter['outcome'] | undefined {
  const o = typeof arg === 'object' && arg !== null ? (arg as { outcome?: unknown }).outcome : undefined;
  return o === 'failed' || o === 'solved' || o === 'all' ? o : undefined;
}

/** The file the command acts on: its argument, the active editor's, or one the user picks. */
export async function pickTrajectorySource(arg: unknown): Promise<vscode.Uri | undefined> {
  if (arg instanceof vscode.Uri) return arg;
  if (typeof arg === 'object' && arg !== null && typeof (arg as { uri?: unknown }).uri === 'string') {
    return vscode.Uri.parse((arg as { uri: string }).uri);
  }
  const editor = vscode.window.activeTextEditor ?? vscode.window.visibleTextEditors.find((e) => isAgentDoc(e.document));
  if (editor && isAgentDoc(editor.document)) return editor.document.uri;
  const found = await vscode.workspace.findFiles('**/*.{transcript,jsonl}', '**/node_modules/**', 2000);
  const items = found
    .filter((u) => u.path.endsWith('.transcript') || /\.traces\.jsonl$/.test(u.path) || /\/(eval|data)\/[^/]+\.jsonl$/.test(u.path))
    .map((u) => ({ label: vscode.workspace.asRelativePath(u), description: u.path.endsWith('.transcript') ? 'transcript' : 'dataset', uri: u }))
    .sort((a, b) => a.label.localeCompare(b.label));
  if (items.length === 0) {
    void vscode.window.showInformationMessage('Agent Lab: no transcripts or datasets in the workspace; open one, or distill some first.');
    return undefined;
  }
  const pick = await vscode.window.showQuickPick(items, { placeHolder: 'Trajectories to inspect (a transcript, a dataset or eval rows)' });
  return pick?.uri;
}
