// The loss-mask view's model without a browser: token classes (supervised, masked,
// harness), counts and the share, the banners; and which tokens of an eval row the harness
// wrote (generated flags, or the forcing text when the flags do not line up).
import * as assert from 'node:assert/strict';
import type { LossMaskResult } from '../../core/protocol/lsp';
import { segment } from '../../core/lossMask';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import { harnessFlags } from '../../core/transcript/maskHarness';
import { FORCED_ANSWER_TEXT } from '../../trainer/agent/agentRuntime';
import { syntheticEvalRows } from '../ui/fixtures';
import { describeToken, maskModel, percent, visible } from '../../webview-ui/lossMask/model';
import { readFileSync } from 'node:fs';

const tok = trainDefaultTokenizer();
const SPECIALS = new Set(['<|bos|>', '<|eos|>', '<|pad|>', '<|end|>', '<|system|>', '<|user|>', '<|assistant|>', '<|tool_call|>', '<|tool_result|>']);

/** A LossMaskResult as the language server builds it: segment by segment, offsets per token. */
function maskOf(text: string, maxLen = 1024): LossMaskResult {
  const ids: number[] = [];
  const offsets: [number, number][] = [];
  const supervised: boolean[] = [];
  const special: boolean[] = [];
  let at = 0;
  for (const [piece, sup] of segment(text)) {
    for (const id of tok.encode(piece)) {
      const s = tok.decode([id]);
      const start = text.indexOf(s, at) === at ? at : at;
      ids.push(id);
      offsets.push([start, start + s.length]);
      supervised.push(sup);
      special.push(SPECIALS.has(s));
      at = start + s.length;
    }
  }
  return {
    uri: 'file:///t.transcript',
    row: null,
    text,
    tokenizer: { source: 'default', path: null, vocabSize: tok.vocabSize },
    ids,
    offsets,
    supervised,
    special,
    spans: [],
    maxLen,
    overLength: ids.length > maxLen,
  };
}

describe('loss-mask model (webview-ui/lossMask/model.ts)', () => {
  const text = readFileSync('samples/compare.transcript', 'utf8').replace(/\n$/, '');
  const mask = maskOf(text);

  it('one cell per token, its class from the mask; the cells cover the transcript', () => {
    const m = maskModel({ label: 'x', mask, harness: null });
    assert.equal(m.cells.length, mask.ids.length);
    assert.equal(m.cells.map((c) => c.text).join(''), text);
    assert.equal(m.cells[0]!.text, '<|system|>');
    assert.equal(m.cells[0]!.cls, 'mask');
    assert.ok(m.cells[0]!.special);
    const asst = m.cells.find((c) => c.text === '<|assistant|>')!;
    assert.equal(asst.cls, 'mask', 'the <|assistant|> marker is masked');
    assert.equal(m.cells[asst.i + 1]!.cls, 'sup', 'the content after it is supervised');
    const call = m.cells.find((c) => c.text === '<|tool_call|>')!;
    assert.equal(call.cls, 'sup', '<|tool_call|> is supervised');
    assert.equal(m.counts.supervised, mask.supervised.filter(Boolean).length);
    assert.equal(m.counts.supervised + m.counts.masked, m.counts.tokens);
    assert.equal(percent(m.counts.share), `${((100 * m.counts.supervised) / m.counts.tokens).toFixed(1)}%`);
    assert.deepEqual(m.banners, []);
    assert.match(describeToken(m.cells[0]!), /^token 0 · id \d+ · offset 0–10 · masked · special · "<\|system\|>"$/);
  });

  it('warns when an example supervises nothing, or everything, and when SFT drops it', () => {
    const prompt = text.slice(0, text.indexOf('<|assistant|>'));
    assert.match(maskModel({ label: 'x', mask: maskOf(prompt), harness: null }).banners[0]!.text, /supervises nothing/);
    const all = maskOf('Thought: hi');
    all.supervised = all.supervised.map(() => true);
    assert.match(maskModel({ label: 'x', mask: all, harness: null }).banners[0]!.text, /supervises everything/);
    const long = maskOf(text, 100);
    const banners = maskModel({ label: 'x', mask: long, harness: null }).banners;
    assert.equal(banners[0]!.level, 'error');
    assert.match(banners[0]!.text, /over max_len 100: SFT drops this example/);
  });

  it('shows blanks: a newline gets a visible mark before it', () => {
    assert.equal(visible('a\nb\tc'), 'a↵\nb→\tc');
  });
});

describe('harness text in eval rows (core/transcript/maskHarness.ts)', () => {
  const forcedRow = syntheticEvalRows(9).find((r) => r.variant === 'out-of-steps')!;

  it('rows without generated flags have none', () => {
    assert.equal(harnessFlags(maskOf('<|assistant|>x<|end|>'), { text: 'x' }), null);
    assert.equal(harnessFlags(maskOf('<|assistant|>x<|end|>'), null), null);
  });

  it('flags that line up with the tokens: supervised tokens the policy did not generate', () => {
    const mask = maskOf(forcedRow.text);
    assert.equal(forcedRow.generated.length, mask.ids.length, 'the synthetic row was tokenized as the server tokenizes');
    const h = harnessFlags(mask, forcedRow)!;
    const harnessText = mask.offsets.filter((_, i) => h[i]).map(([s, e]) => forcedRow.text.slice(s, e)).join('');
    assert.equal(harnessText, FORCED_ANSWER_TEXT);
    const m = maskModel({ label: 'x', mask, harness: h });
    assert.equal(m.counts.harness, h.filter(Boolean).length);
    assert.equal(m.counts.supervised + m.counts.harness, mask.supervised.filter(Boolean).length);
  });

  it('flags that do not line up: the forcing text is found in the transcript', () => {
    const mask = maskOf(forcedRow.text);
    const h = harnessFlags(mask, { ...forcedRow, generated: [1, 0] })!;
    const harnessText = mask.offsets.filter((_, i) => h[i]).map(([s, e]) => forcedRow.text.slice(s, e)).join('');
    assert.equal(harnessText, FORCED_ANSWER_TEXT);
  });
});
