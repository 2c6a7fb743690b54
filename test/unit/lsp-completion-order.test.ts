// Completion offers first what the wire format allows at the cursor (language-server/
// features/completion.ts), and `<|bos|>`/`<|eos|>`/`<|pad|>` (never inside a transcript) last.
import * as assert from 'node:assert/strict';
import { TextDocument } from 'vscode-languageserver-textdocument';
import { transcriptUnit } from '../../language-server/documents';
import { analyseTranscript } from '../../language-server/analysis/transcript';
import { completionsAt } from '../../language-server/features/completion';
import { hoverAt } from '../../language-server/features/hover';
import { TokenizerStore } from '../../language-server/tokenizers';

const tok = new TokenizerStore().resolve(null, null);
/** The labels in the order an editor shows them (by sortText), at the end of `text`. */
function order(text: string): string[] {
  const doc = TextDocument.create('file:///t.transcript', 'agent-transcript', 1, text);
  const unit = transcriptUnit(doc, analyseTranscript(text), tok);
  return completionsAt(unit, text.length)
    .sort((a, b) => (a.sortText ?? '').localeCompare(b.sortText ?? ''))
    .map((i) => i.label);
}
const NEVER = ['<|bos|>', '<|eos|>', '<|pad|>'];

describe('language server: completion order', () => {
  it('right after a user turn: <|assistant|> first, the never-used tokens last', () => {
    const labels = order('<|system|>S<|end|><|user|>What is 2+2?<|end|>');
    assert.equal(labels[0], '<|assistant|>');
    assert.deepEqual(labels.slice(-3), NEVER);
  });
  it('at the start: <|system|> first', () => {
    assert.equal(order('')[0], '<|system|>');
  });
  it('inside an open assistant turn: <|end|>, then <|tool_call|>, then the call skeletons before the other markers', () => {
    const labels = order('<|system|>S<|end|><|user|>Q<|end|><|assistant|>Thought: search\n');
    assert.deepEqual(labels.slice(0, 2), ['<|end|>', '<|tool_call|>']);
    assert.ok(labels.indexOf('search call') < labels.indexOf('<|user|>'), labels.join(' '));
    assert.deepEqual(labels.slice(-3), NEVER);
  });
  it('after an assistant turn that called a tool: <|tool_result|> first; after the result: <|assistant|>', () => {
    const call = '<|system|>S<|end|><|user|>Q<|end|><|assistant|>T\n<|tool_call|>{"tool": "calc", "args": {"expr": "2+2"}}<|end|>';
    assert.equal(order(call)[0], '<|tool_result|>');
    assert.equal(order(`${call}<|tool_result|>4<|end|>`)[0], '<|assistant|>');
  });
  it('hovers give 1-based character positions, as the Grammar Debugger does', () => {
    const text = '<|system|>S<|end|><|user|>Q<|end|><|assistant|>T\n<|tool_call|>{"tool": "search", "args": {"query": "q", "k": 0}}<|end|>';
    const doc = TextDocument.create('file:///t.transcript', 'agent-transcript', 1, text);
    const unit = transcriptUnit(doc, analyseTranscript(text), tok);
    const h = hoverAt(unit, text.indexOf('"k": 0') + 5);
    const body = '{"tool": "search", "args": {"query": "q", "k": 0}}';
    // The 0 is code point index 47 of the body (0-based): character 48 to a person.
    assert.equal(body.indexOf('0}'), 47);
    assert.match((h!.contents as { value: string }).value, /rejected at character 48:/);
  });
});
