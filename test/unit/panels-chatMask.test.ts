// The Loss Mask panel on a TRL chat row (issue 30): what the language server sends
// (language-server/chatDataset.ts chatLossMask: the rendered row's tokens, each rule's mask,
// where each message lies on the line, the file's totals), that the message validators of
// both boundaries accept it and refuse a lying one, and what the webview makes of it
// (webview-ui/lossMask/model.ts: a class per token by rule, counts, the findings as banners).
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { ChatRowResult, ChatTemplateStore, analyseChatLine, chatFileCounts, chatLossMask, maskOfLine } from '../../language-server/chatDataset';
import type { ChatModel } from '../../core/chatTemplate';
import { isLossMaskResult, type ChatFileCounts, type LossMaskResult } from '../../core/protocol/lsp';
import { parseToWebview } from '../../core/protocol/panels';
import { describeToken, fileSummary, maskModel } from '../../webview-ui/lossMask/model';
import { repoRoot } from '../support/reference';

const FIX = path.join(repoRoot, 'test/fixtures/chat-templates');
const ROW = {
  messages: [
    { role: 'user', content: 'What is the capital of France?' },
    { role: 'assistant', content: 'The capital of France is Paris.' },
    { role: 'user', content: 'And of Italy?' },
    { role: 'assistant', content: 'Rome.' },
  ],
};
const LINE = JSON.stringify(ROW);
const FILE: ChatFileCounts = { rows: 1, failed: 0, lines: 1, tokens: 0, generation: 0, prefix: 0, complete: true };

const store = new ChatTemplateStore();
const modelOf = (family: string): ChatModel => store.resolve(null, path.join(FIX, family), []).model!;

function panelMask(family: string, line = LINE, file = FILE): LossMaskResult {
  const model = modelOf(family);
  const { row, mask, error } = maskOfLine(line, model, {});
  assert.equal(error, null);
  return chatLossMask({
    uri: 'file:///ws/train.jsonl',
    line: 4,
    lineText: line,
    row,
    mask: mask!,
    model,
    templateDir: path.join(FIX, family),
    maxLength: null,
    file,
  });
}

const supervisedText = (m: LossMaskResult, rule: 'generation' | 'prefix'): string =>
  m.offsets
    .filter((_, i) => m.chat![rule][i])
    .map(([s, e]) => m.text.slice(s, e))
    .join('');

