// The Runs view (the Agent Lab container in the activity bar): the worlds and the datasets
// distilled into them, and the runs with their kind, preset, backend, status and held-out
// figure, each with its checkpoints and evaluations. Inline actions start the next step
// (train on a dataset, evaluate, resume, curves, ask the student, export) or reveal and
// delete a folder (after a modal confirmation). It refreshes when a file its items come
// from changes (extension/runsWatch.ts: a non-recursive watcher per world and run folder),
// when a job starts or ends, and when Distill or Build World has written.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { log, reportError } from './log';
import { DatasetInfo, EvalInfo, RunInfo, WorldInfo, datasetTooltipLines, describeRun, evalDescription, isResumable, listRunFolders, listRunFoldersWithLive, listWorlds, readRun, runFigureLines } from './runFolders';
import { liveRunDirs, onRunsChanged, runOutcome } from './training';
import { runsFolderUri } from './workspace';
import { diffTargets, isRunsViewFile, targetKey, watchTargets } from './runsWatch';
import { CHECKPOINTS_DIR } from '../core/protocol/folders';
import type { CommandMap } from './commands';
import type { Lab } from './lab';
import type { CommandId } from './commandIds';

type Node =
  | { type: 'group'; group: 'worlds' | 'runs'; root: string }
  | { type: 'world'; world: WorldInfo }
  | { type: 'dataset'; dataset: DatasetInfo }
  | { type: 'run'; run: RunInfo }
  | { type: 'checkpoints'; run: RunInfo }
  | { type: 'checkpoint'; run: RunInfo; name: string }
  | { type: 'eval'; run: RunInfo; eval: EvalInfo }
  | { type: 'empty'; message: string };

const STATUS_ICON: Record<string, string> = {
  live: 'sync~spin',
  finished: 'pass',
  cancelled: 'debug-pause',
  failed: 'error',
  stopped: 'debug-pause',
  new: 'circle-outline',
};

class RunsTree implements vscode.TreeDataProvider<Node> {
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;

  /** The group nodes, one object per group and runs folder: refreshes name them, not the root. */
  private readonly groups = new Map<string, Node & { type: 'group' }>();
  private rootsKey = '';

  /**
   * Re-reads the groups (their children); the root only when the runs folders changed.
   * Refreshing the root while VS Code is still resolving an expanded group's children can
   * leave that group empty, so ordinary changes (a run writing its files) refresh the groups.
   */
  refresh(): void {
    // Nothing shown yet: VS Code reads everything fresh when it first shows the view.
    if (this.groups.size === 0) return;
    const key = this.runsRoots().join('\n');
    if (key !== this.rootsKey) {
      this.changed.fire(undefined);
      return;
    }
    for (const g of this.groups.values()) this.changed.fire(g);
  }

  /** Everything from the root (the workspace folders or the runs folder setting changed; the Refresh button). */
  refreshAll(): void {
    this.changed.fire(undefined);
  }

  private group(group: 'worlds' | 'runs', root: string): Node & { type: 'group' } {
    const id = `${group}:${root}`;
    let g = this.groups.get(id);
    if (!g) {
      g = { type: 'group', group, root };
      this.groups.set(id, g);
    }
    return g;
  }

  runsRoots(): string[] {
    const out: string[] = [];
    for (const f of vscode.workspace.workspaceFolders ?? []) {
      try {
        out.push(runsFolderUri(f).fsPath);
      } catch (err) {
        log.warn(`Runs view: ${(err as Error).message}`);
      }
    }
    return out;
  }

  getChildren(node?: Node): Node[] {
    try {
      return this.children(node);
    } catch (err) {
      // One unreadable folder must not blank the view: say it, show the rest.
      log.error('Runs view: reading the runs folder failed', err);
      return [{ type: 'empty', message: `Cannot read the runs folder: ${(err as Error).message}` }];
    }
  }

  private children(node?: Node): Node[] {
    if (!node) {
      const roots = this.runsRoots();
      this.rootsKey = roots.join('\n');
      if (roots.length === 0) return [];
      return roots.flatMap((root) => [this.group('worlds', root), this.group('runs', root)]);
    }
    switch (node.type) {
      case 'group': {
        if (node.group === 'worlds') {
          const worlds = listWorlds(node.root);
          return worlds.length ? worlds.map((world) => ({ type: 'world', world })) : [{ type: 'empty', message: 'No world yet: Build World' }];
        }
        const live = liveRunDirs();
        const runs = listRunFoldersWithLive(node.root, live).map((d) => readRun(d, runOutcome(d), live.has(d)));
        return runs.length ? runs.map((run) => ({ type: 'run', run })) : [{ type: 'empty', message: 'No run yet: Train (SFT)' }];
      }
      case 'world':
        return node.world.datasets.map((dataset) => ({ type: 'dataset', dataset }));
      case 'run': {
        const out: Node[] = [];
        if (node.run.checkpoints.length) out.push({ type: 'checkpoints', run: node.run });
        for (const e of node.run.evals) out.push({ type: 'eval', run: node.run, eval: e });
        return out;
      }
      case 'checkpoints':
        return [...node.run.checkpoints].reverse().map((name) => ({ type: 'checkpoint', run: node.run, name }));
      default:
        return [];
    }
  }

