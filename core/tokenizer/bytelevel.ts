// Byte-level pieces of the tokenizer: GPT-2's byte<->unicode map, UTF-8, and the
// pre-tokenizer. Everything here mirrors what `@huggingface/tokenizers` does for a
// `Sequence[Digits(individual_digits), ByteLevel(use_regex)]` pre-tokenizer, because our
// encoder must give the same ids as that library on the same tokenizer.json.

/**
 * GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68
 * bytes to U+0100.. in byte order. Every token is then a plain string of visible chars.
 */
function buildByteToUnicode(): string[] {
  const keep: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) keep.push(b);
  for (let b = 0xa1; b <= 0xac; b++) keep.push(b);
  for (let b = 0xae; b <= 0xff; b++) keep.push(b);
  const out: string[] = new Array<string>(256);
  for (const b of keep) out[b] = String.fromCharCode(b);
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (out[b] === undefined) out[b] = String.fromCharCode(256 + n++);
  }
  return out;
}

/** byte (0..255) -> its one-character byte-level symbol. */
export const BYTE_TO_UNICODE: readonly string[] = buildByteToUnicode();

/** one-character byte-level symbol -> byte. */
export const UNICODE_TO_BYTE: ReadonlyMap<string, number> = new Map(BYTE_TO_UNICODE.map((c, b) => [c, b]));

const encoder = new TextEncoder();
// fatal: false turns bytes that are not valid UTF-8 (a token sequence cut inside a
// character) into U+FFFD, as the Hugging Face ByteLevel decoder does; ignoreBOM keeps a
// leading U+FEFF, which a round trip must not eat.
const decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/** UTF-8 bytes of a string (a lone surrogate becomes U+FFFD, as TextEncoder does). */
export function utf8Encode(text: string): Uint8Array {
  return encoder.encode(text);
}

/** Decodes UTF-8; invalid sequences become U+FFFD. */
export function utf8Decode(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

/** The byte-level form of a text: one symbol per UTF-8 byte. */
export function toByteLevel(text: string): string {
  let s = '';
  for (const b of utf8Encode(text)) s += BYTE_TO_UNICODE[b];
  return s;
}

/** Inverse of toByteLevel; throws on a character that is not a byte-level symbol. */
export function fromByteLevel(symbols: string): string {
  const bytes = new Uint8Array(symbols.length);
  for (let i = 0; i < symbols.length; i++) {
    const b = UNICODE_TO_BYTE.get(symbols[i]!);
    if (b === undefined) throw new Error(`not a byte-level symbol: ${JSON.stringify(symbols[i])}`);
    bytes[i] = b;
  }
  return utf8Decode(bytes);
}

// The exact patterns of @huggingface/tokenizers 0.2.0 (Digits with individual_digits,
// then ByteLevel with use_regex). Identical regexes give identical pre-tokens, so ids
// agree. `\d` under the `u` flag is ASCII 0-9 only, as Rust's Digits (is_ascii_digit).
const DIGITS_SPLIT = /[^\d]+|\d/gu;
const GPT2_SPLIT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/**
 * Pre-tokenizes text that holds no special token: every ASCII digit alone, then the
 * GPT-2 split. Returns raw (not byte-level) pieces whose concatenation is `text`.
 */
export function preTokenize(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(DIGITS_SPLIT)) {
    const chunk = m[0];
    if (chunk.length === 1 && chunk >= '0' && chunk <= '9') {
      out.push(chunk);
      continue;
    }
    for (const p of chunk.matchAll(GPT2_SPLIT)) out.push(p[0]);
  }
  return out;
}
