// Training Curves ("Agent Lab: Show Training Curves"): chart.js charts of runs'
// metrics.jsonl, several runs overlaid, live while a job runs: the file is tailed (a poll
// reads only what was appended) and a running job's worker messages (liveMetrics.ts) make
// the panel add the run and read it at once. A chart can be saved as PNG.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { CurvesState, FromWebview, RunRef, ToWebview } from '../../core/protocol/panels';
import { MetricRecord, recordKey } from '../../core/protocol/metrics';
import { log } from '../log';
import { runsFolderUri } from '../workspace';
import { PanelController, PanelHost, createPanel } from './host';
import { liveRuns, onLiveMetrics } from './liveMetrics';
import { MetricsTail } from './metricsTail';
import { CONFIG_FILE, METRICS_FILE } from '../../core/protocol/folders';
import { readRunMeta } from '../runMeta';
import { readJson } from '../runFolders';
import { commandOfMessage } from '../preflightActions';

const POLL_MS = 1000;
const MEMENTO_KEY = 'agentLab.curves.runs';
let memento: vscode.Memento | undefined;

/** Where the panel remembers its runs (the workspace), for a panel opened after a reload. */
export function setCurvesMemento(m: vscode.Memento): void {
  memento = m;
}

interface TrackedRun {
  ref: RunRef;
  tail: MetricsTail;
  records: Map<string, MetricRecord>;
  problems: string[];
}

export class CurvesPanel implements PanelController {
  static current: CurvesPanel | undefined;

  private readonly runs = new Map<string, TrackedRun>();
  private readonly disposables: vscode.Disposable[] = [];
  private readonly timer: NodeJS.Timeout;
  /** Records posted so far (tests read it). */
  posted = 0;

  private constructor(
    readonly host: PanelHost,
    dirs: readonly string[],
  ) {
    host.attach(this);
    for (const d of dirs) this.addRun(d, false);
    this.timer = setInterval(() => this.pollAll(), POLL_MS);
    this.disposables.push(
      onLiveMetrics((e) => {
        const run = this.runs.get(e.runDir);
        if (!run) {
          if (e.record !== null) this.addRun(e.runDir, true);
        } else if (e.record === null) this.postRun(run, [], false); // the job ended: no longer live
        else this.poll(run);
      }),
    );
  }

  static open(extensionUri: vscode.Uri, dirs: readonly string[]): CurvesPanel {
    const current = CurvesPanel.current;
    if (current && !current.host.isDisposed) {
      current.host.panel.reveal(undefined, true);
      for (const d of dirs) if (!current.runs.has(d)) current.addRun(d, true);
      else current.refresh(d);
      return current;
    }
    // The runs the last panel showed come back (a panel replacing a tab that was not revived).
    const remembered = (memento?.get<string[]>(MEMENTO_KEY) ?? []).filter((d) => typeof d === 'string' && fs.existsSync(path.join(d, METRICS_FILE)));
    const all = [...new Set([...remembered, ...dirs])];
    const panel = createPanel('curves', 'Training Curves', extensionUri, true);
    return (CurvesPanel.current = new CurvesPanel(new PanelHost('curves', panel, extensionUri, 'Training Curves'), all));
  }

  static revive(extensionUri: vscode.Uri, panel: vscode.WebviewPanel, state: CurvesState | null): CurvesPanel {
    const dirs = (state?.runs ?? []).filter((d) => path.isAbsolute(d) && fs.existsSync(d));
    // A live panel already exists (background tabs are revived lazily, when shown): it takes
    // the stale tab's runs, and the stale tab closes.
    const live = CurvesPanel.current;
    if (live && !live.host.isDisposed) {
      for (const d of dirs) live.addRun(d, true);
      panel.dispose();
      live.host.panel.reveal(undefined, true);
      return live;
    }
    return (CurvesPanel.current = new CurvesPanel(new PanelHost('curves', panel, extensionUri, panel.title), dirs));
  }

  get runDirs(): string[] {
    return [...this.runs.keys()];
  }

  private addRun(dir: string, post: boolean): void {
    if (this.runs.has(dir)) return;
    const ref: RunRef = { id: dir, label: runLabel(dir), dir };
    const run: TrackedRun = { ref, tail: new MetricsTail(path.join(dir, METRICS_FILE)), records: new Map(), problems: [] };
    this.runs.set(dir, run);
    void memento?.update(MEMENTO_KEY, this.runDirs);
    this.read(run);
    if (post) this.postRun(run, [...run.records.values()], true);
  }

  private pollAll(): void {
    for (const run of this.runs.values()) this.poll(run);
  }

  /** Reads what the run's file gained; null when nothing. */
  private read(run: TrackedRun): { records: MetricRecord[]; reset: boolean } | null {
    let update;
    try {
      update = run.tail.poll();
    } catch (err) {
      log.warn(`curves: reading ${run.tail.file}: ${String(err)}`);
      return null;
    }
    if (!update) return null;
    if (update.reset) run.records.clear();
    for (const r of update.records) run.records.set(recordKey(r), r);
    run.problems.push(...update.problems);
    if (run.problems.length > 20) run.problems.splice(0, run.problems.length - 20);
    return { records: update.reset ? [...run.records.values()] : update.records, reset: update.reset };
  }

  /** Posts what the run's file gained since the last read. */
  private poll(run: TrackedRun): void {
    const got = this.read(run);
    if (got) this.postRun(run, got.records, got.reset);
  }

  /** Posts the run again with what its config.json says now (a GRPO run's pre-screen is written before its first metrics line). */
  refresh(dir: string): void {
    const run = this.runs.get(dir);
    if (run) this.postRun(run, [], false);
  }

