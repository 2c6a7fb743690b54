// Training and evaluation from the command palette and the Runs view. The work runs in a
// separate worker process (dist/worker.js, forked by path; never in the extension host)
// that speaks core/protocol/worker.ts. Progress shows in a cancellable notification and a
// status-bar item, in steps and minutes; the worker's log goes to the "Agent Lab" output
// channel. The steps pass the data along: Train (SFT) trains on trajectories the user
// distilled (the worker makes the run folder from them: trainer/sft/tracesRun.ts), each job ends with a message
// whose buttons start the next step, and a cancelled run can be resumed.
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { mkdirSync } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { type EvalSplit, FromWorker, JobResult, JobSpec, type PreparedTraces, type RunJobKind, ToWorker, isRunJobResult } from '../core/protocol/worker';
import { forkWorker, onWorkerMessage } from './workerProcess';
import { log, reportError } from './log';
// ---- live metrics for the Training Curves panel (extension/panels/liveMetrics.ts) ----
import { publishJobEnded, publishLiveMetrics } from './panels/liveMetrics';
// ---- end live metrics ----
import { describeProgress, prescreenRefusal, suggestedPool, type ProgressMemo } from './progressText';
import { preflightLine, readRunMeta } from './runMeta';
import { type RetryStep, refusedRunOf, retryCommand, sftMoreNext } from './preflightActions';
import { type GrpoArgs, grpoJobSpec, sftMoreJobSpec } from './jobSpecs';
import { type PreflightAction, preflightActionLabel } from '../core/protocol/panels';
import { CurvesPanel } from './panels/curves';
import { RunStatus, datasetsIn, heldoutShort, isResumable, listRunFolders, listWorlds, readJson, readRun } from './runFolders';
import { evaluateFinishMessage, trainingFinishMessage } from '../core/figures';
import { configuredWorldFolder, userWorldFolders } from './worldPicker';
import { type EvalChoice, evaluateChoices } from './evalChooser';
import { exists, pickWorkspaceFolder, runsFolderUri, timestamp } from './workspace';
import { type ModelChoice, baseFolderVerdict, editorRefusal, modelPickItems, sftModelFields, trainModeItems } from './baseModel';
import { runCli } from './cliProcess';
import { CONFIG_FILE, CORPUS_FILE, DATA_DIR, EVAL_DIR, evalRowsFile, TRAIN_TRACES_FILE } from '../core/protocol/folders';
import type { CommandMap } from './commands';
import type { Lab } from './lab';

interface ActiveJob {
  spec: JobSpec;
  child: ChildProcess;
  cancel(): void;
  done: Promise<JobReport>;
}
/** What a training or eval command returns (for scripted use, tests and the message buttons). */
export interface JobReport {
  ok: boolean;
  runDir: string;
  /** The worker's `done` (core/protocol/worker.ts: the summary typed per job kind); null when it never said done. */
  done: JobResult<RunJobKind> | null;
  /** done's `cancelled` and `summary`, flat for scripted callers (empty when it never said done). */
  cancelled: boolean;
  summary: JobResult<RunJobKind>['summary'] | Record<string, never>;
  checkpoints: number[];
  progressEvents: number;
  error?: string;
  /** The message the job ended with, and its buttons (for scripted use and tests). */
  message?: string;
  actions?: string[];
  /** How the run's data was prepared, for an SFT run trained on distilled trajectories. */
  prepared?: PreparedTraces;
}

const jobs = new Set<ActiveJob>();
let statusItem: vscode.StatusBarItem | undefined;
let outcomes: vscode.Memento | undefined;
const OUTCOMES_KEY = 'agentLab.runOutcomes';
const LAST_DATA_KEY = 'agentLab.sft.lastData';
const LAST_BASE_KEY = 'agentLab.sft.lastBaseFolder';
const runsChanged = new vscode.EventEmitter<void>();
/** Fires when a job starts or ends, or a command wrote a world or a dataset (the Runs view refreshes). */
export const onRunsChanged = runsChanged.event;
/** Says the runs folder changed (Distill, Build World): the Runs view refreshes even where no file event comes. */
export function notifyRunsChanged(): void {
  runsChanged.fire();
}

/** How a job the editor ran on a run folder ended (the files cannot tell cancelled from crashed). */
export function runOutcome(runDir: string): RunStatus | undefined {
  return outcomes?.get<Record<string, RunStatus>>(OUTCOMES_KEY, {})[runDir];
}
/** Run folders a job is running on now. */
export function liveRunDirs(): Set<string> {
  return new Set([...jobs].map((j) => j.spec.runDir));
}
function rememberOutcome(runDir: string, status: RunStatus): void {
  const all = { ...(outcomes?.get<Record<string, RunStatus>>(OUTCOMES_KEY, {}) ?? {}) };
  all[runDir] = status;
  void outcomes?.update(OUTCOMES_KEY, all);
}

