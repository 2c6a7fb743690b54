// The commands around a trained student and its data: Ask the Student (the ask job in the
// worker process, extension/workerProcess.ts: the trajectory opens in the Trajectory
// Inspector), Export to TRL (`agent-lab export`), Audit Reward (core/reward.ts, in-process: no
// tfjs), Run the Demo (`agent-lab demo`), and Open the Samples (a copy of the bundled samples/
// to try the language features on). The CLI runs in a child process (extension/cliProcess.ts);
// what is written goes to new files only.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { DEFAULT_REWARD_TEXT, RewardSpecError, auditReward, formatAudit, parseRewardSpec } from '../core/reward';
import { cliError, runCli } from './cliProcess';
import { log, reportError } from './log';
import { listRunFolders, readRun } from './runFolders';
import { askedEvalRow, checkAnswer, checkText, questionToAsk } from './askQuestion';
import { pickWorkspaceFolder, runsFolderUri, timestamp } from './workspace';
import type { CommandMap } from './commands';
import type { Lab } from './lab';

interface RunArg {
  runDir?: string;
  question?: string;
  /** The question asked last ("Ask Again" starts from it). */
  lastQuestion?: string;
}

export interface AskResult {
  question: string;
  answer: string | null;
  steps: number;
  transcript: string;
  /** When the question is one of the world's tasks: its gold and whether the answer matches it. */
  gold?: string;
  correct?: boolean;
}

async function pickTrainedRun(placeHolder: string): Promise<string | undefined> {
  const ws = await pickWorkspaceFolder();
  if (!ws) {
    void vscode.window.showWarningMessage('Agent Lab: open a folder first.');
    return undefined;
  }
  const runs = listRunFolders(runsFolderUri(ws).fsPath)
    .map((d) => readRun(d))
    .filter((r) => (r.kind === 'sft' || r.kind === 'grpo') && r.checkpoints.length > 0);
  if (runs.length === 0) {
    void vscode.window.showWarningMessage('Agent Lab: no trained student yet; run "Agent Lab: Train (SFT)" first.');
    return undefined;
  }
  if (runs.length === 1) return runs[0]!.dir;
  const pick = await vscode.window.showQuickPick(
    runs.map((r) => ({ label: r.name, description: `${r.kind} · step ${r.step ?? 0}${r.heldout !== null ? ` · held-out ${(100 * r.heldout).toFixed(1)}%` : ''}`, dir: r.dir })),
    { placeHolder },
  );
  return pick?.dir;
}

/** A new path under `dir` named `base` (suffixed -2, -3 … when taken): nothing is written over. */
function freshPath(dir: string, base: string, ext = ''): string {
  let p = path.join(dir, base + ext);
  for (let n = 2; fs.existsSync(p); n++) p = path.join(dir, `${base}-${n}${ext}`);
  return p;
}

