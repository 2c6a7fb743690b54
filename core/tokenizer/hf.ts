// A Hugging Face tokenizer.json (SmolLM's, Qwen's, Llama's ...) behind the lab's Tokenizer
// interface, through @huggingface/tokenizers: encodings are the library's own, with no
// BOS/EOS added. The wire format's nine specials must be added tokens (withWireSpecials adds
// the ones a base model's tokenizer lacks, with new ids after its vocabulary).
// tokenizer_config.json is carried beside it but not read: the library's encode and decode
// read only tokenizer.json with the options given here.
import { Tokenizer as HfLibTokenizer } from '@huggingface/tokenizers';
import { isObj } from '../protocol/isObj';
import { SPECIAL_TOKENS, splitOnSpecials, type AddedTokenJson, type SpecialToken } from './bpe';
import { UNICODE_TO_BYTE, utf8Encode } from './bytelevel';
import type { Tokenizer } from './types';

/** Bad tokenizer.json: the message names the field ("tokenizer.json: added_tokens ..."). */
export class TokenizerJsonError extends Error {
  constructor(field: string, what: string) {
    super(`tokenizer.json: ${field} ${what}`);
    this.name = 'TokenizerJsonError';
  }
}

const DECODE = { skip_special_tokens: false, clean_up_tokenization_spaces: false } as const;
const CACHE_MAX_TEXT = 4096;
const CACHE_MAX_ENTRIES = 100_000;

/** Parse tokenizer.json text into an object, or a TokenizerJsonError. */
export function parseTokenizerJson(text: string): Record<string, unknown> {
  let obj: unknown;
  try {
    obj = JSON.parse(text);
  } catch (e) {
    throw new TokenizerJsonError('(top level)', `is not valid JSON: ${(e as Error).message.split('\n')[0]}`);
  }
  if (!isObj(obj)) throw new TokenizerJsonError('(top level)', 'must be a JSON object');
  return obj;
}

/**
 * Whether a tokenizer.json is meant to be the lab's own byte-level BPE: its added tokens
 * begin with the nine wire specials at ids 0..8 (what the lab writes and no model ships).
 * Such a file is read by the lab's strict reader, whose errors name what is damaged.
 */
export function looksLikeLabTokenizer(obj: Record<string, unknown>): boolean {
  const added = obj['added_tokens'];
  if (!Array.isArray(added) || added.length < SPECIAL_TOKENS.length) return false;
  return SPECIAL_TOKENS.every((s, i) => isObj(added[i]) && added[i]['content'] === s && added[i]['id'] === i);
}

function addedTokensOf(obj: Record<string, unknown>): Record<string, unknown>[] {
  const added = obj['added_tokens'] ?? [];
  if (!Array.isArray(added)) throw new TokenizerJsonError('added_tokens', 'must be an array');
  added.forEach((t: unknown, i) => {
    if (!isObj(t) || typeof t['content'] !== 'string' || typeof t['id'] !== 'number' || !Number.isSafeInteger(t['id']) || t['id'] < 0) {
      throw new TokenizerJsonError(`added_tokens[${i}]`, `must be {"id": integer >= 0, "content": string, ...}, found ${JSON.stringify(t)}`);
    }
  });
  return added as Record<string, unknown>[];
}

/** The library's tokenizer over a parsed tokenizer.json; its errors name the part that failed. */
function libTokenizer(obj: Record<string, unknown>): HfLibTokenizer {
  if (!isObj(obj['model'])) throw new TokenizerJsonError('model', `must be an object (a Hugging Face tokenizer.json), found ${JSON.stringify(obj['model']) ?? 'nothing'}`);
  addedTokensOf(obj);
  let lib: HfLibTokenizer;
  try {
    // A copy: the library keeps (and may extend) what it is given.
    // The library reads a WordLevel model's unknown token from the config (Rust's from the model).
    const model = obj['model'] as Record<string, unknown>;
    const config = typeof model['unk_token'] === 'string' ? { unk_token: model['unk_token'] } : {};
    lib = new HfLibTokenizer(structuredClone({ added_tokens: [], ...obj }), config);
    lib.encode('a 1', { add_special_tokens: false });
  } catch (e) {
    const msg = (e as Error).message;
    const field = /normalizer/i.test(msg)
      ? 'normalizer'
      : /pretokenizer|pre_tokenizer/i.test(msg)
        ? 'pre_tokenizer'
        : /postprocessor|post_processor/i.test(msg)
          ? 'post_processor'
          : /decoder/i.test(msg)
            ? 'decoder'
            : 'model';
    throw new TokenizerJsonError(field, `does not load in @huggingface/tokenizers: ${msg.split('\n')[0]}`);
  }
  return lib;
}