  getTreeItem(node: Node): vscode.TreeItem {
    try {
      return this.item(node);
    } catch (err) {
      log.error(`Runs view: showing ${node.type} failed`, err);
      return new vscode.TreeItem(`(${node.type}: ${(err as Error).message})`);
    }
  }

  private item(node: Node): vscode.TreeItem {
    const C = vscode.TreeItemCollapsibleState;
    switch (node.type) {
      case 'group': {
        const multi = (vscode.workspace.workspaceFolders?.length ?? 0) > 1;
        const item = new vscode.TreeItem(node.group === 'worlds' ? 'Worlds and datasets' : 'Runs', C.Expanded);
        item.id = `${node.group}:${node.root}`;
        item.contextValue = `group.${node.group}`;
        if (multi) item.description = vscode.workspace.asRelativePath(node.root, true);
        return item;
      }
      case 'world': {
        const item = new vscode.TreeItem(node.world.name, node.world.datasets.length ? C.Expanded : C.None);
        // A leaf gets another id than the same folder with children: VS Code keeps the state it
        // knows for an id, so a world that gains its first dataset must be a new item to expand.
        item.id = `world:${node.world.dir}${node.world.datasets.length ? '' : ':leaf'}`;
        item.resourceUri = vscode.Uri.file(node.world.dir);
        item.iconPath = new vscode.ThemeIcon('globe');
        item.description = node.world.datasets.length ? `${node.world.datasets.length} distilled` : 'not distilled yet';
        item.tooltip = `${node.world.dir}\ncorpus.jsonl, train.jsonl, heldout.jsonl`;
        item.contextValue = 'world';
        return item;
      }
      case 'dataset': {
        const item = new vscode.TreeItem(path.basename(node.dataset.file), C.None);
        item.id = `dataset:${node.dataset.file}`;
        item.resourceUri = vscode.Uri.file(node.dataset.file);
        item.iconPath = new vscode.ThemeIcon('database');
        item.description = `${node.dataset.rows} ${node.dataset.rows === 1 ? 'trajectory' : 'trajectories'}`;
        let modified: Date | null = null;
        try {
          modified = fs.statSync(node.dataset.file).mtime;
        } catch {
          /* gone since the listing: the next refresh drops it */
        }
        item.tooltip = datasetTooltipLines(node.dataset, modified).join('\n');
        item.command = { command: 'vscode.open', title: 'Open', arguments: [vscode.Uri.file(node.dataset.file)] };
        item.contextValue = path.basename(node.dataset.file).startsWith('heldout') ? 'dataset.heldout' : 'dataset';
        return item;
      }
      case 'run': {
        const r = node.run;
        const item = new vscode.TreeItem(r.name, r.checkpoints.length || r.evals.length ? C.Collapsed : C.None);
        item.id = `run:${r.dir}${r.checkpoints.length || r.evals.length ? '' : ':leaf'}`;
        item.resourceUri = vscode.Uri.file(r.dir);
        item.iconPath = new vscode.ThemeIcon(STATUS_ICON[r.status] ?? 'circle-outline');
        item.description = describeRun(r);
        const budget = r.budget ? (r.budget.steps !== undefined ? `${r.budget.steps} steps` : `${r.budget.minutes} minutes`) : 'unknown';
        item.tooltip = new vscode.MarkdownString(
          [
            `**${r.name}** (${r.kind})`,
            `status: ${r.status}${r.step !== null ? ` at step ${r.step}` : ''}; budget ${budget}`,
            r.base
              ? `from the Hugging Face model ${r.base.dir}${r.base.lora ? ` with LoRA (${r.base.lora})` : ', fully fine-tuned'}, backend ${r.backend ?? '—'}`
              : `preset ${r.preset ?? '—'}, backend ${r.backend ?? '—'}`,
            ...runFigureLines(r),
            r.trainedOn ? `trained on ${vscode.workspace.asRelativePath(r.trainedOn, false)}` : '',
          ]
            .filter(Boolean)
            .join('\n\n'),
        );
        const tags = [r.kind === 'sft' || r.kind === 'grpo' ? 'trained' : '', isResumable(r) ? 'resumable' : '', r.kind === 'sft' && r.checkpoints.length ? 'sft' : ''];
        item.contextValue = ['run', ...tags.filter(Boolean)].join('.');
        return item;
      }
      case 'checkpoints': {
        const item = new vscode.TreeItem('Checkpoints', C.Collapsed);
        item.id = `checkpoints:${node.run.dir}`;
        item.description = `${node.run.checkpoints.length}`;
        item.iconPath = new vscode.ThemeIcon('save-all');
        return item;
      }
      case 'checkpoint': {
        const item = new vscode.TreeItem(node.name, C.None);
        item.id = `checkpoint:${node.run.dir}:${node.name}`;
        item.resourceUri = vscode.Uri.file(path.join(node.run.dir, CHECKPOINTS_DIR, node.name));
        item.iconPath = new vscode.ThemeIcon('save');
        item.contextValue = 'checkpoint';
        return item;
      }
      case 'eval': {
        const e = node.eval;
        const item = new vscode.TreeItem(`eval: ${e.split}`, C.None);
        item.id = `eval:${node.run.dir}:${e.split}`;
        item.iconPath = new vscode.ThemeIcon('checklist');
        item.description = evalDescription(e);
        item.contextValue = e.rowsFile ? 'eval.rows' : 'eval';
        // The failures first, as "Inspect Evaluation" opens them (the filter offers every outcome).
        if (e.rowsFile) item.command = { command: 'agentLab.inspectTrajectories', title: 'Inspect the failures', arguments: [{ uri: vscode.Uri.file(e.rowsFile).toString(), outcome: 'failed' }] };
        return item;
      }
      case 'empty': {
        const item = new vscode.TreeItem(node.message, C.None);
        item.iconPath = new vscode.ThemeIcon('info');
        return item;
      }
    }
  }
}

