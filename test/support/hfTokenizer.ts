// Small generated Hugging Face tokenizer.json files of the kinds models ship (no download
// is possible here): a GPT-2-style byte-level BPE with its own special at the end and none
// of the lab's wire specials (as SmolLM's and Qwen's), and a hand-written WordLevel one.
import { SPECIAL_TOKENS, trainBpe } from '../../core/tokenizer';

/**
 * A byte-level BPE trained (by the lab's trainer) on `texts`, then re-laid as a model's
 * own: the wire specials removed, ids renumbered from 0, "<|endoftext|>" a special added
 * token after the vocabulary, SmolLM's pre-tokenizer (digits split, then ByteLevel).
 */
export function foreignByteLevelTokenizer(texts: readonly string[], vocabSize: number): Record<string, unknown> {
  const lab = trainBpe(texts, { vocabSize }).toJSON();
  const vocab: Record<string, number> = {};
  let n = 0;
  for (const [t] of Object.entries(lab.model.vocab).sort((a, b) => a[1] - b[1])) {
    if ((SPECIAL_TOKENS as readonly string[]).includes(t)) continue;
    vocab[t] = n++;
  }
  vocab['<|endoftext|>'] = n;
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [{ id: n, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Digits', individual_digits: true },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
      ],
    },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: lab.model.merges,
    },
  };
}

/** A WordLevel tokenizer written by hand: whitespace split, unknown words to "[UNK]". */
export function wordLevelTokenizer(): Record<string, unknown> {
  const words = ['[UNK]', 'the', 'capital', 'of', 'is', 'Thought', ':', 'Answer', 'search', '{', '}', '"', '.', '?', 'What'];
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [{ id: 0, content: '[UNK]', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: null,
    pre_tokenizer: { type: 'Whitespace' },
    post_processor: null,
    decoder: null,
    model: { type: 'WordLevel', vocab: Object.fromEntries(words.map((w, i) => [w, i])), unk_token: '[UNK]' },
  };
}