async function askStudent(lab: Lab, arg: RunArg = {}): Promise<AskResult | undefined> {
  const runDir = arg.runDir ?? (await pickTrainedRun('Student to ask'));
  if (!runDir) return undefined;
  const question =
    arg.question ??
    (await vscode.window.showInputBox({
      title: `Ask the student of ${path.basename(runDir)}`,
      prompt: 'A question about the corpus; the student answers through the real loop (search, calculator)',
      // A held-out question of the run's own world (or the one asked last), not the textbook's.
      value: questionToAsk(runDir, arg.lastQuestion),
      ignoreFocusOut: true,
      validateInput: (v) => (v.trim() === '' ? 'a question' : null),
    }));
  if (!question) return undefined;
  const backend = lab.config.get('backend');
  const { outcome, cancelled } = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Agent Lab: the student of ${path.basename(runDir)} is answering`, cancellable: true },
    async (_p, token) => {
      // One episode has no step boundary to stop at: a cancelled question is killed after a moment.
      const done = await lab.runToolJob({ kind: 'ask', runDir, question, backend }, { cwd: path.dirname(runDir), token, killAfterMs: 3000 });
      return { outcome: done, cancelled: token.isCancellationRequested };
    },
  );
  // A cancelled question is dropped, answered or not (as before: nothing written, nothing shown).
  if (cancelled || (outcome.ok && outcome.result.cancelled)) return undefined;
  if (!outcome.ok) throw new Error(outcome.error);
  const out = outcome.result.summary;
  // The trajectory as a .transcript beside the run's other outputs, then in the inspector.
  const dir = path.join(runDir, 'asked');
  fs.mkdirSync(dir, { recursive: true });
  const file = freshPath(dir, timestamp(), '.transcript');
  fs.writeFileSync(file, out.text, { flag: 'wx' });
  // A question of the world's own tasks is checked against its gold, as Evaluate would.
  const check = checkAnswer(runDir, question, out.answer);
  log.info(`the student answered ${JSON.stringify(out.answer)} in ${out.steps} steps${check ? ` (gold ${JSON.stringify(check.gold)}: ${check.correct ? 'correct' : 'wrong'})` : ''}: ${file}`);
  // Checked against a gold: the inspector opens the answer as an eval row, marked right or wrong.
  let inspected = file;
  if (check) {
    inspected = file.replace(/\.transcript$/, '.jsonl');
    fs.writeFileSync(inspected, JSON.stringify(askedEvalRow(question, out.answer, out.steps, out.text, check)) + '\n', { flag: 'wx' });
  }
  await vscode.commands.executeCommand('agentLab.inspectTrajectories', vscode.Uri.file(inspected));
  void vscode.window
    .showInformationMessage(`Agent Lab: the student answered ${shortAnswer(out.answer)} in ${out.steps} steps.${checkText(check)}`, 'Open Transcript', 'Ask Again')
    .then((c) => {
      if (c === 'Open Transcript') void vscode.window.showTextDocument(vscode.Uri.file(file));
      if (c === 'Ask Again') void vscode.commands.executeCommand('agentLab.askStudent', { runDir, lastQuestion: question });
    });
  return { question, answer: out.answer, steps: out.steps, transcript: file, ...(check ? { gold: check.gold, correct: check.correct } : {}) };
}

/** The answer as a message shows it: quoted, and cut (an untrained student can ramble for pages). */
function shortAnswer(answer: string | null): string {
  if (answer === null) return '(no answer)';
  const q = JSON.stringify(answer);
  return q.length > 90 ? `${q.slice(0, 87)}…"` : q;
}

async function exportTrl(lab: Lab, arg: RunArg & { format?: string; split?: string } = {}): Promise<string | undefined> {
  const runDir = arg.runDir ?? (await pickTrainedRun('Run whose data to export to Hugging Face TRL'));
  if (!runDir) return undefined;
  const format =
    arg.format ??
    (
      await vscode.window.showQuickPick(
        [
          { label: 'trl-sft', description: 'SFTTrainer datasets (messages, prompt/completion) and the tokenizer' },
          { label: 'trl-grpo', description: 'GRPOTrainer prompts and the reward function' },
        ],
        { placeHolder: 'Export format' },
      )
    )?.label;
  if (!format) return undefined;
  const split = arg.split ?? 'train';
  const out = freshPath(runDir, `export-${format}-${split}`);
  const r = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: `Agent Lab: exporting ${path.basename(runDir)} (${format})` }, () =>
    runCli(lab.extension, ['export', '--format', format, '--run', runDir, '--split', split, '--out', out], { cwd: path.dirname(runDir) }),
  );
  if (r.code !== 0) throw new Error(cliError(r));
  log.info(r.stdout.trim());
  void vscode.window.showInformationMessage(`Agent Lab: ${format} export written to ${vscode.workspace.asRelativePath(out, false)}.`, 'Reveal', 'Open README').then((c) => {
    if (c === 'Reveal') void vscode.commands.executeCommand('revealInExplorer', vscode.Uri.file(out));
    if (c === 'Open README' && fs.existsSync(path.join(out, 'README.md'))) void vscode.window.showTextDocument(vscode.Uri.file(path.join(out, 'README.md')));
  });
  return out;
}

async function auditRewardCommand(lab: Lab, arg: { reward?: string } = {}): Promise<{ ok: boolean; report: string } | undefined> {
  const configured = lab.config.get('grpo.reward') || DEFAULT_REWARD_TEXT;
  const text =
    arg.reward ??
    (await vscode.window.showInputBox({
      title: 'Audit a GRPO reward',
      prompt: 'exact[=W], step=L, format=B, cap=C, gate=answer-tag (comma-separated); scored on a fixed group of 7 rollouts',
      value: configured,
      validateInput: (v) => {
        try {
          parseRewardSpec(v);
          return null;
        } catch (err) {
          return err instanceof RewardSpecError ? err.message : String(err);
        }
      },
    }));
  if (text === undefined) return undefined;
  const audit = auditReward(parseRewardSpec(text));
  const report = formatAudit(audit);
  const doc = await vscode.workspace.openTextDocument({ content: report, language: 'plaintext' });
  await vscode.window.showTextDocument(doc, { preview: true });
  const failed = audit.checks.filter((c) => !c.ok).map((c) => c.name);
  if (audit.ok) void vscode.window.showInformationMessage(`Agent Lab: the reward "${audit.reward}" passes the audit (group std ${audit.std.toFixed(3)}).`);
  else void vscode.window.showWarningMessage(`Agent Lab: the reward "${audit.reward}" fails the audit: ${failed.join('; ')}.`);
  return { ok: audit.ok, report };
}

