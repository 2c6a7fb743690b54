// A SentencePiece tokenizer (Llama 2, Mistral, TinyLlama: "▁" for a space, a "▁" prefix added
// to each stretch of text, "<0xE2>" byte-fallback tokens, a decoder that strips the prefix)
// behind the lab's Tokenizer (issue 29). Generated here in both of the forms models ship (a
// Prepend normalizer, or a Metaspace pre-tokenizer with prepend_scheme "first"); the lab
// encodes each stretch between wire specials as the library does, knows which bytes are the
// text's (the loss mask, the language server's table), and its grammar mask lets the student
// write the call it was trained on, prefix space and all.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Tokenizer as HfLib } from '@huggingface/tokenizers';
import {
  HfTokenizer,
  PieceAlignmentError,
  SPECIAL_TOKENS,
  type Tokenizer,
  defaultWorldTexts,
  insertedPrefix,
  pieceByteLengths,
  splitOnSpecials,
  tokenTexts,
  tokenizerJsonSize,
  trainDefaultTokenizer,
  withWireSpecials,
} from '../../core/tokenizer';
import { segment } from '../../core/lossMask';
import { TOOL_CALL } from '../../core/wire';
import { tokenizeTrace, UNSUPERVISED } from '../../trainer/sft/data';
import { tokenizerCallMask } from '../../trainer/agent/policy';
import { analyseTranscript } from '../../language-server/analysis/transcript';
import { tokenTable } from '../../language-server/analysis/tokens';
import { initBackend } from '../../trainer/model/backend';
import { writeHfFolder } from '../../trainer/hf/hfExport';
import { type ModelConfig, StackModel } from '../../trainer/model/model';
import { foreignByteLevelTokenizer, sentencePieceTokenizer } from '../support/hfTokenizer';
import { repoRoot } from '../support/reference';
import { mean, sftLosses } from '../support/runFiles';

const texts = defaultWorldTexts();
const corpus = [...texts.passages, ...texts.train.slice(0, 200)];
const SP = '\u2581';

const FIXED: string[] = [
  texts.train[0]!,
  texts.heldout[0]!,
  'What is 1234 + 5678? The capital of France is Paris.',
  'leading spaces:  two, tab\t and\nnewlines\r\n',
  'café naïve — “quotes” 漢字 🙂 \u00a0nbsp',
  SPECIAL_TOKENS.join(''),
  `x${SPECIAL_TOKENS.join(' y ')}z`,
  '<|tool_call|>{"tool": "search", "args": {"query": "Ada", "k": 3}}<|end|>',
];

/** The UTF-8 a token sequence spells once each token's inserted bytes (at its start) are dropped. */
function spelled(tok: Tokenizer, piece: string, ids: readonly number[]): string {
  const lens = pieceByteLengths(tok, piece, ids);
  const parts = ids.map((id, i) => {
    const b = tok.tokenBytes(id) ?? Buffer.from(tok.decode([id]));
    return Buffer.from(b.subarray(b.length - lens[i]!));
  });
  return Buffer.concat(parts).toString('utf8');
}

function walkMask(tok: Tokenizer, body: string): { rejectedAt: number | null; endAllowed: boolean } {
  const mask = tokenizerCallMask(tok);
  const ids = tok.encode(TOOL_CALL + body).slice(1);
  let states = mask.start();
  for (let i = 0; i < ids.length; i++) {
    const logits = new Float32Array(tok.vocabSize);
    mask.apply(logits, states);
    if (logits[ids[i]!] === -Infinity) return { rejectedAt: i, endAllowed: false };
    states = mask.advance(states, ids[i]!);
  }
  const logits = new Float32Array(tok.vocabSize);
  mask.apply(logits, states);
  return { rejectedAt: null, endAllowed: logits[tok.specialIds['<|end|>']] !== -Infinity };
}

