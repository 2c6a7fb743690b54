// The lab's tokenizer: byte-level BPE with the nine wire-format specials as ids 0..8,
// digits split one per token, saved and loaded as a Hugging Face tokenizer.json. Beside it,
// a model's own Hugging Face tokenizer (hf.ts); both behind one interface (types.ts).
import { BpeTokenizer } from './bpe';
import { utf8Encode } from './bytelevel';
import { HfTokenizer, looksLikeLabTokenizer, parseTokenizerJson } from './hf';
import type { Tokenizer } from './types';

export {
  BpeTokenizer,
  DEFAULT_MAX_VOCAB,
  DEFAULT_MIN_PAIR_COUNT,
  SPECIAL_TOKENS,
  splitOnSpecials,
  trainBpe,
} from './bpe';
export type { AddedTokenJson, SpecialToken, TokenizerJson, TrainOptions } from './bpe';
export { BYTE_TO_UNICODE, UNICODE_TO_BYTE, fromByteLevel, preTokenize, toByteLevel } from './bytelevel';
export { defaultWorldTexts, trainDefaultTokenizer } from './default';
export type { DefaultWorldTexts } from './default';
export { HfTokenizer, TokenizerJsonError, looksLikeLabTokenizer, missingWireSpecials, parseTokenizerJson, tokenizerJsonSize, withWireSpecials } from './hf';
export { PieceAlignmentError, insertedPrefix, pieceByteLengths, tokenTexts } from './pieces';
export type { Tokenizer } from './types';

/** Which implementation a tokenizer is: the lab's BPE or a Hugging Face tokenizer.json. */
export function tokenizerKind(tok: Tokenizer): 'lab' | 'hf' {
  return tok instanceof HfTokenizer ? 'hf' : 'lab';
}

/** The tokenizer.json text we write: compact, deterministic (same tokenizer, same bytes). */
export function canonicalTokenizerJson(tok: Tokenizer): string {
  if (tok instanceof HfTokenizer) return tok.jsonText;
  if (tok instanceof BpeTokenizer) return JSON.stringify(tok.toJSON());
  throw new Error('canonicalTokenizerJson: neither the lab\'s BPE nor a Hugging Face tokenizer');
}

/** Parses tokenizer.json text; errors say whether the JSON or the tokenizer is wrong. */
export function tokenizerFromJsonText(text: string): BpeTokenizer {
  let obj: unknown;
  try {
    obj = JSON.parse(text);
  } catch (e) {
    throw new Error(`tokenizer.json: not valid JSON: ${(e as Error).message}`);
  }
  return BpeTokenizer.fromJSON(obj);
}

/**
 * A run's tokenizer.json, either kind: the lab's (its nine specials at ids 0..8; read by the
 * strict reader, whose errors name the damage) or a Hugging Face one holding the wire
 * specials as added tokens. Errors start "tokenizer.json: FIELD".
 */
export function anyTokenizerFromJsonText(text: string): Tokenizer {
  const obj = parseTokenizerJson(text);
  return looksLikeLabTokenizer(obj) ? BpeTokenizer.fromJSON(obj) : new HfTokenizer(obj);
}

/**
 * Stable content hash for run configs: "sha256:" + hex of the canonical JSON. It
 * depends only on vocabulary and merges, not on how a file was indented.
 */
export function tokenizerHash(tok: Tokenizer): string {
  return `sha256:${sha256Hex(utf8Encode(canonicalTokenizerJson(tok)))}`;
}

/**
 * The tokenizer_config.json to ship beside tokenizer.json. `clean_up_tokenization_spaces`
 * must be false: the HF libraries default it to true, which rewrites " ." to "." on
 * decode and breaks the round trip.
 */
export function tokenizerConfig(): Record<string, unknown> {
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: '<|bos|>',
    eos_token: '<|eos|>',
    pad_token: '<|pad|>',
    clean_up_tokenization_spaces: false,
    add_bos_token: false,
    add_eos_token: false,
  };
}

// SHA-256 (FIPS 180-4), pure, so core/ needs no Node import for the hash.
const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

/** Hex SHA-256 of bytes. */
export function sha256Hex(data: Uint8Array): string {
  const bitLen = data.length * 8;
  const padded = new Uint8Array(((data.length + 9 + 63) >> 6) << 6);
  padded.set(data);
  padded[data.length] = 0x80;
  const view = new DataView(padded.buffer);
  // Message length in bits, big-endian 64-bit (high word via division: > 2^32 bits is fine).
  view.setUint32(padded.length - 8, Math.floor(bitLen / 2 ** 32));
  view.setUint32(padded.length - 4, bitLen >>> 0);
  const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Uint32Array(64);
  for (let off = 0; off < padded.length; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(off + 4 * i);
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15]!;
      const b = w[i - 2]!;
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) >>> 0;
    }
    let [a, b, c, d, e, f, g, hh] = [h[0]!, h[1]!, h[2]!, h[3]!, h[4]!, h[5]!, h[6]!, h[7]!];
    for (let i = 0; i < 64; i++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const ch = (e & f) ^ (~e & g);
      const t1 = (hh + S1 + ch + K[i]! + w[i]!) >>> 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const maj = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (S0 + maj) >>> 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) >>> 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) >>> 0;
    }
    h[0] = h[0]! + a;
    h[1] = h[1]! + b;
    h[2] = h[2]! + c;
    h[3] = h[3]! + d;
    h[4] = h[4]! + e;
    h[5] = h[5]! + f;
    h[6] = h[6]! + g;
    h[7] = h[7]! + hh;
  }
  let hex = '';
  for (const x of h) hex += x.toString(16).padStart(8, '0');
  return hex;
}
