// The panels: commands, serializers (a panel comes back after a reload with its
// state), and the code lenses on transcripts. Each panel is a controller (inspector.ts,
// lossMask.ts, curves.ts, grammar.ts) on a PanelHost (host.ts); the webviews are the
// bundles dist/webview/<panel>.js built from webview-ui/.
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { PANEL_KINDS, PANEL_VIEW_TYPES, PanelKind, parsePanelState, CurvesState, GrammarState, InspectorState, LossMaskState } from '../../core/protocol/panels';
import { TOOL_CALL } from '../../core/wire';
import { log } from '../log';
import { ComparePanel } from './compare';
import { CurvesPanel, listRuns, runDirOf, setCurvesMemento } from './curves';
import { GrammarPanel } from './grammar';
import { lastTextEditor } from './host';
import { InspectorPanel, pickTrajectorySource, requestedOutcome } from './inspector';
import { liveRuns } from './liveMetrics';
import { LossMaskPanel } from './lossMask';
import { maskTarget } from './lossMaskTarget';
import { isAgentDoc, isTranscriptDoc, rowLineAt } from './sources';
import { isObj } from '../../core/protocol/isObj';
import { setting } from '../settings';
import type { CommandMap } from '../commands';
import type { Lab } from '../lab';
import { requestLossMask } from '../languageClient';


export function activatePanels(lab: Lab) {
  const ext = lab.extension.extensionUri;
  setCurvesMemento(lab.extension.workspaceState);
  for (const kind of PANEL_KINDS) {
    lab.own(
      vscode.window.registerWebviewPanelSerializer(PANEL_VIEW_TYPES[kind], {
        async deserializeWebviewPanel(panel: vscode.WebviewPanel, state: unknown): Promise<void> {
          revive(lab, kind, panel, state);
        },
      }),
    );
  }

  const lenses = new TranscriptLenses();
  lab.own(lenses, vscode.languages.registerCodeLensProvider({ language: 'agent-transcript' }, lenses));

  return {
    'agentLab.inspectTrajectories': async (arg?: unknown) => {
      const uri = await pickTrajectorySource(arg);
      if (uri) InspectorPanel.open(ext, uri, requestedOutcome(arg));
    },
    'agentLab.showLossMask': async (arg?: unknown) => {
      let target: { uri: vscode.Uri; row: number | null } | null = null;
      const uri = arg instanceof vscode.Uri ? arg : isObj(arg) && typeof arg['uri'] === 'string' ? vscode.Uri.parse(arg['uri']) : undefined;
      if (uri) {
        const doc = await vscode.workspace.openTextDocument(uri);
        const row = isObj(arg) && typeof arg['row'] === 'number' ? arg['row'] : null;
        const editor = vscode.window.visibleTextEditors.find((e) => e.document === doc);
        target = isTranscriptDoc(doc) ? { uri, row: null } : { uri, row: row ?? (editor ? rowLineAt(doc, editor.selection.active.line) : 0) ?? 0 };
      } else {
        const editor = lastTextEditor((e) => isAgentDoc(e.document));
        if (editor) target = maskTarget(editor);
      }
      LossMaskPanel.open(ext, target, (params) => requestLossMask(lab, params));
    },
    'agentLab.showCurves': async (arg?: unknown) => {
      let dirs: string[] = [];
      if (arg instanceof vscode.Uri) {
        const d = runDirOf(arg.fsPath);
        if (d) dirs.push(d);
      } else if (isObj(arg) && Array.isArray(arg['runDirs'])) {
        dirs = arg['runDirs'].filter((d): d is string => typeof d === 'string' && fs.existsSync(d));
      }
      if (dirs.length === 0) {
        const file = vscode.window.activeTextEditor?.document.uri;
        const d = file?.scheme === 'file' ? runDirOf(file.fsPath) : null;
        if (d) dirs.push(d);
      }
      for (const d of liveRuns) if (!dirs.includes(d)) dirs.push(d);
      if (dirs.length === 0) {
        const newest = (await listRuns())[0];
        if (newest) dirs.push(newest);
      }
      CurvesPanel.open(ext, dirs);
    },
    'agentLab.compareRuns': () => {
      ComparePanel.open(ext);
    },
    'agentLab.debugToolCall': async (arg?: unknown) => {
      if (isObj(arg) && typeof arg['text'] === 'string') {
        GrammarPanel.open(ext, { text: arg['text'] });
        return;
      }
      if (isObj(arg) && typeof arg['uri'] === 'string' && typeof arg['offset'] === 'number') {
        const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(arg['uri']));
        const pos = doc.positionAt(arg['offset']);
        const editor = await vscode.window.showTextDocument(doc, { selection: new vscode.Range(pos, pos), preserveFocus: true, preview: false });
        GrammarPanel.open(ext, { editor });
        return;
      }
      GrammarPanel.open(ext, {});
    },
  } satisfies CommandMap;
}

function revive(lab: Lab, kind: PanelKind, panel: vscode.WebviewPanel, raw: unknown): void {
  const ext = lab.extension.extensionUri;
  const state = parsePanelState(kind, raw);
  if (raw !== undefined && raw !== null && state === null) log.warn(`${PANEL_VIEW_TYPES[kind]}: the saved state is not valid; starting afresh`);
  switch (kind) {
    case 'inspector':
      if (!state) {
        // Without a valid state the source is unknown: nothing to restore.
        panel.dispose();
        return;
      }
      InspectorPanel.revive(ext, panel, state as InspectorState);
      return;
    case 'lossMask':
      LossMaskPanel.revive(ext, panel, state as LossMaskState | null, (params) => requestLossMask(lab, params));
      return;
    case 'curves':
      CurvesPanel.revive(ext, panel, state as CurvesState | null);
      return;
    case 'grammar':
      GrammarPanel.revive(ext, panel, state as GrammarState | null);
      return;
    case 'compare':
      ComparePanel.revive(ext, panel);
      return;
  }
}

/** On a transcript: "Loss mask" and "Inspect" at the top, "Debug tool call" on each line with a call. */
class TranscriptLenses implements vscode.CodeLensProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.changed.event;
  private readonly listener = vscode.workspace.onDidChangeConfiguration((e) => {
    if (e.affectsConfiguration('agentLab.codeLens')) this.changed.fire();
  });

  dispose(): void {
    this.listener.dispose();
    this.changed.dispose();
  }

  provideCodeLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
    if (!setting('codeLens', doc.uri)) return [];
    const top = new vscode.Range(0, 0, 0, 0);
    const lenses = [
      new vscode.CodeLens(top, { title: '$(eye) Loss mask', command: 'agentLab.showLossMask', arguments: [doc.uri], tooltip: 'Show the supervised and masked tokens' }),
      new vscode.CodeLens(top, { title: '$(list-tree) Inspect', command: 'agentLab.inspectTrajectories', arguments: [doc.uri], tooltip: 'Show the trajectory as step cards' }),
    ];
    const text = doc.getText();
    let lastLine = -1;
    for (let i = text.indexOf(TOOL_CALL); i >= 0 && lenses.length < 200; i = text.indexOf(TOOL_CALL, i + 1)) {
      const pos = doc.positionAt(i);
      if (pos.line === lastLine) continue;
      lastLine = pos.line;
      lenses.push(
        new vscode.CodeLens(new vscode.Range(pos, pos), {
          title: '$(debug-step-into) Debug tool call',
          command: 'agentLab.debugToolCall',
          arguments: [{ uri: doc.uri.toString(), offset: i + TOOL_CALL.length }],
          tooltip: 'Step through this call with the call grammar',
        }),
      );
    }
    return lenses;
  }
}
