// The lab's default tokenizer: trained, deterministically, on the default world (every
// passage of the corpus plus the stub teacher's distilled transcripts of both splits),
// so the world's words are single tokens and the wire format's pieces are cheap.
import { distill, makeStubTeacher, ToolEnv } from '../distill';
import { buildCorpus, makeTaskPool } from '../world';
import { BpeTokenizer, TrainOptions, trainBpe } from './bpe';

export interface DefaultWorldTexts {
  passages: string[];
  /** Distilled transcripts (wire format) of the train split. */
  train: string[];
  /** Distilled transcripts (wire format) of the held-out split. */
  heldout: string[];
}

/** The default world's texts (seed 0, 120 distractors, 200 + 50 tasks, 4 samples per task). */
export function defaultWorldTexts(): DefaultWorldTexts {
  const corpus = buildCorpus(0, 120);
  const pool = makeTaskPool(0, 200, 50);
  const env = new ToolEnv(corpus);
  // One stub teacher per split: it answers from the answer key of the tasks it is given.
  const transcripts = (tasks: typeof pool.train): string[] =>
    distill(tasks, makeStubTeacher(tasks), env, 4).map((r) => r.text);
  return {
    passages: corpus.map((p) => p.text),
    train: transcripts(pool.train),
    heldout: transcripts(pool.heldout),
  };
}

let cached: BpeTokenizer | null = null;

/**
 * Trains the default tokenizer. With no options it trains to convergence (until no pair
 * occurs twice) and the result is memoised: the tokenizer is immutable, so sharing it is
 * safe. The held-out transcripts are included on purpose: a tokenizer is not a model,
 * and held-out questions tokenizing into rare pieces would only add noise to evaluation.
 */
export function trainDefaultTokenizer(opts?: TrainOptions): BpeTokenizer {
  if (opts === undefined && cached) return cached;
  const w = defaultWorldTexts();
  const tok = trainBpe([...w.passages, ...w.train, ...w.heldout], opts ?? {});
  if (opts === undefined) cached = tok;
  return tok;
}
