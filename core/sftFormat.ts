// Turn a transcript into (input ids, shifted labels) with the loss mask of `segment`:
// supervise assistant emissions only. Over-length examples are DROPPED, never truncated:
// truncation cuts the Answer off the longest traces and teaches the model not to stop.
import { segment } from './lossMask';

export const IGNORE_INDEX = -100;
export const DEFAULT_MAX_LEN = 1024;

/** Anything that encodes wire-format text with special tokens as single ids. */
export interface WireEncoder {
  encode(text: string): number[];
}

export interface SftExample {
  inputIds: number[];
  /** labels[t] is the target for inputIds[t] (the next token), IGNORE_INDEX when masked. */
  labels: number[];
}

/** The tokens of a transcript with their supervision flags, before the shift. */
export function encodeWithMask(transcript: string, tokenizer: WireEncoder): { ids: number[]; supervised: boolean[] } {
  const ids: number[] = [];
  const supervised: boolean[] = [];
  for (const [text, sup] of segment(transcript)) {
    for (const id of tokenizer.encode(text)) {
      ids.push(id);
      supervised.push(sup);
    }
  }
  return { ids, supervised };
}

/** The seed's build_example: null when the transcript does not fit in `maxLen` tokens. */
export function buildExample(transcript: string, tokenizer: WireEncoder, maxLen = DEFAULT_MAX_LEN): SftExample | null {
  const { ids, supervised } = encodeWithMask(transcript, tokenizer);
  if (ids.length > maxLen) return null;
  return {
    inputIds: ids.slice(0, -1),
    labels: ids.slice(1).map((id, t) => (supervised[t + 1] ? id : IGNORE_INDEX)),
  };
}

export interface SftDataset {
  examples: SftExample[];
  total: number;
  dropped: number;
  /** dropped / total (0 for an empty input). */
  dropRate: number;
  maxLen: number;
}

/** The whole distilled set, reporting what was dropped. */
export function buildDataset(texts: readonly string[], tokenizer: WireEncoder, maxLen = DEFAULT_MAX_LEN): SftDataset {
  const examples: SftExample[] = [];
  for (const t of texts) {
    const ex = buildExample(t, tokenizer, maxLen);
    if (ex) examples.push(ex);
  }
  const dropped = texts.length - examples.length;
  return { examples, total: texts.length, dropped, dropRate: texts.length ? dropped / texts.length : 0, maxLen };
}