describe('a SentencePiece tokenizer (Llama 2, Mistral) behind the lab\'s Tokenizer interface', function () {
  this.timeout(120000);

  for (const style of ['legacy', 'metaspace'] as const) {
    describe(`${style === 'legacy' ? 'a Prepend normalizer (Llama 2, Mistral)' : 'a Metaspace pre-tokenizer, prepend_scheme "first"'}`, () => {
      const base = sentencePieceTokenizer(corpus, 400, style);
      const json = withWireSpecials(base, tokenizerJsonSize(base)).json;
      const tok = new HfTokenizer(json);
      const lib = new HfLib(structuredClone(json), {});

      it("each stretch between wire specials is encoded as the library encodes it alone; decode is encode's inverse", () => {
        let tokens = 0;
        for (const t of FIXED) {
          const want = splitOnSpecials(t).flatMap((p) => (p.special ? [tok.specialIds[p.text as (typeof SPECIAL_TOKENS)[number]]] : lib.encode(p.text, { add_special_tokens: false }).ids));
          assert.deepEqual(tok.encode(t), want, JSON.stringify(t.slice(0, 60)));
          tokens += want.length;
          // Metaspace keeps one "▁" for a stretch that starts with a space, and its decoder strips
          // it: such a stretch loses that space, as the library's own decoding of it alone does.
          const lossy = style === 'metaspace' && splitOnSpecials(t).some((p) => !p.special && p.text.startsWith(' '));
          const alone = splitOnSpecials(t)
            .map((p) => (p.special ? p.text : lib.decode(lib.encode(p.text, { add_special_tokens: false }).ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false })))
            .join('');
          assert.equal(tok.decode(tok.encode(t)), lossy ? alone : t, JSON.stringify(t.slice(0, 60)));
          if (lossy) assert.notEqual(alone, t);
        }
        assert.ok(tokens > 150, `${tokens} tokens compared`);
        // Cut anywhere between specials, the ids are the same (the harness encodes a prompt whole, training a segment at a time).
        const t = texts.train[0]!;
        assert.deepEqual(segment(t).flatMap(([s]) => tok.encode(s)), tok.encode(t));
        // Byte fallback: a character outside the vocabulary is its UTF-8 bytes, one token each.
        assert.deepEqual(
          tok.encode('漢').map((id) => tok.idToToken(id)),
          [SP, '<0xE6>', '<0xBC>', '<0xA2>'],
        );
      });

      it('token bytes are what the token writes inside a text; the prefix space of each stretch is the only byte that is not the text\'s', () => {
        const the = tok.encode('a the').find((id) => tok.idToToken(id)!.startsWith(`${SP}t`))!;
        assert.equal(Buffer.from(tok.tokenBytes(the)!).toString('utf8'), tok.idToToken(the)!.replace(SP, ' '));
        assert.ok(!tok.decode([the]).startsWith(' '), 'decoded alone, the decoder strips its space: why tokenBytes does not decode');
        assert.deepEqual([...tok.tokenBytes(tok.encode('漢')[1]!)!], [0xe6]);
        for (const t of FIXED) assert.equal(spelled(tok, t, tok.encode(t)), t, JSON.stringify(t.slice(0, 60)));
        assert.equal(insertedPrefix(tok, '{'), ' ');
        // Tokens that spell another text are refused, naming the sizes.
        assert.throws(() => pieceByteLengths(tok, 'abc', tok.encode('abd')), PieceAlignmentError);
        assert.throws(() => pieceByteLengths(tok, 'abcdef', tok.encode('abc')), /stand for \d+ bytes of a 6-byte piece/);
      });

      it('the loss mask: the tokens of supervised segments are labelled, the others masked (as with the lab\'s own tokenizer)', () => {
        for (const t of texts.train.slice(0, 20)) {
          for (const k of [tok, trainDefaultTokenizer()] as Tokenizer[]) {
            const trace = tokenizeTrace(t, k);
            assert.deepEqual([...trace.ids], k.encode(t));
            let i = 0;
            for (const [piece, supervised] of segment(t)) {
              for (const _ of k.encode(piece)) {
                assert.equal(trace.kinds[i] !== UNSUPERVISED, supervised, `token ${i} of ${JSON.stringify(piece.slice(0, 30))}`);
                i++;
              }
            }
            assert.equal(i, trace.ids.length);
          }
        }
      });

      it("the language server's token table: the transcript's tokens, each over the characters it writes", () => {
        const t = texts.train[1]!;
        const table = tokenTable(analyseTranscript(t), tok);
        assert.deepEqual([...table.ids], tok.encode(t));
        assert.equal(table.ends[table.ends.length - 1], t.length);
        const texts2 = tokenTexts(tok);
        for (let i = 0; i < table.ids.length; i++) {
          const id = table.ids[i]!;
          const shown = t.slice(table.starts[i]!, table.ends[i]!);
          if (tok.isSpecial(id)) assert.equal(shown, tok.decode([id]));
          else assert.ok(texts2[id]!.endsWith(shown) && texts2[id]!.length - shown.length <= 1, `token ${i} ${JSON.stringify(texts2[id])} over ${JSON.stringify(shown)}`);
        }
      });

      it("the grammar's token mask lets the student write a call as it was trained to (prefix space first), and nothing else", () => {
        const first = tok.encode(TOOL_CALL + '{"tool"')[1]!;
        assert.ok(tokenTexts(tok)[first]!.startsWith(' '), 'the call starts with a prefix-space token');
        for (const body of ['{"tool": "search", "args": {"query": "Ada Lovelace", "k": 3}}', '{"tool": "calc", "args": {"expr": "(12 + 7) * 3"}}']) {
          assert.deepEqual(walkMask(tok, body), { rejectedAt: null, endAllowed: true }, body);
        }
        assert.notEqual(walkMask(tok, '{"tool": "search", "args": {"query": "Ada", "k": 0}}').rejectedAt, null, 'k is 1..9');
        assert.notEqual(walkMask(tok, '{"tool":"calc"}').rejectedAt, null, 'the spacing is fixed');
      });
    });
  }

  it('byte-level tokenizers are unchanged: token texts are the ids decoded alone, and a call walks the mask', () => {
    const foreignBase = foreignByteLevelTokenizer(corpus, 600);
    for (const tok of [trainDefaultTokenizer(), new HfTokenizer(withWireSpecials(foreignBase, tokenizerJsonSize(foreignBase)).json)] as Tokenizer[]) {
      const t = tokenTexts(tok);
      for (let id = 0; id < tok.vocabSize; id++) {
        const want = tok.isSpecial(id) || tok.idToToken(id) === undefined ? null : tok.decode([id]);
        assert.equal(t[id], want, `id ${id}`);
      }
      assert.equal(insertedPrefix(tok, '{'), '');
      assert.deepEqual(walkMask(tok, '{"tool": "calc", "args": {"expr": "1 + 2"}}'), { rejectedAt: null, endAllowed: true });
      for (const s of FIXED) assert.deepEqual(pieceByteLengths(tok, s, tok.encode(s)), tok.encode(s).map((id) => (tok.tokenBytes(id) ?? Buffer.from(tok.decode([id]))).length));
    }
  });
});