export function activateTraining(lab: Lab) {
  outcomes = lab.extension.workspaceState;
  statusItem = vscode.window.createStatusBarItem('agentLab.training', vscode.StatusBarAlignment.Left, 10);
  statusItem.name = 'Agent Lab training';
  statusItem.command = 'agentLab.cancelTraining';
  lab.own(statusItem, runsChanged, { dispose: () => cancelAll() });
  return {
    'agentLab.trainSft': (args?: TrainArgs | vscode.Uri | RunRef) => trainSftCommand(lab, args),
    'agentLab.trainGrpo': (args?: GrpoArgs | RunRef) => trainGrpo(lab, isRunRef(args) ? { fromRunDir: args.runDir } : args ?? {}),
    'agentLab.evaluate': (args?: EvalArgs | RunRef) => evaluate(lab, args ?? {}),
    'agentLab.resumeTraining': (args?: RunRef) => resume(lab, args),
    'agentLab.cancelTraining': () => cancelAll(),
  } satisfies CommandMap;
}

/** A run folder, as the Runs view's items and the message buttons pass it. */
interface RunRef {
  runDir: string;
}
const isRunRef = (v: unknown): v is RunRef =>
  typeof v === 'object' && v !== null && typeof (v as Record<string, unknown>)['runDir'] === 'string' && !('steps' in (v as object) || 'fromRunDir' in (v as object));

function cancelAll(): number {
  const n = jobs.size;
  for (const j of jobs) j.cancel();
  if (n === 0) void vscode.window.showInformationMessage('Agent Lab: no training or evaluation is running.');
  return n;
}

/** Optional arguments when the command is run from code (tests, buttons, the Runs view). */
interface TrainArgs {
  /** A distilled traces file to train on; without it (from code) the default world. */
  traces?: string;
  steps?: number;
  minutes?: number;
  runName?: string;
  evalLimit?: number;
  /** A built world folder to train on (its stub-teacher trajectories, as `train sft --world`). */
  world?: string;
  /** A Hugging Face model folder to start from (as `train sft --base`), and LoRA on it ("r,alpha[,targets]"). */
  base?: string;
  lora?: string;
  /**
   * Continued SFT (`train sft --from`): this SFT run's latest checkpoint, data and world go on
   * training in a new run; only the budget is asked (a refused GRPO run's "Train SFT More…").
   */
  from?: string;
}

async function uniqueRunDir(folder: vscode.WorkspaceFolder, name: string): Promise<string> {
  const runs = runsFolderUri(folder);
  let dir = vscode.Uri.joinPath(runs, name);
  for (let n = 2; await exists(dir); n++) dir = vscode.Uri.joinPath(runs, `${name}-${n}`);
  return dir.fsPath;
}

/** What an SFT run trains on: a distilled traces file, a user's world folder (agentLab.world), or the default world. */
type DataChoice = { traces: string } | { world: string } | { defaultWorld: true };

/**
 * The distilled trajectories to train on: every *.traces.jsonl of the world folders and of
 * the workspace (not a run's own data/ or eval/), the last choice first; the default world
 * only when there is none (or the user picks it).
 */
async function pickTrainingData(lab: Lab, folder: vscode.WorkspaceFolder): Promise<DataChoice | undefined> {
  const runs = runsFolderUri(folder).fsPath;
  const found = new Map<string, number>();
  for (const w of listWorlds(runs)) for (const d of w.datasets) found.set(d.file, d.rows);
  for (const uri of await vscode.workspace.findFiles(new vscode.RelativePattern(folder, '**/*.traces.jsonl'), '**/node_modules/**', 200)) {
    const parent = path.basename(path.dirname(uri.fsPath));
    const inRun = (parent === DATA_DIR || parent === EVAL_DIR) && fs.existsSync(path.join(path.dirname(path.dirname(uri.fsPath)), CONFIG_FILE));
    if (!inRun && !found.has(uri.fsPath)) found.set(uri.fsPath, datasetsIn(path.dirname(uri.fsPath)).find((d) => d.file === uri.fsPath)?.rows ?? 0);
  }
  // A held-out split is never training data.
  const files = [...found.entries()].filter(([f]) => !path.basename(f).startsWith('heldout'));
  // A user's world (agentLab.world first): trained on its stub-teacher trajectories, distilled in the run.
  const configured = configuredWorldFolder(folder);
  const worlds = [...new Set([...(configured ? [configured] : []), ...userWorldFolders(folder)])];
  if (files.length === 0 && configured) return { world: configured };
  if (files.length === 0 && worlds.length === 0) {
    log.info('Train (SFT): no distilled trajectories in the workspace; training on the default world (stub teacher)');
    return { defaultWorld: true };
  }
  const last = lab.extension.workspaceState.get<string>(LAST_DATA_KEY);
  files.sort(([a], [b]) => (a === last ? -1 : b === last ? 1 : b.localeCompare(a)));
  type Item = vscode.QuickPickItem & { choice: DataChoice };
  const items: Item[] = files.map(([file, rows]) => ({
    label: vscode.workspace.asRelativePath(file, false),
    description: `${rows} trajectories${file === last ? ' · last used' : ''}`,
    detail: fs.existsSync(path.join(path.dirname(file), CORPUS_FILE)) ? `distilled in world ${path.basename(path.dirname(file))}` : undefined,
    choice: { traces: file },
  }));
  items.unshift(
    ...worlds.map((dir) => ({
      label: `The world ${path.basename(dir)}`,
      description: dir === configured ? 'agentLab.world' : '',
      detail: 'its tasks with hints, distilled with the stub teacher inside the run folder',
      choice: { world: dir } as DataChoice,
    })),
  );
  items.push({
    label: 'The default world',
    description: last === 'default' ? 'last used' : '',
    detail: 'built and distilled with the stub teacher inside the run folder',
    choice: { defaultWorld: true },
  });
  if (last === 'default') items.unshift(items.pop()!);
  const pick = await vscode.window.showQuickPick(items, { placeHolder: 'Trajectories to train the student on', ignoreFocusOut: true });
  if (!pick) return undefined;
  if ('traces' in pick.choice) await lab.extension.workspaceState.update(LAST_DATA_KEY, pick.choice.traces);
  else if ('defaultWorld' in pick.choice) await lab.extension.workspaceState.update(LAST_DATA_KEY, 'default');
  return pick.choice;
}

