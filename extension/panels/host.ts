// Hosting one webview panel: the HTML (CSP `default-src 'none'`, a nonce for the one
// script, resources only from dist/webview/), the options (localResourceRoots = the bundle
// folder), the `ready` handshake (nothing is posted before the webview says `ready`; a
// reloaded webview says it again and gets a full snapshot), and validation of every
// message the webview sends (core/protocol/panels.ts) before a controller sees it.
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import { FromWebview, PANEL_VIEW_TYPES, PanelKind, ToWebview, parseFromWebviewFor } from '../../core/protocol/panels';
import { log } from '../log';

/** What a panel does with its webview. */
export interface PanelController extends vscode.Disposable {
  /** The webview (re)loaded: post everything it shows. */
  onReady(): void;
  /** A validated message from the webview (never `ready`). */
  onMessage(message: FromWebview): void | Promise<void>;
}

export function bundleRoot(extensionUri: vscode.Uri): vscode.Uri {
  return vscode.Uri.joinPath(extensionUri, 'dist', 'webview');
}

export function webviewOptions(extensionUri: vscode.Uri): vscode.WebviewOptions {
  return { enableScripts: true, enableCommandUris: false, localResourceRoots: [bundleRoot(extensionUri)] };
}

export function nonce(): string {
  return randomBytes(18).toString('base64').replace(/[+/=]/g, (c) => (c === '+' ? '-' : c === '/' ? '_' : ''));
}

