// Byte-level BPE: a deterministic trainer, an encoder that gives exactly the ids of
// `@huggingface/tokenizers` on the same tokenizer.json, and that file's (de)serialiser.
//
// Vocabulary layout: ids 0..8 are the nine wire-format specials, 9..264 the 256 byte
// symbols in byte order, then one token per merge in merge order (a merge whose result
// already exists adds no id).

import { BYTE_TO_UNICODE, UNICODE_TO_BYTE, preTokenize, utf8Decode, utf8Encode } from './bytelevel';
import { isObj } from '../protocol/isObj';

/**
 * The wire-format special tokens in id order (ids 0..8). Kept here rather than imported
 * from core/wire.ts so the tokenizer stands alone; a unit test pins the two lists equal.
 */
export const SPECIAL_TOKENS = [
  '<|bos|>',
  '<|eos|>',
  '<|pad|>',
  '<|end|>',
  '<|system|>',
  '<|user|>',
  '<|assistant|>',
  '<|tool_call|>',
  '<|tool_result|>',
] as const;

export type SpecialToken = (typeof SPECIAL_TOKENS)[number];

/** Largest vocabulary the trainer builds by default: stack-100m's embedding rows. */
export const DEFAULT_MAX_VOCAB = 32768;
/** A pair seen fewer times than this is not worth a token (see trainBpe). */
export const DEFAULT_MIN_PAIR_COUNT = 2;

export interface TrainOptions {
  /** Stop when the vocabulary (specials + 256 bytes + merges) has this many tokens. */
  vocabSize?: number;
  /** Stop when the most frequent pair occurs fewer times than this. */
  minPairCount?: number;
}

// The pre-tokenizer and decoder we write, and the only ones our loader accepts.
const PRE_TOKENIZER_JSON = {
  type: 'Sequence',
  pretokenizers: [
    { type: 'Digits', individual_digits: true },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  ],
};
const DECODER_JSON = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };

export interface AddedTokenJson {
  id: number;
  content: string;
  single_word: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
  special: boolean;
}

/** The subset of the Hugging Face tokenizer.json schema that we write. */
export interface TokenizerJson {
  version: '1.0';
  truncation: null;
  padding: null;
  added_tokens: AddedTokenJson[];
  normalizer: null;
  pre_tokenizer: typeof PRE_TOKENIZER_JSON;
  post_processor: null;
  decoder: typeof DECODER_JSON;
  model: {
    type: 'BPE';
    dropout: null;
    unk_token: null;
    continuing_subword_prefix: null;
    end_of_word_suffix: null;
    fuse_unk: false;
    byte_fallback: false;
    ignore_merges: false;
    vocab: Record<string, number>;
    merges: [string, string][];
  };
}

// Specials are matched longest-first at the leftmost position: what the HF library's
// trie splitter does, so "<|tool_call|>" inside a word still becomes its one id.
const SPECIAL_SPLIT = new RegExp(
  [...SPECIAL_TOKENS]
    .sort((a, b) => b.length - a.length)
    .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('|'),
  'g',
);

/** Splits text into ordinary segments and special tokens (specials always win). */
export function splitOnSpecials(text: string): { text: string; special: boolean }[] {
  const out: { text: string; special: boolean }[] = [];
  let at = 0;
  for (const m of text.matchAll(SPECIAL_SPLIT)) {
    const i = m.index!;
    if (i > at) out.push({ text: text.slice(at, i), special: false });
    out.push({ text: m[0], special: true });
    at = i + m[0].length;
  }
  if (at < text.length) out.push({ text: text.slice(at), special: false });
  return out;
}

// Pair keys pack two ids into one number; ids stay below 2^21 (checked on load).
const PAIR_BASE = 2 ** 21;
const MAX_VOCAB = PAIR_BASE;

// Per-pre-token cache. Long pieces are rare (whitespace runs) and not worth keeping;
// the cache is dropped whole when it grows past its cap, which keeps memory bounded.
const CACHE_MAX_PIECE = 256;
const CACHE_MAX_ENTRIES = 100_000;

export class BpeTokenizer {
  /** Number of ids (0..vocabSize-1). */
  readonly vocabSize: number;
  /** Each special token's id. */
  readonly specialIds: Readonly<Record<SpecialToken, number>>;

  private readonly tokens: readonly string[];
  private readonly ids: ReadonlyMap<string, number>;
  private readonly mergeList: readonly (readonly [string, string])[];
  private readonly mergeRank = new Map<number, number>();
  private readonly mergeResult: Int32Array;
  private readonly byteIds = new Int32Array(256);
  private readonly bytesOf: (Uint8Array | null)[];
  private readonly specialById = new Map<number, string>();
  private readonly cache = new Map<string, readonly number[]>();

