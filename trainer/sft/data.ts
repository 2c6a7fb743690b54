// SFT data with span kinds and copy weights: each transcript becomes token ids, the loss
// mask of `segment`, the span kind of every supervised token and its loss weight. Recipe
// knobs (copy weight, first-turn-only examples) act here.
import { SPAN_KINDS, SpanKind, annotateSpans } from '../../core/spans';
import { IGNORE_INDEX } from '../../core/sftFormat';
import { segment } from '../../core/lossMask';
import { ASST, END } from '../../core/wire';
import { pieceByteLengths, type Tokenizer } from '../../core/tokenizer';

/** Span-kind codes per token; UNSUPERVISED for masked tokens. */
export const UNSUPERVISED = 255;
export const spanKindCode = (k: SpanKind): number => SPAN_KINDS.indexOf(k);

export interface TokenizedTrace {
  ids: Int32Array;
  /** Span-kind code of each token (UNSUPERVISED when masked). */
  kinds: Uint8Array;
  /** 1 where the token is part of a copy span. */
  copy: Uint8Array;
}

function utf8Length(cp: number): number {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/** Tokenizes a transcript segment by segment (as build_example does) and labels every token. */
export function tokenizeTrace(text: string, tok: Tokenizer): TokenizedTrace {
  // Per-byte kind and copy flags from the character spans.
  const byteOffsetOfChar: number[] = [];
  let b = 0;
  for (let i = 0; i < text.length; i++) {
    byteOffsetOfChar.push(b);
    const cp = text.codePointAt(i)!;
    if (cp > 0xffff) {
      byteOffsetOfChar.push(b);
      i++;
    }
    b += utf8Length(cp);
  }
  byteOffsetOfChar.push(b);
  const byteKind = new Uint8Array(b).fill(UNSUPERVISED);
  const byteCopy = new Uint8Array(b);
  for (const s of annotateSpans(text)) {
    const from = byteOffsetOfChar[s.start]!;
    const to = byteOffsetOfChar[s.end]!;
    byteKind.fill(spanKindCode(s.kind), from, to);
    if (s.copy) byteCopy.fill(1, from, to);
  }
  const ids: number[] = [];
  const kinds: number[] = [];
  const copy: number[] = [];
  let at = 0;
  for (const [piece] of segment(text)) {
    const pieceIds = tok.encode(piece);
    // A SentencePiece tokenizer's inserted prefix space counts to no text (core/tokenizer/pieces.ts).
    const lens = pieceByteLengths(tok, piece, pieceIds);
    for (let i = 0; i < pieceIds.length; i++) {
      const id = pieceIds[i]!;
      const len = lens[i]!;
      // A token takes its first byte's kind; copy if any of its bytes is copied.
      kinds.push(byteKind[at]!);
      let c = 0;
      for (let j = at; j < at + len; j++) c |= byteCopy[j]!;
      copy.push(c);
      ids.push(id);
      at += len;
    }
  }
  // The labels align on bytes (pieceByteLengths refuses a tokenizer that changes the text).
  if (at !== b) throw new Error(`the tokenizer's tokens stand for ${at} bytes of a ${b}-byte transcript: the loss mask cannot be aligned`);
  return { ids: Int32Array.from(ids), kinds: Uint8Array.from(kinds), copy: Uint8Array.from(copy) };
}

export interface TrainExample {
  inputIds: Int32Array;
  /** Next-token targets, IGNORE_INDEX where masked. */
  labels: Int32Array;
  /** Loss weight per position (0 where masked). */
  weights: Float32Array;
  /** Span-kind code of each target (UNSUPERVISED where masked). */
  kinds: Uint8Array;
}

export interface WeightOptions {
  /** Multiplier on copy spans (1 = plain SFT). */
  copyWeight: number;
  /** Per span-kind multipliers (default 1). */
  kindWeights?: Partial<Record<SpanKind, number>>;
  /** Per span-kind multipliers on that kind's copy spans only (default 1). */
  copyKindWeights?: Partial<Record<SpanKind, number>>;
}

/** Shifted example (predict t+1 from <= t) with weights; null when longer than maxLen. */
export function toExample(trace: TokenizedTrace, maxLen: number, w: WeightOptions): TrainExample | null {
  const n = trace.ids.length;
  if (n > maxLen || n < 2) return null;
  const inputIds = trace.ids.slice(0, n - 1);
  const labels = new Int32Array(n - 1);
  const weights = new Float32Array(n - 1);
  const kinds = new Uint8Array(n - 1);
  for (let t = 0; t < n - 1; t++) {
    const k = trace.kinds[t + 1]!;
    kinds[t] = k;
    if (k === UNSUPERVISED) {
      labels[t] = IGNORE_INDEX;
      continue;
    }
    labels[t] = trace.ids[t + 1]!;
    const kind = SPAN_KINDS[k]!;
    const kindW = w.kindWeights?.[kind] ?? 1;
    weights[t] = kindW * (trace.copy[t + 1] ? w.copyWeight * (w.copyKindWeights?.[kind] ?? 1) : 1);
  }
  return { inputIds, labels, weights, kinds };
}

/** The transcript cut after its first assistant turn: system + user + one step. */
export function firstTurnOnly(text: string): string {
  const a = text.indexOf(ASST);
  if (a < 0) return text;
  const e = text.indexOf(END, a);
  return e < 0 ? text : text.slice(0, e + END.length);
}

/** One example per assistant turn: the transcript cut after each assistant turn's <|end|>. */
export function cutAfterEachTurn(text: string): string[] {
  const out: string[] = [];
  let a = text.indexOf(ASST);
  while (a >= 0) {
    const e = text.indexOf(END, a);
    if (e < 0) break;
    out.push(text.slice(0, e + END.length));
    a = text.indexOf(ASST, e);
  }
  return out;
}

/** Pads a batch to its longest example: pad id for inputs, IGNORE_INDEX and weight 0 for targets. */
export function padBatch(
  examples: readonly TrainExample[],
  padId: number,
): { inputIds: Int32Array; labels: Int32Array; weights: Float32Array; kinds: Uint8Array; batch: number; seq: number } {
  const seq = Math.max(...examples.map((e) => e.inputIds.length));
  const batch = examples.length;
  const inputIds = new Int32Array(batch * seq).fill(padId);
  const labels = new Int32Array(batch * seq).fill(IGNORE_INDEX);
  const weights = new Float32Array(batch * seq);
  const kinds = new Uint8Array(batch * seq).fill(UNSUPERVISED);
  examples.forEach((e, r) => {
    inputIds.set(e.inputIds, r * seq);
    labels.set(e.labels, r * seq);
    weights.set(e.weights, r * seq);
    kinds.set(e.kinds, r * seq);
  });
  return { inputIds, labels, weights, kinds, batch, seq };
}