  private postRun(run: TrackedRun, records: MetricRecord[], reset: boolean): void {
    // config.json is read each time: its kind, curriculum and a GRPO run's pre-flight (the panel draws the phase marks and the pre-flight table).
    const meta = readRunMeta(run.ref.dir);
    const msg: ToWebview = { type: 'curves/run', run: run.ref, records, reset, live: liveRuns.has(run.ref.dir), problems: run.problems.slice(-5), meta };
    if (this.host.post(msg)) this.posted += records.length;
  }

  onReady(): void {
    if (this.runs.size === 0) {
      this.host.post({
        type: 'curves/status',
        message: 'No run yet. Train one (Agent Lab: Train (SFT)): its curves appear here live. Or add a run folder.',
      });
    }
    for (const run of this.runs.values()) this.postRun(run, [...run.records.values()], true);
  }

  async onMessage(msg: FromWebview): Promise<void> {
    switch (msg.type) {
      case 'curves/addRun': {
        const dirs = await pickRuns(this.runDirs);
        for (const d of dirs) this.addRun(d, true);
        return;
      }
      case 'curves/removeRun':
        if (this.runs.delete(msg.id)) {
          void memento?.update(MEMENTO_KEY, this.runDirs);
          this.host.post({ type: 'curves/removed', id: msg.id });
        }
        return;
      case 'curves/savePng':
        await savePng(msg.chart, msg.dataUrl, this.runDirs[0]);
        return;
      case 'curves/retryGrpo':
      case 'curves/sftMore': {
        // Only a run the panel shows, from its own config.json: Train (GRPO) from its SFT run with the
        // step's flags, or Train (SFT) continuing that SFT run (extension/preflightActions.ts).
        if (!this.runs.has(msg.id)) return;
        const cmd = commandOfMessage(msg, readJson(path.join(msg.id, CONFIG_FILE)));
        if (typeof cmd === 'string') {
          log.warn(`curves: ${msg.type} ignored: ${cmd}`);
          return;
        }
        void vscode.commands.executeCommand(cmd.command, cmd.args);
        return;
      }
      default:
        return;
    }
  }

  dispose(): void {
    clearInterval(this.timer);
    for (const d of this.disposables) d.dispose();
    if (CurvesPanel.current === this) CurvesPanel.current = undefined;
  }
}

function runLabel(dir: string): string {
  const rel = vscode.workspace.asRelativePath(dir, false);
  return rel === dir ? path.basename(dir) : rel;
}

/** Run folders (holding metrics.jsonl) in the workspace's runs folder, newest first. */
export async function listRuns(): Promise<string[]> {
  const out: { dir: string; mtime: number }[] = [];
  for (const folder of vscode.workspace.workspaceFolders ?? []) {
    let root: vscode.Uri;
    try {
      root = runsFolderUri(folder);
    } catch {
      continue;
    }
    let entries: [string, vscode.FileType][] = [];
    try {
      entries = await vscode.workspace.fs.readDirectory(root);
    } catch {
      continue;
    }
    for (const [name, type] of entries) {
      if (type !== vscode.FileType.Directory) continue;
      const file = path.join(root.fsPath, name, METRICS_FILE);
      try {
        out.push({ dir: path.join(root.fsPath, name), mtime: fs.statSync(file).mtimeMs });
      } catch {
        /* not a run (a world folder) */
      }
    }
  }
  return out.sort((a, b) => b.mtime - a.mtime).map((r) => r.dir);
}

/** The run folder holding `file` (walking up to a folder with metrics.jsonl or config.json). */
export function runDirOf(file: string): string | null {
  let dir = fs.existsSync(file) && fs.statSync(file).isDirectory() ? file : path.dirname(file);
  for (let i = 0; i < 6; i++) {
    if (fs.existsSync(path.join(dir, METRICS_FILE)) || fs.existsSync(path.join(dir, CONFIG_FILE))) return dir;
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return null;
}

async function pickRuns(already: readonly string[]): Promise<string[]> {
  const runs = (await listRuns()).filter((d) => !already.includes(d));
  const browse = { label: '$(folder-opened) Browse for a run folder…', dir: '' };
  const items = [...runs.map((d) => ({ label: runLabel(d), description: d, dir: d })), browse];
  const picked = await vscode.window.showQuickPick(items, { placeHolder: 'Runs to overlay', canPickMany: true });
  if (!picked) return [];
  const dirs = picked.filter((p) => p.dir !== '').map((p) => p.dir);
  if (picked.includes(browse)) {
    const chosen = await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, canSelectMany: true, openLabel: 'Add run' });
    for (const u of chosen ?? []) dirs.push(u.fsPath);
  }
  return dirs;
}

async function savePng(chart: string, dataUrl: string, runDir: string | undefined): Promise<void> {
  const bytes = Buffer.from(dataUrl.slice(dataUrl.indexOf(',') + 1), 'base64');
  // A PNG starts with its 8-byte signature; anything else is refused.
  if (bytes.length < 8 || bytes.subarray(0, 8).toString('hex') !== '89504e470d0a1a0a') {
    log.warn('curves: refused a PNG without the PNG signature');
    return;
  }
  const base = runDir ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? process.cwd();
  const target = await vscode.window.showSaveDialog({
    defaultUri: vscode.Uri.file(path.join(base, `${chart}.png`)),
    filters: { 'PNG image': ['png'] },
    saveLabel: 'Save chart',
  });
  if (!target) return;
  await vscode.workspace.fs.writeFile(target, bytes);
  log.info(`curves: saved ${chart} as ${target.fsPath}`);
  void vscode.window.showInformationMessage(`Agent Lab: chart saved to ${vscode.workspace.asRelativePath(target)}`);
}