  /**
   * `tokens[id]` is the token (special content or byte-level string); `merges` in rank
   * order. Throws with a clear message when the pair does not form a valid byte-level BPE.
   */
  constructor(tokenList: readonly string[], mergeList: readonly (readonly [string, string])[]) {
    // Own copies: a caller mutating its arrays later must not change this tokenizer.
    const tokens = [...tokenList];
    const merges = mergeList.map(([l, r]) => [l, r] as const);
    if (tokens.length > MAX_VOCAB) throw new Error(`vocabulary too large: ${tokens.length} > ${MAX_VOCAB}`);
    const ids = new Map<string, number>();
    tokens.forEach((t, id) => {
      if (typeof t !== 'string' || t.length === 0) throw new Error(`token ${id} is not a non-empty string`);
      if (ids.has(t)) throw new Error(`token ${JSON.stringify(t)} has two ids (${ids.get(t)} and ${id})`);
      ids.set(t, id);
    });
    const specialIds = {} as Record<SpecialToken, number>;
    SPECIAL_TOKENS.forEach((s, i) => {
      if (tokens[i] !== s) throw new Error(`id ${i} must be the special token ${s}, found ${JSON.stringify(tokens[i])}`);
      specialIds[s] = i;
      this.specialById.set(i, s);
    });
    this.bytesOf = tokens.map((t, id) => {
      if (id < SPECIAL_TOKENS.length) return null;
      const bytes = new Uint8Array(t.length);
      for (let i = 0; i < t.length; i++) {
        const b = UNICODE_TO_BYTE.get(t[i]!);
        if (b === undefined) {
          throw new Error(`token ${id} ${JSON.stringify(t)} holds ${JSON.stringify(t[i])}, which is not a byte-level symbol`);
        }
        bytes[i] = b;
      }
      return bytes;
    });
    for (let b = 0; b < 256; b++) {
      const id = ids.get(BYTE_TO_UNICODE[b]!);
      if (id === undefined) throw new Error(`byte 0x${b.toString(16).padStart(2, '0')} (${JSON.stringify(BYTE_TO_UNICODE[b])}) has no token`);
      this.byteIds[b] = id;
    }
    this.mergeResult = new Int32Array(merges.length);
    merges.forEach((m, rank) => {
      const [l, r] = m;
      const li = ids.get(l);
      const ri = ids.get(r);
      const out = ids.get(l + r);
      const where = `merge ${rank} ${JSON.stringify([l, r])}`;
      if (li === undefined || li < SPECIAL_TOKENS.length) throw new Error(`${where}: left part is not an ordinary token`);
      if (ri === undefined || ri < SPECIAL_TOKENS.length) throw new Error(`${where}: right part is not an ordinary token`);
      if (out === undefined) throw new Error(`${where}: the merged token ${JSON.stringify(l + r)} is not in the vocabulary`);
      if (out < SPECIAL_TOKENS.length) throw new Error(`${where}: the merged token is the special token ${l + r}`);
      const key = li * PAIR_BASE + ri;
      if (this.mergeRank.has(key)) throw new Error(`${where}: duplicate of merge ${this.mergeRank.get(key)}`);
      this.mergeRank.set(key, rank);
      this.mergeResult[rank] = out;
    });
    this.tokens = tokens;
    this.ids = ids;
    this.mergeList = merges;
    this.vocabSize = tokens.length;
    this.specialIds = Object.freeze(specialIds);
  }

  /** Encodes text; special-token strings anywhere in it become their single ids. */
  encode(text: string): number[] {
    const out: number[] = [];
    for (const seg of splitOnSpecials(text)) {
      if (seg.special) out.push(this.ids.get(seg.text)!);
      else this.encodeOrdinaryInto(seg.text, out);
    }
    return out;
  }

  /** Encodes text treating special-token strings as plain text (never special ids). */
  encodeOrdinary(text: string): number[] {
    const out: number[] = [];
    this.encodeOrdinaryInto(text, out);
    return out;
  }

  /** Decodes ids; bytes that do not form UTF-8 (a cut character) become U+FFFD. */
  decode(ids: readonly number[]): string {
    let out = '';
    let buf: number[] = [];
    const flush = (): void => {
      if (buf.length > 0) out += utf8Decode(Uint8Array.from(buf));
      buf = [];
    };
    for (const id of ids) {
      const special = this.specialById.get(id);
      if (special !== undefined) {
        flush();
        out += special;
        continue;
      }
      const bytes = Number.isInteger(id) ? this.bytesOf[id] : undefined;
      if (!bytes) throw new RangeError(`token id ${id} is not in the vocabulary (0..${this.vocabSize - 1})`);
      for (const b of bytes) buf.push(b);
    }
    flush();
    return out;
  }

