// Adapters from the trained model to the agent runtime: a StackModel as a Policy (KV-cache
// decoding; ids past the tokenizer's vocabulary — a padded embedding — are never sampled)
// and the vocabulary trie as the runtime's CallMask.
import { startStates, type StateSet } from '../core/grammar';
import { TokenMasker, compileVocabulary } from '../core/tokenMask';
import type { BpeTokenizer } from '../core/tokenizer';
import type { CallMask, DecodeSession, Policy } from './agentRuntime';
import type { StackModel } from './model';

export function modelPolicy(model: StackModel, tokenizerVocab: number): Policy {
  return {
    vocab: tokenizerVocab,
    maxContext: model.config.maxSeq,
    newSession(): DecodeSession {
      const cache = model.newCache();
      return {
        append(ids) {
          const logits = model.prefill(ids, cache);
          return logits.length === tokenizerVocab ? logits : logits.slice(0, tokenizerVocab);
        },
        dispose() {
          cache.dispose();
        },
      };
    },
  };
}

/** The grammar as a token mask over this tokenizer's vocabulary (specials never allowed, but <|end|>). */
export function tokenizerCallMask(tokenizer: BpeTokenizer): CallMask {
  const strings = Array.from({ length: tokenizer.vocabSize }, (_, id) => (tokenizer.isSpecial(id) ? null : tokenizer.decode([id])));
  const masker = new TokenMasker(compileVocabulary(strings, tokenizer.specialIds['<|end|>']));
  return {
    start: (): StateSet => startStates(),
    apply: (logits, states) => {
      masker.maskLogits(logits, states);
    },
    advance: (states, id) => masker.advance(states, id),
  };
}
