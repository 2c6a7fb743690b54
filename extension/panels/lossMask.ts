// Loss Mask ("Agent Lab: Show Loss Mask"; also a code lens and an editor title action on
// transcripts and datasets): the transcript of the active editor (or the dataset row under
// the cursor) as tokens, supervised and masked, from the language server's
// agentLab/lossMask request. It follows the active editor and updates as the user types.
import * as vscode from 'vscode';
import { FromWebview, LossMaskState, MaskView, ToWebview } from '../../core/protocol/panels';
import type { LossMaskParams, LossMaskResult } from '../../core/protocol/lsp';
import { PanelController, PanelHost, createPanel, lastTextEditor, revealRange } from './host';
import { maskTarget } from './lossMaskTarget';
import { isAgentDoc, isTranscriptDoc, label, rangeOf, rowLineAt } from './sources';
import { harnessFlags } from '../../core/transcript/maskHarness';

interface Target {
  uri: vscode.Uri;
  row: number | null;
}

/** Where the panel gets a mask: the language server's agentLab/lossMask (extension/languageClient.ts). */
export type LossMaskServer = (params: LossMaskParams) => Promise<LossMaskResult>;

const TYPING_DEBOUNCE_MS = 150;
const FILE_POLL_MS = 1000;
const FILE_POLLS = 120;

export class LossMaskPanel implements PanelController {
  static current: LossMaskPanel | undefined;

  private target: Target | null = null;
  private last: ToWebview | null = null;
  private timer: NodeJS.Timeout | undefined;
  private seq = 0;
  private retries = 0;
  private filePolls = 0;
  private readonly disposables: vscode.Disposable[] = [];
  /** Completed requests (tests read it to see that typing refreshed the view). */
  updates = 0;

