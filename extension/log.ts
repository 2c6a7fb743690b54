// The "Agent Lab" output channel: every feature logs here, the user opens it from the
// Output panel (or from the "Show Log" button of an error message).
import * as vscode from 'vscode';
import { API_KEY_ENV, redactSecrets as redactKey } from '../core/teachers/redact';

let channel: vscode.LogOutputChannel | undefined;

/** The teacher's key as the HTTP teacher gets it (the environment VS Code was started with), and any Bearer token, redacted. */
const redactSecrets = (text: string): string => redactKey(text, process.env[API_KEY_ENV]);

export function activateLog(context: vscode.ExtensionContext): vscode.LogOutputChannel {
  channel = vscode.window.createOutputChannel('Agent Lab', { log: true });
  context.subscriptions.push(channel, { dispose: () => (channel = undefined) });
  return channel;
}

/** The channel; usable before activation finished (falls back to the console). */
export const log = {
  // Every line is redacted: a server that echoes the Authorization header must not put the key here.
  info(raw: string): void {
    const message = redactSecrets(raw);
    if (channel) channel.info(message);
    else console.log(`[agent-lab] ${message}`);
  },
  warn(raw: string): void {
    const message = redactSecrets(raw);
    if (channel) channel.warn(message);
    else console.warn(`[agent-lab] ${message}`);
  },
  error(raw: string, err?: unknown): void {
    const message = redactSecrets(raw);
    const detail = redactSecrets(err instanceof Error ? `${err.message}${err.stack ? `\n${err.stack}` : ''}` : err === undefined ? '' : String(err));
    if (channel) channel.error(detail ? `${message}: ${detail}` : message);
    else console.error(`[agent-lab] ${message}`, detail);
  },
  show(): void {
    channel?.show(true);
  },
};

/** Shows an error message with a button that opens the log. Never throws. */
export function reportError(message: string, err?: unknown): void {
  log.error(message, err);
  const text = err instanceof Error ? `${message}: ${err.message}` : message;
  void vscode.window.showErrorMessage(`Agent Lab: ${text}`, 'Show Log').then((choice) => {
    if (choice === 'Show Log') log.show();
  });
}
