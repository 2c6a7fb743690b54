// Runs the bundled CLI (bin/agent-lab → dist/cli.js, shipped in the .vsix) in a child
// process, for what is not a job of the worker (extension/workerProcess.ts) and that the
// CLI already does completely: the demo (a tour of the whole pipeline), the export to TRL
// and Hugging Face, a model folder's inspection. tfjs never loads in the extension host.
// Its stderr goes to the "Agent Lab" output channel line by line.
import { fork } from 'node:child_process';
import * as path from 'node:path';
import type * as vscode from 'vscode';
import { log } from './log';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  cancelled: boolean;
}

export function runCli(
  context: vscode.ExtensionContext,
  args: string[],
  opts: { cwd: string; token?: vscode.CancellationToken; onStderrLine?: (line: string) => void },
): Promise<CliResult> {
  const child = fork(path.join(context.extensionPath, 'bin', 'agent-lab'), args, { cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  let stdout = '';
  let stderr = '';
  let partial = '';
  let cancelled = false;
  // SIGINT: the CLI stops after its current step and keeps what it wrote.
  const sub = opts.token?.onCancellationRequested(() => {
    cancelled = true;
    child.kill('SIGINT');
  });
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => {
    const text = partial + d.toString();
    stderr += d.toString();
    const lines = text.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      log.info(`[cli] ${line}`);
      opts.onStderrLine?.(line);
    }
  });
  log.info(`agent-lab ${args.map((a) => (/\s/.test(a) ? JSON.stringify(a) : a)).join(' ')}`);
  return new Promise((resolve, reject) => {
    child.on('error', (err) => {
      sub?.dispose();
      reject(err);
    });
    child.on('exit', (code) => {
      sub?.dispose();
      if (partial) log.info(`[cli] ${partial}`);
      resolve({ code, stdout, stderr, cancelled });
    });
  });
}

/** The last lines of the CLI's stderr without its "[agent-lab]" prefixes: what to tell the user. */
export function cliError(r: CliResult): string {
  return (
    r.stderr
      .trim()
      .split('\n')
      .slice(-2)
      .map((l) => l.replace(/^\[agent-lab\]\s*/, ''))
      .join(' ') || `exit ${r.code}`
  );
}
