// A transcript's tokens as SFT sees them (encodeWithMask: segment by segment), with each
// token's UTF-16 offsets, and the diagnostics that need a tokenizer (over-length).
import { DEFAULT_MAX_LEN } from '../../core/sftFormat';
import type { BpeTokenizer } from '../../core/tokenizer';
import type { Span, TDiagnostic, TranscriptAnalysis } from './transcript';

export interface TokenTable {
  ids: Int32Array;
  starts: Int32Array;
  ends: Int32Array;
  supervised: Uint8Array;
  special: Uint8Array;
}

// Span texts repeat across a dataset (the system prompt, markers, observations): their
// token counts are kept per tokenizer, in a bounded map.
const COUNT_CACHE = new WeakMap<BpeTokenizer, Map<string, number>>();
const COUNT_CACHE_MAX = 20_000;
const COUNT_CACHE_PIECE = 4096;

/** Only the count: what the over-length check needs for every row. */
export function countTokens(a: TranscriptAnalysis, tok: BpeTokenizer): number {
  let cache = COUNT_CACHE.get(tok);
  if (!cache) {
    cache = new Map();
    COUNT_CACHE.set(tok, cache);
  }
  let n = 0;
  for (const s of a.spans) {
    const piece = a.text.slice(s.start, s.end);
    let c = cache.get(piece);
    if (c === undefined) {
      c = tok.encode(piece).length;
      if (piece.length <= COUNT_CACHE_PIECE) {
        if (cache.size >= COUNT_CACHE_MAX) cache.clear();
        cache.set(piece, c);
      }
    }
    n += c;
  }
  return n;
}

function utf8Len(cp: number): number {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/** Every token with offsets. A token that cuts a character covers the whole character. */
export function tokenTable(a: TranscriptAnalysis, tok: BpeTokenizer): TokenTable {
  const ids: number[] = [];
  const starts: number[] = [];
  const ends: number[] = [];
  const sup: number[] = [];
  const special: number[] = [];
  for (const s of a.spans) pushSpan(a.text, s, tok, ids, starts, ends, sup, special);
  return {
    ids: Int32Array.from(ids),
    starts: Int32Array.from(starts),
    ends: Int32Array.from(ends),
    supervised: Uint8Array.from(sup),
    special: Uint8Array.from(special),
  };
}

function pushSpan(
  text: string,
  span: Span,
  tok: BpeTokenizer,
  ids: number[],
  starts: number[],
  ends: number[],
  sup: number[],
  special: number[],
): void {
  const piece = text.slice(span.start, span.end);
  // (ci, cb): a character boundary, as a UTF-16 index into `piece` and its UTF-8 offset.
  let ci = 0;
  let cb = 0;
  let byte = 0;
  const charBytes = (i: number): number => utf8Len(piece.codePointAt(i)!);
  const charUnits = (i: number): number => (piece.codePointAt(i)! > 0xffff ? 2 : 1);
  for (const id of tok.encode(piece)) {
    const bytes = tok.tokenBytes(id);
    const nb = bytes ? bytes.length : (tok.idToToken(id) ?? '').length; // specials are ASCII
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
    ids.push(id);
    starts.push(span.start + start);
    ends.push(span.start + ei);
    sup.push(span.supervised ? 1 : 0);
    special.push(bytes ? 0 : 1);
    byte = endByte;
  }
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

/** "would be dropped from SFT": the range runs from the first token past `maxLen` to the end. */
export function overLengthDiagnostic(
  a: TranscriptAnalysis,
  count: number,
  maxLen: number,
  table: () => TokenTable,
): TDiagnostic | null {
  if (count <= maxLen) return null;
  const t = table();
  const start = t.starts[maxLen] ?? 0;
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
