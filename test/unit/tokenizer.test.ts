// The tokenizer: specials as single ids 0..8, digits one per token, lossless round trips,
// and the same ids as @huggingface/tokenizers on our own tokenizer.json — the file a run
// ships is only useful if another library reads it the same way.
import * as assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Tokenizer } from '@huggingface/tokenizers';
import {
  BpeTokenizer,
  DefaultWorldTexts,
  SPECIAL_TOKENS,
  canonicalTokenizerJson,
  defaultWorldTexts,
  preTokenize,
  sha256Hex,
  splitOnSpecials,
  tokenizerConfig,
  tokenizerFromJsonText,
  tokenizerHash,
  trainBpe,
  trainDefaultTokenizer,
} from '../../core/tokenizer';
import * as wire from '../../core/wire';
import { mulberry32 } from '../../core/mulberry32';

/** Deterministic PRNG (mulberry32) so "random" strings are the same on every run. */
const rng = mulberry32;

/** Random well-formed strings mixing the classes the pre-tokenizer treats differently. */
function randomStrings(n: number, seed: number): string[] {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const pieces: (() => string)[] = [
    () => String.fromCodePoint(0x20 + Math.floor(r() * 95)), // printable ASCII
    () => pick([' ', '  ', '\n', '\t', '\r\n', '\u00a0', '\u3000', '\u2028', '\ufeff', '\u0085']),
    () => String.fromCodePoint(0x80 + Math.floor(r() * 0x780)), // Latin-1 .. Arabic
    () => String.fromCodePoint(0x4e00 + Math.floor(r() * 0x5000)), // CJK
    () => String.fromCodePoint(0x1f300 + Math.floor(r() * 0x300)), // emoji (astral)
    () => String.fromCodePoint(0x10000 + Math.floor(r() * 0xfff00)), // any astral
    () => pick(['\u0301', '\u0308', '\u200d', '\ufe0f']), // combining / joiners
    () => String(Math.floor(r() * 100000)),
    () => pick(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "’s"]),
    () => pick(SPECIAL_TOKENS),
    () => pick(['<|', '|>', '<|end', 'end|>', '<|tool_', '<||>', '<|END|>']),
    () => pick(['Stack-100M', ' publication year', ' the', 'Thought:', '{"tool": "calc"']),
    () => String.fromCodePoint(Math.floor(r() * 0x20)), // control characters
  ];
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    let s = '';
    const len = 1 + Math.floor(r() * 24);
    for (let j = 0; j < len; j++) s += pick(pieces)();
    out.push(s);
  }
  return out;
}

const ADVERSARIAL = [
  '',
  ' ',
  '   ',
  '\n',
  '\n\n\n',
  ' \n \n ',
  'a   b',
  'a \t\n b',
  'trailing spaces   ',
  '   leading spaces',
  '\r\n\r\n',
  "it's they're we've I'm you'll he'd don't",
  "IT'S 'S 's 'ss '' ''s",
  'R-042 x2019y 10000 2048tokens v1.2.3 -3+4 1e-9 0.05',
  'abc123def456',
  '١٢٣ ²³ Ⅻ ½',
  'naïve café Ünïcödé ß',
  '日本語のテキスト',
  '👍🏽 👨‍👩‍👧 🇫🇷',
  'e\u0301 a\u0308',
  '\ufeffBOM first',
  'x<|tool_call|>y',
  'word<|end|>word',
  '<|end|><|end|>',
  '<|bos|><|eos|><|pad|><|end|><|system|><|user|><|assistant|><|tool_call|><|tool_result|>',
  '<|end|',
  '<|<|end|>|>',
  '<|unknown|>',
  '<|tool_call|>{"tool": "calc", "args": {"expr": "(2019+10000)*2"}}<|end|>',
  '{"tool": "search", "args": {"query": "Stack-100M RoPE base", "k": 2}}',
  'Thought: I need the publication year of RMSNorm.\nAnswer: 2019',
  '\u0000\u0001\u007f\u0080\u00ff',
  'a'.repeat(3000),
  ' '.repeat(500) + 'x',
  '9'.repeat(200),
];

