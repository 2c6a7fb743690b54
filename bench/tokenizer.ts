// Tokenizer figures: default-world training time, vocabulary, tokens per transcript, and
// encode throughput on every distilled transcript (both splits) for our encoder (cold =
// freshly loaded, empty cache; warm = same stream again) beside @huggingface/tokenizers
// on the same tokenizer.json. Run: npx tsx bench/tokenizer.ts  (JSON is the last line).
import { Tokenizer } from '@huggingface/tokenizers';
import { BpeTokenizer, defaultWorldTexts, tokenizerConfig, tokenizerHash, trainBpe } from '../core/tokenizer';

function time<T>(f: () => T): [T, number] {
  const t0 = performance.now();
  const v = f();
  return [v, performance.now() - t0];
}

function main(): void {
  const [world, worldMs] = time(() => defaultWorldTexts());
  const transcripts = [...world.train, ...world.heldout];
  const [tok, trainMs] = time(() => trainBpe([...world.passages, ...transcripts]));
  const json = tok.toJSON();

  const counts = transcripts.map((t) => tok.encode(t).length);
  const totalTokens = counts.reduce((a, b) => a + b, 0);
  const chars = transcripts.reduce((a, t) => a + t.length, 0);
  const passes = 5;

  // Ours, cold: a fresh instance (empty pre-token cache) per pass.
  let coldMs = 0;
  for (let p = 0; p < passes; p++) {
    const fresh = BpeTokenizer.fromJSON(json);
    coldMs += time(() => {
      for (const t of transcripts) fresh.encode(t);
    })[1];
  }
  // Ours, warm: the cache already holds every pre-token.
  const warm = BpeTokenizer.fromJSON(json);
  for (const t of transcripts) warm.encode(t);
  const warmMs = time(() => {
    for (let p = 0; p < passes; p++) for (const t of transcripts) warm.encode(t);
  })[1];
  // The reference library (it keeps its own LRU cache), warm as well.
  const hf = new Tokenizer(tok.toJSON(), tokenizerConfig());
  for (const t of transcripts) hf.encode(t);
  const hfMs = time(() => {
    for (let p = 0; p < passes; p++) for (const t of transcripts) hf.encode(t);
  })[1];
  const decodeMs = time(() => {
    for (let p = 0; p < passes; p++) for (const t of transcripts) warm.decode(warm.encode(t));
  })[1];

  const perS = (ms: number): number => Math.round((totalTokens * passes) / (ms / 1000));
  const out = {
    vocab_size: tok.vocabSize,
    merges: tok.merges().length,
    hash: tokenizerHash(tok),
    world_ms: Math.round(worldMs),
    train_ms: Math.round(trainMs),
    transcripts: transcripts.length,
    tokens_per_transcript_mean: +(totalTokens / transcripts.length).toFixed(1),
    tokens_per_transcript_max: Math.max(...counts),
    chars_per_token: +(chars / totalTokens).toFixed(2),
    encode_cold_tokens_per_s: perS(coldMs),
    encode_warm_tokens_per_s: perS(warmMs),
    hf_encode_warm_tokens_per_s: perS(hfMs),
    encode_decode_warm_tokens_per_s: perS(decodeMs),
  };
  console.log(`default world: ${world.passages.length} passages, ${world.train.length} + ${world.heldout.length} transcripts (built in ${out.world_ms} ms)`);
  console.log(`trained in ${out.train_ms} ms: vocabulary ${out.vocab_size} (${out.merges} merges), ${out.hash}`);
  console.log(`tokens per transcript: mean ${out.tokens_per_transcript_mean}, max ${out.tokens_per_transcript_max}; ${out.chars_per_token} chars/token`);
  console.log(`encode (ours, cold):  ${out.encode_cold_tokens_per_s.toLocaleString('en')} tokens/s`);
  console.log(`encode (ours, warm):  ${out.encode_warm_tokens_per_s.toLocaleString('en')} tokens/s`);
  console.log(`encode (@huggingface/tokenizers, warm): ${out.hf_encode_warm_tokens_per_s.toLocaleString('en')} tokens/s`);
  console.log(`encode+decode (ours, warm): ${out.encode_decode_warm_tokens_per_s.toLocaleString('en')} tokens/s`);
  console.log(JSON.stringify(out));
}

main();
