// The extension in a real VS Code: activation on a .transcript file, languages, commands,
// and the world/distill commands writing real files into the (scratch) workspace.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';

const EXTENSION_ID = 'agent-lab.agent-lab';

function workspaceRoot(): vscode.Uri {
  const folder = vscode.workspace.workspaceFolders?.[0];
  assert.ok(folder, 'the tests need the fixture workspace open (test/fixtures/workspace)');
  return folder.uri;
}

async function waitFor<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function readLines(uri: vscode.Uri): Promise<string[]> {
  const text = new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
  assert.ok(text.endsWith('\n'), `${uri.fsPath} ends with a newline`);
  return text.slice(0, -1).split('\n');
}

describe('Agent Lab extension (integration)', function () {
  this.timeout(60_000);

  let sample: vscode.TextDocument;

  it('activates when a .transcript file is opened, which gets the agent-transcript language', async () => {
    const ext = vscode.extensions.getExtension(EXTENSION_ID);
    assert.ok(ext, `extension ${EXTENSION_ID} is installed (development path)`);
    sample = await vscode.workspace.openTextDocument(vscode.Uri.joinPath(workspaceRoot(), 'sample.transcript'));
    await vscode.window.showTextDocument(sample);
    assert.equal(sample.languageId, 'agent-transcript');
    await waitFor('the extension to activate', () => ext.isActive || undefined);
    assert.ok(sample.getText().startsWith('<|system|>You are a narrow research assistant.'));
  });

  it('contributes the agent-transcript and agent-dataset languages', async () => {
    const languages = await vscode.languages.getLanguages();
    assert.ok(languages.includes('agent-transcript'), 'agent-transcript');
    assert.ok(languages.includes('agent-dataset'), 'agent-dataset');
  });

  it('registers every command of package.json, each in the category "Agent Lab"', async () => {
    const ext = vscode.extensions.getExtension(EXTENSION_ID)!;
    const contributed: { command: string; category?: string }[] = ext.packageJSON.contributes.commands;
    assert.ok(contributed.length >= 2, 'at least buildWorld and distill');
    const registered = new Set(await vscode.commands.getCommands(true));
    const missing = contributed.filter((c) => !registered.has(c.command)).map((c) => c.command);
    assert.deepEqual(missing, [], 'contributed but not registered');
    for (const c of contributed) {
      // agentLab.camelCase; the Runs view's item actions are agentLab.runs.camelCase.
      assert.match(c.command, /^agentLab\.(runs\.)?[a-z][A-Za-z]*$/, `${c.command} is agentLab.camelCase`);
      assert.equal(c.category, 'Agent Lab', `${c.command} category`);
    }
  });

  it('has a TextMate tokenizer for agent-transcript (the grammar loads in VS Code)', async () => {
    // VS Code's own command (used by its colorize tests) resolves the language's TextMate
    // tokenizer and runs it over the document; it throws when no grammar is registered
    // or it fails to load. The scopes themselves are checked by
    // test/unit/textmate-grammar.test.ts (same engine), and the colours by the screenshot.
    const result = await vscode.commands.executeCommand<{ tokenizeTime: number }>('_workbench.colorizeTextMateTokens', sample.uri);
    assert.ok(result && typeof result.tokenizeTime === 'number', `unexpected result ${JSON.stringify(result)}`);
  });

  describe('Build World and Distill', () => {
    let world: vscode.Uri;

    it('agentLab.buildWorld writes corpus.jsonl (268), train.jsonl (200), heldout.jsonl (50)', async () => {
      const result = await vscode.commands.executeCommand<{ folder: vscode.Uri } | undefined>('agentLab.buildWorld');
      assert.ok(result, 'the command returned its result (undefined means it failed: see the Agent Lab output channel)');
      world = result.folder;
      const runs = vscode.Uri.joinPath(workspaceRoot(), 'runs');
      assert.ok(world.path.startsWith(runs.path + '/world-'), `${world.path} is under ${runs.path}/world-*`);
      const corpus = await readLines(vscode.Uri.joinPath(world, 'corpus.jsonl'));
      const train = await readLines(vscode.Uri.joinPath(world, 'train.jsonl'));
      const heldout = await readLines(vscode.Uri.joinPath(world, 'heldout.jsonl'));
      assert.equal(corpus.length, 268, 'passages');
      assert.equal(train.length, 200, 'train tasks');
      assert.equal(heldout.length, 50, 'held-out tasks');
      const p = JSON.parse(corpus[0]!);
      assert.deepEqual(Object.keys(p), ['doc_id', 'text']);
      const t = JSON.parse(train[0]!);
      assert.deepEqual(Object.keys(t), ['question', 'gold', 'kind', 'hints']);
    });

    it('agentLab.distill writes <world>/heldout.traces.jsonl with wire-format transcripts', async () => {
      assert.ok(world, 'needs the world from the previous test');
      const result = await vscode.commands.executeCommand<{ file: vscode.Uri; kept: number; tasks: number } | undefined>(
        'agentLab.distill',
        world,
        'heldout',
      );
      assert.ok(result, 'the command returned its result');
      assert.equal(result.file.path, vscode.Uri.joinPath(world, 'heldout.traces.jsonl').path);
      assert.equal(result.tasks, 50);
      const rows = (await readLines(result.file)).map((l) => JSON.parse(l));
      assert.equal(rows.length, result.kept);
      // The seed's Python keeps 50 on the default world (one distinct solved rollout per task).
      assert.equal(rows.length, 50, 'trajectories kept');
      for (const r of rows) {
        assert.deepEqual(Object.keys(r).slice(0, 3), ['task', 'text', 'kind']);
        assert.ok(r.text.startsWith('<|system|>') && r.text.endsWith('<|end|>'), 'wire format');
        assert.match(r.text, /<\|assistant\|>Thought: [^]*Answer: /);
      }
    });
  });

  after(async () => {
    // Leave the sample transcript in front for the launcher's screenshot.
    if (sample) await vscode.window.showTextDocument(sample, { preview: false });
  });
});
