// The webview side of the extension ↔ webview channel: typed posting, validated receiving
// (core/protocol/panels.ts), the `ready` handshake, and the state VS Code keeps across
// reloads (restored by the extension's serializer). Never imports vscode or Node.
import {
  FromWebview,
  PanelKind,
  PanelState,
  ToWebview,
  parsePanelState,
  parseToWebview,
} from '../../core/protocol/panels';

interface VsCodeApi {
  postMessage(message: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const api = acquireVsCodeApi();

export function post(message: FromWebview): void {
  api.postMessage(message);
}

/**
 * Listens for the extension's messages (each validated; a bad one is reported through
 * `onBad`), then says `ready`: the extension posts nothing before it.
 */
export function connect(onMessage: (m: ToWebview) => void, onBad: (error: string) => void): void {
  window.addEventListener('message', (event: MessageEvent<unknown>) => {
    const parsed = parseToWebview(event.data);
    if (!parsed.ok) {
      onBad(parsed.error);
      return;
    }
    try {
      onMessage(parsed.message);
    } catch (err) {
      onBad(err instanceof Error ? err.message : String(err));
    }
  });
  post({ type: 'ready' });
}

export function loadState<T extends PanelState>(panel: PanelKind): T | null {
  return parsePanelState(panel, api.getState()) as T | null;
}

export function saveState(state: PanelState): void {
  api.setState(state);
}
