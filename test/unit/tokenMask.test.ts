// The token mask (core/tokenMask.ts) against the seed's naive algorithm — feed every
// token's characters to the acceptor — on the lab's own tokenizer and on a real published
// vocabulary (js-tiktoken cl100k_base, V = 100277): the same allowed ids and the same next
// state set on every state set reached while feeding every tool call of the distilled
// transcripts, random and mutated bodies, every state set of the determinized grammar and
// arbitrary (unreachable) state sets; `<|end|>` exactly when the acceptor accepts.
import * as assert from 'node:assert/strict';
import { StateSet, TEMPLATES, accepts, allowedChars, checkCall, startStates, step } from '../../core/grammar';
import { CompiledVocabulary, TokenMasker, compileVocabulary, naiveTransitions, stateSetKey } from '../../core/tokenMask';
import { defaultWorldTexts, trainDefaultTokenizer } from '../../core/tokenizer';
import { publishedVocabulary, toolCallBodies } from '../../bench/grammar';
import { mulberry32 } from '../../core/mulberry32';

/** Deterministic PRNG (mulberry32). */
const rng = mulberry32;

interface Vocab {
  name: string;
  strings: (string | null)[];
  endTokenId: number;
  encode(text: string): number[];
}

/** The state sets met while feeding `bodies` character by character (until rejection). */
function stateSetsOf(bodies: readonly string[], into: Map<string, StateSet>): void {
  for (const body of bodies) {
    let states = startStates();
    into.set(stateSetKey(states), states);
    for (const ch of body) {
      states = step(states, ch);
      if (states.length === 0) break;
      into.set(stateSetKey(states), states);
    }
  }
}

/** Bodies walked at random through the grammar (sometimes stopping early). */
function randomBodies(n: number, seed: number): string[] {
  const r = rng(seed);
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    let states = startStates();
    let body = '';
    while (!(accepts(states) || r() < 0.01)) {
      const chars = allowedChars(states);
      const ch = chars[Math.floor(r() * chars.length)]!;
      body += ch;
      states = step(states, ch);
    }
    out.push(body);
  }
  return out;
}

/** Real bodies with one to three characters replaced, inserted or deleted. */
function mutatedBodies(bodies: readonly string[], n: number, seed: number): string[] {
  const r = rng(seed);
  const pool = 'abcXYZ019 "{}:,.()-+*/\\\'_\n\u00e9\ufffd<|>';
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    let b = bodies[Math.floor(r() * bodies.length)]!;
    for (let m = 1 + Math.floor(r() * 3); m > 0; m--) {
      const at = Math.floor(r() * (b.length + 1));
      const ch = pool[Math.floor(r() * pool.length)]!;
      const op = Math.floor(r() * 3);
      b = op === 0 ? b.slice(0, at) + ch + b.slice(at + 1) : op === 1 ? b.slice(0, at) + ch + b.slice(at) : b.slice(0, at) + b.slice(at + 1);
    }
    out.push(b);
  }
  return out;
}

/** Arbitrary state sets (1-3 valid states, most not reachable together from the start). */
function arbitraryStateSets(n: number, seed: number): StateSet[] {
  const r = rng(seed);
  const one = (): number => {
    const ti = Math.floor(r() * TEMPLATES.length);
    const items = TEMPLATES[ti]!.items;
    const ii = Math.floor(r() * (items.length + 1));
    const item = items[ii];
    const n = item === undefined ? 0 : typeof item === 'string' ? Math.floor(r() * item.length) : Math.floor(r() * (item.maxLen + 1));
    return (ti << 16) | (ii << 8) | n;
  };
  const out: StateSet[] = [];
  for (let i = 0; i < n; i++) {
    const s = new Set<number>();
    for (let k = 1 + Math.floor(r() * 3); k > 0; k--) s.add(one());
    out.push([...s].sort((a, b) => a - b));
  }
  return out;
}

type Naive = ReturnType<typeof naiveTransitions>;

/** Asserts the trie mask equals the naive one on `states`, token by token. */
function assertAgrees(
  masker: TokenMasker,
  vocab: Vocab,
  naiveStrings: readonly (string | null)[],
  states: StateSet,
  memo: Map<string, Naive>,
): void {
  const where = `state set [${stateSetKey(states)}] (${vocab.name})`;
  const m = masker.allowed(states);
  const naive: Naive = memo.get(stateSetKey(states)) ?? naiveTransitions(states, naiveStrings);
  memo.set(stateSetKey(states), naive);
  const complete = accepts(states);
  const expected = complete ? [...naive.ids, vocab.endTokenId].sort((a, b) => a - b) : naive.ids;
  assert.equal(m.endAllowed, complete, `endAllowed in ${where}`);
  assert.deepEqual([...m.ids], expected, `allowed ids in ${where}`);
  for (let i = 1; i < m.ids.length; i++) assert.ok(m.ids[i - 1]! < m.ids[i]!, `ids sorted in ${where}`);
  for (let id = 0; id < vocab.strings.length; id++) {
    const want: StateSet | undefined = naive.next.get(id);
    const got = m.next(id);
    if (want === undefined) {
      if (got.length !== 0) assert.fail(`token ${id} ${JSON.stringify(vocab.strings[id])} not allowed but next = [${got}] in ${where}`);
    } else if (stateSetKey(got) !== stateSetKey(want)) {
      assert.fail(`next after token ${id} ${JSON.stringify(vocab.strings[id])}: [${got}] != [${want}] in ${where}`);
    }
  }
  assert.deepEqual(m.next(vocab.endTokenId), [], `<|end|> ends the call in ${where}`);
}