async function runDemo(lab: Lab, arg: { minutes?: number } = {}): Promise<string | undefined> {
  const ws = await pickWorkspaceFolder();
  if (!ws) {
    void vscode.window.showWarningMessage('Agent Lab: open a folder first; the demo writes a run folder into the workspace.');
    return undefined;
  }
  const minutes = arg.minutes ?? 3;
  const runs = runsFolderUri(ws).fsPath;
  fs.mkdirSync(runs, { recursive: true });
  const runDir = freshPath(runs, `demo-${timestamp()}`);
  log.show();
  const r = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Agent Lab: the demo (${minutes} minutes of training)`, cancellable: true },
    (progress, token) =>
      runCli(lab.extension, ['demo', '--minutes', String(minutes), '--run', runDir], {
        cwd: runs,
        token,
        onStderrLine: (line) => progress.report({ message: line.replace(/^\[agent-lab\]\s*/, '').slice(0, 120) }),
      }),
  );
  if (r.code !== 0 && !r.cancelled) throw new Error(cliError(r));
  log.info(r.stdout);
  void vscode.window.showInformationMessage(`Agent Lab: the demo ${r.cancelled ? 'was stopped' : 'finished'}; its run is ${path.basename(runDir)} (the report is in the log).`, 'Open Curves', 'Show Log').then((c) => {
    if (c === 'Open Curves') void vscode.commands.executeCommand('agentLab.showCurves', { runDirs: [runDir] });
    if (c === 'Show Log') log.show();
  });
  return runDir;
}

/** Copies the bundled samples into the extension's storage (once) and opens them as a folder. */
async function openSamples(lab: Lab, arg: { target?: string; newWindow?: boolean; file?: string } = {}): Promise<string> {
  // A workspace that already holds the samples (the repository's samples/, or the copy): open the file there.
  const file = arg.file ?? 'broken-call.transcript';
  for (const f of vscode.workspace.workspaceFolders ?? []) {
    const here = path.join(f.uri.fsPath, file);
    if (!arg.target && fs.existsSync(here) && fs.existsSync(path.join(f.uri.fsPath, 'broken-call.transcript'))) {
      await vscode.window.showTextDocument(vscode.Uri.file(here), { preview: false });
      return f.uri.fsPath;
    }
  }
  const target = arg.target ?? path.join(lab.extension.globalStorageUri.fsPath, 'samples');
  if (!fs.existsSync(target)) {
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.cpSync(path.join(lab.extension.extensionPath, 'samples'), target, { recursive: true, errorOnExist: true, force: false });
    log.info(`copied the samples into ${target}`);
  }
  const open = vscode.workspace.workspaceFolders?.some((f) => f.uri.fsPath === target);
  if (open) await vscode.window.showTextDocument(vscode.Uri.file(path.join(target, file)), { preview: false });
  else await vscode.commands.executeCommand('vscode.openFolder', vscode.Uri.file(target), { forceNewWindow: arg.newWindow ?? false });
  return target;
}

export function activateStudentCommands(lab: Lab) {
  const wrap =
    <A, R>(what: string, fn: (a: A) => Promise<R>) =>
    async (a: A): Promise<R | undefined> => {
      try {
        return await fn(a);
      } catch (err) {
        reportError(what, err);
        return undefined;
      }
    };
  return {
    'agentLab.askStudent': wrap('asking the student failed', (a?: RunArg) => askStudent(lab, a ?? {})),
    'agentLab.exportTrl': wrap('the export failed', (a?: RunArg & { format?: string }) => exportTrl(lab, a ?? {})),
    'agentLab.auditReward': wrap('the reward audit failed', (a?: { reward?: string }) => auditRewardCommand(lab, a ?? {})),
    'agentLab.runDemo': wrap('the demo failed', (a?: { minutes?: number }) => runDemo(lab, a ?? {})),
    'agentLab.openSamples': wrap('opening the samples failed', (a?: { target?: string; file?: string }) => openSamples(lab, a ?? {})),
  } satisfies CommandMap;
}
