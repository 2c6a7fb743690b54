// Adapters from the trained model to the agent runtime: a StackModel as a Policy (KV-cache
// decoding; ids past the tokenizer's vocabulary — a padded embedding — are never sampled)
// and the vocabulary trie as the runtime's CallMask.
import { TEMPLATES, startStates, templatesWithPrefix, type StateSet, type Template } from '../../core/grammar';
import { TokenMasker, compileVocabulary } from '../../core/tokenMask';
import { insertedPrefix, tokenTexts, type Tokenizer } from '../../core/tokenizer';
import type { CallMask, DecodeSession, Policy } from './agentRuntime';
import type { KvCache, StackModel } from '../model/model';

export function modelPolicy(model: StackModel, tokenizerVocab: number): Policy {
  const caches = new WeakMap<DecodeSession, KvCache>();
  const trim = (logits: Float32Array) => (logits.length === tokenizerVocab ? logits : logits.slice(0, tokenizerVocab));
  return {
    vocab: tokenizerVocab,
    maxContext: model.config.maxSeq,
    copyBias: model.config.copyBias ?? 0,
    copyStop: model.config.copyStop ?? false,
    copyValues: model.config.copyValues ?? false,
    newSession(): DecodeSession {
      const cache = model.newCache();
      const session: DecodeSession = {
        append: (ids) => trim(model.prefill(ids, cache)),
        // webgpu reads back asynchronously only; elsewhere prefillAsync is prefill
        appendAsync: async (ids) => trim(await model.prefillAsync(ids, cache)),
        dispose: () => cache.dispose(),
      };
      caches.set(session, cache);
      return session;
    },
    appendBatch(sessions, ids) {
      const cs = sessions.map((s) => {
        const c = caches.get(s);
        if (!c) throw new Error('appendBatch: a session of another policy');
        return c;
      });
      return model.stepBatch(ids, cs).map(trim);
    },
    async appendBatchAsync(sessions, ids) {
      const cs = sessions.map((s) => {
        const c = caches.get(s);
        if (!c) throw new Error('appendBatch: a session of another policy');
        return c;
      });
      return (await model.stepBatchAsync(ids, cs)).map(trim);
    },
  };
}

/** The grammar as a token mask over this tokenizer's vocabulary (specials never allowed, but <|end|>). */
export function tokenizerCallMask(tokenizer: Tokenizer, templates: readonly Template[] = TEMPLATES): CallMask {
  // An id no token has (a gap in a model's vocabulary) is never allowed, as a special.
  const strings = tokenTexts(tokenizer);
  // A user's world may narrow the grammar (its tool list, core/worldTools.ts); the default is the textbook's.
  // A SentencePiece tokenizer writes a prefix space before the call's "{" (as in its training data): the grammar takes it first.
  templates = templatesWithPrefix(templates, insertedPrefix(tokenizer, '{'));
  const masker = new TokenMasker(compileVocabulary(strings, tokenizer.specialIds['<|end|>'], templates));
  return {
    start: (): StateSet => startStates(templates),
    apply: (logits, states) => {
      masker.maskLogits(logits, states);
    },
    advance: (states, id) => masker.advance(states, id),
  };
}