describe('Loss Mask panel on TRL chat rows', () => {
  it('a template without generation blocks (Llama 3.1): no generation token, the prefix mask is exactly the assistant turns and their end-of-turn; the all-zero finding comes along', () => {
    const m = panelMask('llama3.1');
    assert.ok(isLossMaskResult(m), 'the answer passes the protocol validator');
    assert.equal(m.row, 4);
    assert.equal(m.tokenizer.source, 'template');
    assert.ok(m.tokenizer.vocabSize > 0);
    const chat = m.chat!;
    assert.equal(chat.hasGenerationTags, false);
    assert.equal(chat.generation.filter(Boolean).length, 0);
    assert.equal(supervisedText(m, 'prefix'), 'The capital of France is Paris.<|eot_id|>Rome.<|eot_id|>');
    assert.deepEqual(
      m.supervised,
      chat.prefix.map((p, i) => p || chat.generation[i]),
      'supervised = either rule',
    );
    assert.ok(chat.findings.some((f) => f.code === 'all-zero-generation-mask' && f.severity === 'error'));
    // Tokens name their message; special tokens are flagged.
    const me = m.offsets.findIndex(([s, e], i) => m.text.slice(s, e) === 'me' && chat.messages[i] === 3);
    assert.ok(me > 0, 'a token of "Rome" in message 3');
    assert.equal(chat.roles[me], 'assistant');
    assert.equal(chat.roles[0], 'template', 'the bos the template writes before any message');
    assert.ok(m.special[m.offsets.findIndex(([s, e]) => m.text.slice(s, e) === '<|eot_id|>')]);
    // messageColumns: each message's object on the row's line (the panel reveals it).
    assert.equal(chat.messageColumns.length, 4);
    chat.messageColumns.forEach((c, k) => assert.deepEqual(JSON.parse(LINE.slice(c![0], c![1])), ROW.messages[k]));
  });

  it('a template with generation blocks (Qwen2.5 patched): the two rules agree on the assistant text and end-of-turn', () => {
    const m = panelMask('qwen2.5-generation');
    const chat = m.chat!;
    assert.equal(chat.hasGenerationTags, true);
    assert.equal(supervisedText(m, 'generation'), 'The capital of France is Paris.<|im_end|>Rome.<|im_end|>');
    assert.equal(supervisedText(m, 'generation'), supervisedText(m, 'prefix'));
    assert.deepEqual(chat.findings, []);
  });

  it('the webview model: a class per token by rule (both, generation only, prefix only, neither), counts, findings as banners', () => {
    // Llama 3.1: every supervised token is prefix-only (the rules disagree on all of them).
    const q3 = panelMask('llama3.1');
    const mq = maskModel({ label: 'train.jsonl, row on line 5', mask: q3, harness: null });
    const prefixCount = q3.chat!.prefix.filter(Boolean).length;
    assert.equal(mq.cells.filter((c) => c.cls === 'prefix').length, prefixCount);
    assert.equal(mq.cells.filter((c) => c.cls === 'gen' || c.cls === 'sup').length, 0);
    assert.deepEqual(
      { generation: mq.chat!.generation, prefix: mq.chat!.prefix, both: mq.chat!.both, disagree: mq.chat!.disagree },
      { generation: 0, prefix: prefixCount, both: 0, disagree: prefixCount },
    );
    assert.equal(mq.counts.supervised, prefixCount);
    assert.equal(mq.counts.masked, q3.ids.length - prefixCount);
    assert.equal(mq.banners[0]!.level, 'error');
    assert.match(mq.banners[0]!.text, /^all-zero-generation-mask: the assistant mask is all zero/);
    const me = mq.cells.find((c) => c.text === 'me' && c.message === 3)!;
    assert.match(describeToken(me), /^token \d+ · id \d+ · assistant \(message 3\) · supervised by the prefix difference only \(the rules disagree\) · "me"$/);
    assert.match(describeToken(mq.cells[0]!), /^token 0 · id \d+ · template · masked by both rules · special · "<\|begin_of_text\|>"$/);
    // Qwen2.5 with generation blocks: both rules on the same tokens, no banner.
    const g = panelMask('qwen2.5-generation');
    const mg = maskModel({ label: 'x', mask: g, harness: null });
    assert.equal(mg.cells.filter((c) => c.cls === 'sup').length, g.chat!.generation.filter(Boolean).length);
    assert.equal(mg.chat!.disagree, 0);
    assert.deepEqual(mg.banners, []);
    // A token only the generation blocks supervise is `gen` (hand-set: no fixture disagrees that way on this row).
    const flipped = structuredClone(g);
    const first = flipped.chat!.prefix.indexOf(true);
    flipped.chat!.prefix[first] = false;
    const mf = maskModel({ label: 'x', mask: flipped, harness: null });
    assert.equal(mf.cells[first]!.cls, 'gen');
    assert.equal(mf.chat!.disagree, 1);
    assert.match(describeToken(mf.cells[first]!), /supervised by the generation blocks only/);
  });

  it('the file totals: the rows the pass masked, summed; lines not masked yet leave them incomplete; failed rows counted apart', () => {
    const model = modelOf('qwen3');
    const other = JSON.stringify({ prompt: [{ role: 'user', content: 'Hi' }], completion: [{ role: 'assistant', content: 'Hello.' }] });
    const bad = '{"text": "plain"}';
    const rows = new Map<string, ChatRowResult>([LINE, other, bad].map((l) => [l, analyseChatLine(l, model, {})]));
    const a = rows.get(LINE)!.counts!;
    const b = rows.get(other)!.counts!;
    assert.equal(rows.get(bad)!.counts, undefined, 'a row without a mask has no counts');
    const f = chatFileCounts([LINE, '', other, bad, LINE], rows);
    assert.deepEqual(f, {
      rows: 3,
      failed: 1,
      lines: 4,
      tokens: 2 * a.tokens + b.tokens,
      generation: 0,
      prefix: 2 * a.prefix + b.prefix,
      complete: true,
    });
    assert.equal(a.prefix, panelMask('qwen3').chat!.prefix.filter(Boolean).length, 'the pass counts what the panel shows');
    const pending = chatFileCounts([LINE, '{"messages": [{"role": "user", "content": "new"}]}'], rows);
    assert.equal(pending.complete, false);
    assert.equal(pending.rows, 1);
    assert.equal(
      fileSummary(pending),
      `file: 0 supervised by the generation blocks, ${a.prefix} by the prefix difference, of ${a.tokens} tokens in 1 row (checking: 1 of 2 rows so far)`,
    );
    assert.match(fileSummary(f), /^file: 0 supervised by the generation blocks, \d+ by the prefix difference, of \d+ tokens in 3 rows, 1 without a mask$/);
  });

  it('both boundaries check the chat part: per-token arrays of the mask’s length, known severities', () => {
    const m = panelMask('qwen3');
    const show = (mask: LossMaskResult) => parseToWebview({ type: 'lossMask/show', view: { label: 'x', mask, harness: null } });
    assert.ok(show(m).ok);
    const short = structuredClone(m);
    short.chat!.prefix.pop();
    assert.equal(isLossMaskResult(short), false);
    assert.equal(show(short).ok, false);
    const sev = structuredClone(m) as unknown as { chat: { findings: { severity: string }[] } };
    sev.chat.findings[0]!.severity = 'fatal';
    assert.equal(isLossMaskResult(sev), false);
    const file = structuredClone(m) as unknown as { chat: { file: Record<string, unknown> } };
    delete file.chat.file['complete'];
    assert.equal(isLossMaskResult(file), false);
  });
});
