// The copy bias (core/copyBias.ts): which tokens it raises, and what it changes in a real
// decoding loop — a student that drifts from an unseen name into a name it knows stays on
// the question's name with the bias, and drifts without it.
import * as assert from 'node:assert/strict';
import { ToolEnv } from '../../core/distill';
import { CopyBias, copyContinuations, copyDrifts, copyOverruns, numberDrifts, numberSlot, numbersIn, questionWords, trailingWord } from '../../core/copyBias';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import { renderPrompt } from '../../core/distill';
import { AgentRuntime, type DecodeSession, type Policy } from '../../trainer/agent/agentRuntime';
import { PRESETS, validateConfig } from '../../trainer/model/modelConfig';

describe('copy bias', () => {
  it('reads the words of a question and the word a text ends in', () => {
    assert.deepEqual(questionWords('What is the RoPE base of Stack-100M? Use the corpus.'), ['What', 'is', 'the', 'RoPE', 'base', 'of', 'Stack-100M', 'Use', 'corpus']);
    assert.equal(trailingWord('I need the period of Niox'), 'Niox');
    assert.equal(trailingWord('{"query": "Stack-'), 'Stack-');
    assert.equal(trailingWord('period of '), '');
    assert.equal(trailingWord('"'), '');
  });

  it('raises the tokens that continue a question word, end a whole one, or start one after punctuation', () => {
    const strings = ['nem', 'n', 'ne', 'krm', 'nem?', 'nemo', ' Niox', 'ox', null, '?', ' period', '"', 'imon', 'Niox', ' Sour'];
    const pick = (partial: string, words: string[], lastChar = partial.slice(-1)) => copyContinuations(strings, words, partial, lastChar).map((id) => strings[id]);
    // Mid-word: the rest of the word, or all of it and then out of the word; never past it.
    assert.deepEqual(pick('Niox', ['What', 'Nioxnem']), ['nem', 'n', 'ne', 'nem?']);
    // A whole question word: the tokens that leave it into nothing or into a question word, not those that run on.
    assert.deepEqual(pick('Jyndpimon', ['Jyndpimon', 'period', 'Nioxnem']), [' Niox', '?', ' period', '"']);
    assert.deepEqual(pick('of', ['of', 'Nioxnem']), [' Niox', '?', '"']);
    // After punctuation, the tokens that start a question word; nothing after a space or at the start.
    assert.deepEqual(pick('', ['Nioxnem'], '"'), ['Niox']);
    assert.deepEqual(pick('', ['Nioxnem'], ' '), []);
    assert.deepEqual(pick('', ['Nioxnem'], ''), []);
    // Nothing for a word no question word begins with.
    assert.deepEqual(pick('Sour', ['Nioxnem']), []);
  });

  it('adds its strength to the raised tokens only, and never lifts a token the grammar removed', () => {
    const strings = ['nem', 'krm', 'n'];
    const bias = new CopyBias(strings, 'What is the period of Nioxnem?', 4);
    const logits = Float32Array.from([1, 2, -Infinity]);
    bias.apply(logits, 'I need the period of Niox');
    assert.deepEqual([...logits], [5, 2, -Infinity]);
    const untouched = Float32Array.from([1, 2, 3]);
    bias.apply(untouched, 'I need the period of ');
    assert.deepEqual([...untouched], [1, 2, 3]);
  });

  it('with the stop, removes what runs on past a whole name of the question, and nothing else', () => {
    const strings = ['mar', '-', '-40M', '0', '?', ' or', '"', 'n', null];
    const over = (partial: string, words: string[]) => copyOverruns(strings, words, partial).map((id) => strings[id]);
    const words = ['Which', 'is', 'the', 'of', 'Marmar', 'Tygri', 'Tygri-540M', '100'];
    // A whole name nothing extends: letters, digits and a joining hyphen run on.
    assert.deepEqual(over('Marmar', words), ['mar', '-', '-40M', '0', 'n']);
    // A name another question word extends, a word with no capital, a name half written, no word: nothing.
    assert.deepEqual(over('Tygri', words), []);
    assert.deepEqual(over('the', words), []);
    assert.deepEqual(over('100', words), []);
    assert.deepEqual(over('Mar', words), []);
    assert.deepEqual(over('', words), []);
    // At the end of a whole name a hyphen leaves it without the stop (the old rule), not with it.
    assert.ok(copyContinuations(strings, ['Mifa'], 'Mifa').map((id) => strings[id]).includes('-'));
    assert.deepEqual(copyContinuations(strings, ['Mifa'], 'Mifa', 'a', true).map((id) => strings[id]), ['?', '"']);
    // The bias applies both: raised to leave (into nothing or the question's "or"); what runs on
    // is removed, a grammar-removed token stays removed.
    const logits = Float32Array.from([10, 10, 10, 10, 1, 1, 1, -Infinity, 0]);
    new CopyBias(strings, 'Which is larger, Marmar or Tygri-540M?', 4, true).apply(logits, 'Answer: Marmar');
    assert.deepEqual([...logits], [-Infinity, -Infinity, -Infinity, -Infinity, 5, 5, 5, -Infinity, 0]);
    // Unless the grammar left nothing else: then the bias stays out of its way.
    const only = Float32Array.from([3, -Infinity, -Infinity, -Infinity, -Infinity, -Infinity, -Infinity, -Infinity, -Infinity]);
    new CopyBias(strings, 'Which is larger, Marmar or Tygri-540M?', 4, true).apply(only, 'Answer: Marmar');
    assert.equal(only[0], 3);
  });

  it('with the stop, lowers what drifts from a name of the question or ends it early', () => {
    const strings = ['t', 'fa', ' publication', '"', 'tfa', 'n', 'en', null];
    const words = ['Which', 'the', 'Peost', 'Raostfa', 'Vennu', 'year'];
    const drifts = (partial: string) => copyDrifts(strings, words, partial, copyContinuations(strings, words, partial, partial.slice(-1), true)).map((id) => strings[id]);
    // Inside a name: everything but its continuation ("Peos" + "t"; "Raos" + "t", "tfa").
    assert.deepEqual(drifts('Peos'), ['fa', ' publication', '"', 'tfa', 'n', 'en']);
    assert.deepEqual(drifts('Raos'), ['fa', ' publication', '"', 'n', 'en']);
    // After one letter only what leaves the word: a letter begins words of the transcript's own too.
    assert.deepEqual(drifts('V'), [' publication', '"']);
    // A whole question word, a word no name begins, a lower-case question word's prefix: nothing.
    assert.deepEqual(drifts('Peost'), []);
    assert.deepEqual(drifts('Sour'), []);
    assert.deepEqual(drifts('ye'), []);
  });

  describe('in the decoding loop', () => {
    const tok = trainDefaultTokenizer();
    const idOf = (ch: string) => {
      const ids = tok.encode(ch);
      assert.equal(ids.length, 1, `'${ch}' is one token`);
      return ids[0]!;
    };
    const endId = tok.specialIds['<|end|>'];
    const start = 'Thought: the period of Niox';
    /**
     * A student that writes `start` and then prefers the name it knows ("krm", logit 10) to
     * the question's ("nem", logit 7), one character at a time, then ends the turn.
     */
    function driftingPolicy(copyBias: number, copyStop = false): Policy {
      return {
        vocab: tok.vocabSize,
        maxContext: 4096,
        copyBias,
        copyStop,
        newSession(): DecodeSession {
          const history: number[] = [];
          return {
            append(ids) {
              history.push(...ids);
              const text = tok.decode(history);
              const turn = text.slice(text.lastIndexOf('<|assistant|>') + '<|assistant|>'.length);
              const l = new Float32Array(tok.vocabSize).fill(-10);
              if (turn.length < start.length) l[idOf(start[turn.length]!)] = 10;
              else {
                const rest = turn.slice(start.length);
                const wrong = 'krm.'.slice(rest.length);
                const right = 'nem.'.slice(rest.length);
                if (rest.endsWith('.')) l[endId] = 10;
                else {
                  if (wrong.length > 0 && 'krm.'.startsWith(rest)) l[idOf(wrong[0]!)] = 10;
                  if (right.length > 0 && 'nem.'.startsWith(rest)) l[idOf(right[0]!)] = 'krm.'.startsWith(rest) ? 7 : 10;
                }
              }
              return l;
            },
            dispose() {},
          };
        },
      };
    }
    const promptOf = (question: string) => `${renderPrompt(question)}<|assistant|>`;

    it('keeps the student on the question’s name with the bias, and lets it drift without', () => {
      const question = 'What is the period of Nioxnem? Use the corpus.';
      const biased = new AgentRuntime(driftingPolicy(4), tok, new ToolEnv([]), null).continueTurn(promptOf(question));
      assert.equal(biased.text, 'Thought: the period of Nioxnem.');
      const plain = new AgentRuntime(driftingPolicy(0), tok, new ToolEnv([]), null).continueTurn(promptOf(question));
      assert.equal(plain.text, 'Thought: the period of Nioxkrm.');
      // A bias weaker than the student's preference changes nothing.
      const weak = new AgentRuntime(driftingPolicy(2), tok, new ToolEnv([]), null).continueTurn(promptOf(question));
      assert.equal(weak.text, 'Thought: the period of Nioxkrm.');
      // The stop lowers the drift by as much again: the weak bias then holds.
      const stopped = new AgentRuntime(driftingPolicy(2, true), tok, new ToolEnv([]), null).continueTurn(promptOf(question));
      assert.equal(stopped.text, 'Thought: the period of Nioxnem.');
    });

    it('with the stop, ends a copied name where the question’s name ends', () => {
      // A student that copies "Marmar" and then prefers to run on with "m" (12) over "." (7).
      const loopStart = 'Thought: the year of Marmar';
      const looping = (copyStop: boolean): Policy => ({
        vocab: tok.vocabSize,
        maxContext: 4096,
        copyBias: 4,
        copyStop,
        newSession(): DecodeSession {
          const history: number[] = [];
          return {
            append(ids) {
              history.push(...ids);
              const text = tok.decode(history);
              const turn = text.slice(text.lastIndexOf('<|assistant|>') + '<|assistant|>'.length);
              const l = new Float32Array(tok.vocabSize).fill(-10);
              if (turn.length < loopStart.length) l[idOf(loopStart[turn.length]!)] = 30;
              else if (turn.endsWith('.')) l[endId] = 10;
              else if (turn === loopStart) {
                l[idOf('m')] = 12;
                l[idOf('.')] = 7;
              } else l[idOf('.')] = 10;
              return l;
            },
            dispose() {},
          };
        },
      });
      const question = 'What is the year of Marmar? Use the corpus.';
      assert.equal(new AgentRuntime(looping(true), tok, new ToolEnv([]), null).continueTurn(promptOf(question)).text, 'Thought: the year of Marmar.');
      assert.equal(new AgentRuntime(looping(false), tok, new ToolEnv([]), null).continueTurn(promptOf(question)).text, 'Thought: the year of Marmarm.');
    });

    it('does nothing when the question holds no word the student is writing', () => {
      const other = new AgentRuntime(driftingPolicy(4), tok, new ToolEnv([]), null).continueTurn(promptOf('What is the period of Sourskim? Use the corpus.'));
      assert.equal(other.text, 'Thought: the period of Nioxkrm.');
    });
  });

  it('is part of a model config: checked, and on in the presets that train students', () => {
    const base = { vocab: 100, ...PRESETS.tiny.model };
    assert.doesNotThrow(() => validateConfig({ ...base, copyBias: 0 }));
    assert.throws(() => validateConfig({ ...base, copyBias: -1 }), /copyBias must be a number in 0\.\.50/);
    assert.throws(() => validateConfig({ ...base, copyBias: Number.NaN }), /copyBias/);
    assert.equal(PRESETS.tiny.model.copyBias, 4);
    assert.equal(PRESETS.tiny.model.copyStop, true);
    assert.equal(PRESETS.tiny.model.copyValues, true);
    assert.throws(() => validateConfig({ ...base, copyStop: 'yes' as unknown as boolean }), /copyStop must be true or false/);
  });
});

