// Grammar Debugger ("Agent Lab: Debug Tool Call"): the tool call under the cursor (in a
// transcript or a dataset row), or one typed in the panel, stepped through character by
// character: the acceptor's live states, the characters allowed next, where and why it
// was rejected. In editor mode the panel follows the cursor through calls (the cursor's
// place in the call is the step shown) and updates as the call is edited.
import * as vscode from 'vscode';
import { FromWebview, GrammarSource, GrammarState, ToWebview } from '../../core/protocol/panels';
import { PanelController, PanelHost, createPanel, lastTextEditor, revealRange } from './host';
import { CallSpan, callAt, codePointIndex, findCalls, grammarTrace, offsetOfCodePoint } from '../../core/transcript/grammarTrace';
import { isAgentDoc, label, rangeOf, transcriptAt } from './sources';

interface EditorCall {
  uri: vscode.Uri;
  row: number | null;
  text: string;
  call: CallSpan;
  cursor: number | null;
}

export class GrammarPanel implements PanelController {
  static current: GrammarPanel | undefined;

  private mode: 'editor' | 'typed' = 'editor';
  private typed = '';
  private editorCall: EditorCall | null = null;
  private last: ToWebview | null = null;
  private timer: NodeJS.Timeout | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  private constructor(
    readonly host: PanelHost,
    state: GrammarState | null,
  ) {
    host.attach(this);
    if (state?.source === 'typed') {
      this.mode = 'typed';
      this.typed = state.text;
    }
    this.disposables.push(
      vscode.window.onDidChangeTextEditorSelection((e) => {
        if (this.mode === 'editor' && isAgentDoc(e.textEditor.document)) this.schedule(() => this.fromEditor(e.textEditor, false), 60);
      }),
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (this.mode !== 'editor' || !this.editorCall || e.document.uri.toString() !== this.editorCall.uri.toString()) return;
        const editor = vscode.window.visibleTextEditors.find((x) => x.document === e.document);
        if (editor) this.schedule(() => this.fromEditor(editor, false), 120);
      }),
    );
  }

  static open(extensionUri: vscode.Uri, at: { editor?: vscode.TextEditor; text?: string }): GrammarPanel {
    let panel = GrammarPanel.current;
    if (!panel || panel.host.isDisposed) {
      const wp = createPanel('grammar', 'Grammar Debugger', extensionUri, true);
      panel = GrammarPanel.current = new GrammarPanel(new PanelHost('grammar', wp, extensionUri, 'Grammar Debugger'), null);
    } else {
      panel.host.panel.reveal(undefined, true);
    }
    if (at.text !== undefined) panel.check(at.text);
    else {
      const editor = at.editor ?? lastTextEditor((e) => isAgentDoc(e.document));
      if (editor) panel.fromEditor(editor, true);
      else panel.showNone('No transcript is open: type a call body below, or put the cursor in a <|tool_call|> and run the command again.');
    }
    return panel;
  }

  static revive(extensionUri: vscode.Uri, panel: vscode.WebviewPanel, state: GrammarState | null): GrammarPanel {
    // A live panel of this kind already exists (background tabs are revived lazily, when shown): keep it, close the stale tab.
    const live = GrammarPanel.current;
    if (live && !live.host.isDisposed) {
      panel.dispose();
      live.host.panel.reveal(undefined, true);
      return live;
    }
    const p = (GrammarPanel.current = new GrammarPanel(new PanelHost('grammar', panel, extensionUri, panel.title), state));
    if (state?.source === 'typed') p.check(state.text);
    else {
      const editor = lastTextEditor((e) => isAgentDoc(e.document));
      if (editor) p.fromEditor(editor, true);
      else p.check(state?.text ?? '');
    }
    return p;
  }

  private schedule(f: () => void, ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(f, ms);
  }

  private send(msg: ToWebview): void {
    this.last = msg;
    this.host.post(msg);
  }

  private showNone(message: string): void {
    this.editorCall = null;
    this.send({ type: 'grammar/trace', source: { kind: 'none', message }, trace: grammarTrace(this.typed), cursor: null });
  }

  /** The call under the editor's cursor; `explicit` (the command, the button) also takes the next call when the cursor is in none. */
  fromEditor(editor: vscode.TextEditor, explicit: boolean): void {
    const at = transcriptAt(editor.document, editor.selection.active);
    let call = at ? callAt(at.text, at.offset) : null;
    if (!call && at && explicit) call = findCalls(at.text).find((c) => c.start >= at.offset) ?? findCalls(at.text)[0] ?? null;
    if (!at || !call) {
      if (explicit) {
        this.mode = 'editor';
        this.showNone(`No tool call at the cursor in ${label(editor.document.uri)}: put the cursor in a <|tool_call|>…<|end|>, or type a call body below.`);
      }
      return; // following the cursor: keep showing the last call
    }
    this.mode = 'editor';
    const body = at.text.slice(call.bodyStart, call.bodyEnd);
    // Inside the body the cursor picks the step; elsewhere (on the markers) the panel shows the verdict's step.
    const cursor = at.offset >= call.bodyStart && at.offset <= call.bodyEnd ? codePointIndex(at.text, call, at.offset) : null;
    this.editorCall = { uri: editor.document.uri, row: at.row, text: at.text, call, cursor };
    const line = rangeOf(editor.document, at.row, call.start, call.start).start.line;
    const source: GrammarSource = { kind: 'editor', uri: editor.document.uri.toString(), label: label(editor.document.uri), line };
    this.send({ type: 'grammar/trace', source, trace: grammarTrace(body), cursor });
  }

  check(text: string): void {
    this.mode = 'typed';
    this.typed = text;
    this.editorCall = null;
    this.send({ type: 'grammar/trace', source: { kind: 'typed' }, trace: grammarTrace(text), cursor: null });
  }

  onReady(): void {
    if (this.last) this.host.post(this.last);
  }

  async onMessage(msg: FromWebview): Promise<void> {
    switch (msg.type) {
      case 'grammar/check':
        this.check(msg.text);
        return;
      case 'grammar/fromEditor': {
        const editor = lastTextEditor((e) => isAgentDoc(e.document));
        if (editor) this.fromEditor(editor, true);
        else this.showNone('No transcript or dataset is open.');
        return;
      }
      case 'grammar/reveal': {
        const ec = this.editorCall;
        if (this.mode !== 'editor' || !ec) return;
        const offset = offsetOfCodePoint(ec.text, ec.call, msg.index);
        const doc = await vscode.workspace.openTextDocument(ec.uri);
        const range = rangeOf(doc, ec.row, offset, offset);
        await revealRange(ec.uri, range, this.host.panel.viewColumn, true); // the panel keeps the keyboard
        return;
      }
      default:
        return;
    }
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const d of this.disposables) d.dispose();
    if (GrammarPanel.current === this) GrammarPanel.current = undefined;
  }
}
