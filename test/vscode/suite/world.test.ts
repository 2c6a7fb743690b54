// A user's own world in a real VS Code (issue 13, docs/worlds.md "In the editor"): New World
// scaffolds a fact table from the template and refuses to write over a file; then the
// sample's elements world (samples/worlds/elements, copied into the workspace) is named by
// agentLab.world, built by Build World (the bundled `agent-lab world`), trained a few SFT
// steps and evaluated, and the run records that world. A broken fact table builds nothing.
// The commands get their arguments as scripts pass them, so no quick pick waits for a person.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { worldTemplate } from '../../../extension/worldSources';

interface JobResult {
  ok: boolean;
  cancelled: boolean;
  runDir: string;
  summary: Record<string, unknown>;
  checkpoints: number[];
  error?: string;
  message?: string;
}
interface BuildWorldResult {
  folder: vscode.Uri;
  passages: number;
  train: number;
  heldout: number;
}

const EXTENSION_ID = 'agent-lab.agent-lab';
const lines = (file: string) =>
  fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');
const worldFolders = (runs: string) => (fs.existsSync(runs) ? fs.readdirSync(runs).filter((n) => n.startsWith('world-')).sort() : []);

describe('Your own world: New World, Build World, Train (SFT), Evaluate (integration)', function () {
  this.timeout(240_000);
  let root: string;
  let runs: string;
  const config = () => vscode.workspace.getConfiguration('agentLab');
  const setWorld = (value: string | undefined) => config().update('world', value, vscode.ConfigurationTarget.Workspace);

  before(async () => {
    const ext = vscode.extensions.getExtension(EXTENSION_ID);
    assert.ok(ext, 'the extension is installed (development path)');
    await ext.activate();
    const folder = vscode.workspace.workspaceFolders?.[0];
    assert.ok(folder, 'the tests need the fixture workspace open');
    root = folder.uri.fsPath;
    runs = path.join(root, 'runs');
    await setWorld(undefined);
  });
  after(async () => setWorld(undefined));

  it('New World scaffolds a fact table, opens it, and names it in agentLab.world', async () => {
    const made = await vscode.commands.executeCommand<{ folder: vscode.Uri; main: vscode.Uri; files: vscode.Uri[]; selected: boolean } | undefined>('agentLab.newWorld', {
      kind: 'facts',
      folder: 'worlds/it-new',
    });
    assert.ok(made, 'New World returned its result');
    const csv = path.join(root, 'worlds', 'it-new', 'facts.csv');
    assert.equal(made.main.fsPath, csv);
    assert.equal(fs.readFileSync(csv, 'utf8'), worldTemplate('facts').files[0]!.text);
    assert.match(fs.readFileSync(csv, 'utf8'), /^entity,attribute,value$/m);
    assert.equal(vscode.window.activeTextEditor?.document.uri.fsPath, csv, 'the fact table is open');
    assert.equal(vscode.window.activeTextEditor?.document.languageId, 'agent-facts', 'as a fact table, not Plain Text');
    assert.equal(made.selected, true);
    assert.equal(config().get<string>('world'), 'worlds/it-new/facts.csv');
  });

  it('the world guide the template and diagnostics cite opens from the extension (docs/worlds.md ships)', async () => {
    const guide = await vscode.commands.executeCommand<vscode.Uri>('agentLab.openWorldGuide');
    assert.ok(guide && fs.existsSync(guide.fsPath), `the guide exists: ${guide?.fsPath}`);
    assert.equal(path.basename(guide.fsPath), 'worlds.md');
    assert.match(fs.readFileSync(guide.fsPath, 'utf8'), /fact table/i);
  });

  it('New World refuses a folder whose template file exists, and leaves it as it was', async () => {
    const csv = path.join(root, 'worlds', 'it-new', 'facts.csv');
    fs.writeFileSync(csv, 'entity,attribute,value\nMine,kept,1\n');
    const again = await vscode.commands.executeCommand('agentLab.newWorld', { kind: 'facts', folder: 'worlds/it-new' });
    assert.equal(again, undefined, 'refused');
    assert.equal(fs.readFileSync(csv, 'utf8'), 'entity,attribute,value\nMine,kept,1\n');
    // The other kind in a fresh folder: its documents and tasks file.
    const docs = await vscode.commands.executeCommand<{ files: vscode.Uri[]; selected: boolean } | undefined>('agentLab.newWorld', { kind: 'docs', folder: 'worlds/it-notes' });
    assert.ok(docs);
    assert.deepEqual(docs.files.map((f) => path.relative(root, f.fsPath).split(path.sep).join('/')), ['worlds/it-notes/docs/notes.md', 'worlds/it-notes/tasks.jsonl']);
    assert.equal(docs.selected, false, 'agentLab.world already named a world');
    assert.equal(config().get<string>('world'), 'worlds/it-new/facts.csv');
  });

  it('Build World on a broken fact table writes no world folder', async () => {
    fs.mkdirSync(path.join(root, 'broken'), { recursive: true });
    fs.writeFileSync(path.join(root, 'broken', 'facts.csv'), 'entity,attribute,value\nIron,atomic number,26\nIron,atomic number,27\n');
    await setWorld('broken/facts.csv');
    const before = worldFolders(runs);
    const built = await vscode.commands.executeCommand<BuildWorldResult | undefined>('agentLab.buildWorld');
    assert.equal(built, undefined, 'the build failed');
    assert.deepEqual(worldFolders(runs), before, 'no world folder was written');
  });

  it('the language server marks the broken fact table in the editor (a .csv reaches it) and hovers a fact', async () => {
    const uri = vscode.Uri.file(path.join(root, 'broken', 'facts.csv'));
    await vscode.window.showTextDocument(uri);
    const ours = () => vscode.languages.getDiagnostics(uri).filter((d) => d.source === 'agent-lab');
    const deadline = Date.now() + 30_000;
    while (ours().length === 0) {
      assert.ok(Date.now() < deadline, 'no agent-lab diagnostics on broken/facts.csv within 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const [d] = ours();
    assert.equal(String(typeof d!.code === 'object' ? d!.code.value : d!.code), 'duplicate-fact');
    // Line 3 "Iron,atomic number,27": the attribute column.
    assert.deepEqual([d!.range.start.line, d!.range.start.character, d!.range.end.character], [2, 5, 18]);
    const hovers = await vscode.commands.executeCommand<vscode.Hover[]>('vscode.executeHoverProvider', uri, new vscode.Position(1, 2));
    const text = hovers.flatMap((h) => h.contents.map((c) => (typeof c === 'string' ? c : 'value' in c ? c.value : ''))).join('\n');
    assert.match(text, /"the atomic number of Iron is 26"/);
  });

  let worldDir: string;
  let runDir: string;

  it('Build World builds the elements sample that agentLab.world names', async () => {
    const ext = vscode.extensions.getExtension(EXTENSION_ID)!;
    fs.cpSync(path.join(ext.extensionPath, 'samples', 'worlds', 'elements'), path.join(root, 'elements'), { recursive: true });
    await setWorld('elements/elements.csv');
    const built = await vscode.commands.executeCommand<BuildWorldResult | undefined>('agentLab.buildWorld');
    assert.ok(built, 'Build World returned its result (undefined: see the Agent Lab output channel)');
    worldDir = built.folder.fsPath;
    assert.match(path.basename(worldDir), /^world-elements-\d{8}-\d{6}(-\d+)?$/);
    assert.equal(path.dirname(worldDir), runs);
    const manifest = JSON.parse(fs.readFileSync(path.join(worldDir, 'world.json'), 'utf8')) as { source: { kind: string; files: { path: string }[] } };
    assert.equal(manifest.source.kind, 'facts');
    assert.deepEqual(
      manifest.source.files.map((f) => f.path),
      [path.join(root, 'elements', 'elements.csv')],
    );
    assert.equal(built.passages, lines(path.join(worldDir, 'corpus.jsonl')).length);
    assert.equal(built.heldout, lines(path.join(worldDir, 'heldout.jsonl')).length);
    assert.equal(built.train, lines(path.join(worldDir, 'train.jsonl')).length);
    assert.ok(built.heldout > 0 && built.train > built.heldout);
    assert.ok(lines(path.join(worldDir, 'train.jsonl')).some((l) => /Iron/.test(l)), 'the elements are in the tasks');
  });

  it('Train (SFT) trains on the built world and its config.json records it', async () => {
    const result = await vscode.commands.executeCommand<JobResult>('agentLab.trainSft', { steps: 4, evalLimit: 2, runName: 'it-elements' });
    assert.ok(result, 'the command returned its result');
    assert.equal(result.error, undefined, `the worker failed: ${result.error}`);
    assert.ok(result.ok && !result.cancelled);
    assert.equal(result.summary['steps'], 4);
    runDir = result.runDir;
    const cfg = JSON.parse(fs.readFileSync(path.join(runDir, 'config.json'), 'utf8')) as { world?: { name: string; dir: string; id: string } };
    assert.ok(cfg.world, 'config.json records a world');
    assert.equal(cfg.world.dir, worldDir);
    assert.equal(cfg.world.name, path.basename(worldDir));
    assert.match(cfg.world.id, /^custom:\d+$/);
    // The run keeps a copy of the world: its held-out split is the built world's.
    assert.deepEqual(lines(path.join(runDir, 'world', 'heldout.jsonl')), lines(path.join(worldDir, 'heldout.jsonl')));
  });

  it("Evaluate evaluates on the world's held-out split and writes the result", async () => {
    const result = await vscode.commands.executeCommand<JobResult>('agentLab.evaluate', { runDir, split: 'heldout', limit: 3 });
    assert.equal(result.error, undefined, `the worker failed: ${result.error}`);
    assert.match(result.message ?? '', /^it-elements: held-out exact match [\d.]+% on 3 of the \d+ held-out tasks at step-4 \(checkpoint latest, step-4\); per shape .+\.$/);
    const summary = JSON.parse(fs.readFileSync(path.join(runDir, 'eval', 'heldout.json'), 'utf8')) as { n: number; worlds?: { kind: string; world?: { dir: string } } };
    assert.equal(summary.n, 3);
    assert.equal(summary.worlds?.kind, 'custom');
    // The run's own copy of the world (world/, made from the built folder).
    assert.equal(summary.worlds?.world?.dir, path.join(runDir, 'world'));
    const heldoutQuestions = new Set(lines(path.join(worldDir, 'heldout.jsonl')).map((l) => (JSON.parse(l) as { question: string }).question));
    const evaluated = lines(path.join(runDir, 'eval', 'heldout.jsonl')).map((l) => (JSON.parse(l) as { question: string }).question);
    assert.equal(evaluated.length, 3);
    for (const q of evaluated) assert.ok(heldoutQuestions.has(q), `an elements held-out question: ${q}`);
  });
});
