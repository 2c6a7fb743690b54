// What a token stands for inside a text, for tokenizers that are not byte-level too. The lab
// encodes a transcript piece by piece (the text between specials). A SentencePiece tokenizer
// (Llama 2, Mistral: a "▁" prepended by its normalizer or its Metaspace pre-tokenizer) writes
// a space at the start of each piece that the text does not hold; its decoder strips it
// again. The loss mask, the language server's token table, the grammar's token mask and the
// copy bias all need to know which bytes are the text's: they ask here.
import { utf8Decode, utf8Encode } from './bytelevel';
import type { Tokenizer } from './types';

/** A tokenizer whose tokens do not spell the piece they encode (a normalizer that changes the text). */
export class PieceAlignmentError extends Error {
  constructor(tokenBytes: number, pieceBytes: number, piece: string) {
    super(
      `the tokenizer's tokens stand for ${tokenBytes} bytes of a ${pieceBytes}-byte piece (${JSON.stringify(piece.slice(0, 40))}${piece.length > 40 ? '...' : ''}): ` +
        'its encoding does not keep the text byte for byte (beyond a prefix space), so the loss mask cannot be aligned',
    );
    this.name = 'PieceAlignmentError';
  }
}

const SPACE = 0x20;

function bytesOf(tok: Tokenizer, id: number): Uint8Array {
  // Specials have no byte symbols; they stand for their literal text.
  return tok.tokenBytes(id) ?? utf8Encode(tok.decode([id]));
}

/**
 * How many of the piece's bytes each token of `ids` (the encoding of `piece`) stands for. The
 * same as the tokens' byte lengths for a byte-level tokenizer; with a SentencePiece one the
 * prefix space it inserts at the start of each stretch between specials counts to no text
 * (that stretch's first token is a byte shorter, or zero-length when it is "▁" alone).
 * Throws PieceAlignmentError when the tokens spell anything else.
 */
export function pieceByteLengths(tok: Tokenizer, piece: string, ids: readonly number[]): number[] {
  const bytes = ids.map((id) => bytesOf(tok, id));
  const lens = bytes.map((b) => b.length);
  const want = utf8Encode(piece);
  const total = lens.reduce((a, b) => a + b, 0);
  if (total === want.length) return lens;
  if (total < want.length) throw new PieceAlignmentError(total, want.length, piece);
  const matches = (at: number, b: Uint8Array, from: number): boolean => {
    if (at + b.length - from > want.length) return false;
    for (let i = from; i < b.length; i++) if (want[at + i - from] !== b[i]) return false;
    return true;
  };
  let at = 0;
  for (let i = 0; i < ids.length; ) {
    if (tok.isSpecial(ids[i]!)) {
      if (!matches(at, bytes[i]!, 0)) throw new PieceAlignmentError(total, want.length, piece);
      at += lens[i++]!;
      continue;
    }
    // A stretch of text tokens: as spelled, or with one inserted space before it.
    let j = i;
    const parts: Uint8Array[] = [];
    for (; j < ids.length && !tok.isSpecial(ids[j]!); j++) parts.push(bytes[j]!);
    const stretch = new Uint8Array(parts.reduce((n, b) => n + b.length, 0));
    parts.reduce((o, b) => (stretch.set(b, o), o + b.length), 0);
    if (matches(at, stretch, 0)) at += stretch.length;
    else if (stretch[0] === SPACE && matches(at, stretch, 1)) {
      at += stretch.length - 1;
      let k = i;
      while (lens[k] === 0) k++;
      lens[k]! -= 1;
    } else throw new PieceAlignmentError(total, want.length, piece);
    i = j;
  }
  if (at !== want.length) throw new PieceAlignmentError(total, want.length, piece);
  return lens;
}

/**
 * The text the tokenizer writes before `text` when it encodes `text` as a piece of its own:
 * '' for a byte-level tokenizer, ' ' for a SentencePiece one that prepends "▁".
 */
export function insertedPrefix(tok: Tokenizer, text: string): string {
  const ids = tok.encode(text);
  const lens = pieceByteLengths(tok, text, ids);
  let inserted = 0;
  ids.forEach((id, i) => (inserted += bytesOf(tok, id).length - lens[i]!));
  return ' '.repeat(inserted);
}

const TEXTS = new WeakMap<Tokenizer, readonly (string | null)[]>();

/**
 * Each id's text in the middle of a text (a SentencePiece "▁the" is " the"; a byte-level
 * token cut inside a character holds U+FFFD), null for specials and ids without a token.
 * What the grammar's token mask and the copy bias match characters against. Cached per tokenizer.
 */
export function tokenTexts(tok: Tokenizer): readonly (string | null)[] {
  let texts = TEXTS.get(tok);
  if (!texts) {
    texts = Array.from({ length: tok.vocabSize }, (_, id) => {
      if (tok.isSpecial(id) || tok.idToToken(id) === undefined) return null;
      const b = tok.tokenBytes(id);
      return b ? utf8Decode(b) : tok.decode([id]);
    });
    TEXTS.set(tok, texts);
  }
  return texts;
}