/**
 * What the student starts from: a preset, or a Hugging Face model folder (the last one used
 * first), checked by the loader's own inspection before anything is written, then trained
 * fully or with LoRA.
 */
async function pickModel(lab: Lab, folder: vscode.WorkspaceFolder): Promise<ModelChoice | undefined> {
  const configured = lab.config.get('preset', folder.uri);
  const items = modelPickItems(configured, lab.extension.workspaceState.get<string>(LAST_BASE_KEY));
  const pick = await vscode.window.showQuickPick(items, { placeHolder: 'The model to train: a preset, or a Hugging Face model folder', ignoreFocusOut: true });
  if (!pick) return undefined;
  if ('preset' in pick.pick) return { preset: pick.pick.preset };
  let dir: string;
  if ('folder' in pick.pick) dir = pick.pick.folder;
  else {
    const last = lab.extension.workspaceState.get<string>(LAST_BASE_KEY);
    const chosen = await vscode.window.showOpenDialog({
      canSelectFolders: true,
      canSelectFiles: false,
      canSelectMany: false,
      openLabel: 'Train from this model',
      title: 'A Hugging Face model folder (config.json, tokenizer.json, model.safetensors)',
      ...(last ? { defaultUri: vscode.Uri.file(path.dirname(last)) } : {}),
    });
    if (!chosen?.[0]) return undefined;
    dir = chosen[0].fsPath;
  }
  const inspected = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Agent Lab: checking ${path.basename(dir)}` },
    () => runCli(lab.extension, ['model', 'inspect', '--base', dir, '--json'], { cwd: folder.uri.fsPath }),
  );
  const verdict = baseFolderVerdict(dir, inspected);
  const refusal = verdict.ok ? editorRefusal(verdict.info) : verdict.message;
  if (!verdict.ok || refusal !== null) {
    // The loader's own line, naming the folder; nothing was written.
    log.warn(refusal ?? dir);
    void vscode.window.showErrorMessage(refusal ?? dir);
    return undefined;
  }
  await lab.extension.workspaceState.update(LAST_BASE_KEY, dir);
  log.info(`Train (SFT): ${dir}: ${verdict.info.architecture}, ${verdict.info.parameters} parameters`);
  const mode = await vscode.window.showQuickPick(trainModeItems(verdict.info), { placeHolder: `How to train ${path.basename(dir)}`, ignoreFocusOut: true });
  if (!mode) return undefined;
  return { base: dir, ...(mode.lora !== undefined ? { lora: mode.lora } : {}) };
}

type Budget = { steps: number } | { minutes: number };

/** The SFT budget: the settings, or (agentLab.sft.askBudget) a prompt offering them first. */
async function pickBudget(lab: Lab, folder: vscode.WorkspaceFolder): Promise<Budget | undefined> {
  const steps = lab.config.get('sft.steps', folder.uri);
  const minutes = lab.config.get('sft.minutes', folder.uri);
  const fromSettings: Budget = steps > 0 ? { steps } : { minutes };
  if (!lab.config.get('sft.askBudget', folder.uri)) return fromSettings;
  type Item = vscode.QuickPickItem & { budget?: Budget; ask?: 'minutes' | 'steps' };
  const label = (b: Budget) => ('steps' in b ? `${b.steps} steps` : `${b.minutes} minutes`);
  const items: Item[] = [
    { label: label(fromSettings), description: 'from the settings (agentLab.sft.minutes / agentLab.sft.steps)', budget: fromSettings },
    ...[3, 10, 20].filter((m) => !('minutes' in fromSettings && fromSettings.minutes === m)).map((m) => ({
      label: `${m} minutes`,
      description: m === 3 ? 'a first look' : m === 20 ? "the tiny preset's best on 2 CPU cores" : '',
      budget: { minutes: m } as Budget,
    })),
    { label: 'Other minutes…', ask: 'minutes' },
    { label: 'A number of steps…', ask: 'steps' },
  ];
  const pick = await vscode.window.showQuickPick(items, { placeHolder: 'Training budget (a cancelled run keeps its checkpoint and can be resumed)', ignoreFocusOut: true });
  if (!pick) return undefined;
  if (pick.budget) return pick.budget;
  const value = await vscode.window.showInputBox({
    prompt: pick.ask === 'minutes' ? 'Minutes of training (optimiser time; evaluation is not counted)' : 'Optimiser steps',
    value: pick.ask === 'minutes' ? String(minutes) : String(steps || 200),
    validateInput: (v) => (/^\d+(\.\d+)?$/.test(v.trim()) && Number(v) > 0 ? null : 'a positive number'),
  });
  if (value === undefined) return undefined;
  return pick.ask === 'minutes' ? { minutes: Number(value) } : { steps: Math.round(Number(value)) };
}

async function trainSftCommand(lab: Lab, arg?: TrainArgs | vscode.Uri | RunRef): Promise<JobReport | undefined> {
  // From the Explorer or the Runs view: a traces file (or a world folder with one).
  if (arg instanceof vscode.Uri) {
    const file = fs.statSync(arg.fsPath).isDirectory() ? path.join(arg.fsPath, TRAIN_TRACES_FILE) : arg.fsPath;
    if (!fs.existsSync(file)) {
      const choice = await vscode.window.showWarningMessage(`Agent Lab: ${vscode.workspace.asRelativePath(arg, false)} has no train.traces.jsonl yet.`, 'Distill');
      if (choice === 'Distill') void vscode.commands.executeCommand('agentLab.distill', arg, 'train');
      return undefined;
    }
    return trainSft(lab, { traces: file }, true);
  }
  if (isRunRef(arg)) return resume(lab, arg);
  return trainSft(lab, arg ?? {}, arg === undefined);
}

async function trainSft(lab: Lab, args: TrainArgs, interactive: boolean): Promise<JobReport | undefined> {
  const folder = await pickWorkspaceFolder();
  if (!folder) {
    void vscode.window.showErrorMessage('Agent Lab: open a folder first; runs are written into the workspace.');
    return undefined;
  }
  if (args.from !== undefined) return trainSftMore(lab, folder, args.from, args);
  let data: DataChoice | undefined;
  try {
    const world = args.world ?? (interactive || args.traces ? undefined : configuredWorldFolder(folder));
    data = world ? { world } : args.traces ? { traces: args.traces } : interactive ? await pickTrainingData(lab, folder) : { defaultWorld: true };
  } catch (err) {
    reportError('Train (SFT)', err);
    return undefined;
  }
  if (!data) return undefined;
  const model: ModelChoice | undefined =
    args.base !== undefined
      ? { base: args.base, ...(args.lora !== undefined ? { lora: args.lora } : {}) }
      : interactive
        ? await pickModel(lab, folder)
        : { preset: lab.config.get('preset', folder.uri) };
  if (!model) return undefined;
  let budget: Budget | undefined =
    args.steps !== undefined ? { steps: args.steps } : args.minutes !== undefined ? { minutes: args.minutes } : undefined;
  if (!budget && interactive) budget = await pickBudget(lab, folder);
  else if (!budget) {
    const steps = lab.config.get('sft.steps', folder.uri);
    budget = steps > 0 ? { steps } : { minutes: lab.config.get('sft.minutes', folder.uri) };
  }
  if (!budget) return undefined;
  const runDir = await uniqueRunDir(folder, args.runName ?? `sft-${timestamp()}`);
  const spec: JobSpec = {
    kind: 'sft',
    runDir,
    ...sftModelFields(model),
    backend: lab.config.get('backend', folder.uri),
    ...budget,
    evalLimit: args.evalLimit ?? lab.config.get('sft.heldoutTasks', folder.uri),
    ...('world' in data ? { world: data.world } : {}),
    // The worker makes the run folder from the file (trainer/sft/tracesRun.ts); the extension host trains nothing.
    ...('traces' in data ? { traces: data.traces } : {}),
  };
  const on =
    'traces' in data
      ? `Training (SFT) on the trajectories of ${path.basename(data.traces)}`
      : 'world' in data
      ? `Training (SFT) on the world ${path.basename(data.world)}`
      : 'Training (SFT) on the default world';
  const title = 'base' in model ? `${on} from ${path.basename(model.base)}${model.lora !== undefined ? ' (LoRA)' : ''}` : on;
  const result = await runWithProgress(lab, spec, title);
  const prepared = result.done?.kind === 'sft' ? result.done.summary.prepared : undefined;
  if (prepared) result.prepared = prepared;
  return closeJob(result, spec);
}

/**
 * More SFT from an SFT run (a refused GRPO run's "Train SFT More…"): the run's checkpoint,
 * data, tokenizer and world go on in a new run for the budget Train (SFT) asks; its finish
 * message says to start GRPO from the new run.
 */
async function trainSftMore(lab: Lab, folder: vscode.WorkspaceFolder, from: string, args: TrainArgs): Promise<JobReport | undefined> {
  const r = readRun(from);
  if (r.kind !== 'sft' || r.checkpoints.length === 0) {
    void vscode.window.showErrorMessage(`Agent Lab: cannot continue ${path.basename(from)}: it is not an SFT run with a checkpoint.`);
    return undefined;
  }
  const budget: Budget | undefined = args.steps !== undefined ? { steps: args.steps } : args.minutes !== undefined ? { minutes: args.minutes } : await pickBudget(lab, folder);
  if (!budget) return undefined;
  const runDir = await uniqueRunDir(folder, args.runName ?? `sft-more-${timestamp()}`);
  const spec: JobSpec = sftMoreJobSpec(from, runDir, budget, lab.config.reader(folder.uri), args.evalLimit);
  const result = await runWithProgress(lab, spec, `Training (SFT) more from ${path.basename(from)}`);
  return closeJob(result, spec);
}

/** Run folders that hold a trained SFT student (config kind sft and a checkpoint). */
async function sftRuns(folder: vscode.WorkspaceFolder): Promise<string[]> {
  return listRunFolders(runsFolderUri(folder).fsPath).filter((dir) => {
    const r = readRun(dir);
    return r.kind === 'sft' && r.checkpoints.length > 0;
  });
}

async function trainGrpo(lab: Lab, args: GrpoArgs): Promise<JobReport | undefined> {
  const folder = await pickWorkspaceFolder();
  if (!folder) {
    void vscode.window.showErrorMessage('Agent Lab: open a folder first; runs are written into the workspace.');
    return undefined;
  }
  let from = args.fromRunDir;
  if (!from) {
    const candidates = await sftRuns(folder);
    if (candidates.length === 0) {
      void vscode.window.showErrorMessage('Agent Lab: GRPO starts from a trained SFT student; run "Agent Lab: Train (SFT)" first.');
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      candidates.map((c) => {
        const r = readRun(c, runOutcome(c));
        return { label: path.basename(c), description: `${r.step ?? 0} steps${heldoutShort(r) ? ` · ${heldoutShort(r)}` : ''} · ${r.status}`, dir: c };
      }),
      { placeHolder: 'SFT student to start GRPO from' },
    );
    if (!pick) return undefined;
    from = pick.dir;
  }
  const runDir = await uniqueRunDir(folder, args.runName ?? `grpo-${timestamp()}`);
  const spec: JobSpec = grpoJobSpec(args, lab.config.reader(folder.uri), runDir, from);
  const result = await runWithProgress(lab, spec, `Training (GRPO) from ${path.basename(from)}`);
  // The pre-screen refused (the error holds its prediction, cause and next step): a button for
  // each next step the verdict names (config.json's actions; an older trainer's text: its pool), and Train Anyway.
  const verdict = result.error ? prescreenRefusal(result.error) : null;
  if (verdict && !args.force) {
    const refusedRun = refusedRunOf(readJson(path.join(runDir, CONFIG_FILE))) ?? { from, ...(args.pool ? { pool: args.pool } : {}) };
    const pool = suggestedPool(verdict);
    const steps: PreflightAction[] = readRunMeta(runDir)?.preflight?.verdict?.actions ?? (pool ? [{ kind: 'grpo', flags: { pool } }] : []);
    const buttons = steps.map((step) => ({ label: preflightActionLabel(step), step }));
    // "Show Pre-flight": the whole table (per shape, with intervals) in the Training Curves panel.
    void vscode.window.showWarningMessage(`Agent Lab: ${verdict}`, ...buttons.map((b) => b.label), 'Train Anyway', 'Show Pre-flight').then((choice) => {
      if (choice === 'Show Pre-flight') void vscode.commands.executeCommand('agentLab.showCurves', { runDirs: [runDir] });
      const step: RetryStep | undefined = choice === 'Train Anyway' ? { kind: 'force' } : buttons.find((b) => b.label === choice)?.step;
      if (!step) return;
      const cmd = retryCommand(step, refusedRun);
      // A GRPO retry keeps what this call was given (steps, group size…) under the step's flags.
      void vscode.commands.executeCommand(cmd.command, cmd.command === 'agentLab.trainGrpo' ? { ...args, ...cmd.args } : cmd.args);
    });
  }
  return closeJob(result, spec);
}

/** Resume: continues an unfinished SFT or GRPO run from its last checkpoint, with its own budget. */
async function resume(lab: Lab, ref?: RunRef): Promise<JobReport | undefined> {
  let runDir = ref?.runDir;
  if (!runDir) {
    const folder = await pickWorkspaceFolder();
    if (!folder) return undefined;
    const candidates = listRunFolders(runsFolderUri(folder).fsPath)
      .map((d) => readRun(d, runOutcome(d), liveRunDirs().has(d)))
      .filter(isResumable);
    if (candidates.length === 0) {
      void vscode.window.showInformationMessage('Agent Lab: no unfinished run to resume (every run has finished its budget, or none has a checkpoint).');
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      candidates.map((r) => ({ label: r.name, description: `${r.kind} · ${r.status} at step ${r.step ?? 0}`, dir: r.dir })),
      { placeHolder: 'Run to resume from its last checkpoint' },
    );
    if (!pick) return undefined;
    runDir = pick.dir;
  }
  if (liveRunDirs().has(runDir)) {
    void vscode.window.showWarningMessage(`Agent Lab: ${path.basename(runDir)} is training now.`);
    return undefined;
  }
  const run = readRun(runDir);
  if (run.kind !== 'sft' && run.kind !== 'grpo') {
    void vscode.window.showErrorMessage(`Agent Lab: ${path.basename(runDir)} is not an SFT or GRPO run (kind ${run.kind}).`);
    return undefined;
  }
  const backend = lab.config.get('backend');
  const spec: JobSpec = { kind: run.kind, runDir, resume: true, backend };
  const result = await runWithProgress(lab, spec, `Resuming ${run.kind.toUpperCase()} ${path.basename(runDir)} at step ${run.step ?? 0}`);
  return closeJob(result, spec);
}

interface EvalArgs {
  runDir?: string;
  split?: string;
  limit?: number;
  /** With a runDir: still ask for the split (the Runs view's Evaluate). */
  askSplit?: boolean;
  /** Evaluate on this built world folder's split instead of the run's own world. */
  world?: string;
}

async function evaluate(lab: Lab, args: EvalArgs): Promise<JobReport | undefined> {
  let runDir = args.runDir;
  let split = args.split;
  let world = args.world;
  // One chooser (run, split and world in one list, the newest run's held-out first) unless
  // the caller said what to evaluate: a button's run and split, or code.
  if (!split && (runDir === undefined || args.askSplit)) {
    const folder = runDir ? vscode.workspace.workspaceFolders?.find((f) => runDir!.startsWith(f.uri.fsPath + path.sep)) : await pickWorkspaceFolder();
    if (!runDir && !folder) return undefined;
    const runs = runDir
      ? [readRun(runDir, runOutcome(runDir))]
      : listRunFolders(runsFolderUri(folder!).fsPath)
          .map((d) => readRun(d, runOutcome(d)))
          .filter((r) => r.checkpoints.length > 0);
    if (runs.length === 0) {
      void vscode.window.showErrorMessage('Agent Lab: no trained run with a checkpoint in the runs folder; train one first.');
      return undefined;
    }
    let other: { dir: string; name: string } | null = null;
    if (folder && world === undefined) {
      try {
        const dir = configuredWorldFolder(folder);
        if (dir) other = { dir, name: path.basename(dir) };
      } catch {
        other = null; // an unbuilt or broken setting: the runs' own worlds, as without one
      }
    }
    const limitNow = args.limit ?? lab.config.get('evaluate.tasks');
    const rows = evaluateChoices(runs, other, limitNow);
    // A run's line (name, kind, step, figure) is its first row's detail, and runs are parted by a
    // bare line: a labelled separator is drawn over the first row's label (the tour's item 7).
    const items: (vscode.QuickPickItem & { choice?: EvalChoice })[] = [];
    let runLine: string | undefined;
    for (const row of rows) {
      if ('separator' in row) {
        if (items.length) items.push({ label: '', kind: vscode.QuickPickItemKind.Separator });
        runLine = row.separator;
        continue;
      }
      items.push({ label: row.label, description: row.description, ...(runLine ? { detail: runLine } : {}), choice: row });
      runLine = undefined;
    }
    const pick = await vscode.window.showQuickPick(items, { placeHolder: 'What to evaluate (Enter: the newest run on its held-out tasks)', matchOnDescription: true });
    const choice = pick && 'choice' in pick ? pick.choice : undefined;
    if (!choice) return undefined;
    runDir = choice.runDir;
    split = choice.split;
    world = choice.world ?? world;
  }
  if (!runDir) return undefined;
  split ??= 'heldout';
  // From a button or code (a run and a split given): the run's own world unless `world` says another.
  const limit = args.limit ?? lab.config.get('evaluate.tasks');
  const spec: JobSpec = {
    kind: 'eval',
    runDir,
    // A documents world has no fresh splits: the worker refuses them with the reason.
    split: split as EvalSplit,
    backend: lab.config.get('backend'),
    ...(limit > 0 ? { limit } : {}),
    ...(world !== undefined ? { world } : {}),
  };
  const result = await runWithProgress(lab, spec, `Evaluating ${path.basename(runDir)} on ${split}${world !== undefined ? ` of ${path.basename(world)}` : ''}`);
  return closeJob(result, spec);
}

/** The message a job ends with: what it reached, and buttons for the next step. */
function closeJob(result: JobReport, spec: JobSpec): JobReport {
  const name = path.basename(spec.runDir);
  const done = result.done;
  const stepsDone = done && done.kind !== 'eval' ? done.summary.steps : result.checkpoints.at(-1) ?? 0;
  if (spec.kind !== 'eval') rememberOutcome(spec.runDir, result.error ? 'failed' : result.cancelled ? 'cancelled' : 'finished');
  runsChanged.fire();
  if (result.error) return result; // startWorker has shown the error with "Show Log"
  let message: string;
  let actions: string[];
  if (result.cancelled && spec.kind !== 'eval') {
    const ck = result.checkpoints.at(-1);
    message = `${spec.kind.toUpperCase()} ${name} cancelled at step ${stepsDone}; ` + (ck !== undefined ? `checkpoint step-${ck} kept.` : 'no checkpoint was written.');
    actions = ck !== undefined ? ['Resume', 'Open Curves'] : ['Open Curves'];
  } else if (spec.kind === 'eval') {
    const s = done?.kind === 'eval' ? done.summary : undefined;
    message = s ? evaluateFinishMessage(name, s) : `${name}: ${spec.split}: no figure (the evaluation returned no summary).`;
    actions = ['Inspect Evaluation', 'Open Curves', ...(readRun(spec.runDir).kind === 'sft' ? ['Train (GRPO)'] : [])];
  } else {
    const s = done && done.kind !== 'eval' ? done.summary : undefined;
    // The figure names its split, task count, checkpoint and per-shape accuracy (extension/runFigures.ts).
    message = s
      ? trainingFinishMessage(spec.kind, name, s, stepsDone)
      : `${spec.kind.toUpperCase()} ${name} finished: ${stepsDone} steps. (No held-out evaluation in this run: Evaluate gives the figure.)`;
    // More SFT for a refused GRPO run: the GRPO run is the user's to start again, from this run.
    if (spec.kind === 'sft' && spec.from !== undefined) message += ` ${sftMoreNext(spec.from)}`;
    // A GRPO run is judged beside its SFT start: the results table has both.
    actions = spec.kind === 'sft' ? ['Evaluate', 'Open Curves', 'Train (GRPO)'] : ['Evaluate', 'Open Curves', 'Compare Runs'];
  }
  result.message = message;
  result.actions = actions;
  log.info(message);
  // An information toast with buttons goes to the notification centre after a few seconds (VS Code
  // makes only errors with buttons sticky, and the API has no say): the toast says where they stay.
  const where = actions.length ? ' (These steps stay on the run in the Runs view.)' : '';
  void vscode.window.showInformationMessage(`Agent Lab: ${message}${where}`, ...actions).then((choice) => {
    const ref = { runDir: spec.runDir };
    if (choice === 'Resume') void vscode.commands.executeCommand('agentLab.resumeTraining', ref);
    if (choice === 'Open Curves') void vscode.commands.executeCommand('agentLab.showCurves', { runDirs: [spec.runDir] });
    if (choice === 'Evaluate') void vscode.commands.executeCommand('agentLab.evaluate', { runDir: spec.runDir, split: 'heldout' });
    if (choice === 'Train (GRPO)') void vscode.commands.executeCommand('agentLab.trainGrpo', { fromRunDir: spec.runDir });
    if (choice === 'Compare Runs') void vscode.commands.executeCommand('agentLab.compareRuns');
    if (choice === 'Inspect Evaluation' && spec.kind === 'eval') {
      void vscode.commands.executeCommand('agentLab.inspectTrajectories', { uri: vscode.Uri.file(path.join(spec.runDir, EVAL_DIR, evalRowsFile(spec.split))).toString(), outcome: 'failed' });
    }
  });
  return result;
}

function runWithProgress(lab: Lab, spec: JobSpec, title: string): Thenable<JobReport> {
  return vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Agent Lab: ${title}`, cancellable: true },
    (progress, token) => {
      const started = Date.now();
      let reported = 0; // percent of the bar filled so far
      let lastFraction = 0;
      const memo: ProgressMemo = {};
      const job = startWorker(lab, spec, (msg) => {
        // The pre-screen's verdict is in config.json once logged: shown before step 1 (issue 33).
        if (msg.type === 'log' && spec.kind === 'grpo' && msg.message.startsWith('pre-screen verdict:')) showPreflight(spec.runDir, msg.level, (m) => progress.report({ message: m }));
        if (msg.type !== 'progress') return;
        const view = describeProgress(spec.kind, msg, (Date.now() - started) / 1000, lastFraction, memo);
        let increment: number | undefined;
        if (view.fraction !== null) {
          lastFraction = view.fraction;
          const target = Math.min(100, Math.round(100 * view.fraction));
          if (target > reported) increment = target - reported;
          reported = Math.max(reported, target);
        }
        progress.report({ message: view.text, ...(increment ? { increment } : {}) });
        setStatus(`${spec.kind.toUpperCase()}: ${view.short}`);
      });
      token.onCancellationRequested(() => {
        progress.report({ message: 'stopping after the current step and writing a checkpoint…' });
        job.cancel();
      });
      runsChanged.fire();
      return job.done;
    },
  );
}