  /** The token string of an id (byte-level form, or the special's content). */
  idToToken(id: number): string | undefined {
    return this.tokens[id];
  }

  tokenToId(token: string): number | undefined {
    return this.ids.get(token);
  }

  /** The raw bytes a token stands for; undefined for specials and unknown ids. */
  tokenBytes(id: number): Uint8Array | undefined {
    return this.bytesOf[id] ?? undefined;
  }

  isSpecial(id: number): boolean {
    return this.specialById.has(id);
  }

  /** The merges in rank order. */
  merges(): readonly (readonly [string, string])[] {
    return this.mergeList;
  }

  /** A Hugging Face tokenizer.json object (deterministic key order). */
  toJSON(): TokenizerJson {
    // No prototype, so a token spelled "__proto__" is an ordinary key.
    const vocab = Object.create(null) as Record<string, number>;
    this.tokens.forEach((t, id) => {
      vocab[t] = id;
    });
    return {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: SPECIAL_TOKENS.map((content, id) => ({
        id,
        content,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      })),
      normalizer: null,
      pre_tokenizer: structuredCloneJson(PRE_TOKENIZER_JSON),
      post_processor: null,
      decoder: { ...DECODER_JSON },
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
        merges: this.mergeList.map(([l, r]) => [l, r]),
      },
    };
  }

  /** Loads a tokenizer.json as written by toJSON; anything else gets an error naming the field. */
  static fromJSON(obj: unknown): BpeTokenizer {
    return fromTokenizerJson(obj);
  }

  private encodeOrdinaryInto(text: string, out: number[]): void {
    for (const piece of preTokenize(text)) {
      let ids = this.cache.get(piece);
      if (ids === undefined) {
        ids = this.bpe(piece);
        if (piece.length <= CACHE_MAX_PIECE) {
          if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.clear();
          this.cache.set(piece, ids);
        }
      }
      for (const id of ids) out.push(id);
    }
  }

  /**
   * Standard BPE on one pre-token: repeatedly merge the adjacent pair with the lowest
   * merge rank, the leftmost one on ties. A heap of (rank, position) with lazy
   * invalidation keeps long pieces O(n log n); it is the order the HF library applies.
   */
  private bpe(piece: string): number[] {
    const bytes = utf8Encode(piece);
    const n = bytes.length;
    const sym = new Int32Array(n);
    for (let i = 0; i < n; i++) sym[i] = this.byteIds[bytes[i]!]!;
    if (n < 2 || this.mergeRank.size === 0) return Array.from(sym);
    const next = new Int32Array(n);
    const prev = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      next[i] = i + 1 < n ? i + 1 : -1;
      prev[i] = i - 1;
    }
    // Entries are rank * 2^32 + position: one number orders by rank, then position.
    const heap: number[] = [];
    const rankAt = (i: number): number => {
      const j = next[i]!;
      if (j < 0) return -1;
      return this.mergeRank.get(sym[i]! * PAIR_BASE + sym[j]!) ?? -1;
    };
    const pushAt = (i: number): void => {
      const r = rankAt(i);
      if (r >= 0) heapPush(heap, r * 2 ** 32 + i);
    };
    for (let i = 0; i < n - 1; i++) pushAt(i);
    const alive = new Uint8Array(n).fill(1);
    while (heap.length > 0) {
      const top = heapPop(heap);
      const rank = Math.floor(top / 2 ** 32);
      const i = top - rank * 2 ** 32;
      // Stale when the symbol at i was absorbed or its pair changed since the push.
      if (!alive[i] || rankAt(i) !== rank) continue;
      const j = next[i]!;
      sym[i] = this.mergeResult[rank]!;
      alive[j] = 0;
      next[i] = next[j]!;
      if (next[j]! >= 0) prev[next[j]!] = i;
      if (prev[i]! >= 0) pushAt(prev[i]!);
      pushAt(i);
    }
    const out: number[] = [];
    for (let i = 0; i >= 0; i = next[i]!) out.push(sym[i]!);
    return out;
  }
}

function heapPush(h: number[], v: number): void {
  let i = h.length;
  h.push(v);
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (h[p]! <= v) break;
    h[i] = h[p]!;
    i = p;
  }
  h[i] = v;
}

