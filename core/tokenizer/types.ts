// One tokenizer interface, two implementations: the lab's byte-level BPE (bpe.ts) and a
// Hugging Face tokenizer.json through @huggingface/tokenizers (hf.ts). It holds what the
// trainer, the agent runtime, the grammar's token mask and the language server call.
import type { SpecialToken } from './bpe';

export interface Tokenizer {
  /** Number of ids (0..vocabSize-1). */
  readonly vocabSize: number;
  /** The id of each wire-format special (one id each, in either implementation). */
  readonly specialIds: Readonly<Record<SpecialToken, number>>;
  /** Encodes text; special-token strings anywhere in it become their single ids; no BOS/EOS added. */
  encode(text: string): number[];
  /** Decodes ids, specials kept as their text, no clean-up. */
  decode(ids: readonly number[]): string;
  /** The token string of an id (the vocabulary's form, e.g. byte-level "Ġthe"), or undefined. */
  idToToken(id: number): string | undefined;
  /** The raw bytes a token stands for; undefined for special tokens and unknown ids. */
  tokenBytes(id: number): Uint8Array | undefined;
  /** Whether an id is a special token (never text: left out of the grammar's token mask). */
  isSpecial(id: number): boolean;
}