/** The page: one stylesheet and one module script from the bundle folder, nothing else. */
export function panelHtml(webview: Pick<vscode.Webview, 'asWebviewUri' | 'cspSource'>, extensionUri: vscode.Uri, kind: PanelKind, title: string): string {
  const root = bundleRoot(extensionUri);
  const script = webview.asWebviewUri(vscode.Uri.joinPath(root, `${kind}.js`));
  const style = webview.asWebviewUri(vscode.Uri.joinPath(root, `${kind}.css`));
  const n = nonce();
  const csp = [`default-src 'none'`, `style-src ${webview.cspSource}`, `font-src ${webview.cspSource}`, `img-src ${webview.cspSource}`, `script-src 'nonce-${n}'`].join('; ');
  const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>${esc(title)}</title>
<link rel="stylesheet" href="${style.toString()}">
</head>
<body data-panel="${kind}">
<div id="app"></div>
<script type="module" nonce="${n}" src="${script.toString()}"></script>
</body>
</html>`;
}

/**
 * One panel's channel. `post` delivers only after the webview said `ready` (and while it
 * is visible: a hidden webview without retained context is torn down and says `ready`
 * again when shown); the controller answers `ready` with everything the view shows.
 */
export class PanelHost implements vscode.Disposable {
  private ready = false;
  private controller: PanelController | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private disposed = false;
  /** Messages refused since the panel opened (tests and the log read it). */
  refused = 0;

  constructor(
    readonly kind: PanelKind,
    readonly panel: vscode.WebviewPanel,
    extensionUri: vscode.Uri,
    title: string,
  ) {
    trackPanel(panel);
    panel.webview.options = webviewOptions(extensionUri);
    panel.webview.html = panelHtml(panel.webview, extensionUri, kind, title);
    this.disposables.push(
      panel.webview.onDidReceiveMessage((raw: unknown) => this.receive(raw)),
      panel.onDidChangeViewState(() => {
        if (!panel.visible) this.ready = false;
      }),
      panel.onDidDispose(() => this.dispose()),
    );
  }

  attach(controller: PanelController): void {
    this.controller = controller;
  }

  get isReady(): boolean {
    return this.ready;
  }

  /** Posts when the webview is ready; returns whether it was posted. */
  post(message: ToWebview): boolean {
    if (!this.ready || this.disposed) return false;
    void this.panel.webview.postMessage(message).then(undefined, (err: unknown) => log.warn(`${this.kind} panel: post failed: ${String(err)}`));
    return true;
  }

  private receive(raw: unknown): void {
    const parsed = parseFromWebviewFor(this.kind, raw);
    if (!parsed.ok) {
      this.refused++;
      log.warn(`${PANEL_VIEW_TYPES[this.kind]}: refused a message from the webview: ${parsed.error}`);
      return;
    }
    const msg = parsed.message;
    if (msg.type === 'ready') {
      this.ready = true;
      this.controller?.onReady();
      return;
    }
    if (!this.ready) {
      this.refused++;
      log.warn(`${PANEL_VIEW_TYPES[this.kind]}: ${msg.type} before ready; ignored`);
      return;
    }
    Promise.resolve(this.controller?.onMessage(msg)).catch((err: unknown) => log.error(`${this.kind} panel: ${msg.type} failed`, err));
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.ready = false;
    this.controller?.dispose();
    for (const d of this.disposables) d.dispose();
    this.panel.dispose();
  }

  get isDisposed(): boolean {
    return this.disposed;
  }
}

/**
 * Tabs of `kind` that no live panel owns: after a window reload, VS Code revives a panel in a
 * background tab only when that tab is shown. A new panel replaces them (closed once it is
 * open), so that a command never leaves two tabs of one panel.
 */
function staleTabs(kind: PanelKind): vscode.Tab[] {
  const viewType = PANEL_VIEW_TYPES[kind];
  return vscode.window.tabGroups.all
    .flatMap((g) => g.tabs)
    .filter((t) => t.input instanceof vscode.TabInputWebview && (t.input.viewType === viewType || t.input.viewType.endsWith(`-${viewType}`)));
}

/** Open panels (any kind), so that a new one joins their editor group rather than opening yet another. */
const openPanels = new Set<vscode.WebviewPanel>();

/**
 * A new panel beside the text editor (the editor stays visible: step cards reveal lines in
 * it), in the group of the other Agent Lab panels when one is open.
 */
export function createPanel(kind: PanelKind, title: string, extensionUri: vscode.Uri, preserveFocus = false): vscode.WebviewPanel {
  const stale = staleTabs(kind);
  const sibling = [...openPanels].find((p) => p.viewColumn !== undefined);
  const editorColumn = vscode.window.activeTextEditor?.viewColumn ?? vscode.window.visibleTextEditors[0]?.viewColumn;
  // The results table acts on no editor and needs the width (it opened half-wide beside one).
  const viewColumn = kind === 'compare' ? vscode.ViewColumn.Active : (sibling?.viewColumn ?? (editorColumn !== undefined ? vscode.ViewColumn.Beside : vscode.ViewColumn.Two));
  const panel = vscode.window.createWebviewPanel(
    PANEL_VIEW_TYPES[kind],
    title,
    { viewColumn, preserveFocus },
    { ...webviewOptions(extensionUri), retainContextWhenHidden: false },
  );
  if (stale.length) void vscode.window.tabGroups.close(stale, true).then(undefined, () => undefined);
  return panel; // PanelHost tracks it
}

/** Revived panels (the serializer) count as open panels too. */
export function trackPanel(panel: vscode.WebviewPanel): void {
  openPanels.add(panel);
  panel.onDidDispose(() => openPanels.delete(panel));
}

/** The text editor a panel acts on: the active one, or the last visible one when a webview has focus. */
export function lastTextEditor(filter: (e: vscode.TextEditor) => boolean): vscode.TextEditor | undefined {
  const active = vscode.window.activeTextEditor;
  if (active && filter(active)) return active;
  return vscode.window.visibleTextEditors.find(filter);
}

/** Reveals [start, end) of `uri`, in the first editor group that is not the panel's. */
export async function revealRange(
  uri: vscode.Uri,
  range: vscode.Range,
  panelColumn: vscode.ViewColumn | undefined,
  preserveFocus = false,
): Promise<vscode.TextEditor> {
  const doc = await vscode.workspace.openTextDocument(uri);
  const existing = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri.toString() && e.viewColumn !== panelColumn);
  const column = existing?.viewColumn ?? (panelColumn === vscode.ViewColumn.One ? vscode.ViewColumn.Two : vscode.ViewColumn.One);
  const editor = await vscode.window.showTextDocument(doc, { viewColumn: column, selection: range, preserveFocus });
  editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  return editor;
}
