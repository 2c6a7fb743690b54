// The language server in a real VS Code (code-server), through the extension's client:
// diagnostics at the right ranges in a transcript and a dataset, the hover text, a quick
// fix applied, a content-sniffed JSONL switched to agent-dataset, the semantic token legend.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';

const P = '<|system|>You are a narrow research assistant.<|end|><|user|>What is 2+2?<|end|>';
const BROKEN = `${P}<|assistant|>Thought: search first.\n<|tool_call|>{"tool": "search", "args": {"query": "two plus two", "k": 0}}<|end|><|tool_result|>NoResults<|end|><|assistant|>Thought: done.\nAnswer: 4<|end|>\n`;
const NONCANONICAL = `${P}<|assistant|>Thought: add.\n<|tool_call|>{"tool":"calc","args":{"expr":"2+2"}}<|end|><|tool_result|>4<|end|><|assistant|>Thought: done.\nAnswer: 4<|end|>\n`;

function root(): vscode.Uri {
  const folder = vscode.workspace.workspaceFolders?.[0];
  assert.ok(folder, 'a workspace folder is open');
  return folder.uri;
}

async function waitFor<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function write(name: string, text: string): Promise<vscode.Uri> {
  const uri = vscode.Uri.joinPath(root(), name);
  await vscode.workspace.fs.writeFile(uri, new TextEncoder().encode(text));
  return uri;
}

const ours = (uri: vscode.Uri): vscode.Diagnostic[] => vscode.languages.getDiagnostics(uri).filter((d) => d.source === 'agent-lab');
const codeOf = (d: vscode.Diagnostic): string => String(typeof d.code === 'object' ? d.code.value : d.code);

describe('Agent Lab language server (integration)', function () {
  this.timeout(90_000);

  it('puts the grammar rejection of a transcript on the rejected character', async () => {
    const uri = await write('lsp-broken.transcript', BROKEN);
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc);
    assert.equal(doc.languageId, 'agent-transcript');
    const d = await waitFor('the grammar diagnostic', () => ours(uri).find((x) => codeOf(x) === 'grammar-rejected'));
    const at = doc.positionAt(BROKEN.indexOf('"k": 0') + 5);
    assert.deepEqual([d.range.start.line, d.range.start.character, d.range.end.character], [at.line, at.character, at.character + 1]);
    assert.equal(d.severity, vscode.DiagnosticSeverity.Error);
    assert.equal(d.message, "tool call rejected by the grammar: expected a digit 1-9 for k, got '0'");
  });

  it('hovers say supervised on the assistant text and masked on the question', async () => {
    const uri = vscode.Uri.joinPath(root(), 'lsp-broken.transcript');
    const doc = await vscode.workspace.openTextDocument(uri);
    const hoverText = async (offset: number): Promise<string> => {
      const hs = await vscode.commands.executeCommand<vscode.Hover[]>('vscode.executeHoverProvider', uri, doc.positionAt(offset));
      return hs
        .flatMap((h) => h.contents)
        .map((c) => (typeof c === 'string' ? c : c.value))
        .join('\n');
    };
    assert.match(await hoverText(BROKEN.indexOf('search first')), /\*\*supervised\*\*/);
    assert.match(await hoverText(BROKEN.indexOf('What is 2+2')), /\*\*masked\*\*/);
    assert.match(await hoverText(BROKEN.indexOf('"k": 0')), /grammar: rejected at character \d+: expected a digit 1-9 for k, got '0'/);
  });

  it('applies the quick fix that canonicalises a call, and the warning goes away', async () => {
    const uri = await write('lsp-noncanonical.transcript', NONCANONICAL);
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc);
    const d = await waitFor('the non-canonical warning', () => ours(uri).find((x) => codeOf(x) === 'call-noncanonical'));
    assert.equal(d.severity, vscode.DiagnosticSeverity.Warning);
    const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>('vscode.executeCodeActionProvider', uri, d.range);
    const fix = actions.find((a) => a.title === 'Canonicalise the tool call');
    assert.ok(fix?.edit, `a quick fix among ${actions.map((a) => a.title).join(', ')}`);
    assert.ok(await vscode.workspace.applyEdit(fix.edit));
    assert.ok(doc.getText().includes('<|tool_call|>{"tool": "calc", "args": {"expr": "2+2"}}<|end|>'));
    await waitFor('the warning to clear', () => (ours(uri).length === 0 ? true : undefined));
  });

  it('checks a dataset: the diagnostic lands on the escape inside the JSON string', async () => {
    const text = BROKEN.replace(/\n$/, '');
    const row = JSON.stringify({ task: 'What is 2+2?', text, kind: 'lookup' }).replace('\\"k\\": 0', '\\"k\\": \\u0030');
    const uri = await write('lsp.traces.jsonl', `${row}\n{"task": "no transcript"}\n`);
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc);
    assert.equal(doc.languageId, 'agent-dataset');
    const g = await waitFor('the row diagnostic', () => ours(uri).find((x) => codeOf(x) === 'grammar-rejected'));
    const col = row.indexOf('\\u0030');
    assert.deepEqual([g.range.start.line, g.range.start.character, g.range.end.character], [0, col, col + 6]);
    const noText = ours(uri).find((x) => codeOf(x) === 'row-no-text');
    assert.equal(noText?.range.start.line, 1);
  });

  it('switches a JSONL whose rows hold transcripts to agent-dataset; other JSONL files stay as they are', async () => {
    const text = BROKEN.replace(/\n$/, '');
    const uri = await write('rows.jsonl', `${JSON.stringify({ task: 'q', text })}\n`);
    const other = await write('metrics.jsonl', '{"phase": "sft", "step": 1, "loss": 2.5}\n');
    const otherDoc = await vscode.workspace.openTextDocument(other);
    await vscode.workspace.openTextDocument(uri);
    await waitFor('the language switch', () =>
      vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString() && d.languageId === 'agent-dataset'),
    );
    await waitFor('the dataset diagnostics', () => ours(uri).find((x) => codeOf(x) === 'grammar-rejected'));
    assert.notEqual(otherDoc.languageId, 'agent-dataset');
    assert.deepEqual(ours(other), []);
  });

  it('contributes the semantic token legend that shows the mask', async () => {
    const uri = vscode.Uri.joinPath(root(), 'lsp-broken.transcript');
    const legend = await vscode.commands.executeCommand<vscode.SemanticTokensLegend>('vscode.provideDocumentSemanticTokensLegend', uri);
    assert.ok(legend, 'a legend');
    for (const t of ['supervised', 'masked', 'specialToken']) assert.ok(legend.tokenTypes.includes(t), t);
    const tokens = await vscode.commands.executeCommand<vscode.SemanticTokens>('vscode.provideDocumentSemanticTokens', uri);
    assert.ok(tokens && tokens.data.length > 0);
  });
});
