// TRL conversational datasets in the language server over real stdio (issue 30): with the
// template folder from the `agentLab.chatTemplate` setting or beside the dataset, every row's
// findings are published on the row, a hover on a message's text names the token and both
// masks' verdicts, and bad input (a row that is not a conversation, a folder that does not
// load) is one diagnostic while the server keeps serving other documents; the mask panel's
// request (agentLab/lossMask) answers a chat row with each rule per token and the file's totals.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Hover, PublishDiagnosticsParams } from 'vscode-languageserver-protocol';
import { chatDatasetText } from '../../bench/chatMask';
import { LspClient, repoRootFrom } from '../../bench/lspClient';
import { LossMaskRequest, isLossMaskResult, type LossMaskResult } from '../../core/protocol/lsp';

const root = repoRootFrom(__dirname);
const FIX = path.join(root, 'test/fixtures/chat-templates');
const hoverValue = (h: Hover | null): string => (h ? (h.contents as { value: string }).value : '');
const final = (p: PublishDiagnosticsParams): boolean => !p.diagnostics.some((d) => String(d.message).startsWith('chat dataset: checking rows'));

describe('language server: TRL chat datasets over stdio (issue 30)', function () {
  this.timeout(180_000);
  let tmp: string;
  before(function () {
    this.timeout(180_000);
    if (process.env['AGENT_LAB_SKIP_BUILD'] !== '1') {
      const b = spawnSync(process.execPath, [path.join(root, 'scripts', 'build.mjs')], { cwd: root, encoding: 'utf8' });
      assert.equal(b.status, 0, b.stderr);
    }
    tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-lsp-chat-'));
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('the setting picks the template: each row gets its finding, a bad row one diagnostic naming why, and hovers name the token', async () => {
    const client = await LspClient.start({ configuration: { chatTemplate: path.join(FIX, 'qwen2.5') }, createFiles: true });
    try {
      await client.configured;
      const text = chatDatasetText(40) + '{"text": "a plain row"}\n';
      const uri = pathToFileURL(path.join(tmp, 'train.jsonl')).toString();
      const done = client.waitForDiagnostics(uri, final, 60_000);
      await client.open(uri, text, 'plaintext', false);
      const p = await done;
      const byLine = new Map<number, string[]>();
      for (const d of p.diagnostics) byLine.set(d.range.start.line, [...(byLine.get(d.range.start.line) ?? []), String(d.code)]);
      for (let line = 0; line < 40; line++) assert.ok(byLine.get(line)?.includes('all-zero-generation-mask'), `line ${line}: ${byLine.get(line)}`);
      const bad = p.diagnostics.filter((d) => d.range.start.line === 40);
      assert.equal(bad.length, 1);
      assert.equal(bad[0]!.code, 'chat-row');
      assert.match(String(bad[0]!.message), /not a conversation: a standard \(text\) row/);

      const line0 = text.split('\n')[0]!;
      const col = line0.indexOf('degrees celsius') + 3;
      const h = hoverValue(await client.request<Hover | null>('textDocument/hover', { textDocument: { uri }, position: { line: 0, character: col } }));
      assert.match(h, /^\*\*Agent Lab: token\*\* ".*" · id \d+ · assistant \(message 4\)/);
      assert.match(h, /generation blocks \(assistant_only_loss\): \*\*masked\*\*/);
      assert.match(h, /prefix difference \(completion_only_loss\): \*\*supervised\*\*/);

      // The all-zero finding's quick fixes: the row as prompt-completion, and a patched template in a new folder.
      type Action = { title: string; edit: { changes: Record<string, { newText: string }[]>; documentChanges?: ({ kind: string; uri: string; options: unknown } | { textDocument: { uri: string }; edits: { newText: string }[] })[] } };
      const actions = await client.request<Action[]>('textDocument/codeAction', {
        textDocument: { uri },
        range: { start: { line: 0, character: 0 }, end: { line: 0, character: 1 } },
        context: { diagnostics: [] },
      });
      assert.equal(actions.length, 2);
      // qwen2.5-generation/ is the repository's hand-patched fixture: the fix takes the next free name, writes over nothing.
      assert.equal(actions[1]!.title, 'Write a patched template with generation tags to qwen2.5-generation-2/ (select it with Agent Lab: Choose Chat Template…)');
      const changes = actions[1]!.edit.documentChanges!;
      assert.deepEqual(
        changes.filter((c) => 'kind' in c).map((c) => ('kind' in c ? [path.relative(FIX, fileURLToPath(c.uri)), c.kind, c.options] : [])),
        ['chat_template.jinja', 'tokenizer.json', 'tokenizer_config.json', 'README.md'].map((f) => [path.join('qwen2.5-generation-2', f), 'create', { overwrite: false, ignoreIfExists: false }]),
      );
      const jinja = changes.find((c) => 'textDocument' in c && c.textDocument.uri.endsWith('chat_template.jinja'));
      assert.match(jinja && 'edits' in jinja ? jinja.edits[0]!.newText : '', /{% generation %}/);
      assert.ok(!existsSync(path.join(FIX, 'qwen2.5-generation-2')), 'offering the fix writes nothing');
      assert.match(actions[0]!.title, /^Make the row prompt-completion: completion_only_loss trains its last assistant turn \(the 2 earlier ones become prompt, untrained\)$/);
      const fixed = JSON.parse(actions[0]!.edit.changes[uri]![0]!.newText) as { prompt: unknown[]; completion: { role: string }[] };
      assert.equal(fixed.prompt.length, 6);
      assert.deepEqual(fixed.completion.map((m) => m.role), ['assistant']);

      // An edit that breaks row 3: its diagnostic says why, the other rows keep theirs.
      const l3 = text.split('\n')[3]!;
      const edited = await client.change(uri, [{ range: { start: { line: 3, character: 0 }, end: { line: 3, character: l3.length } }, text: '{"messages": "oops"}' }], true, 60_000);
      const onLine3 = edited!.diagnostics.filter((d) => d.range.start.line === 3);
      assert.deepEqual(onLine3.map((d) => [d.code, d.message]), [['chat-row', 'not a conversation: "messages" is a string, not a list of messages']]);
      assert.ok(edited!.diagnostics.filter((d) => d.code === 'all-zero-generation-mask').length >= 39);
      assert.equal(client.exitCode, null);
    } finally {
      await client.stop();
    }
  });

  it('agentLab/lossMask on a chat row (the mask panel): the rendered row, each rule per token, the file totals once the pass is done; a bad row is an error naming why', async () => {
    const client = await LspClient.start({ configuration: { chatTemplate: path.join(FIX, 'llama3.1') } });
    try {
      await client.configured;
      const text = chatDatasetText(6) + '{"text": "a plain row"}\n';
      const uri = pathToFileURL(path.join(tmp, 'panel.jsonl')).toString();
      const done = client.waitForDiagnostics(uri, final, 60_000);
      await client.open(uri, text, 'plaintext', false);
      await done;
      const ask = (row: number) => client.request<LossMaskResult>(LossMaskRequest.method, { textDocument: { uri }, row });
      const m = await ask(2);
      assert.ok(isLossMaskResult(m));
      assert.equal(m.row, 2);
      assert.equal(m.tokenizer.source, 'template');
      assert.match(m.text, /^<\|begin_of_text\|><\|start_header_id\|>system/);
      const chat = m.chat!;
      assert.equal(chat.hasGenerationTags, false);
      assert.equal(chat.generation.filter(Boolean).length, 0);
      assert.ok(chat.prefix.filter(Boolean).length > 0);
      assert.ok(chat.findings.some((f) => f.code === 'all-zero-generation-mask'));
      // The file totals: the 6 conversations, each masked once; the plain row counted apart.
      const rows = await Promise.all([0, 1, 2, 3, 4, 5].map(ask));
      assert.deepEqual(chat.file, {
        rows: 6,
        failed: 1,
        lines: 7,
        tokens: rows.reduce((a, r) => a + r.ids.length, 0),
        generation: 0,
        prefix: rows.reduce((a, r) => a + r.chat!.prefix.filter(Boolean).length, 0),
        complete: true,
      });
      await assert.rejects(ask(6), /line 7: not a conversation: a standard \(text\) row/);
      assert.equal(client.exitCode, null);
    } finally {
      await client.stop();
    }
  });

  it('agentLab.chatMaxLength turns on the truncation findings', async () => {
    const client = await LspClient.start({ configuration: { chatTemplate: path.join(FIX, 'qwen2.5-generation'), chatMaxLength: 64 } });
    try {
      await client.configured;
      const uri = pathToFileURL(path.join(tmp, 'short.jsonl')).toString();
      const done = client.waitForDiagnostics(uri, final, 60_000);
      await client.open(uri, chatDatasetText(3), 'plaintext', false);
      const p = await done;
      assert.deepEqual(
        p.diagnostics.map((d) => [d.range.start.line, d.code]),
        // Both masks of each row lose everything: the tool list alone is longer than 64 tokens.
        [0, 0, 1, 1, 2, 2].map((line) => [line, 'all-supervision-truncated']),
      );
      assert.match(String(p.diagnostics[0]!.message), /beyond max_length=64/);
    } finally {
      await client.stop();
    }
  });

  it('without the setting, the folder beside the dataset is used; a patched template gives no finding', async () => {
    const dir = path.join(tmp, 'qwen-gen');
    mkdirSync(dir);
    cpSync(path.join(FIX, 'qwen2.5-generation'), dir, { recursive: true });
    const client = await LspClient.start({ configuration: {} });
    try {
      await client.configured;
      const uri = pathToFileURL(path.join(dir, 'train.jsonl')).toString();
      const done = client.waitForDiagnostics(uri, final, 60_000);
      await client.open(uri, chatDatasetText(10), 'plaintext', false);
      const p = await done;
      assert.deepEqual(p.diagnostics, []);
    } finally {
      await client.stop();
    }
  });

  it('a template folder that does not load is one diagnostic; the server keeps answering other documents', async () => {
    const bad = path.join(tmp, 'bad');
    mkdirSync(bad);
    writeFileSync(path.join(bad, 'tokenizer.json'), '{"model": ');
    const client = await LspClient.start({ configuration: { chatTemplate: bad } });
    try {
      await client.configured;
      const uri = pathToFileURL(path.join(tmp, 'other.jsonl')).toString();
      const p = await client.open(uri, chatDatasetText(5));
      assert.equal(p!.diagnostics.length, 1);
      assert.equal(p!.diagnostics[0]!.code, 'chat-template');
      assert.match(String(p!.diagnostics[0]!.message), /^template folder .*bad: tokenizer\.json is not valid JSON/);
      const h = hoverValue(await client.request<Hover | null>('textDocument/hover', { textDocument: { uri }, position: { line: 0, character: 5 } }));
      assert.match(h, /tokenizer\.json is not valid JSON/);
      // Another document is served as before.
      const t = pathToFileURL(path.join(tmp, 'a.transcript')).toString();
      await client.open(t, '<|system|>S<|end|><|user|>Q<|end|><|assistant|>Answer: 4<|end|>', 'agent-transcript');
      const th = hoverValue(await client.request<Hover | null>('textDocument/hover', { textDocument: { uri: t }, position: { line: 0, character: 52 } }));
      assert.ok(th.length > 0);
      assert.equal(client.exitCode, null);
    } finally {
      await client.stop();
    }
  });
});