describe('train sft --base with a SentencePiece tokenizer: the run trains, evaluates and answers', function () {
  this.timeout(600000);
  let tmp: string;
  const bin = path.join(repoRoot, 'bin', 'agent-lab');
  const run = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', cwd: repoRoot });
  before(async () => {
    const b = spawnSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    assert.equal(b.status, 0, b.stderr);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-sp-'));
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('a generated Llama folder with a Llama 2-style tokenizer: wire specials added, the loss falls, eval and run decode with it', async () => {
    const base = sentencePieceTokenizer(corpus, 400, 'legacy');
    const V = tokenizerJsonSize(base);
    const cfg: ModelConfig = { vocab: V, dModel: 32, layers: 1, heads: 2, kvHeads: 1, mlp: 48, maxSeq: 512, ropeBase: 10000, normEps: 1e-6, tiedHead: true };
    await initBackend('wasm');
    const m = StackModel.create(cfg, 5);
    const hf = path.join(tmp, 'hf');
    writeHfFolder(hf, cfg, m.exportWeights(), { 'tokenizer.json': JSON.stringify(base) });
    m.dispose();
    const runDir = path.join(tmp, 'run');
    const r = run('train', 'sft', '--base', hf, '--steps', '40', '--eval-limit', '0', '--backend', 'wasm', '--threads', '1', '--run', runDir);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /the model's own tokenizer \(9 wire-format specials added as tokens/);
    const losses = sftLosses(runDir);
    const [first, last] = [mean(losses.slice(0, 5)), mean(losses.slice(-5))];
    console.log(`      loss: first 5 steps ${first.toFixed(3)}, last 5 ${last.toFixed(3)} (SentencePiece vocabulary ${V} + 9 added)`);
    assert.ok(last < first - 0.3, `loss ${first} -> ${last}`);
    const e = run('eval', '--run', runDir, '--limit', '2', '--backend', 'wasm', '--json');
    assert.equal(e.status, 0, e.stderr);
    assert.equal((JSON.parse(e.stdout.trim().split('\n').pop()!) as { n: number }).n, 2);
    const q = run('run', '--run', runDir, '--backend', 'wasm', '--json', '--', 'What is the capital of France?');
    assert.equal(q.status, 0, q.stderr);
  });
});
