// A transcript's tokens as SFT sees them (encodeWithMask: segment by segment), with each
// token's UTF-16 offsets, and the diagnostics that need a tokenizer (over-length).
import { DEFAULT_MAX_LEN } from '../../core/sftFormat';
import { insertedPrefix, pieceByteLengths, type Tokenizer } from '../../core/tokenizer';
import type { TDiagnostic, TranscriptAnalysis } from './transcript';

export interface TokenTable {
  ids: Int32Array;
  starts: Int32Array;
  ends: Int32Array;
  supervised: Uint8Array;
  special: Uint8Array;
}

// Span texts repeat across a dataset (the system prompt, markers, observations): their
// token counts are kept per tokenizer, in a bounded map.
const COUNT_CACHE = new WeakMap<Tokenizer, Map<string, number>>();
const COUNT_CACHE_MAX = 20_000;
const COUNT_CACHE_PIECE = 4096;

/** Only the count: what the over-length check needs for every row. */
export function countTokens(a: TranscriptAnalysis, tok: Tokenizer): number {
  return runToEnd(countTokensSteps(a, tok));
}

function runToEnd<T>(steps: Generator<void, T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** countTokens as a generator that yields between spans and chunks (large transcripts work in slices). */
export function* countTokensSteps(a: TranscriptAnalysis, tok: Tokenizer): Generator<void, number> {
  let cache = COUNT_CACHE.get(tok);
  if (!cache) {
    cache = new Map();
    COUNT_CACHE.set(tok, cache);
  }
  let n = 0;
  let work = 0;
  for (const s of a.spans) {
    const piece = a.text.slice(s.start, s.end);
    let c = cache.get(piece);
    if (c === undefined) {
      if (piece.length > ENCODE_CHUNK && chunkable(tok)) {
        c = 0;
        for (const chunk of safeChunks(piece)) {
          c += tok.encode(chunk.text).length;
          yield;
        }
      } else c = tok.encode(piece).length;
      if (piece.length <= COUNT_CACHE_PIECE) {
        if (cache.size >= COUNT_CACHE_MAX) cache.clear();
        cache.set(piece, c);
      }
    }
    n += c;
    if ((++work & 63) === 0) yield;
  }
  return n;
}

/** Pieces longer than this are encoded in chunks cut where the pre-tokenizer would cut anyway. */
export const ENCODE_CHUNK = 32 * 1024;
const WS = /\s/u;

/**
 * Splits `text` into chunks of about `size` UTF-16 units whose encodings, concatenated,
 * are the encoding of `text`: a cut falls only before a space that sits between two
 * non-whitespace characters, or after a newline between two non-whitespace characters.
 * The GPT-2 pre-tokenizer (after the digit split) ends a pre-token there in every case,
 * and no special token holds a space or a newline. With no such place the chunk grows.
 */
export function* safeChunks(text: string, size: number = ENCODE_CHUNK): Generator<{ start: number; text: string }> {
  let from = 0;
  while (text.length - from > size) {
    let cut = -1;
    for (let i = from + size; i < text.length - 1; i++) {
      const c = text[i]!;
      if (c === ' ' && !WS.test(text[i - 1]!) && !WS.test(text[i + 1]!)) {
        cut = i;
        break;
      }
      if (text[i - 1] === '\n' && i >= 2 && !WS.test(text[i - 2]!) && !WS.test(c)) {
        cut = i;
        break;
      }
    }
    if (cut < 0) break;
    yield { start: from, text: text.slice(from, cut) };
    from = cut;
  }
  yield { start: from, text: text.slice(from) };
}

const CHUNKABLE = new WeakMap<Tokenizer, boolean>();
/** safeChunks' cuts hold for byte-level tokenizers; a SentencePiece one would write a prefix space at each. */
function chunkable(tok: Tokenizer): boolean {
  let c = CHUNKABLE.get(tok);
  if (c === undefined) CHUNKABLE.set(tok, (c = insertedPrefix(tok, 'x') === ''));
  return c;
}

function utf8Len(cp: number): number {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/** Every token with offsets. A token that cuts a character covers the whole character. */
export function tokenTable(a: TranscriptAnalysis, tok: Tokenizer): TokenTable {
  return runToEnd(tokenTableSteps(a, tok));
}

/** The table under construction: typed arrays that grow (no number[] of millions of boxed entries). */
class TableBuilder {
  n = 0;
  ids: Int32Array;
  starts: Int32Array;
  ends: Int32Array;
  sup: Uint8Array;
  special: Uint8Array;
  constructor(cap: number) {
    this.ids = new Int32Array(cap);
    this.starts = new Int32Array(cap);
    this.ends = new Int32Array(cap);
    this.sup = new Uint8Array(cap);
    this.special = new Uint8Array(cap);
  }
  add(id: number, start: number, end: number, sup: number, special: number): void {
    if (this.n === this.ids.length) this.grow();
    const i = this.n++;
    this.ids[i] = id;
    this.starts[i] = start;
    this.ends[i] = end;
    this.sup[i] = sup;
    this.special[i] = special;
  }
  private grow(): void {
    const cap = Math.max(1024, this.ids.length * 2);
    const i32 = (a: Int32Array): Int32Array => {
      const b = new Int32Array(cap);
      b.set(a);
      return b;
    };
    const u8 = (a: Uint8Array): Uint8Array => {
      const b = new Uint8Array(cap);
      b.set(a);
      return b;
    };
    this.ids = i32(this.ids);
    this.starts = i32(this.starts);
    this.ends = i32(this.ends);
    this.sup = u8(this.sup);
    this.special = u8(this.special);
  }
  table(): TokenTable {
    const n = this.n;
    return { ids: this.ids.slice(0, n), starts: this.starts.slice(0, n), ends: this.ends.slice(0, n), supervised: this.sup.slice(0, n), special: this.special.slice(0, n) };
  }
}

/** tokenTable as a generator that yields between spans and chunks; `expected` (the count, when known) sizes the arrays. */
export function* tokenTableSteps(a: TranscriptAnalysis, tok: Tokenizer, expected = 0): Generator<void, TokenTable> {
  const t = new TableBuilder(Math.max(16, expected));
  let work = 0;
  for (const s of a.spans) {
    const piece = a.text.slice(s.start, s.end);
    if (piece.length > ENCODE_CHUNK && chunkable(tok)) {
      for (const chunk of safeChunks(piece)) {
        pushPiece(chunk.text, s.start + chunk.start, s.supervised, tok, t);
        yield;
      }
    } else pushPiece(piece, s.start, s.supervised, tok, t);
    if ((++work & 63) === 0) yield;
  }
  return t.table();
}

const ASCII = /^[\x00-\x7f]*$/;

/** A piece's tokens with offsets relative to the piece (kept per tokenizer for pieces that repeat). */
interface PieceTokens {
  ids: Int32Array;
  starts: Int32Array;
  ends: Int32Array;
  special: Uint8Array;
}
const PIECE_CACHE = new WeakMap<Tokenizer, Map<string, PieceTokens>>();

function pushPiece(piece: string, base: number, supervised: boolean, tok: Tokenizer, t: TableBuilder): void {
  let cache = PIECE_CACHE.get(tok);
  if (!cache) {
    cache = new Map();
    PIECE_CACHE.set(tok, cache);
  }
  let p = cache.get(piece);
  if (!p) {
    const b = new TableBuilder(16);
    encodePiece(piece, 0, false, tok, b);
    const done = b.table();
    p = { ids: done.ids, starts: done.starts, ends: done.ends, special: done.special };
    if (piece.length <= COUNT_CACHE_PIECE) {
      if (cache.size >= COUNT_CACHE_MAX) cache.clear();
      cache.set(piece, p);
    }
  }
  const sup = supervised ? 1 : 0;
  for (let i = 0; i < p.ids.length; i++) t.add(p.ids[i]!, base + p.starts[i]!, base + p.ends[i]!, sup, p.special[i]!);
}

function encodePiece(piece: string, base: number, supervised: boolean, tok: Tokenizer, t: TableBuilder): void {
  const ids = tok.encode(piece);
  // The piece's bytes each token stands for (a SentencePiece prefix space stands for none).
  const lens = pieceByteLengths(tok, piece, ids);
  if (ASCII.test(piece)) {
    // One byte per character: offsets are byte offsets.
    let at = 0;
    ids.forEach((id, i) => {
      const nb = lens[i]!;
      t.add(id, base + at, base + Math.min(piece.length, at + nb), supervised ? 1 : 0, tok.isSpecial(id) ? 1 : 0);
      at += nb;
    });
    return;
  }
  // (ci, cb): a character boundary, as a UTF-16 index into `piece` and its UTF-8 offset.
  let ci = 0;
  let cb = 0;
  let byte = 0;
  const charBytes = (i: number): number => utf8Len(piece.codePointAt(i)!);
  const charUnits = (i: number): number => (piece.codePointAt(i)! > 0xffff ? 2 : 1);
  ids.forEach((id, i) => {
    const nb = lens[i]!;
    const startByte = byte;
    const endByte = byte + nb;
    // Floor the start to the character holding its first byte.
    while (ci < piece.length && cb + charBytes(ci) <= startByte) {
      cb += charBytes(ci);
      ci += charUnits(ci);
    }
    const start = ci;
    // Ceil the end to the end of the character holding its last byte.
    let ei = ci;
    let eb = cb;
    while (ei < piece.length && eb < endByte) {
      eb += charBytes(ei);
      ei += charUnits(ei);
    }
    t.add(id, base + start, base + ei, supervised ? 1 : 0, tok.isSpecial(id) ? 1 : 0);
    byte = endByte;
  });
}

/**
 * The offset where token `index` starts, without the whole table: span counts (cached)
 * up to the span that holds it, then that span's tokens only. -1 when there is no such token.
 */
export function tokenStartAt(a: TranscriptAnalysis, tok: Tokenizer, index: number): number {
  let before = 0;
  for (const s of a.spans) {
    const piece = a.text.slice(s.start, s.end);
    const n = runToEnd(countTokensSteps({ ...a, spans: [s] }, tok));
    if (before + n > index) {
      const t = new TableBuilder(16);
      for (const chunk of piece.length > ENCODE_CHUNK && chunkable(tok) ? safeChunks(piece) : [{ start: 0, text: piece }]) {
        pushPiece(chunk.text, s.start + chunk.start, s.supervised, tok, t);
        if (before + t.n > index) break;
      }
      return index - before < t.n ? t.starts[index - before]! : s.start;
    }
    before += n;
  }
  return -1;
}

/** The index of the token holding `offset`, or -1. */
export function tokenIndexAt(t: TokenTable, offset: number): number {
  let lo = 0;
  let hi = t.ids.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (offset < t.starts[mid]!) hi = mid - 1;
    else if (offset >= t.ends[mid]!) lo = mid + 1;
    else return mid;
  }
  return -1;
}

/** Tokens whose offsets overlap [start, end). */
export function tokensIn(t: TokenTable, start: number, end: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < t.ids.length; i++) {
    if (t.ends[i]! <= start) continue;
    if (t.starts[i]! >= end) break;
    out.push(t.ids[i]!);
  }
  return out;
}

/**
 * "would be dropped from SFT": the range runs from the first token past `maxLen` to the end.
 * `startOf(i)` is where token i starts (the table's, or tokenStartAt: never the whole table just for this).
 */
export function overLengthDiagnostic(
  a: TranscriptAnalysis,
  count: number,
  maxLen: number,
  startOf: (index: number) => number,
): TDiagnostic | null {
  if (count <= maxLen) return null;
  const start = Math.max(0, startOf(maxLen));
  return {
    start,
    end: a.text.length,
    severity: 'warning',
    code: 'over-length',
    message:
      `the transcript is ${count} tokens, longer than the SFT max_len of ${maxLen}: it would be dropped from SFT ` +
      `(over-length examples are dropped, never truncated); the tokens past ${maxLen} start here`,
  };
}

export { DEFAULT_MAX_LEN };