describe('tokenizer', function () {
  let world: DefaultWorldTexts;
  let transcripts: string[];
  let tok: BpeTokenizer;
  let hf: Tokenizer;

  before(function () {
    world = defaultWorldTexts();
    transcripts = [...world.train, ...world.heldout];
    tok = trainDefaultTokenizer();
    hf = new Tokenizer(tok.toJSON(), tokenizerConfig());
  });

  describe('special tokens', function () {
    it('are the wire format specials, in order', function () {
      assert.deepEqual([...SPECIAL_TOKENS], [...wire.SPECIAL_TOKENS]);
    });

    it('are single reserved ids 0..8', function () {
      SPECIAL_TOKENS.forEach((s, i) => {
        assert.deepEqual(tok.encode(s), [i], s);
        assert.equal(tok.specialIds[s], i);
        assert.equal(tok.idToToken(i), s);
        assert.equal(tok.tokenToId(s), i);
        assert.ok(tok.isSpecial(i));
        assert.equal(tok.decode([i]), s);
      });
      assert.ok(!tok.isSpecial(SPECIAL_TOKENS.length));
    });

    it('split first, even mid-word', function () {
      const ids = tok.encode('abc<|tool_call|>def');
      assert.equal(ids.filter((id) => id === 7).length, 1);
      assert.equal(tok.decode(ids), 'abc<|tool_call|>def');
      const i = ids.indexOf(7);
      assert.deepEqual(ids.slice(0, i), tok.encode('abc'));
      assert.deepEqual(ids.slice(i + 1), tok.encode('def'));
      assert.deepEqual(tok.encode('x<|end|>y<|end|>'), [...tok.encode('x'), 3, ...tok.encode('y'), 3]);
    });

    it('encodeOrdinary treats them as plain text', function () {
      const ids = tok.encodeOrdinary('<|end|>');
      assert.ok(ids.length > 1 && ids.every((id) => !tok.isSpecial(id)));
      assert.equal(tok.decode(ids), '<|end|>');
    });

    it('splitOnSpecials partitions the text', function () {
      const t = 'a<|end|><|user|>b<|tool_call|';
      const parts = splitOnSpecials(t);
      assert.equal(parts.map((p) => p.text).join(''), t);
      assert.deepEqual(
        parts.map((p) => p.special),
        [false, true, true, false],
      );
    });

    it('are never produced by merges of ordinary text', function () {
      for (const s of SPECIAL_TOKENS) {
        assert.ok(!tok.encodeOrdinary(s).some((id) => id < SPECIAL_TOKENS.length));
      }
    });
  });

  describe('digits', function () {
    it('are one token each', function () {
      const ids = tok.encode('12345');
      assert.equal(ids.length, 5);
      assert.deepEqual(ids.map((id) => tok.decode([id])), ['1', '2', '3', '4', '5']);
      const r = tok.encode('R-042 2019+10000');
      assert.equal(tok.decode(r), 'R-042 2019+10000');
      for (const id of r) {
        const s = tok.decode([id]);
        assert.ok(!/\d/.test(s) || /^\d$/.test(s), `token ${JSON.stringify(s)} mixes a digit with more`);
      }
    });

    it('no vocabulary token holds a digit beside anything else', function () {
      for (let id = SPECIAL_TOKENS.length; id < tok.vocabSize; id++) {
        const s = tok.decode([id]);
        assert.ok(!/[0-9]/.test(s) || /^[0-9]$/.test(s), `token ${id} ${JSON.stringify(s)}`);
      }
    });

    it('a number is the same ids wherever it appears', function () {
      const n = tok.encode('2019');
      for (const ctx of ['x2019', ' 2019', '(2019+1)', '"2019"', 'year 2019.']) {
        const ids = tok.encode(ctx);
        assert.ok(
          ids.some((_, i) => n.every((d, k) => ids[i + k] === d)),
          `${ctx}: ${JSON.stringify(ids)} lacks ${JSON.stringify(n)}`,
        );
      }
    });
  });

  describe('round trip', function () {
    it('every distilled transcript of both splits', function () {
      assert.ok(world.train.length > 0 && world.heldout.length > 0);
      for (const t of transcripts) assert.equal(tok.decode(tok.encode(t)), t);
    });

    it('every passage', function () {
      assert.equal(world.passages.length, 268);
      for (const p of world.passages) assert.equal(tok.decode(tok.encode(p)), p);
    });

    it('random unicode strings and adversarial ones', function () {
      for (const s of [...randomStrings(2000, 7), ...ADVERSARIAL]) {
        assert.equal(tok.decode(tok.encode(s)), s, JSON.stringify(s));
        assert.equal(tok.decode(tok.encodeOrdinary(s)), s, JSON.stringify(s));
      }
    });

    it('a lone surrogate becomes U+FFFD (UTF-8 cannot hold it), in both libraries', function () {
      const s = 'a\ud800b\udfffc';
      assert.equal(tok.decode(tok.encode(s)), 'a\ufffdb\ufffdc');
      assert.deepEqual(tok.encode(s), hf.encode(s).ids);
    });

    it('decode of a cut character gives U+FFFD, unknown ids throw', function () {
      const ids = tok.encode('日');
      assert.ok(ids.length > 1, 'a CJK character outside the world is several byte tokens');
      assert.equal(tok.decode(ids.slice(0, 1)), '\ufffd');
      assert.throws(() => tok.decode([tok.vocabSize]), /not in the vocabulary/);
      assert.throws(() => tok.decode([-1]), /not in the vocabulary/);
      assert.throws(() => tok.decode([1.5]), /not in the vocabulary/);
      assert.equal(tok.decode([]), '');
    });
  });

  describe('against @huggingface/tokenizers', function () {
    it('loads our tokenizer.json with the same vocabulary', function () {
      assert.equal(hf.get_vocab().size, tok.vocabSize);
      for (let id = 0; id < tok.vocabSize; id++) assert.equal(hf.id_to_token(id), tok.idToToken(id));
    });

    it('gives identical ids on every distilled transcript of both splits, and decodes them back', function () {
      for (const t of transcripts) {
        const ids = tok.encode(t);
        assert.deepEqual(hf.encode(t).ids, ids);
        assert.equal(hf.decode(ids), t);
      }
    });

    it('gives identical ids on every passage', function () {
      for (const p of world.passages) assert.deepEqual(hf.encode(p).ids, tok.encode(p));
    });

    it('gives identical ids on adversarial and random strings', function () {
      for (const s of [...ADVERSARIAL, ...randomStrings(1000, 11)]) {
        const ids = tok.encode(s);
        assert.deepEqual(hf.encode(s).ids, ids, JSON.stringify(s));
        if (ids.length > 0) assert.equal(hf.decode(ids), s, JSON.stringify(s));
      }
    });

    it('gives identical ids for a small tokenizer trained on other text (many partial merges)', function () {
      const texts = randomStrings(300, 3).concat(ADVERSARIAL);
      const small = trainBpe(texts, { vocabSize: 400 });
      const h = new Tokenizer(small.toJSON(), tokenizerConfig());
      for (const s of [...texts, ...transcripts.slice(0, 20), ...randomStrings(300, 5)]) {
        assert.deepEqual(h.encode(s).ids, small.encode(s), JSON.stringify(s));
      }
    });

    it('gives identical ids where merge order and ties matter (a tiny alphabet, long runs)', function () {
      const r = rng(42);
      const gen = (n: number): string[] =>
        Array.from({ length: n }, () => {
          let s = '';
          const len = 1 + Math.floor(r() * 40);
          for (let i = 0; i < len; i++) s += 'aab ba'[Math.floor(r() * 6)]!;
          return s;
        });
      const small = trainBpe(gen(200), { vocabSize: 330 });
      assert.ok(small.merges().length > 40, `${small.merges().length} merges`);
      const h = new Tokenizer(small.toJSON(), tokenizerConfig());
      for (const s of [...gen(2000), 'a'.repeat(257), 'ab'.repeat(300), 'aaab'.repeat(100)]) {
        assert.deepEqual(small.encode(s), h.encode(s).ids, JSON.stringify(s));
      }
    });
  });

  describe('training', function () {
    it('the default world trains to convergence: its words are single tokens', function () {
      const counts = new Map<string, number>();
      for (const t of [...world.passages, ...transcripts]) {
        for (const seg of splitOnSpecials(t)) {
          if (seg.special) continue;
          for (const p of preTokenize(seg.text)) counts.set(p, (counts.get(p) ?? 0) + 1);
        }
      }
      for (const [p, c] of counts) {
        if (c >= 2) assert.equal(tok.encode(p).length, 1, `${JSON.stringify(p)} (seen ${c} times)`);
      }
      assert.ok(tok.vocabSize > 265 && tok.vocabSize < 2000, `vocab ${tok.vocabSize}`);
    });

    it('is deterministic: same input, byte-identical JSON; input order does not matter', function () {
      const texts = [...world.passages, ...transcripts];
      const a = canonicalTokenizerJson(trainBpe(texts));
      const b = canonicalTokenizerJson(trainBpe(texts));
      assert.equal(a, b);
      assert.equal(a, canonicalTokenizerJson(trainDefaultTokenizer({})));
      assert.equal(canonicalTokenizerJson(trainBpe([...texts].reverse())), a);
      assert.equal(canonicalTokenizerJson(tok), a);
    });

    it('respects vocabSize and minPairCount', function () {
      const texts = [...world.passages, ...transcripts];
      const capped = trainBpe(texts, { vocabSize: 300 });
      assert.equal(capped.vocabSize, 300);
      // The capped run is a prefix of the full one: the same first merges.
      assert.deepEqual(capped.merges(), tok.merges().slice(0, capped.merges().length));
      // "ab ab ab": the pair a+b occurs 3 times, then Ġ+ab twice.
      assert.equal(trainBpe(['ab ab ab'], { minPairCount: 4 }).vocabSize, 265);
      const three = trainBpe(['ab ab ab'], { minPairCount: 3 });
      assert.deepEqual(three.merges(), [['a', 'b']]);
      assert.deepEqual(three.encode(' ab'), [three.tokenToId('Ġ'), three.tokenToId('ab')]);
      const two = trainBpe(['ab ab ab'], { minPairCount: 2 });
      assert.deepEqual(two.encode(' ab'), [two.tokenToId('Ġab')]);
      assert.equal(trainBpe([]).vocabSize, 265);
    });

    it('ties go to the smaller pair of ids', function () {
      // "ab" and "cd" both occur twice; a (id 9+97) < c (id 9+99), so "ab" merges first.
      const t = trainBpe(['abcd', 'abcd'], { vocabSize: 266 });
      assert.deepEqual(t.merges(), [['a', 'b']]);
    });

    it('rejects bad options', function () {
      assert.throws(() => trainBpe([], { vocabSize: 100 }), /vocabSize/);
      assert.throws(() => trainBpe([], { vocabSize: 1.5 }), /vocabSize/);
      assert.throws(() => trainBpe([], { minPairCount: 0 }), /minPairCount/);
    });

    it('special tokens are never trained on', function () {
      const t = trainBpe(['<|end|><|end|><|end|><|end|>']);
      assert.equal(t.vocabSize, 265);
    });
  });

  describe('tokenizer.json', function () {
    it('has the Hugging Face shape', function () {
      const j = tok.toJSON();
      assert.equal(j.version, '1.0');
      assert.equal(j.model.type, 'BPE');
      assert.equal(j.decoder.type, 'ByteLevel');
      assert.deepEqual(
        j.added_tokens.map((t) => [t.id, t.content, t.special]),
        SPECIAL_TOKENS.map((s, i) => [i, s, true]),
      );
      assert.equal(Object.keys(j.model.vocab).length, tok.vocabSize);
      assert.equal(j.model.merges.length, tok.merges().length);
    });

    it('fromJSON(toJSON()) reproduces encodings, also through JSON text', function () {
      const back = BpeTokenizer.fromJSON(tok.toJSON());
      const viaText = tokenizerFromJsonText(JSON.stringify(tok.toJSON(), null, 2));
      for (const s of [...transcripts, ...ADVERSARIAL]) {
        const ids = tok.encode(s);
        assert.deepEqual(back.encode(s), ids);
        assert.deepEqual(viaText.encode(s), ids);
      }
      assert.equal(canonicalTokenizerJson(back), canonicalTokenizerJson(tok));
      assert.equal(tokenizerHash(viaText), tokenizerHash(tok));
    });

    it('accepts the older "a b" merge form', function () {
      const j = tok.toJSON() as unknown as { model: { merges: unknown[] } };
      j.model.merges = j.model.merges.map((m) => (m as string[]).join(' '));
      const back = BpeTokenizer.fromJSON(j);
      assert.deepEqual(back.encode(transcripts[0]!), tok.encode(transcripts[0]!));
    });

    it('a malformed tokenizer.json gets an error naming what is wrong', function () {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each case breaks a parsed tokenizer.json at a different depth
      type J = Record<string, any>;
      const cases: [string, (j: J) => unknown, RegExp][] = [
        ['not an object', () => [], /top level.*object/],
        ['wrong version', (j) => ((j.version = '2.0'), j), /version.*"1\.0"/],
        ['normalizer', (j) => ((j.normalizer = { type: 'NFC' }), j), /normalizer must be null/],
        ['pre_tokenizer', (j) => ((j.pre_tokenizer = { type: 'ByteLevel' }), j), /pre_tokenizer must be/],
        ['decoder', (j) => ((j.decoder = null), j), /decoder must be a ByteLevel/],
        ['added_tokens missing', (j) => (delete j.added_tokens, j), /added_tokens must be an array/],
        ['added_tokens count', (j) => (j.added_tokens.pop(), j), /added_tokens must hold the 9 special tokens/],
        ['special id', (j) => ((j.added_tokens[3].id = 4), j), /added_tokens\[3\] must be \{"id": 3, "content": "<\|end\|>"\}/],
        ['special flag', (j) => ((j.added_tokens[0].special = false), j), /added_tokens\[0\]\.special must be true/],
        ['lstrip', (j) => ((j.added_tokens[0].lstrip = true), j), /added_tokens\[0\]\.lstrip must be false/],
        ['model type', (j) => ((j.model.type = 'WordPiece'), j), /model\.type must be "BPE"/],
        ['byte_fallback', (j) => ((j.model.byte_fallback = true), j), /model\.byte_fallback must be false/],
        ['unk_token', (j) => ((j.model.unk_token = '<unk>'), j), /model\.unk_token must be null/],
        ['vocab', (j) => ((j.model.vocab = []), j), /model\.vocab must be an object/],
        ['vocab id', (j) => ((j.model.vocab['Ġthe'] = -1), j), /model\.vocab\["Ġthe"\] must be an integer id/],
        ['vocab id reuse', (j) => ((j.model.vocab['Ġthe'] = 0), j), /reuses id 0/],
        ['merges', (j) => ((j.model.merges = {}), j), /model\.merges must be an array/],
        ['merge shape', (j) => ((j.model.merges[5] = ['a']), j), /model\.merges\[5\] must be a pair/],
        ['merge unknown', (j) => ((j.model.merges[0] = ['zz', 'q']), j), /merge 0 .*left part is not an ordinary token/],
        ['merge result', (j) => ((j.model.merges[0] = ['q', 'q']), j), /merged token "qq" is not in the vocabulary/],
        ['duplicate merge', (j) => (j.model.merges.push(j.model.merges[0]), j), /duplicate of merge 0/],
        [
          'special moved',
          (j) => {
            const v = j.model.vocab;
            [v['<|bos|>'], v['a']] = [v['a'], v['<|bos|>']];
            return j;
          },
          /id 0 must be the special token <\|bos\|>/,
        ],
        [
          'missing byte',
          (j) => {
            // Byte 0xff's symbol "ÿ" is renamed to a (byte-level) two-symbol token.
            const v = j.model.vocab;
            v['ÿÿ'] = v['ÿ'];
            delete v['ÿ'];
            return j;
          },
          /byte 0xff \("ÿ"\) has no token/,
        ],
        ['non byte-level token', (j) => ((j.model.vocab['a b'] = tok.vocabSize), j), /"a b" holds " ", which is not a byte-level symbol/],
      ];
      for (const [name, mutate, re] of cases) {
        const j = mutate(JSON.parse(JSON.stringify(tok.toJSON())) as J);
        assert.throws(() => BpeTokenizer.fromJSON(j), (e: Error) => {
          assert.match(e.message, /^tokenizer\.json: /, name);
          assert.match(e.message, re, `${name}: ${e.message}`);
          return true;
        });
      }
      assert.throws(() => tokenizerFromJsonText('{"version": '), /tokenizer\.json: not valid JSON/);
    });
  });

  describe('hash', function () {
    it('is sha256 of the canonical JSON, and changes with the merges', function () {
      const want = createHash('sha256').update(canonicalTokenizerJson(tok), 'utf8').digest('hex');
      assert.equal(tokenizerHash(tok), `sha256:${want}`);
      assert.notEqual(tokenizerHash(trainBpe(transcripts, { vocabSize: 300 })), tokenizerHash(tok));
    });

    it('the pure sha256 agrees with node:crypto on edge lengths', function () {
      for (const n of [0, 1, 55, 56, 63, 64, 65, 119, 120, 1000, 100_000]) {
        const b = new Uint8Array(n).map((_, i) => (i * 31 + 7) & 0xff);
        assert.equal(sha256Hex(b), createHash('sha256').update(b).digest('hex'), `length ${n}`);
      }
    });
  });

  describe('speed', function () {
    it('a long piece encodes in near-linear time and matches the reference library', function () {
      const s = 'ab'.repeat(50_000);
      const t0 = performance.now();
      const ids = tok.encode(s);
      const ms = performance.now() - t0;
      assert.ok(ms < 2000, `${ms} ms`);
      assert.deepEqual(hf.encode(s).ids, ids);
    });
  });
});