/** A tree node, or what a command was passed from elsewhere, as a run folder path. */
function runDirOfArg(arg: unknown): string | undefined {
  const n = arg as Node | undefined;
  if (n?.type === 'run' || n?.type === 'checkpoint' || n?.type === 'eval' || n?.type === 'checkpoints') return n.run.dir;
  if (arg instanceof vscode.Uri) return arg.fsPath;
  if (typeof arg === 'object' && arg !== null && typeof (arg as Record<string, unknown>)['runDir'] === 'string') return (arg as { runDir: string }).runDir;
  return undefined;
}

function pathOfNode(n: Node): string | undefined {
  if (n.type === 'world') return n.world.dir;
  if (n.type === 'dataset') return n.dataset.file;
  if (n.type === 'run') return n.run.dir;
  if (n.type === 'checkpoint') return path.join(n.run.dir, CHECKPOINTS_DIR, n.name);
  if (n.type === 'eval') return n.eval.rowsFile ?? n.eval.file;
  return undefined;
}

export function activateRunsView(lab: Lab) {
  const tree = new RunsTree();
  const view = vscode.window.createTreeView('agentLab.runs', { treeDataProvider: tree, showCollapseAll: true });
  let timer: NodeJS.Timeout | undefined;
  // Changes while the view is hidden are applied when it shows (a run writes every step).
  let stale = false;
  // One watcher per folder the items come from (extension/runsWatch.ts), kept in step with
  // the folders there are: non-recursive watchers are served even where files.watcherExclude
  // or a remote host's recursive watcher drop events.
  const watchers = new Map<string, vscode.FileSystemWatcher>();
  const onFile = (uri: vscode.Uri) => {
    if (isRunsViewFile(uri.fsPath, tree.runsRoots())) refreshSoon();
  };
  const syncWatchers = () => {
    try {
      const roots = tree.runsRoots();
      const worlds = roots.flatMap((r) => listWorlds(r).map((w) => w.dir));
      const runs = roots.flatMap((r) => listRunFolders(r));
      const { start, stop } = diffTargets(watchers.keys(), watchTargets(roots, worlds, runs));
      for (const key of stop) {
        watchers.get(key)?.dispose();
        watchers.delete(key);
      }
      for (const t of start) {
        const w = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(vscode.Uri.file(t.base), t.pattern));
        w.onDidCreate(onFile);
        w.onDidChange(onFile);
        w.onDidDelete(onFile);
        watchers.set(targetKey(t), w);
      }
    } catch (err) {
      log.warn(`Runs view: watching the runs folder failed: ${(err as Error).message}`);
    }
  };
  const refreshNow = () => {
    syncWatchers();
    tree.refresh();
  };
  // At most one refresh in 800 ms: a run writing every step must not hold the view back (a
  // debounce that restarts on each write would never fire while it trains).
  const refreshSoon = () => {
    if (!view.visible) {
      stale = true;
      syncWatchers();
      return;
    }
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      refreshNow();
    }, 800);
  };
  view.onDidChangeVisibility((e) => {
    if (e.visible && stale) {
      stale = false;
      refreshNow();
    }
  }, undefined, lab.extension.subscriptions);
  syncWatchers();
  // A context-menu command's failure is reported, never a silent rejection.
  const cmd = (id: CommandId, fn: (node: Node) => unknown) => async (node: Node) => {
    try {
      await fn(node);
    } catch (err) {
      reportError(`${id} failed`, err);
    }
  };
  const refreshAll = () => {
    syncWatchers();
    tree.refreshAll();
  };
  lab.own(
    view,
    { dispose: () => watchers.forEach((w) => w.dispose()) },
    onRunsChanged(refreshSoon),
    vscode.workspace.onDidChangeWorkspaceFolders(refreshAll),
    vscode.workspace.onDidChangeConfiguration((e) => e.affectsConfiguration('agentLab.runsFolder') && refreshAll()),
    { dispose: () => timer && clearTimeout(timer) },
  );
  return {
    'agentLab.runs.refresh': refreshAll,
    'agentLab.runs.trainOnDataset': cmd('agentLab.runs.trainOnDataset', (n) => n.type === 'dataset' && vscode.commands.executeCommand('agentLab.trainSft', vscode.Uri.file(n.dataset.file))),
    'agentLab.runs.distill': cmd('agentLab.runs.distill', (n) => n.type === 'world' && vscode.commands.executeCommand('agentLab.distill', vscode.Uri.file(n.world.dir))),
    'agentLab.runs.evaluate': cmd('agentLab.runs.evaluate', (n) => vscode.commands.executeCommand('agentLab.evaluate', { runDir: runDirOfArg(n), askSplit: true })),
    'agentLab.runs.resume': cmd('agentLab.runs.resume', (n) => vscode.commands.executeCommand('agentLab.resumeTraining', { runDir: runDirOfArg(n) })),
    'agentLab.runs.curves': cmd('agentLab.runs.curves', (n) => vscode.commands.executeCommand('agentLab.showCurves', { runDirs: [runDirOfArg(n)] })),
    'agentLab.runs.grpo': cmd('agentLab.runs.grpo', (n) => vscode.commands.executeCommand('agentLab.trainGrpo', { fromRunDir: runDirOfArg(n) })),
    'agentLab.runs.ask': cmd('agentLab.runs.ask', (n) => vscode.commands.executeCommand('agentLab.askStudent', { runDir: runDirOfArg(n) })),
    'agentLab.runs.export': cmd('agentLab.runs.export', (n) => vscode.commands.executeCommand('agentLab.exportTrl', { runDir: runDirOfArg(n) })),
    'agentLab.runs.inspect': cmd('agentLab.runs.inspect', (n) => {
      const p = pathOfNode(n);
      if (p) return vscode.commands.executeCommand('agentLab.inspectTrajectories', vscode.Uri.file(p));
      return undefined;
    }),
    'agentLab.runs.reveal': cmd('agentLab.runs.reveal', (n) => {
      const p = pathOfNode(n);
      if (p) return vscode.commands.executeCommand('revealInExplorer', vscode.Uri.file(p));
      return undefined;
    }),
    'agentLab.runs.delete': cmd('agentLab.runs.delete', async (n) => {
      const p = n.type === 'run' ? n.run.dir : n.type === 'world' ? n.world.dir : undefined;
      if (!p) return;
      if (liveRunDirs().has(p)) {
        void vscode.window.showWarningMessage(`Agent Lab: ${path.basename(p)} is training now; cancel it first.`);
        return;
      }
      const what = n.type === 'run' ? 'run folder (checkpoints, metrics, evaluations)' : 'world folder (and the datasets distilled into it)';
      const choice = await vscode.window.showWarningMessage(
        `Delete the ${what} ${vscode.workspace.asRelativePath(p, false)}?`,
        { modal: true, detail: 'It goes to the trash where the system has one.' },
        'Delete',
      );
      if (choice !== 'Delete') return;
      try {
        await vscode.workspace.fs.delete(vscode.Uri.file(p), { recursive: true, useTrash: true });
      } catch {
        // No trash here (a server, a container): deleted for good, as the dialog said.
        await vscode.workspace.fs.delete(vscode.Uri.file(p), { recursive: true, useTrash: false });
      }
      log.info(`deleted ${p}`);
      tree.refresh();
    }),
  } satisfies CommandMap;
}