/** Number of ids a tokenizer.json defines: its largest id (vocabulary or added token) + 1. */
export function tokenizerJsonSize(obj: Record<string, unknown>): number {
  let n = 0;
  for (const id of libTokenizer(obj).get_vocab(true).values()) n = Math.max(n, id + 1);
  return n;
}

/** The wire-format specials a tokenizer.json lacks as added tokens, in SPECIAL_TOKENS order. */
export function missingWireSpecials(obj: Record<string, unknown>): SpecialToken[] {
  const have = new Set(addedTokensOf(obj).map((t) => t['content'] as string));
  return SPECIAL_TOKENS.filter((s) => !have.has(s));
}

/**
 * A copy of a tokenizer.json with the wire specials it lacks added as special added tokens,
 * with ids firstId, firstId+1, ... (after the vocabulary, and after the model's embedding rows
 * when it has more: the caller gives the first free row). `added` lists them in id order.
 */
export function withWireSpecials(obj: Record<string, unknown>, firstId: number): { json: Record<string, unknown>; added: { content: SpecialToken; id: number }[] } {
  const size = tokenizerJsonSize(obj);
  if (!Number.isSafeInteger(firstId) || firstId < size) throw new Error(`withWireSpecials: first id ${firstId} is inside the vocabulary (${size} ids)`);
  const added = missingWireSpecials(obj).map((content, i) => ({ content, id: firstId + i }));
  const json = structuredClone(obj);
  json['added_tokens'] = [
    ...addedTokensOf(json),
    ...added.map(
      (a): AddedTokenJson => ({ id: a.id, content: a.content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }),
    ),
  ];
  return { json, added };
}

/** Whether the decoder is byte-level (GPT-2's byte symbols): tokens are then exact byte strings. */
function byteLevelDecoder(d: unknown): boolean {
  if (!isObj(d)) return false;
  if (d['type'] === 'ByteLevel') return true;
  return d['type'] === 'Sequence' && Array.isArray(d['decoders']) && d['decoders'].some(byteLevelDecoder);
}

/**
 * The character a SentencePiece-style decoder turns into a space (Llama 2's and Mistral's
 * `Replace("▁", " ")`, or a `Metaspace` decoder's replacement), or null for other decoders.
 */
function spaceReplacementOf(d: unknown): string | null {
  if (!isObj(d)) return null;
  if (d['type'] === 'Metaspace') return typeof d['replacement'] === 'string' ? d['replacement'] : '\u2581';
  if (d['type'] === 'Replace' && d['content'] === ' ' && isObj(d['pattern']) && typeof d['pattern']['String'] === 'string') return d['pattern']['String'];
  if (d['type'] === 'Sequence' && Array.isArray(d['decoders'])) {
    for (const x of d['decoders'] as unknown[]) {
      const r = spaceReplacementOf(x);
      if (r !== null) return r;
    }
  }
  return null;
}

/** SentencePiece's byte-fallback token "<0xE2>": the byte it stands for. */
const BYTE_FALLBACK = /^<0x([0-9A-Fa-f]{2})>$/;

