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

/**
 * A SentencePiece-style BPE as Llama 2, Mistral and TinyLlama ship it (no download is
 * possible here): "<unk>", "<s>", "</s>", the 256 byte-fallback tokens "<0x00>".."<0xFF>",
 * the characters of `texts` with spaces as "▁", then `merges` merges learnt inside words (a
 * "▁" only at a word's start). `style` picks how the "▁" prefix is added: "legacy" by a
 * Prepend normalizer on every stretch between added tokens (Llama 2's, Mistral's files),
 * "metaspace" by a Metaspace pre-tokenizer at the input's start only (prepend_scheme
 * "first", transformers' legacy=False). Both decode with Replace, ByteFallback, Fuse, Strip.
 */
export function sentencePieceTokenizer(texts: readonly string[], merges: number, style: 'legacy' | 'metaspace'): Record<string, unknown> {
  const SP = '\u2581';
  const vocab: Record<string, number> = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  let n = 3;
  for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = n++;
  // Words with their counts: spaces become "▁", each word starts at a "▁" (or the text's start).
  const words = new Map<string, number>();
  for (const t of texts) {
    for (const w of (SP + t.replace(/ /g, SP)).split(new RegExp(`(?=${SP})`, 'u'))) if (w) words.set(w, (words.get(w) ?? 0) + 1);
  }
  // Characters seen twice or more; the rest fall back to bytes.
  const charCount = new Map<string, number>();
  for (const [w, c] of words) for (const ch of w) charCount.set(ch, (charCount.get(ch) ?? 0) + c);
  for (const [ch, c] of [...charCount].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))) if (c >= 2 && vocab[ch] === undefined) vocab[ch] = n++;
  const seqs = [...words].map(([w, c]) => ({ syms: [...w], c })).filter((x) => x.syms.every((ch) => vocab[ch] !== undefined));
  const mergeList: [string, string][] = [];
  for (let m = 0; m < merges; m++) {
    const pairs = new Map<string, number>();
    for (const { syms, c } of seqs) for (let i = 0; i + 1 < syms.length; i++) {
      const k = `${syms[i]}\u0000${syms[i + 1]}`;
      pairs.set(k, (pairs.get(k) ?? 0) + c);
    }
    let best: string | null = null;
    let bestCount = 1;
    for (const [k, c] of pairs) if (c > bestCount || (c === bestCount && best !== null && k < best)) [best, bestCount] = [k, c];
    if (best === null) break;
    const [a, b] = best.split('\u0000') as [string, string];
    mergeList.push([a, b]);
    if (vocab[a + b] === undefined) vocab[a + b] = n++;
    for (const s of seqs) {
      const out: string[] = [];
      for (let i = 0; i < s.syms.length; i++) {
        if (i + 1 < s.syms.length && s.syms[i] === a && s.syms[i + 1] === b) {
          out.push(a + b);
          i++;
        } else out.push(s.syms[i]!);
      }
      s.syms = out;
    }
  }
  const special = (id: number, content: string) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [special(0, '<unk>'), special(1, '<s>'), special(2, '</s>')],
    normalizer:
      style === 'legacy'
        ? { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: SP }, { type: 'Replace', pattern: { String: ' ' }, content: SP }] }
        : null,
    pre_tokenizer: style === 'legacy' ? null : { type: 'Metaspace', replacement: SP, prepend_scheme: 'first', split: false },
    post_processor: null,
    decoder: {
      type: 'Sequence',
      decoders: [
        { type: 'Replace', pattern: { String: SP }, content: ' ' },
        { type: 'ByteFallback' },
        { type: 'Fuse' },
        { type: 'Strip', content: ' ', start: 1, stop: 0 },
      ],
    },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: '<unk>',
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: true,
      byte_fallback: true,
      ignore_merges: false,
      vocab,
      merges: mergeList,
    },
  };
}