/**
 * A GRPO run's checks before step 1 where the user looks: the prediction per shape and the
 * verdict in the progress notification, a message with "Show Pre-flight" (the Training
 * Curves panel's table), and an open curves panel updated. A forced FAIL comes as the
 * worker's warning already, so it gets no second message.
 */
function showPreflight(runDir: string, level: 'info' | 'warn' | 'error', report: (message: string) => void): void {
  const view = readRunMeta(runDir)?.preflight;
  if (!view) return;
  const line = preflightLine(view);
  report(line);
  CurvesPanel.current?.refresh(runDir);
  if (level !== 'info') return;
  void vscode.window.showInformationMessage(`Agent Lab (GRPO), before step 1: ${line}`, 'Show Pre-flight').then((choice) => {
    if (choice === 'Show Pre-flight') void vscode.commands.executeCommand('agentLab.showCurves', { runDirs: [runDir] });
  });
}

function setStatus(text: string | null): void {
  if (!statusItem) return;
  if (text === null || jobs.size === 0) {
    statusItem.hide();
    return;
  }
  statusItem.text = `$(sync~spin) ${text}`;
  statusItem.tooltip = 'Agent Lab is training. Click to cancel (the run keeps its checkpoints).';
  statusItem.show();
}

/** Forks the worker and supervises it: a crash or a hang is reported, never silent. */
export function startWorker(lab: Lab, spec: JobSpec, onMessage: (m: FromWorker) => void): ActiveJob {
  mkdirSync(path.dirname(spec.runDir), { recursive: true });
  const child = forkWorker(lab.extension, spec, path.dirname(spec.runDir));
  const result: JobReport = { ok: false, runDir: spec.runDir, done: null, cancelled: false, summary: {}, checkpoints: [], progressEvents: 0 };
  let killTimer: NodeJS.Timeout | undefined;
  const job: ActiveJob = {
    spec,
    child,
    cancel() {
      if (child.connected) child.send({ type: 'cancel' } satisfies ToWorker);
      // A worker that does not stop within a minute is killed; checkpoints are complete files.
      killTimer ??= setTimeout(() => child.kill('SIGKILL'), 60_000);
    },
    done: new Promise<JobReport>((resolve) => {
      onWorkerMessage(child, (msg) => {
        switch (msg.type) {
          case 'started':
            log.info(`${spec.kind} started in ${spec.runDir} (backend ${msg.backend}, pid ${msg.pid})`);
            break;
          case 'log':
            log[msg.level === 'error' ? 'error' : msg.level === 'warn' ? 'warn' : 'info'](msg.message);
            // A GRPO run that has stopped learning says so where the user looks.
            if (msg.level === 'warn' && spec.kind === 'grpo') void vscode.window.showWarningMessage(`Agent Lab (GRPO): ${msg.message}`);
            break;
          case 'checkpoint':
            result.checkpoints.push(msg.step);
            log.info(`checkpoint step ${msg.step}: ${msg.path}`);
            break;
          case 'progress':
            result.progressEvents++;
            break;
          case 'done': {
            const { type: _type, ...done } = msg;
            if (!isRunJobResult(done)) break;
            result.ok = true;
            result.done = done;
            result.cancelled = done.cancelled;
            result.summary = done.summary;
            break;
          }
          case 'failed':
            result.error = msg.error;
            break;
          case 'metrics':
            publishLiveMetrics(spec.runDir, msg.record); // live curves
            break;
        }
        onMessage(msg);
      });
      child.on('exit', (code, signal) => {
        if (killTimer) clearTimeout(killTimer);
        jobs.delete(job);
        setStatus(null);
        publishJobEnded(spec.runDir); // live curves
        if (!result.ok && !result.error) result.error = `the worker exited (code ${code}, signal ${signal}) without finishing`;
        if (result.error) reportError(`${spec.kind} in ${path.basename(spec.runDir)} failed`, new Error(result.error));
        else log.info(`${spec.kind} ${result.cancelled ? 'cancelled' : 'finished'}: ${JSON.stringify(result.summary)}`);
        resolve(result);
      });
      child.on('error', (err) => {
        result.error = err.message;
      });
    }),
  };
  jobs.add(job);
  setStatus(`${spec.kind} starting`);
  return job;
}
