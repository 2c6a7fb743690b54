// One tokenizer interface, two implementations (issue 29): a model's own Hugging Face
// tokenizer.json behind the lab's Tokenizer, its encodings the library's own on a fixed
// text set (wire specials included), the wire specials added as tokens after the
// vocabulary, the result a valid tokenizer.json the library loads back, and bad files
// refused with the field named.
import * as assert from 'node:assert/strict';
import { Tokenizer as HfLib } from '@huggingface/tokenizers';
import {
  BpeTokenizer,
  HfTokenizer,
  SPECIAL_TOKENS,
  type Tokenizer,
  anyTokenizerFromJsonText,
  canonicalTokenizerJson,
  missingWireSpecials,
  tokenizerHash,
  tokenizerJsonSize,
  tokenizerKind,
  trainDefaultTokenizer,
  withWireSpecials,
} from '../../core/tokenizer';
import { foreignByteLevelTokenizer, wordLevelTokenizer } from '../support/hfTokenizer';
import { tokenizerCallMask } from '../../trainer/agent/policy';
import { defaultWorldTexts } from '../../core/tokenizer';

const texts = defaultWorldTexts();
const corpus = [...texts.passages, ...texts.train.slice(0, 200)];

/** The fixed text set: transcripts (with every wire special), digits, Unicode, specials glued to words. */
const FIXED: string[] = [
  texts.train[0]!,
  texts.train[1]!,
  texts.heldout[0]!,
  'What is 1234 + 5678? The capital of France is Paris.',
  '  leading spaces, trailing tab\t and\nnewlines\r\n',
  'café naïve — “quotes” 漢字 🙂 \u00a0nbsp',
  SPECIAL_TOKENS.join(''),
  `x${SPECIAL_TOKENS.join(' y ')}z`,
  '<|tool_call|>{"name": "search", "arguments": {"query": "Ada"}}<|end|>',
  '<|endoftext|>text<|end|><|eos|>',
  '<|unknown|> <| end |> <|end',
  '',
];