function heapPop(h: number[]): number {
  const top = h[0]!;
  const last = h.pop()!;
  if (h.length > 0) {
    let i = 0;
    const n = h.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const c = l + 1 < n && h[l + 1]! < h[l]! ? l + 1 : l;
      if (h[c]! >= last) break;
      h[i] = h[c]!;
      i = c;
    }
    h[i] = last;
  }
  return top;
}

function structuredCloneJson<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/**
 * Trains a byte-level BPE. Texts are split on special tokens (which are never trained
 * on) and pre-tokenized; pre-tokens are counted; then, repeatedly, the most frequent
 * adjacent pair (weighted by pre-token counts) is merged everywhere, left to right.
 * Ties go to the smaller (left id, right id), so the result depends only on the
 * multiset of pre-tokens, never on map or input order. Stops at `vocabSize` tokens or
 * when no pair occurs `minPairCount` times.
 */
export function trainBpe(texts: Iterable<string>, opts: TrainOptions = {}): BpeTokenizer {
  const vocabSize = opts.vocabSize ?? DEFAULT_MAX_VOCAB;
  const minPairCount = opts.minPairCount ?? DEFAULT_MIN_PAIR_COUNT;
  const base = SPECIAL_TOKENS.length + 256;
  if (!Number.isInteger(vocabSize) || vocabSize < base || vocabSize > MAX_VOCAB) {
    throw new RangeError(`vocabSize must be an integer in ${base}..${MAX_VOCAB} (specials + 256 bytes at least), got ${vocabSize}`);
  }
  if (!Number.isInteger(minPairCount) || minPairCount < 1) {
    throw new RangeError(`minPairCount must be a positive integer, got ${minPairCount}`);
  }

  const tokens: string[] = [...SPECIAL_TOKENS, ...BYTE_TO_UNICODE];
  const ids = new Map<string, number>();
  tokens.forEach((t, i) => ids.set(t, i));
  const byteId = (b: number): number => SPECIAL_TOKENS.length + b;

  const pieceCounts = new Map<string, number>();
  for (const text of texts) {
    for (const seg of splitOnSpecials(text)) {
      if (seg.special) continue;
      for (const p of preTokenize(seg.text)) pieceCounts.set(p, (pieceCounts.get(p) ?? 0) + 1);
    }
  }
  const words: number[][] = [];
  const freqs: number[] = [];
  for (const [p, c] of pieceCounts) {
    words.push(Array.from(utf8Encode(p), byteId));
    freqs.push(c);
  }

  const pairCount = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();
  const addPairs = (w: number, sign: 1 | -1): void => {
    const s = words[w]!;
    const f = freqs[w]! * sign;
    for (let i = 0; i + 1 < s.length; i++) {
      const key = s[i]! * PAIR_BASE + s[i + 1]!;
      const c = (pairCount.get(key) ?? 0) + f;
      if (c === 0) pairCount.delete(key);
      else pairCount.set(key, c);
      if (sign > 0) {
        let set = pairWords.get(key);
        if (!set) pairWords.set(key, (set = new Set()));
        set.add(w);
      }
    }
  };
  for (let w = 0; w < words.length; w++) addPairs(w, 1);

  const merges: [string, string][] = [];
  while (tokens.length < vocabSize) {
    let bestKey = -1;
    let bestCount = 0;
    for (const [key, c] of pairCount) {
      if (c > bestCount || (c === bestCount && key < bestKey)) {
        bestKey = key;
        bestCount = c;
      }
    }
    if (bestKey < 0 || bestCount < minPairCount) break;
    const a = Math.floor(bestKey / PAIR_BASE);
    const b = bestKey - a * PAIR_BASE;
    const merged = tokens[a]! + tokens[b]!;
    let c = ids.get(merged);
    if (c === undefined) {
      c = tokens.length;
      tokens.push(merged);
      ids.set(merged, c);
    }
    merges.push([tokens[a]!, tokens[b]!]);
    // Sets may hold words that lost the pair earlier; re-merging them is a no-op.
    const affected = [...(pairWords.get(bestKey) ?? [])];
    pairWords.delete(bestKey);
    for (const w of affected) {
      const s = words[w]!;
      let has = false;
      for (let i = 0; i + 1 < s.length && !has; i++) has = s[i] === a && s[i + 1] === b;
      if (!has) continue;
      addPairs(w, -1);
      const t: number[] = [];
      for (let i = 0; i < s.length; i++) {
        if (i + 1 < s.length && s[i] === a && s[i + 1] === b) {
          t.push(c);
          i++;
        } else {
          t.push(s[i]!);
        }
      }
      words[w] = t;
      addPairs(w, 1);
    }
  }
  return new BpeTokenizer(tokens, merges);
}

// ---- loading tokenizer.json -------------------------------------------------------

