// SFT data: span kinds per token, copy weights, the per-turn cuts of the curriculum.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { IGNORE_INDEX, encodeWithMask } from '../../core/sftFormat';
import { SPAN_KINDS } from '../../core/spans';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import { UNSUPERVISED, cutAfterEachTurn, firstTurnOnly, padBatch, toExample, tokenizeTrace } from '../../trainer/sft/data';
import { repoRoot } from '../support/reference';

const tok = trainDefaultTokenizer();
const sum = readFileSync(path.join(repoRoot, 'samples', 'sum.transcript'), 'utf8').replace(/\n$/, '');

describe('SFT data', () => {
  it('labels exactly the supervised tokens of the loss mask, each with a span kind', () => {
    const trace = tokenizeTrace(sum, tok);
    const mask = encodeWithMask(sum, tok);
    assert.deepEqual(Array.from(trace.ids), mask.ids);
    mask.supervised.forEach((s, i) => assert.equal(trace.kinds[i] !== UNSUPERVISED, s, `token ${i}`));
  });

  it('marks the copied digits of the expression and the answer, and weights them', () => {
    const trace = tokenizeTrace(sum, tok);
    const ex = toExample(trace, 1024, { copyWeight: 5 })!;
    const decodeKind = (kind: string) =>
      tok.decode(Array.from(ex.labels).filter((id, t) => id !== IGNORE_INDEX && SPAN_KINDS[ex.kinds[t]!] === kind));
    assert.equal(decodeKind('expr'), '2019+10000');
    assert.equal(decodeKind('answer'), '12019');
    assert.equal(decodeKind('query'), 'RMSNorm publication yearStack-100M RoPE base');
    ex.labels.forEach((id, t) => {
      if (id === IGNORE_INDEX) assert.equal(ex.weights[t], 0);
      else if (['expr', 'answer', 'query'].includes(SPAN_KINDS[ex.kinds[t]!]!)) assert.equal(ex.weights[t], 5);
    });
    const plain = toExample(trace, 1024, { copyWeight: 1 })!;
    assert.ok(plain.weights.every((w, t) => w === (plain.labels[t] === IGNORE_INDEX ? 0 : 1)));
  });

  it("copyKindWeights multiply one kind's copy spans only: the thought's compute values, not its other words", () => {
    const trace = tokenizeTrace(sum, tok);
    const base = toExample(trace, 1024, { copyWeight: 5, kindWeights: { answer: 3 } })!;
    const heavy = toExample(trace, 1024, { copyWeight: 5, kindWeights: { answer: 3 }, copyKindWeights: { thought: 3 } })!;
    let tripled = 0;
    heavy.weights.forEach((w, t) => {
      const kind = SPAN_KINDS[heavy.kinds[t]!];
      const copied = trace.copy[t + 1] === 1;
      if (kind === 'thought' && copied) {
        assert.equal(w, base.weights[t]! * 3, `token ${t}`);
        tripled++;
      } else assert.equal(w, base.weights[t], `token ${t} (${String(kind)}, copy ${copied})`);
    });
    const thoughtCopies = tok.decode(Array.from(heavy.labels).filter((_, t) => heavy.weights[t] === 15));
    assert.ok(thoughtCopies.includes('2019+10000'), thoughtCopies);
    assert.ok(tripled > 10);
  });

  it('drops an example longer than max_len instead of truncating it', () => {
    const trace = tokenizeTrace(sum, tok);
    assert.equal(toExample(trace, trace.ids.length - 1, { copyWeight: 1 }), null);
    assert.notEqual(toExample(trace, trace.ids.length, { copyWeight: 1 }), null);
  });

  it('cuts after the first turn and after each turn', () => {
    const first = firstTurnOnly(sum);
    assert.ok(first.endsWith('"k": 2}}<|end|>'));
    assert.equal(first.split('<|assistant|>').length, 2);
    const cuts = cutAfterEachTurn(sum);
    assert.equal(cuts.length, 4);
    assert.equal(cuts[0], first);
    assert.equal(cuts[3], sum);
    for (const c of cuts) assert.ok(sum.startsWith(c) && c.endsWith('<|end|>'));
  });

  it('pads a batch with the pad id, ignored labels and zero weights', () => {
    const a = toExample(tokenizeTrace(firstTurnOnly(sum), tok), 1024, { copyWeight: 1 })!;
    const b = toExample(tokenizeTrace(sum, tok), 1024, { copyWeight: 1 })!;
    const batch = padBatch([a, b], 2);
    assert.equal(batch.seq, b.inputIds.length);
    const tail = a.inputIds.length;
    assert.ok(Array.from(batch.inputIds.slice(tail, batch.seq)).every((x) => x === 2));
    assert.ok(Array.from(batch.labels.slice(tail, batch.seq)).every((x) => x === IGNORE_INDEX));
    assert.ok(Array.from(batch.weights.slice(tail, batch.seq)).every((x) => x === 0));
  });
});