describe('HfTokenizer: a Hugging Face tokenizer.json behind the lab\'s Tokenizer interface', function () {
  this.timeout(120000);
  const base = foreignByteLevelTokenizer(corpus, 600);
  const baseSize = tokenizerJsonSize(base);

  it('a model\'s own tokenizer lacks the wire specials: they are added as special tokens with ids after the vocabulary', () => {
    assert.deepEqual(missingWireSpecials(base), [...SPECIAL_TOKENS]);
    // After the model's embedding rows when it has more (a padded vocabulary): the caller gives the first free row.
    const { json, added } = withWireSpecials(base, baseSize + 3);
    assert.deepEqual(
      added,
      SPECIAL_TOKENS.map((content, i) => ({ content, id: baseSize + 3 + i })),
    );
    assert.deepEqual(missingWireSpecials(json), []);
    assert.equal(tokenizerJsonSize(json), baseSize + 3 + SPECIAL_TOKENS.length);
    // The base is not changed, and a tokenizer that has them gains nothing.
    assert.deepEqual(missingWireSpecials(base), [...SPECIAL_TOKENS]);
    assert.deepEqual(withWireSpecials(json, tokenizerJsonSize(json)).added, []);
    assert.throws(() => withWireSpecials(base, baseSize - 1), /inside the vocabulary/);
  });

  it('the written tokenizer.json loads back in @huggingface/tokenizers, with the specials as single ids', () => {
    const { json, added } = withWireSpecials(base, baseSize);
    const text = JSON.stringify(json);
    const lib = new HfLib(JSON.parse(text) as object, {});
    for (const a of added) {
      assert.deepEqual(lib.encode(a.content, { add_special_tokens: false }).ids, [a.id]);
      assert.equal(lib.token_to_id(a.content), a.id);
    }
    const tok = anyTokenizerFromJsonText(text);
    assert.ok(tok instanceof HfTokenizer);
    assert.equal(tokenizerKind(tok), 'hf');
    assert.equal(canonicalTokenizerJson(tok), text);
    // The hash is of the content, not of the indentation.
    assert.equal(tokenizerHash(anyTokenizerFromJsonText(JSON.stringify(json, null, 2))), tokenizerHash(tok));
  });

  for (const [name, make] of [
    ['byte-level BPE (SmolLM-style)', () => withWireSpecials(base, baseSize).json],
    ['WordLevel (hand-written)', () => withWireSpecials(wordLevelTokenizer(), tokenizerJsonSize(wordLevelTokenizer())).json],
  ] as const) {
    it(`${name}: encodings equal the library's own on the fixed text set, wire specials one id each`, () => {
      const json = make();
      const tok = new HfTokenizer(json);
      // The library as a model folder drives it: tokenizer_config.json names a WordLevel model's unknown token.
      const lib = new HfLib(structuredClone(json), name.startsWith('WordLevel') ? { unk_token: '[UNK]' } : {});
      let tokens = 0;
      for (const t of FIXED) {
        const want = lib.encode(t, { add_special_tokens: false }).ids;
        assert.deepEqual(tok.encode(t), want, JSON.stringify(t.slice(0, 60)));
        assert.deepEqual(tok.encode(t), want, 'the cached encoding is the same');
        tokens += want.length;
        if (want.length) assert.equal(tok.decode(want), lib.decode(want, { skip_special_tokens: false, clean_up_tokenization_spaces: false }));
      }
      assert.ok(tokens > 100, `${tokens} tokens compared`);
      for (const s of SPECIAL_TOKENS) {
        assert.deepEqual(tok.encode(s), [tok.specialIds[s]]);
        assert.ok(tok.isSpecial(tok.specialIds[s]));
        assert.equal(tok.tokenBytes(tok.specialIds[s]), undefined);
        assert.equal(tok.decode([tok.specialIds[s]]), s);
      }
      assert.throws(() => tok.decode([tok.vocabSize]), RangeError);
    });
  }

  it('byte-level: decode(encode(x)) is x, and token bytes add up to the text\'s (what the loss mask aligns on)', () => {
    const tok = new HfTokenizer(withWireSpecials(base, baseSize).json);
    for (const t of FIXED) {
      assert.equal(tok.decode(tok.encode(t)), t);
      const ordinary = t.split(new RegExp([...SPECIAL_TOKENS, '<|endoftext|>'].map((s) => s.replace(/[|]/g, '\\|')).join('|'))).join('');
      const bytes = tok.encode(ordinary).reduce((n, id) => n + (tok.tokenBytes(id)?.length ?? 0), 0);
      assert.equal(bytes, Buffer.byteLength(ordinary), JSON.stringify(ordinary.slice(0, 60)));
    }
    // Text ids are not special; "<|endoftext|>", the model's own special, is.
    assert.ok(!tok.isSpecial(tok.encode('the')[0]!));
    assert.ok(tok.isSpecial(tok.encode('<|endoftext|>')[0]!));
    assert.equal(typeof tok.idToToken(tok.encode(' the')[0]!), 'string');
  });

  it("the grammar's token mask over the model's vocabulary: the call's first token allowed, specials but <|end|> and gaps never", () => {
    // A gap in the id space (ids without a token, as some models' vocabularies have): the model's special moved up.
    const gappy = structuredClone(base) as { model: { vocab: Record<string, number> }; added_tokens: { id: number }[] };
    gappy.model.vocab['<|endoftext|>'] = baseSize + 5;
    gappy.added_tokens[0]!.id = baseSize + 5;
    const tok = new HfTokenizer(withWireSpecials(gappy as unknown as Record<string, unknown>, baseSize + 6).json);
    assert.equal(tok.idToToken(baseSize - 1), undefined);
    const mask = tokenizerCallMask(tok);
    const logits = new Float32Array(tok.vocabSize).fill(1);
    mask.apply(logits, mask.start());
    const allowed = [...logits.keys()].filter((i) => logits[i]! > -1e9);
    assert.ok(allowed.includes(tok.encode('{')[0]!), 'a call opens with {');
    assert.ok(!allowed.includes(baseSize - 1), 'the gap');
    for (const s of SPECIAL_TOKENS) assert.ok(!allowed.includes(tok.specialIds[s]), s);
    assert.ok(!allowed.includes(baseSize + 5), '<|endoftext|>');
  });

  it("the lab's BPE is the same interface, and the dispatching reader keeps it the lab's", () => {
    const lab = trainDefaultTokenizer();
    const asInterface: Tokenizer = lab;
    const back = anyTokenizerFromJsonText(canonicalTokenizerJson(asInterface));
    assert.ok(back instanceof BpeTokenizer);
    assert.equal(tokenizerKind(back), 'lab');
    assert.equal(tokenizerHash(back), tokenizerHash(lab));
    // A damaged lab tokenizer still gets the lab reader's error, naming the field.
    const j = lab.toJSON() as unknown as { model: { merges: unknown } };
    j.model.merges = {};
    assert.throws(() => anyTokenizerFromJsonText(JSON.stringify(j)), /^Error: tokenizer\.json: model\.merges must be an array/);
  });

  it('a tokenizer.json that does not parse or load is refused, naming the field', () => {
    const cases: [string, RegExp][] = [
      ['{"model": ', /^tokenizer\.json: \(top level\) is not valid JSON/],
      ['[]', /^tokenizer\.json: \(top level\) must be a JSON object/],
      [JSON.stringify({ ...base, model: null }), /^tokenizer\.json: model must be an object/],
      [JSON.stringify({ ...base, model: { type: 'Nope' } }), /^tokenizer\.json: model does not load in @huggingface\/tokenizers: Unknown TokenizerModel type: Nope/],
      [JSON.stringify({ ...base, pre_tokenizer: { type: 'Nope' } }), /^tokenizer\.json: pre_tokenizer does not load/],
      [JSON.stringify({ ...base, added_tokens: {} }), /^tokenizer\.json: added_tokens must be an array/],
      [JSON.stringify({ ...base, added_tokens: [{ id: -1, content: 'x' }] }), /^tokenizer\.json: added_tokens\[0\] must be/],
      // A run's tokenizer without the wire specials (they are added when a run starts from the model).
      [JSON.stringify(base), /^tokenizer\.json: added_tokens lack the wire-format special <\|bos\|>/],
    ];
    for (const [text, re] of cases) assert.throws(() => anyTokenizerFromJsonText(text), (e: Error) => (assert.match(e.message, re), true));
  });
});