export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly specialIds: Readonly<Record<SpecialToken, number>>;
  /** The tokenizer.json text this tokenizer was made from, compact (what a run writes and hashes). */
  readonly jsonText: string;
  private readonly lib: HfLibTokenizer;
  private readonly tokens: readonly (string | undefined)[];
  private readonly special = new Set<number>();
  private readonly wireSpecial = new Set<number>();
  private readonly addedText = new Map<number, string>();
  private readonly byteLevel: boolean;
  /** SentencePiece style (Llama 2, Mistral, Gemma): this character is a space, and "<0xHH>" a byte when byteFallback. */
  private readonly spaceReplacement: string | null;
  private readonly byteFallback: boolean;
  private readonly bytesCache = new Map<number, Uint8Array>();
  private readonly cache = new Map<string, readonly number[]>();

  /** From a parsed tokenizer.json holding the nine wire specials as added tokens; TokenizerJsonError otherwise. */
  constructor(obj: Record<string, unknown>) {
    this.lib = libTokenizer(obj);
    const vocab = this.lib.get_vocab(true);
    const tokens: (string | undefined)[] = [];
    for (const [t, id] of vocab) tokens[id] = t;
    this.tokens = tokens;
    this.vocabSize = tokens.length;
    const ids = {} as Record<SpecialToken, number>;
    const byContent = new Map<string, number>();
    addedTokensOf(obj).forEach((t) => {
      const id = t['id'] as number;
      byContent.set(t['content'] as string, id);
      this.addedText.set(id, t['content'] as string);
      if (t['special'] === true) this.special.add(id);
    });
    for (const s of SPECIAL_TOKENS) {
      const id = byContent.get(s);
      if (id === undefined) throw new TokenizerJsonError('added_tokens', `lack the wire-format special ${s} (a run's tokenizer holds all nine as added tokens)`);
      if (!this.special.has(id)) throw new TokenizerJsonError('added_tokens', `hold ${s} with "special": false (a wire-format special must be special)`);
      ids[s] = id;
      this.wireSpecial.add(id);
    }
    this.specialIds = Object.freeze(ids);
    this.byteLevel = byteLevelDecoder(obj['decoder']);
    this.spaceReplacement = this.byteLevel ? null : spaceReplacementOf(obj['decoder']);
    this.byteFallback = isObj(obj['model']) && obj['model']['byte_fallback'] === true;
    this.jsonText = JSON.stringify(obj);
  }

  static fromJsonText(text: string): HfTokenizer {
    return new HfTokenizer(parseTokenizerJson(text));
  }

  encode(text: string): number[] {
    const hit = this.cache.get(text);
    if (hit) return [...hit];
    const ids = this.spaceReplacement === null ? this.encodeSection(text) : this.encodeSections(text);
    if (text.length <= CACHE_MAX_TEXT) {
      if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.clear();
      this.cache.set(text, ids);
    }
    return [...ids];
  }

  /**
   * A SentencePiece tokenizer prepends "▁" to the start of its input only (Metaspace's
   * prepend_scheme "first") or to every stretch between added tokens (a Prepend normalizer):
   * the ids of a transcript would then depend on how it was cut into calls. Encoding the
   * stretches between wire specials one at a time gives every stretch its prefix space, so
   * the ids are the same whether the lab encodes a segment (training), a whole prompt (the
   * harness) or a file (the language server); `decode` strips it again per stretch.
   */
  private encodeSections(text: string): number[] {
    const ids: number[] = [];
    for (const part of splitOnSpecials(text)) {
      if (part.special) ids.push(this.specialIds[part.text as SpecialToken]);
      else ids.push(...this.encodeSection(part.text));
    }
    return ids;
  }

  private encodeSection(text: string): number[] {
    const ids = this.lib.encode(text, { add_special_tokens: false }).ids;
    const bad = ids.findIndex((id) => !Number.isInteger(id));
    if (bad >= 0) throw new Error(`tokenizer.json: model gives no id for the piece ${JSON.stringify(this.lib.tokenize(text)[bad] ?? '?')} of ${JSON.stringify(text.slice(0, 40))} (no unk_token)`);
    return ids;
  }

  decode(ids: readonly number[]): string {
    if (ids.length === 0) return ''; // the library refuses an empty list
    for (const id of ids) {
      if (!Number.isInteger(id) || this.tokens[id] === undefined) throw new RangeError(`token id ${id} is not in the vocabulary (0..${this.vocabSize - 1})`);
    }
    if (this.spaceReplacement === null) return this.lib.decode([...ids], DECODE);
    // Stretch by stretch, as encode wrote them (see encodeSections).
    let out = '';
    let run: number[] = [];
    const flush = (): void => {
      if (run.length) out += this.lib.decode(run, DECODE);
      run = [];
    };
    for (const id of ids) {
      if (this.wireSpecial.has(id)) {
        flush();
        out += this.addedText.get(id)!;
      } else run.push(id);
    }
    flush();
    return out;
  }

  idToToken(id: number): string | undefined {
    return this.tokens[id];
  }

  isSpecial(id: number): boolean {
    return this.special.has(id);
  }

  /**
   * The bytes a token writes in the middle of a text. Exact for byte-level vocabularies
   * (SmolLM, Qwen2, Llama 3: every token a string of byte symbols) and for SentencePiece ones
   * (Llama 2, Mistral, Gemma: "▁" is a space, "<0xE2>" one byte; decoded alone such a token
   * would lose its leading space to the decoder's Strip); otherwise the UTF-8 of the token
   * decoded alone.
   */
  tokenBytes(id: number): Uint8Array | undefined {
    if (this.special.has(id) || this.tokens[id] === undefined) return undefined;
    let b = this.bytesCache.get(id);
    if (b) return b;
    const added = this.addedText.get(id);
    const t = this.tokens[id]!;
    const byte = this.byteFallback ? BYTE_FALLBACK.exec(t) : null;
    if (added !== undefined) b = utf8Encode(added);
    else if (this.byteLevel && [...t].every((c) => UNICODE_TO_BYTE.has(c))) b = Uint8Array.from([...t].map((c) => UNICODE_TO_BYTE.get(c)!));
    else if (byte) b = Uint8Array.of(parseInt(byte[1]!, 16));
    else if (this.spaceReplacement !== null) b = utf8Encode(t.split(this.spaceReplacement).join(' '));
    else b = utf8Encode(this.lib.decode([id], DECODE));
    this.bytesCache.set(id, b);
    return b;
  }
}