/** Feeds tokenized bodies as a decoder would; checks each step against the character acceptor. */
function assertTokenFeed(masker: TokenMasker, vocab: Vocab, bodies: readonly string[]): number {
  let steps = 0;
  for (const body of bodies) {
    let states = startStates();
    let text = '';
    for (const tok of vocab.encode(body)) {
      const m = masker.allowed(states);
      assert.equal(m.endAllowed, false, `<|end|> allowed before ${JSON.stringify(body)} is complete`);
      assert.ok(binarySearch(m.ids, tok), `token ${tok} ${JSON.stringify(vocab.strings[tok])} rejected in ${JSON.stringify(body)}`);
      const next = m.next(tok);
      assert.deepEqual(masker.advance(states, tok), next);
      text += vocab.strings[tok];
      let chars = states;
      for (const ch of vocab.strings[tok]!) chars = step(chars, ch);
      assert.deepEqual([...next], [...chars], `state set after ${JSON.stringify(text)}`);
      states = next;
      steps++;
    }
    assert.equal(text, body);
    const last = masker.allowed(states);
    assert.equal(last.endAllowed, true, `<|end|> not allowed after ${JSON.stringify(body)}`);
    assert.ok(binarySearch(last.ids, vocab.endTokenId));
    steps++;
  }
  return steps;
}