function fail(path: string, msg: string): never {
  throw new Error(`tokenizer.json: ${path} ${msg}`);
}

function expectJsonEqual(v: unknown, want: unknown, path: string): void {
  if (JSON.stringify(v) !== JSON.stringify(want)) {
    fail(path, `must be ${JSON.stringify(want)} (only this lab's byte-level BPE is supported), found ${JSON.stringify(v) ?? 'nothing'}`);
  }
}

function fromTokenizerJson(obj: unknown): BpeTokenizer {
  if (!isObj(obj)) fail('(top level)', 'must be a JSON object');
  if (obj.version !== '1.0') fail('version', `must be "1.0", found ${JSON.stringify(obj.version) ?? 'nothing'}`);
  for (const k of ['truncation', 'padding', 'normalizer', 'post_processor'] as const) {
    if (obj[k] !== null && obj[k] !== undefined) fail(k, `must be null, found ${JSON.stringify(obj[k])}`);
  }
  expectJsonEqual(obj.pre_tokenizer, PRE_TOKENIZER_JSON, 'pre_tokenizer');
  if (!isObj(obj.decoder) || obj.decoder.type !== 'ByteLevel') {
    fail('decoder', `must be a ByteLevel decoder, found ${JSON.stringify(obj.decoder) ?? 'nothing'}`);
  }

  const added = obj.added_tokens;
  if (!Array.isArray(added)) fail('added_tokens', 'must be an array');
  if (added.length !== SPECIAL_TOKENS.length) {
    fail('added_tokens', `must hold the ${SPECIAL_TOKENS.length} special tokens ${SPECIAL_TOKENS.join(' ')}, found ${added.length} entries`);
  }
  added.forEach((t: unknown, i: number) => {
    const p = `added_tokens[${i}]`;
    if (!isObj(t)) fail(p, 'must be an object');
    if (t.content !== SPECIAL_TOKENS[i] || t.id !== i) {
      fail(p, `must be {"id": ${i}, "content": ${JSON.stringify(SPECIAL_TOKENS[i])}}, found id ${JSON.stringify(t.id)} content ${JSON.stringify(t.content)}`);
    }
    if (t.special !== true) fail(`${p}.special`, 'must be true');
    for (const k of ['single_word', 'lstrip', 'rstrip', 'normalized'] as const) {
      if (t[k] !== undefined && t[k] !== false) fail(`${p}.${k}`, `must be false, found ${JSON.stringify(t[k])}`);
    }
  });

  const model = obj.model;
  if (!isObj(model)) fail('model', 'must be an object');
  if (model.type !== 'BPE') fail('model.type', `must be "BPE", found ${JSON.stringify(model.type) ?? 'nothing'}`);
  // Options that change how BPE segments or what unknown pieces become.
  const fixed: Record<string, unknown> = {
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: false,
    byte_fallback: false,
    ignore_merges: false,
  };
  for (const [k, want] of Object.entries(fixed)) {
    if (model[k] !== undefined && model[k] !== want) fail(`model.${k}`, `must be ${JSON.stringify(want)}, found ${JSON.stringify(model[k])}`);
  }

  const vocab = model.vocab;
  if (!isObj(vocab)) fail('model.vocab', 'must be an object mapping token -> id');
  const entries = Object.entries(vocab);
  const tokens: string[] = new Array<string>(entries.length);
  for (const [tok, id] of entries) {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= entries.length) {
      fail(`model.vocab[${JSON.stringify(tok)}]`, `must be an integer id in 0..${entries.length - 1}, found ${JSON.stringify(id)}`);
    }
    if (tokens[id] !== undefined) fail(`model.vocab[${JSON.stringify(tok)}]`, `reuses id ${id} (already ${JSON.stringify(tokens[id])})`);
    tokens[id] = tok;
  }

  const rawMerges = model.merges;
  if (!Array.isArray(rawMerges)) fail('model.merges', 'must be an array');
  const merges: [string, string][] = rawMerges.map((m: unknown, i: number) => {
    // Both HF merge forms: ["a", "b"] and the older "a b" (byte-level tokens hold no space).
    if (Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string') return [m[0], m[1]];
    if (typeof m === 'string') {
      const parts = m.split(' ');
      if (parts.length === 2) return [parts[0]!, parts[1]!];
    }
    return fail(`model.merges[${i}]`, `must be a pair of token strings, found ${JSON.stringify(m)}`);
  });

  try {
    return new BpeTokenizer(tokens, merges);
  } catch (e) {
    return fail('model', `is not a valid byte-level BPE: ${(e as Error).message}`);
  }
}
