// TRL conversational datasets in the language server (language-server/chatDataset.ts, issue
// 30), in process: recognition by glob and content, the template folder (setting or beside
// the dataset), findings as diagnostics on the row (on the message they concern), the hover
// per token, and bad input as one diagnostic.
import * as assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ChatTemplateStore, analyseChatLine, chatHover, jsonSpans, maskOfLine, promptCompletionFix } from '../../language-server/chatDataset';
import { Settings, detectKind } from '../../language-server/documents';
import { repoRoot } from '../support/reference';

const FIX = path.join(repoRoot, 'test/fixtures/chat-templates');
const ROW = {
  messages: [
    { role: 'user', content: 'What is the capital of France?' },
    { role: 'assistant', content: 'The capital of France is Paris.' },
  ],
};
const LINE = JSON.stringify(ROW);
const hoverText = (h: ReturnType<typeof chatHover>): string => (h && typeof h.contents === 'object' && 'value' in h.contents ? h.contents.value : '');

describe('language server: TRL chat datasets', () => {
  let tmp: string;
  before(() => {
    tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-lsp-chat-'));
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('recognises a .jsonl by its first row (messages, or prompt/completion lists) and by the chatDatasetGlobs setting', () => {
    const settings: Settings = { datasetGlobs: ['**/*.traces.jsonl'], tokenizerPath: null, workspaceRoots: [tmp], chatDatasetGlobs: ['**/*.sft.jsonl'] };
    const kind = (file: string, first: string): string => detectKind(pathToFileURL(path.join(tmp, file)).toString(), 'plaintext', () => first, settings, existsSync).kind;
    assert.equal(kind('train.jsonl', LINE), 'chat');
    assert.equal(kind('pc.jsonl', JSON.stringify({ prompt: [{ role: 'user', content: 'q' }], completion: [{ role: 'assistant', content: 'a' }] })), 'chat');
    assert.equal(kind('other.jsonl', '{"a": 1}'), 'ignored');
    assert.equal(kind('x.sft.jsonl', '{"a": 1}'), 'chat');
    // The lab's own datasets stay datasets.
    assert.equal(kind('t.traces.jsonl', LINE), 'dataset');
  });

  it('finds the template folder beside the dataset (or above it, inside the workspace); the setting wins', () => {
    const ws = path.join(tmp, 'ws');
    const model = path.join(ws, 'model');
    mkdirSync(path.join(model, 'data'), { recursive: true });
    cpSync(path.join(FIX, 'qwen2.5'), model, { recursive: true });
    const store = new ChatTemplateStore();
    const beside = store.resolve(path.join(model, 'data', 'train.jsonl'), null, [ws]);
    assert.equal(beside.dir, model);
    assert.ok(beside.model);
    const none = store.resolve(path.join(ws, 'train.jsonl'), null, [ws]);
    assert.equal(none.model, null);
    assert.match(none.problem!, /no chat template: set agentLab.chatTemplate/);
    const set = store.resolve(path.join(ws, 'train.jsonl'), path.join(FIX, 'llama3.1'), [ws]);
    assert.equal(set.dir, path.join(FIX, 'llama3.1'));
    const rel = store.resolve(path.join(ws, 'train.jsonl'), 'model', [ws]);
    assert.equal(rel.dir, model);
    // A folder that does not load: its cause, once.
    const bad = path.join(tmp, 'bad');
    mkdirSync(bad);
    writeFileSync(path.join(bad, 'tokenizer.json'), '[');
    const b = store.resolve(null, bad, [ws]);
    assert.equal(b.model, null);
    assert.match(b.problem!, /^template folder .*bad: tokenizer\.json is not valid JSON/);
  });

  it('findings are diagnostics on the row; one tied to a message spans that message', () => {
    const store = new ChatTemplateStore();
    const upstream = store.resolve(null, path.join(FIX, 'qwen2.5'), []).model!;
    const r = analyseChatLine(LINE, upstream, {});
    assert.deepEqual(
      r.diagnostics.map((d) => [d.code, d.severity, d.range.start.character, d.range.end.character]),
      [['all-zero-generation-mask', 1, 0, LINE.length]],
    );
    // eot-not-supervised names message 1: its range is that message's object.
    const dir = path.join(tmp, 'eot');
    mkdirSync(dir);
    cpSync(path.join(FIX, 'qwen2.5', 'tokenizer.json'), path.join(dir, 'tokenizer.json'));
    writeFileSync(
      path.join(dir, 'chat_template.jinja'),
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' }}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}{{ '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    );
    const e = analyseChatLine(LINE, store.resolve(null, dir, []).model!, {});
    assert.equal(e.diagnostics.length, 1);
    assert.equal(e.diagnostics[0]!.code, 'eot-not-supervised');
    const msg1 = JSON.stringify(ROW.messages[1]);
    assert.equal(LINE.slice(e.diagnostics[0]!.range.start.character, e.diagnostics[0]!.range.end.character), msg1);
  });

  it('bad rows are one diagnostic naming the cause', () => {
    const m = new ChatTemplateStore().resolve(null, path.join(FIX, 'qwen2.5'), []).model!;
    const one = (line: string): string[] => analyseChatLine(line, m, {}).diagnostics.map((d) => `${String(d.code)}: ${d.message}`);
    assert.match(one('{"messages": [')[0]!, /^chat-row: not JSON: /);
    assert.deepEqual(one('{"text": "hi"}'), ['chat-row: not a conversation: a standard (text) row: no chat template applies; conversational rows have "messages"']);
    assert.deepEqual(one('{"messages": [{"role": "user", "content": 5}]}'), ['chat-row: not a conversation: messages[0].content is a number; a message\'s content is a string, a list of parts or null']);
  });

  it('hover on an assistant word: the token, its id, role and both verdicts; elsewhere the row summary', () => {
    const m = new ChatTemplateStore().resolve(null, path.join(FIX, 'qwen2.5-generation'), []).model!;
    const { row, mask, error } = maskOfLine(LINE, m, {});
    const col = LINE.indexOf('Paris') + 2;
    const h = hoverText(chatHover(LINE, col, mask, error, row));
    const tok = mask!.tokens.find((t) => t.role === 'assistant' && t.text.includes('Par'))!;
    assert.match(h, new RegExp(`^\\*\\*Agent Lab: token\\*\\* ${JSON.stringify(tok.text).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} · id ${tok.id} · assistant \\(message 1\\)`));
    assert.match(h, /generation blocks \(assistant_only_loss\): \*\*supervised\*\*/);
    assert.match(h, /prefix difference \(completion_only_loss\): \*\*supervised\*\*/);
    // A user word is masked by both rules.
    const u = hoverText(chatHover(LINE, LINE.indexOf('capital') + 1, mask, error, row));
    assert.match(u, /· user \(message 0\)/);
    assert.match(u, /assistant_only_loss\): \*\*masked\*\*/);
    // On a key: the row's summary.
    const s = hoverText(chatHover(LINE, 3, mask, error, row));
    assert.match(s, /^\*\*Agent Lab: chat row\*\*\n\n\d+ tokens; supervised: \d+ by the generation blocks/);
  });

  it('hover on a prompt-completion row: the completion is message promptLength + i', () => {
    const m = new ChatTemplateStore().resolve(null, path.join(FIX, 'qwen2.5'), []).model!;
    const line = JSON.stringify({ prompt: [{ role: 'user', content: 'What is the capital of Chile?' }], completion: [{ role: 'assistant', content: 'Santiago.' }] });
    const { row, mask, error } = maskOfLine(line, m, {});
    const h = hoverText(chatHover(line, line.indexOf('Santiago') + 1, mask, error, row));
    assert.match(h, /· assistant \(message 1\)/);
    assert.match(h, /assistant_only_loss\): \*\*masked\*\*/);
    assert.match(h, /completion_only_loss\): \*\*supervised\*\*/);
  });

  it('the quick fix of an all-zero mask: the row as prompt-completion, which the prefix mask (completion_only_loss) trains', () => {
    const m = new ChatTemplateStore().resolve(null, path.join(FIX, 'qwen2.5'), []).model!;
    const fix = promptCompletionFix(JSON.stringify({ ...ROW, tools: [] }))!;
    assert.equal(fix.title, 'Make the row prompt-completion: completion_only_loss trains its assistant turn whatever the template');
    assert.deepEqual(JSON.parse(fix.text), { prompt: [ROW.messages[0]], completion: [ROW.messages[1]], tools: [] });
    const after = analyseChatLine(fix.text, m, {});
    assert.deepEqual(after.diagnostics.map((d) => [d.code, d.severity]), [['all-zero-generation-mask', 2]]);
    const { mask } = maskOfLine(fix.text, m, {});
    assert.equal(mask!.tokens.filter((t) => t.prefix).map((t) => t.text).join(''), 'The capital of France is Paris.<|im_end|>\n');
    const multi = promptCompletionFix(JSON.stringify({ messages: [ROW.messages[0], ROW.messages[1], { role: 'user', content: 'And Chile?' }, { role: 'assistant', content: 'Santiago.' }] }))!;
    assert.match(multi.title, /the 1 earlier one becomes prompt, untrained/);
    assert.equal(promptCompletionFix(JSON.stringify({ messages: [ROW.messages[0]] })), null);
    assert.equal(promptCompletionFix('{"prompt": []}'), null);
  });

  it('jsonSpans: paths and columns of every value; null on broken JSON', () => {
    const spans = jsonSpans('{"a": [1, {"b": "x\\"y"}], "c": null}')!;
    assert.deepEqual(
      spans.map((s) => [s.path.join('.'), s.start, s.end]),
      [
        ['', 0, 36],
        ['a', 6, 24],
        ['a.0', 7, 8],
        ['a.1', 10, 23],
        ['a.1.b', 16, 22],
        ['c', 31, 35],
      ],
    );
    assert.equal(jsonSpans('{"a": '), null);
  });
});