  private constructor(
    readonly host: PanelHost,
    initial: Target | null,
    private readonly server: LossMaskServer,
  ) {
    host.attach(this);
    this.disposables.push(
      vscode.window.onDidChangeActiveTextEditor((e) => {
        // A webview taking focus leaves no active text editor: keep showing the last one.
        if (e && isAgentDoc(e.document)) this.follow(e);
      }),
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (this.target && e.document.uri.toString() === this.target.uri.toString() && e.contentChanges.length > 0) {
          this.schedule(TYPING_DEBOUNCE_MS);
        }
      }),
      vscode.window.onDidChangeTextEditorSelection((e) => {
        if (!this.target || e.textEditor.document.uri.toString() !== this.target.uri.toString()) return;
        if (isTranscriptDoc(e.textEditor.document)) return;
        const row = rowLineAt(e.textEditor.document, e.selections[0]!.active.line);
        if (row !== this.target.row) {
          this.target = { uri: this.target.uri, row };
          this.schedule(50);
        }
      }),
    );
    this.target = initial;
    if (!initial) {
      const editor = lastTextEditor((e) => isAgentDoc(e.document));
      if (editor) this.follow(editor);
    }
    this.schedule(0);
  }

  static open(extensionUri: vscode.Uri, target: Target | null, server: LossMaskServer): LossMaskPanel {
    const current = LossMaskPanel.current;
    if (current && !current.host.isDisposed) {
      current.host.panel.reveal(undefined, true);
      if (target) current.setTarget(target);
      return current;
    }
    const panel = createPanel('lossMask', 'Loss Mask', extensionUri, true);
    return (LossMaskPanel.current = new LossMaskPanel(new PanelHost('lossMask', panel, extensionUri, 'Loss Mask'), target, server));
  }

  static revive(extensionUri: vscode.Uri, panel: vscode.WebviewPanel, state: LossMaskState | null, server: LossMaskServer): LossMaskPanel {
    // A live panel of this kind already exists (background tabs are revived lazily, when shown): keep it, close the stale tab.
    const live = LossMaskPanel.current;
    if (live && !live.host.isDisposed) {
      panel.dispose();
      live.host.panel.reveal(undefined, true);
      return live;
    }
    const target = state?.uri ? { uri: vscode.Uri.parse(state.uri), row: state.row } : null;
    return (LossMaskPanel.current = new LossMaskPanel(new PanelHost('lossMask', panel, extensionUri, panel.title), target, server));
  }

  private follow(editor: vscode.TextEditor): void {
    this.setTarget(maskTarget(editor));
  }

  setTarget(t: Target): void {
    if (this.target && this.target.uri.toString() === t.uri.toString() && this.target.row === t.row && this.last?.type === 'lossMask/show') return;
    this.target = t;
    this.filePolls = 0;
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.refresh(), ms);
  }

  private send(msg: ToWebview): void {
    this.last = msg;
    this.host.post(msg);
  }

  private async refresh(): Promise<void> {
    const target = this.target;
    if (!target) {
      this.send({ type: 'lossMask/status', level: 'info', message: 'Open a .transcript or a dataset (a *.traces.jsonl, a run’s data/ or eval/ rows, a TRL conversational .jsonl): the panel follows the active editor.' });
      return;
    }
    const seq = ++this.seq;
    const params: LossMaskParams = { textDocument: { uri: target.uri.toString() }, ...(target.row !== null ? { row: target.row } : {}) };
    try {
      const mask = await this.server(params);
      if (seq !== this.seq) return; // a newer request is on its way
      this.retries = 0;
      let row: unknown = null;
      if (target.row !== null) {
        const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === target.uri.toString());
        const line = doc && target.row < doc.lineCount ? doc.lineAt(target.row).text : '';
        try {
          row = JSON.parse(line);
        } catch {
          row = null;
        }
      }
      // A TRL chat row has no harness text (its rows carry no generated flags of the lab's).
      const view: MaskView = { label: label(target.uri, target.row), mask, harness: mask.chat ? null : harnessFlags(mask, row) };
      this.updates++;
      this.send({ type: 'lossMask/show', view });
      // A chat dataset's file totals fill in as the server's pass goes: ask again until they are complete.
      if (mask.chat && !mask.chat.file.complete && this.filePolls < FILE_POLLS) {
        this.filePolls++;
        this.schedule(FILE_POLL_MS);
      }
    } catch (err) {
      if (seq !== this.seq) return;
      const message = err instanceof Error ? err.message : String(err);
      // The server starts with the extension: wait for it rather than fail.
      if (/not running|not ready|starting|Client is not/i.test(message) && this.retries < 60) {
        this.retries++;
        this.send({ type: 'lossMask/status', level: 'waiting', message: 'Waiting for the Agent Lab language server…' });
        this.schedule(500);
        return;
      }
      this.send({ type: 'lossMask/status', level: 'error', message: `${label(target.uri, target.row)}: ${message}` });
    }
  }

  onReady(): void {
    if (this.last) this.host.post(this.last);
  }

  async onMessage(msg: FromWebview): Promise<void> {
    if (msg.type !== 'lossMask/reveal' || !this.target || this.last?.type !== 'lossMask/show') return;
    const view = this.last.view;
    if (msg.end > view.mask.text.length) return;
    const doc = await vscode.workspace.openTextDocument(this.target.uri);
    const chat = view.mask.chat;
    let range: vscode.Range;
    if (chat && this.target.row !== null) {
      // A chat row's text is the template's rendering, not in the file: reveal the message the token belongs to.
      const i = view.mask.offsets.findIndex(([s]) => s === msg.start);
      const cols = i >= 0 ? chat.messageColumns[chat.messages[i]!] : undefined;
      const row = Math.min(this.target.row, doc.lineCount - 1);
      range = cols ? new vscode.Range(row, cols[0], row, cols[1]) : doc.lineAt(row).range;
    } else range = rangeOf(doc, this.target.row, msg.start, msg.end);
    await revealRange(this.target.uri, range, this.host.panel.viewColumn);
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const d of this.disposables) d.dispose();
    if (LossMaskPanel.current === this) LossMaskPanel.current = undefined;
  }
}