describe('copy bias: numbers copied from the question and the tools (copyValues)', () => {
  it('finds standalone numbers, and the number slots of a calc expression and an answer only', () => {
    assert.deepEqual(numbersIn('[1] the RoPE base of Stack-100M is 10000. [2] 2019'), ['1', '10000', '2', '2019']);
    assert.equal(numberSlot('Thought: I compute 20'), null, 'a thought is free');
    assert.equal(numberSlot('Thought: x\n{"tool": "search", "args": {"query": "Stack-10'), null, 'a search is free');
    assert.equal(numberSlot('Thought: x\n{"tool": "calc", "args": {"expr": "'), '');
    assert.equal(numberSlot('Thought: x\n{"tool": "calc", "args": {"expr": "2019+100'), '100');
    assert.equal(numberSlot('Thought: x\nAnswer: 35'), '35');
    assert.equal(numberSlot('Thought: x\nAnswer: Stack-10'), null, 'digits of a name');
  });

  it('lowers digits that begin no allowed number, run past one, or end one early; nothing else', () => {
    const toks = ['20', '2019', '19', '1', '0', '5', ' 2019', ' 7', '+', '"}}', 'Stack', null];
    const allowed = new Set(['2019', '10000']);
    const ids = (partial: string) => numberDrifts(toks, allowed, partial).map((i) => toks[i]);
    // At the start: only digits beginning 2019 or 10000 (" 2019" too); words and punctuation are free.
    assert.deepEqual(ids(''), ['19', '0', '5', ' 7']);
    // Inside "20": "19" finishes 2019; "1" goes on; "0", "5" and "2019" leave it; ending at "20" is early.
    assert.deepEqual(ids('20'), ['20', '2019', '0', '5', ' 2019', ' 7', '+', '"}}', 'Stack']);
    // At a whole number: more digits run past it (none longer begins so); ending it is right.
    assert.deepEqual(ids('2019'), ['20', '2019', '19', '1', '0', '5', ' 7']);
    // Already off every allowed number: the rule has nothing to copy.
    assert.deepEqual(ids('77'), []);
  });

  it('in the decoding loop: an answer remembered is lowered once the observation said another number', () => {
    const toks = ['Answer: ', '3520', '3530', '<|end|>'];
    const bias = new CopyBias(toks, 'What is the length in km of Volga?', 4, true, true);
    const logits = Float32Array.from([0, 5, 3, 0]);
    bias.apply(logits, 'Thought: done\nAnswer: ');
    assert.deepEqual([...logits], [0, 5, 3, 0], 'nothing observed yet: nothing to copy');
    bias.observe('[1] the length in km of Volga is 3530.');
    bias.apply(logits, 'Thought: done\nAnswer: ');
    assert.deepEqual([...logits], [0, -3, 3, 0], 'the remembered 3520 falls by twice the strength, under the observed 3530');
    const off = new CopyBias(toks, 'What is the length in km of Volga?', 4, true, false);
    off.observe('[1] the length in km of Volga is 3530.');
    const same = Float32Array.from([0, 5, 3, 0]);
    off.apply(same, 'Thought: done\nAnswer: ');
    assert.deepEqual([...same], [0, 5, 3, 0], 'off: as before');
  });

  it('is part of a model config, checked', () => {
    const base = { vocab: 100, ...PRESETS.tiny.model };
    assert.doesNotThrow(() => validateConfig({ ...base, copyValues: true }));
    assert.throws(() => validateConfig({ ...base, copyValues: 1 as unknown as boolean }), /copyValues must be true or false/);
  });
});