function binarySearch(ids: Int32Array, id: number): boolean {
  let lo = 0;
  let hi = ids.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (ids[mid] === id) return true;
    if (ids[mid]! < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

let bodies: string[] = [];

before(function () {
  this.timeout(120000);
  const world = defaultWorldTexts();
  bodies = toolCallBodies([...world.train, ...world.heldout]);
});

describe('tokenMask: tool calls of the distilled transcripts', () => {
  it('has calls of both tools, every one accepted and complete', () => {
    assert.ok(bodies.length > 100, `only ${bodies.length} calls`);
    assert.ok(bodies.some((b) => b.includes('"search"')) && bodies.some((b) => b.includes('"calc"')));
    for (const b of bodies) assert.equal(checkCall(b).complete, true, b);
  });
});

function vocabularySuite(label: string, load: () => Vocab, seed: number): void {
  describe(`tokenMask on ${label}`, function () {
    this.timeout(120000);
    let vocab: Vocab;
    let naiveStrings: (string | null)[];
    let compiled: CompiledVocabulary;
    let masker: TokenMasker;
    const memo = new Map<string, Naive>(); // the naive scan is slow on V = 100k: once per state set

    before(() => {
      vocab = load();
      naiveStrings = vocab.strings.map((s, id) => (id === vocab.endTokenId ? null : s));
      compiled = compileVocabulary(vocab.strings, vocab.endTokenId);
      masker = new TokenMasker(compiled);
    });

    it('equals the naive mask on every state set reached by the real tool calls', () => {
      const sets = new Map<string, StateSet>();
      stateSetsOf(bodies, sets);
      assert.ok(sets.size > 50);
      for (const s of sets.values()) assertAgrees(masker, vocab, naiveStrings, s, memo);
    });

    it('equals the naive mask on random and mutated bodies', () => {
      const sets = new Map<string, StateSet>();
      stateSetsOf([...randomBodies(300, seed), ...mutatedBodies(bodies, 300, seed + 1)], sets);
      for (const s of sets.values()) assertAgrees(masker, vocab, naiveStrings, s, memo);
    });

    it('equals the naive mask on every state set of the determinized grammar', () => {
      const all = [...compiled.dfa.sets];
      assert.ok(all.length > 100);
      for (const s of all) assertAgrees(masker, vocab, naiveStrings, s, memo);
    });

    it('equals the naive mask on arbitrary state sets, not reachable from the start', () => {
      for (const s of arbitraryStateSets(40, seed + 2)) assertAgrees(masker, vocab, naiveStrings, s, memo);
    });

    it('feeds every tokenized tool call: each token allowed, next = the characters fed, <|end|> only at the end', () => {
      const steps = assertTokenFeed(masker, vocab, bodies);
      assert.ok(steps > bodies.length * 3);
    });

    it('never gets stuck, and constrained random decoding yields complete calls', () => {
      const r = rng(seed + 3);
      for (let n = 0; n < 200; n++) {
        let states = startStates();
        let text = '';
        for (let k = 0; ; k++) {
          const m = masker.allowed(states);
          assert.ok(m.ids.length > 0, `no token allowed after ${JSON.stringify(text)}`);
          if (m.endAllowed && (r() < 0.5 || m.ids.length === 1)) break;
          // Prefer short tokens so the walk crosses every part of the template.
          let id = m.ids[Math.floor(r() * m.ids.length)]!;
          for (let tries = 0; tries < 20 && (id === vocab.endTokenId || vocab.strings[id]!.length > 2); tries++) {
            id = m.ids[Math.floor(r() * m.ids.length)]!;
          }
          if (id === vocab.endTokenId) break;
          text += vocab.strings[id];
          states = masker.advance(states, id);
          assert.ok(states.length > 0);
          assert.ok(k < 500, 'runaway decode');
        }
        const verdict = checkCall(text);
        assert.equal(verdict.complete, true, `decoded ${JSON.stringify(text)}: ${JSON.stringify(verdict)}`);
      }
    });

    it('maskLogits writes -Infinity exactly on the disallowed ids', () => {
      const r = rng(seed + 4);
      const sets = [startStates(), ...compiled.dfa.sets.filter((_, i) => i % 17 === 0)];
      for (const s of sets) {
        const logits = Float32Array.from({ length: vocab.strings.length }, () => r() * 10 - 5);
        const copy = logits.slice();
        const m = masker.maskLogits(logits, s);
        const allowed = new Set(m.ids);
        for (let id = 0; id < logits.length; id++) {
          if (allowed.has(id)) assert.equal(logits[id], copy[id]);
          else assert.equal(logits[id], -Infinity);
        }
      }
    });

    it('returns identical masks from the cache and after clearCache()', () => {
      const sets = [...compiled.dfa.sets].filter((_, i) => i % 5 === 0);
      const before = sets.map((s) => masker.allowed(s));
      sets.forEach((s, i) => assert.equal(masker.allowed(s), before[i], 'a cache hit returns the cached mask'));
      masker.clearCache();
      assert.equal(masker.cacheMisses, 0);
      const after = sets.map((s) => masker.allowed(s));
      assert.equal(masker.cacheMisses, sets.length);
      sets.forEach((s, i) => {
        const a = before[i]!;
        const b = after[i]!;
        assert.notEqual(a, b);
        assert.deepEqual([...b.ids], [...a.ids]);
        assert.equal(b.endAllowed, a.endAllowed);
        for (let id = 0; id < vocab.strings.length; id += 7) assert.deepEqual(b.next(id), a.next(id), `next(${id}) in [${s}]`);
      });
    });
  });
}

vocabularySuite(
  "the lab's tokenizer",
  () => {
    const tok = trainDefaultTokenizer();
    const end = tok.specialIds['<|end|>'];
    assert.equal(end, 3);
    const specials = new Set(Object.values(tok.specialIds));
    const strings = Array.from({ length: tok.vocabSize }, (_, id) => (specials.has(id) ? null : tok.decode([id])));
    return { name: 'lab', strings, endTokenId: end, encode: (text) => tok.encode(text) };
  },
  11,
);

vocabularySuite(
  'js-tiktoken cl100k_base',
  () => {
    const v = publishedVocabulary('cl100k_base');
    assert.ok(v.strings.length >= 100000, `V = ${v.strings.length}`);
    assert.ok(v.strings.some((s) => s !== null && s.includes('\ufffd')), 'some ranks are not valid UTF-8 alone');
    return { name: 'cl100k_base', strings: v.strings, endTokenId: v.endTokenId, encode: (text) => v.encode(text) };
  },
  23,
);

describe('tokenMask: compileVocabulary edge cases', () => {
  const strings: (string | null)[] = [null, '<|end|>', '{', '{"', '{"', '', '{"tool', '\ufffd', 'é', '{"tool": "calc', '"}}', 'x{', null];
  const compiled = compileVocabulary(strings, 1);
  const masker = new TokenMasker(compiled);

  it('allows duplicate strings under both ids, never empty, null, special or out-of-alphabet tokens', () => {
    const m = masker.allowed(startStates());
    assert.deepEqual([...m.ids], [2, 3, 4, 6, 9]);
    assert.equal(m.endAllowed, false);
    assert.deepEqual(m.next(3), m.next(4));
    for (const id of [0, 1, 5, 7, 8, 11, 12, 99, -1]) assert.deepEqual(m.next(id), []);
  });

  it('allows <|end|> (its string ignored) exactly on a complete call', () => {
    let states = startStates();
    for (const ch of '{"tool": "calc", "args": {"expr": "1+2') states = step(states, ch);
    const m = masker.allowed(states);
    assert.deepEqual([...m.ids], [10]);
    const done = m.next(10);
    assert.equal(accepts(done), true);
    const fin = masker.allowed(done);
    assert.deepEqual([...fin.ids], [1]);
    assert.equal(fin.endAllowed, true);
    assert.deepEqual(fin.next(1), []);
  });

  it('gives the empty mask for the empty (rejected) state set', () => {
    const m = masker.allowed([]);
    assert.equal(m.ids.length, 0);
    assert.equal(m.endAllowed, false);
    assert.deepEqual(masker.advance([], 2), []);
  });

  it('rejects an end token outside the vocabulary', () => {
    assert.throws(() => compileVocabulary(['a'], 1), RangeError);
  });
});
